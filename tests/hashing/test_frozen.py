"""`hashing.frozen.fast_init` builds the same objects as the dataclass's own constructor."""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass, field

import pytest

from hashing.frozen import fast_init


def _twins(slots: bool) -> tuple[type, type]:
    def make() -> type:
        @dataclass(frozen=True, slots=slots)
        class Row:
            a: int
            b: str = "b"
            c: tuple[int, ...] = field(default_factory=tuple)
            d: list[int] = field(default_factory=list)
            size: int = field(init=False, compare=False)
            fixed: str = field(init=False, default="fixed")

            def __post_init__(self) -> None:
                object.__setattr__(self, "size", self.a + len(self.b))
        return Row
    return make(), fast_init(make())


@pytest.mark.parametrize("slots", [True, False])
def test_fast_init_builds_what_the_dataclass_builds(slots: bool) -> None:
    plain, fast = _twins(slots)
    assert str(inspect.signature(fast.__init__)).replace("<factory>", "F") == \
        str(inspect.signature(plain.__init__)).replace("<factory>", "F").replace("_HAS_DEFAULT_FACTORY", "F")
    for args, kwargs in [((1,), {}), ((1, "x"), {}), ((1,), {"c": (2,), "d": [3]}), ((), {"a": 5, "b": "yy"})]:
        a, b = plain(*args, **kwargs), fast(*args, **kwargs)
        assert dataclasses.astuple(a) == dataclasses.astuple(b)
        assert (a.size, a.fixed) == (b.size, b.fixed)
    assert fast(1).d is not fast(1).d  # a fresh default each time
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast(1).a = 2  # type: ignore[misc]
    with pytest.raises(TypeError):
        fast()  # type: ignore[call-arg]


def test_fast_init_refuses_what_it_would_half_handle() -> None:
    @dataclass
    class Mutable:
        a: int

    @dataclass(frozen=True)
    class KeywordOnly:
        a: int = field(kw_only=True)

    for cls in (Mutable, KeywordOnly):
        with pytest.raises(TypeError):
            fast_init(cls)

"""A faster `__init__` for the frozen dataclasses a fleet check builds by the hundred per job.

A frozen dataclass's generated `__init__` sets each field with `object.__setattr__(self, name, value)`: a
global lookup, an attribute lookup and a call per field. A fleet check builds ~1,000 such objects a job
(operator-ID pairs, job vertices, findings, stream references), and their constructors were ~8 % of a
job's CPU (docs/performance.md, "Frozen objects"). `fast_init` replaces the constructor by one that calls
each slot's descriptor directly (or writes the instance dict of a class without slots): same signature,
same defaults, same `__post_init__`, the object still frozen afterwards; a slots class builds in ~2/3 of
the time. Only what the dataclass itself would do is supported: a class using keyword-only fields or
`InitVar`s is refused at import, not half-handled.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

__all__ = ["fast_init"]

T = TypeVar("T")


class _Factory:
    """The default of a field made by `default_factory`: a marker the constructor replaces by a fresh value."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY = _Factory()


def fast_init(cls: type[T]) -> type[T]:
    """Give the frozen dataclass `cls` a descriptor-setting `__init__` (decorate above `@dataclass`)."""
    if not cls.__dataclass_params__.frozen:  # type: ignore[attr-defined]
        raise TypeError(f"{cls.__name__}: fast_init is for frozen dataclasses (a plain one sets attributes fast)")
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    generated = cls.__init__.__code__  # the dataclass's own: its parameters are exactly the init fields unless an
    # InitVar adds one or a keyword-only field moves one
    if generated.co_kwonlyargcount or generated.co_varnames[1:generated.co_argcount] != tuple(
            f.name for f in fields if f.init):
        raise TypeError(f"{cls.__name__}: fast_init does not handle keyword-only fields or InitVars")
    slots = "__slots__" in cls.__dict__
    namespace: dict[str, Any] = {"_FACTORY": _FACTORY}
    args, body = [], []
    for k, f in enumerate(fields):
        value = f.name
        if f.default_factory is not dataclasses.MISSING:
            namespace[f"_make{k}"] = f.default_factory
            if f.init:
                args.append(f"{f.name}=_FACTORY")
                body.append(f" if {f.name} is _FACTORY: {f.name} = _make{k}()")
            else:
                value = f"_make{k}()"
        elif f.default is not dataclasses.MISSING:
            namespace[f"_default{k}"] = f.default
            if f.init:
                args.append(f"{f.name}=_default{k}")
            else:
                value = f"_default{k}"
        elif f.init:
            args.append(f.name)
        else:
            continue  # set by __post_init__, as the dataclass leaves it
        if slots:
            namespace[f"_set{k}"] = cls.__dict__[f.name].__set__
            body.append(f" _set{k}(self, {value})")
        else:
            body.append(f" self.__dict__[{f.name!r}] = {value}")
    if hasattr(cls, "__post_init__"):
        body.append(" self.__post_init__()")
    source = f"def __init__(self, {', '.join(args)}):\n" + ("\n".join(body) or " pass") + "\n"
    exec(source, namespace)
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__doc__ = cls.__init__.__doc__
    init.__annotations__ = dict(cls.__init__.__annotations__)
    cls.__init__ = init  # type: ignore[misc]
    return cls

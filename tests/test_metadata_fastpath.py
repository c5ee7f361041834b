"""The reader's fast paths (common handle layouts, empty subtasks, the cached properties trailer,
the direct-slot constructors) give exactly what the general reader gives: the same objects with
the same computed sizes, or the same error at the same offset.

Each input is parsed twice, once as shipped and once with the fast paths switched off, over the
real Flink fixtures, synthetic files for the layouts the fixtures lack, and deterministic
mutations (truncations, bit flips, overwritten counts and tags) of both.
"""

from __future__ import annotations

import dataclasses
import enum
import random
import struct
from typing import Any

import pytest

import upgrade_gate.flink.metadata.java_serialization as java_serialization
import upgrade_gate.flink.metadata.serializers as serializers
from tests.metadata_support import MetadataBuilder, fixture_dirs, header, v3_file
from upgrade_gate.flink.metadata import MetadataFormatError, parse_metadata
from upgrade_gate.flink.metadata.model import (
    ByteStreamStateHandle,
    KeyGroupRange,
    KeyGroupsStateHandle,
    OperatorState,
    OperatorSubtaskState,
    new_operator_state,
    new_subtask_state,
)

FIXTURE_FILES = [(d / "_metadata").read_bytes() for d in fixture_dirs()]


def _canon(o: Any) -> Any:
    """Every field (the computed sizes too), with type names, dict order and enum members."""
    if dataclasses.is_dataclass(o) and not isinstance(o, type):
        return (type(o).__name__, getattr(o, "kind", None),
                tuple((f.name, _canon(getattr(o, f.name))) for f in dataclasses.fields(o)))
    if isinstance(o, enum.Enum):
        return (type(o).__name__, o.name)
    if isinstance(o, dict):
        return ("dict", tuple((_canon(k), _canon(v)) for k, v in o.items()))
    if isinstance(o, tuple | list):
        return (type(o).__name__, tuple(_canon(x) for x in o))
    return (type(o).__name__, o)


def _outcome(data: bytes, base: str | None) -> Any:
    try:
        return _canon(parse_metadata(data, "fp/_metadata", base))
    except MetadataFormatError as exc:
        return ("error", str(exc), exc.offset)


def _general_outcome(data: bytes, base: str | None, monkeypatch: pytest.MonkeyPatch) -> Any:
    with monkeypatch.context() as m:
        m.setattr(serializers, "_fast_operator_head", lambda r: None)
        m.setattr(serializers, "_fast_subtask", lambda data, pos, end, ctx: None)
        m.setattr(java_serialization, "_PROPERTIES_CACHE_MAX_BYTES", -1)
        return _outcome(data, base)


def _assert_same(data: bytes, monkeypatch: pytest.MonkeyPatch, base: str | None = "/sp/dir/") -> Any:
    general = _general_outcome(data, base, monkeypatch)
    assert _outcome(data, base) == general
    assert _outcome(data, base) == general  # again, with the properties trailer cached
    return general


def _operator_handle(delegate: bytes, tag: int = 4, names: tuple[str, ...] = ("s",)) -> bytes:
    b = MetadataBuilder().byte(tag).int(len(names))
    for i, name in enumerate(names):
        b.utf(name).byte(i % 3).int(2).long(0).long(9)
    if tag == 17:  # file-merging: task-owned and shared directories, is-empty flag
        b.utf("/task-owned").utf("/shared").byte(1)
    return b.raw(delegate).bytes()


def _keyed_handle(tag: int, delegate: bytes, handle_id: str | None = None) -> bytes:
    b = MetadataBuilder().byte(tag).int(4).int(3).long(1).long(2).long(3).raw(delegate)
    if handle_id is not None:
        b.utf(handle_id)
    return b.bytes()


INLINE = MetadataBuilder().byte(1).utf("inline").int(3).raw(b"abc").bytes()
FILE = MetadataBuilder().byte(2).long(77).utf("s3://bucket/sp/file").bytes()
RELATIVE = MetadataBuilder().byte(6).utf("9f0c8e3a-state").long(64).bytes()
NON_ASCII = MetadataBuilder().byte(1).utf("zustand-\u00e4").int(1).raw(b"x").bytes()
SEGMENT = MetadataBuilder().byte(15).long(0).long(5).int(0).utf("/seg/file").utf("logical").bytes()


def _subtask(managed_op: bytes | None = None, raw_op: bytes | None = None, managed_keyed: bytes = b"\0",
             raw_keyed: bytes = b"\0", channels: bytes = bytes(8)) -> bytes:
    b = MetadataBuilder()
    for handle in (managed_op, raw_op):
        b.int(0) if handle is None else b.int(1).raw(handle)
    return b.raw(managed_keyed).raw(raw_keyed).raw(channels).bytes()


SYNTHETIC_SUBTASKS = [
    _subtask(managed_op=_operator_handle(INLINE)),
    _subtask(managed_op=_operator_handle(FILE, names=("a", "b", "c")), raw_op=_operator_handle(RELATIVE)),
    _subtask(managed_op=_operator_handle(INLINE, names=())),
    _subtask(managed_op=b"\0"),  # a present-flag with a null handle
    _subtask(raw_op=_operator_handle(NON_ASCII)),
    _subtask(managed_op=_operator_handle(INLINE, names=("zustand-\u00e4",))),
    _subtask(managed_op=_operator_handle(MetadataBuilder().byte(16).bytes(), tag=17)),
    _subtask(managed_keyed=_keyed_handle(7, RELATIVE)),
    _subtask(managed_keyed=_keyed_handle(3, INLINE), raw_keyed=_keyed_handle(12, FILE, "handle-id")),
    _subtask(managed_keyed=_keyed_handle(12, SEGMENT, "id")),
    _subtask(managed_keyed=_keyed_handle(3, _keyed_handle(3, INLINE))),  # nested key-groups delegate
    _subtask(managed_keyed=_keyed_handle(7, b"\0")),
    _subtask(managed_op=_operator_handle(INLINE), channels=MetadataBuilder().int(1).int(1).int(0).int(0).int(0)
             .long(5).raw(INLINE).int(0).bytes()),
]


def _properties_trailer() -> bytes:
    """The Java-serialized `CheckpointProperties` at the end of a real v4+ file."""
    data = FIXTURE_FILES[-1]
    return data[data.rindex(b"\xac\xed\x00\x05"):]


def _synthetic_files() -> list[bytes]:
    files = [v3_file(body) for body in SYNTHETIC_SUBTASKS]
    files += [v3_file(body, version=5, trailer=_properties_trailer()) for body in SYNTHETIC_SUBTASKS]
    # two operators: one with coordinator state, finished and empty subtasks; one fully finished
    b = header(3).long(7).int(0).int(2)
    b.raw(bytes(16)).int(3).int(128).raw(INLINE).int(3).int(-1).int(2).raw(bytes(18)).int(1)
    b.raw(SYNTHETIC_SUBTASKS[0])
    b.raw(bytes(range(16))).int(1).int(128).byte(0).int(-1)
    files.append(b.bytes())
    return files


SYNTHETIC_FILES = _synthetic_files()


@pytest.mark.parametrize("i", range(len(FIXTURE_FILES)))
def test_fixtures_read_the_same_with_and_without_fast_paths(i: int, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _assert_same(FIXTURE_FILES[i], monkeypatch)[0] != "error"
    _assert_same(FIXTURE_FILES[i], monkeypatch, base=None)


@pytest.mark.parametrize("i", range(len(SYNTHETIC_FILES)))
def test_synthetic_layouts_read_the_same(i: int, monkeypatch: pytest.MonkeyPatch) -> None:
    data = SYNTHETIC_FILES[i]
    _assert_same(data, monkeypatch)
    _assert_same(data, monkeypatch, base=None)
    for n in range(len(data)):
        _assert_same(data[:n], monkeypatch)


def _mutants(seed: int, count: int) -> list[bytes]:
    rnd = random.Random(seed)
    sources = FIXTURE_FILES + SYNTHETIC_FILES
    out = []
    for _ in range(count):
        d = bytearray(rnd.choice(sources))
        kind = rnd.randrange(4)
        if kind == 0:
            d = d[:rnd.randrange(len(d))]
        elif kind == 1:
            for _ in range(rnd.randint(1, 6)):
                d[rnd.randrange(len(d))] ^= 1 << rnd.randrange(8)
        elif kind == 2:
            at = rnd.randrange(len(d) - 4)
            d[at:at + 4] = struct.pack(">i", rnd.choice([2**31 - 1, -1, -(2**31), 0xFFFF, 0, 1, 2, 3, 12]))
        else:
            d[rnd.randrange(len(d))] = rnd.choice([0, 1, 2, 3, 4, 6, 7, 12, 15, 17, 0x80, 0xC0, 0xFF])
        out.append(bytes(d))
    return out


@pytest.mark.parametrize("seed", range(4))
def test_mutants_give_the_same_result_or_error(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    for data in _mutants(seed, 250):
        _assert_same(data, monkeypatch)


def test_trailing_bytes_after_a_cached_trailer_are_reported_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    data = max(FIXTURE_FILES, key=len)
    parse_metadata(data, "fp/_metadata", "/sp")  # caches the trailer
    for tail in (b"\0", b"garbage", bytes(5000)):
        general = _assert_same(data + tail, monkeypatch)
        assert general[0] == "error" and "trailing bytes" in general[1]


def test_cached_properties_are_equal_but_not_shared() -> None:
    data = FIXTURE_FILES[-1]
    a = parse_metadata(data, "fp/_metadata", "/sp").properties
    b = parse_metadata(data, "fp/_metadata", "/sp").properties
    assert a is not None and a == b and a is not b and a.flags is not b.flags


def test_direct_constructors_equal_the_dataclass_ones() -> None:
    keyed = KeyGroupsStateHandle(KeyGroupRange(0, 3), (1, 2, 3, 4), ByteStreamStateHandle("n", b"12345"))
    for groups in [((), (), (), ()), ((), (), (keyed,), ()), ((), (), (), (keyed,)), ((), (), (keyed,), (keyed,))]:
        fast, slow = new_subtask_state(*groups), OperatorSubtaskState(*groups)
        assert _canon(fast) == _canon(slow) and fast == slow
        assert (fast.state_size, fast.channel_state_size, fast.has_state) == (
            slow.state_size, slow.channel_state_size, slow.has_state)
    subtasks = {0: OperatorSubtaskState(), 1: new_subtask_state((), (), (keyed,), ())}
    for coordinator in (None, ByteStreamStateHandle("c", b"xy")):
        args = (bytes(16), "name", None, 2, 128, coordinator, subtasks)
        fast_op, slow_op = new_operator_state(*args), OperatorState(*args)
        assert _canon(fast_op) == _canon(slow_op) and fast_op == slow_op
        assert fast_op.state_size == slow_op.state_size == 5 + (2 if coordinator else 0)

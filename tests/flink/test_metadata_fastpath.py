"""The reader's fast layer (fast_reader.py, the cached properties trailer, the direct-slot
constructors) gives exactly what the per-version definitions give: the same objects with the same
computed sizes, or the same error at the same offset.

The check runs for every serializer version in the registry (`serializers.SERIALIZERS`), not a
list written here: each input is parsed twice, as shipped and with `fast_paths=False`, over the
real Flink fixtures of that version, synthetic files of that version (finished, empty, common and
rare handle layouts, channel state, coordinator state, repeated indices), every truncation of
them, and deterministic mutations (truncations, bit flips, overwritten counts and tags). A version
registered later, without a fast reader of its own, is read by its own definition: the last tests
register Flink's (unreleased) v7, which appends a field to every subtask.
"""

from __future__ import annotations

import dataclasses
import enum
import random
import struct
from collections.abc import Iterator
from typing import Any

import pytest

import upgrade_gate.flink.metadata.checkpoint_properties as checkpoint_properties
import upgrade_gate.flink.metadata.fast_reader as fast_reader
import upgrade_gate.flink.metadata.serializers as serializers
from hashing.versions import SUPPORTED, FlinkVersion
from tests.metadata_support import MetadataBuilder, fixture_dirs, header
from upgrade_gate.flink.metadata import MetadataFormatError, parse_metadata
from upgrade_gate.flink.metadata.fast_reader import V3_SUBTASK_LAYOUT, FastReader
from upgrade_gate.flink.metadata.model import (
    ByteStreamStateHandle,
    KeyGroupRange,
    KeyGroupsStateHandle,
    OperatorState,
    OperatorSubtaskState,
    new_operator_state,
    new_subtask_state,
)
from upgrade_gate.flink.metadata.reader import BoundedReader
from upgrade_gate.flink.metadata.serializers import SERIALIZERS, MetadataV6Serializer

VERSIONS = sorted(SERIALIZERS)


@pytest.fixture(autouse=True, params=["compiled", "python"])
def subtask_loop(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test here runs twice: with the compiled subtask loop (`_fastsubtasks.c`) and with the
    pure-Python fast reader alone, the fallback where no compiler built the extension."""
    if request.param == "python":
        monkeypatch.setattr(fast_reader, "_compiled", None)
    else:
        assert fast_reader.COMPILED, "_fastsubtasks was not built: run `pip install -e .` with a C compiler"
    return str(request.param)


def _version_of(data: bytes) -> int:
    return struct.unpack_from(">i", data, 4)[0]


FIXTURE_FILES = [(d / "_metadata").read_bytes() for d in fixture_dirs()]
FIXTURES_BY_VERSION = {v: [f for f in FIXTURE_FILES if _version_of(f) == v] for v in VERSIONS}
# The Java-serialized `CheckpointProperties` at the end of a real v4+ file.
PROPERTIES_TRAILER = next(f[f.rindex(b"\xac\xed\x00\x05"):] for f in FIXTURE_FILES if _version_of(f) >= 4)


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


def _outcome(data: bytes, base: str | None, fast_paths: bool = True) -> Any:
    try:
        return _canon(parse_metadata(data, "fp/_metadata", base, fast_paths=fast_paths))
    except MetadataFormatError as exc:
        return ("error", str(exc), exc.offset)


def _general_outcome(data: bytes, base: str | None, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The definitions alone: no fast reader, no cached properties trailer."""
    with monkeypatch.context() as m:
        m.setattr(checkpoint_properties, "_PROPERTIES_CACHE_MAX_BYTES", -1)
        return _outcome(data, base, fast_paths=False)


def _assert_same(data: bytes, monkeypatch: pytest.MonkeyPatch, base: str | None = "/sp/dir/",
                 twice: bool = True) -> Any:
    general = _general_outcome(data, base, monkeypatch)
    assert _outcome(data, base) == general
    if twice:
        assert _outcome(data, base) == general  # again, with the properties trailer cached
    return general


# ---- a writer of each version's layout (Flink's MetadataV*Serializer) ----------------------------

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


@dataclasses.dataclass(frozen=True)
class Channel:
    """One channel-state handle: `merged` ones exist from v6 on (FLINK-33734)."""

    output: bool = False
    merged: bool = False

    def encode(self, version: int) -> bytes:
        b = MetadataBuilder()
        if version >= 6:
            b.byte((4 if self.output else 3) if self.merged else (2 if self.output else 1))
        if self.merged:
            return b.int(1).long(5).raw(INLINE).int(3).raw(b"\x01\x02\x03").bytes()
        return b.int(1).int(0).int(2).int(2).long(0).long(3).long(5).raw(INLINE).bytes()


@dataclasses.dataclass(frozen=True)
class Subtask:
    """One subtask state, written in any version's layout (None where a version cannot hold it)."""

    managed_op: bytes | None = None
    raw_op: bytes | None = None
    managed_keyed: bytes = b"\0"
    raw_keyed: bytes = b"\0"
    channels: tuple[Channel, ...] = ()
    ref_checkpoint_id: int | None = None  # v7 only

    def encode(self, version: int) -> bytes | None:
        if (version < 3 and self.channels) or (version < 6 and any(c.merged for c in self.channels)):
            return None
        b = MetadataBuilder()
        if version == 2:
            b.long(-1).int(0)  # unused duration, no legacy operator state
        for handle in (self.managed_op, self.raw_op):
            b.int(0) if handle is None else b.int(1).raw(handle)
        b.raw(self.managed_keyed).raw(self.raw_keyed)
        if version >= 3:
            for output in (False, True):
                group = [c for c in self.channels if c.output == output]
                b.int(len(group))
                for c in group:
                    b.raw(c.encode(version))
        if version >= 7:  # Flink's MetadataV7Serializer: presence byte, then refCheckpointId
            b.byte(0) if self.ref_checkpoint_id is None else b.byte(1).long(self.ref_checkpoint_id)
        return b.bytes()


FINISHED = None  # an entry "subtask i is finished" (v3+)


def _operator(version: int, entries: list[tuple[int, Subtask | None]], *, parallelism: int = 4,
              coordinator: bytes = b"\0", fully_finished: bool = False, name: str = "op", uid: str = "op-uid",
              op_id: bytes = bytes(range(16))) -> bytes | None:
    b = MetadataBuilder()
    if version >= 5:
        b.utf(name).utf(uid)
    b.raw(op_id).int(parallelism).int(128)
    if version == 2:
        if fully_finished or coordinator != b"\0":
            return None
        b.int(1)  # chain length
    else:
        b.raw(coordinator)
    if fully_finished:
        return b.int(-1).bytes()
    b.int(len(entries))
    for index, subtask in entries:
        if subtask is FINISHED:
            if version == 2:
                return None
            b.int(-index - 1)
            continue
        body = subtask.encode(version)
        if body is None:
            return None
        b.int(index).raw(body)
    return b.bytes()


def _file(version: int, operators: list[bytes | None]) -> bytes | None:
    if any(op is None for op in operators):
        return None
    b = header(version).long(7).int(0).int(len(operators))
    for op in operators:
        b.raw(op)  # type: ignore[arg-type]
    return b.raw(PROPERTIES_TRAILER if version >= 4 else b"").bytes()


SYNTHETIC_SUBTASKS = [
    Subtask(),  # empty
    Subtask(managed_op=_operator_handle(INLINE)),
    Subtask(managed_op=_operator_handle(FILE, names=("a", "b", "c")), raw_op=_operator_handle(RELATIVE)),
    Subtask(managed_op=_operator_handle(INLINE, names=())),
    Subtask(managed_op=b"\0"),  # a present-flag with a null handle
    Subtask(raw_op=_operator_handle(NON_ASCII)),
    Subtask(managed_op=_operator_handle(INLINE, names=("zustand-\u00e4",))),
    Subtask(managed_op=_operator_handle(MetadataBuilder().byte(16).bytes(), tag=17)),
    Subtask(managed_keyed=_keyed_handle(7, RELATIVE)),
    Subtask(managed_keyed=_keyed_handle(3, INLINE), raw_keyed=_keyed_handle(12, FILE, "handle-id")),
    Subtask(managed_keyed=_keyed_handle(12, SEGMENT, "id")),
    Subtask(managed_keyed=_keyed_handle(3, _keyed_handle(3, INLINE))),  # nested key-groups delegate
    Subtask(managed_keyed=_keyed_handle(7, b"\0")),
    Subtask(managed_op=_operator_handle(INLINE), channels=(Channel(),)),
    Subtask(channels=(Channel(), Channel(output=True), Channel(output=True))),
    Subtask(managed_keyed=_keyed_handle(7, RELATIVE), channels=(Channel(merged=True), Channel(True, True))),
]


def synthetic_files(version: int) -> list[bytes]:
    """Files of `version` holding every synthetic subtask its layout can express."""
    files = [_file(version, [_operator(version, [(0, s)])]) for s in SYNTHETIC_SUBTASKS]
    common, rare = SYNTHETIC_SUBTASKS[1], SYNTHETIC_SUBTASKS[5]
    files += [
        # coordinator state; finished, empty, common and rare subtasks in one operator; a fully
        # finished operator; a repeated index (the later entry wins, the first position stays)
        _file(version, [_operator(version, [(3, FINISHED), (2, Subtask()), (1, common), (0, rare)],
                                  coordinator=INLINE),
                        _operator(version, [], fully_finished=True, op_id=bytes(range(1, 17)))]),
        _file(version, [_operator(version, [(2, Subtask()), (0, common), (1, Subtask()), (2, rare)]),
                        _operator(version, [(0, FINISHED), (1, common)], op_id=bytes(range(2, 18)))]),
        _file(version, [_operator(version, [(i, common if i % 3 else Subtask()) for i in range(64)],
                                  parallelism=64)]),
    ]
    return [f for f in files if f is not None]


SYNTHETIC_BY_VERSION = {v: synthetic_files(v) for v in VERSIONS}


def _truncations(data: bytes) -> Iterator[bytes]:
    """Every prefix of the first 800 bytes, then every 13th up to the properties trailer and every
    61st in it (the long files repeat the short ones' subtasks; the trailer has its own tests)."""
    body = len(data) - len(PROPERTIES_TRAILER) + 8 if _version_of(data) >= 4 else len(data)
    yield from (data[:n] for n in range(min(body, 800)))
    yield from (data[:n] for n in range(800, body, 13))
    yield from (data[:n] for n in range(body, len(data), 61))


# ---- every registered version ------------------------------------------------------------

def test_the_registry_holds_what_the_newest_release_reads() -> None:
    newest = FlinkVersion.parse(max(SUPPORTED, key=lambda v: tuple(map(int, v.split(".")))))
    assert [v for v in VERSIONS if newest.reads_metadata(v)] == VERSIONS


@pytest.mark.parametrize("version", VERSIONS)
def test_every_registered_version_has_inputs(version: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Real fixtures for each version a supported release writes (and v3, derived from 1.20's v4 by
    flink_bridge/generate_savepoints.py); readable synthetic files for every version."""
    if any(FlinkVersion.parse(r).metadata_version == version for r in SUPPORTED) or version == 3:
        assert FIXTURES_BY_VERSION[version], f"no Flink-written fixture of format v{version}"
    files = SYNTHETIC_BY_VERSION[version]
    assert len(files) >= 10 and all(_version_of(f) == version for f in files)
    assert all(_general_outcome(f, "/sp/", monkeypatch)[0] != "error" for f in files)


@pytest.mark.parametrize("version", VERSIONS)
def test_fixtures_read_the_same_with_and_without_fast_paths(version: int, monkeypatch: pytest.MonkeyPatch) -> None:
    for data in FIXTURES_BY_VERSION[version]:
        assert _assert_same(data, monkeypatch)[0] != "error"
        _assert_same(data, monkeypatch, base=None)


@pytest.mark.parametrize("version", VERSIONS)
def test_synthetic_layouts_read_the_same(version: int, monkeypatch: pytest.MonkeyPatch) -> None:
    for data in SYNTHETIC_BY_VERSION[version]:
        assert _assert_same(data, monkeypatch)[0] != "error"
        _assert_same(data, monkeypatch, base=None)
        for prefix in _truncations(data):
            _assert_same(prefix, monkeypatch, twice=False)


@pytest.mark.parametrize("version", VERSIONS)
def test_declared_fast_reader_is_the_one_used(version: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading follows the declaration: the declared reader is called (unless `fast_paths=False`),
    so the equivalence tests above compare it and not something else."""
    serializer = SERIALIZERS[version]
    declared = type(serializer).FAST_READER
    if declared is None:  # its definition alone reads it: no fast reader may run, even one for other versions
        def refuse(*_: Any, **__: Any) -> Any:
            raise AssertionError(f"a fast reader ran on v{version}, which declares none")

        monkeypatch.setattr(type(V3_SUBTASK_LAYOUT), "read_subtasks", refuse)
        monkeypatch.setattr(type(V3_SUBTASK_LAYOUT), "operator_head", refuse)
        for data in SYNTHETIC_BY_VERSION[version]:
            parse_metadata(data, "fp/_metadata", "/sp/")
        return
    assert version in declared.versions
    calls: list[int] = []

    class Counting(FastReader):
        def operator_head(self, r: BoundedReader) -> tuple[bytes, int, int, int] | None:
            return declared.operator_head(r)

        def read_subtasks(self, serializer, r, ctx, parallelism, n):  # type: ignore[no-untyped-def]
            calls.append(n)
            return declared.read_subtasks(serializer, r, ctx, parallelism, n)

    monkeypatch.setattr(serializer, "FAST_READER", Counting("counting", declared.versions))
    for data in SYNTHETIC_BY_VERSION[version]:
        parse_metadata(data, "fp/_metadata", "/sp/", fast_paths=False)
    assert not calls
    for data in SYNTHETIC_BY_VERSION[version]:
        parse_metadata(data, "fp/_metadata", "/sp/")
    assert len(calls) >= len(SYNTHETIC_BY_VERSION[version])


def _mutants(seed: int, count: int) -> list[bytes]:
    rnd = random.Random(seed)
    sources = FIXTURE_FILES + [f for v in VERSIONS for f in SYNTHETIC_BY_VERSION[v]]
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


# ---- a version registered later ------------------------------------------------------------

class MetadataV7Serializer(MetadataV6Serializer):
    """Flink's `MetadataV7Serializer` (in apache/flink, in no release up to 2.3): v6 plus a presence
    byte and an optional `refCheckpointId` long after every subtask state. It declares no fast reader."""

    VERSION = 7

    def read_subtask_state(self, r: BoundedReader, ctx):  # type: ignore[no-untyped-def]
        state = super().read_subtask_state(r, ctx)
        if r.read_byte("refCheckpointId marker") == 1:
            r.read_long("refCheckpointId")
        return state


@pytest.fixture
def v7(monkeypatch: pytest.MonkeyPatch) -> serializers.MetadataV2V3SerializerBase:
    monkeypatch.setattr(serializers, "SERIALIZERS", dict(SERIALIZERS))
    serializers.register(MetadataV7Serializer)
    return serializers.SERIALIZERS[7]


def _v6_and_v7_pairs(ref: int | None) -> list[tuple[bytes, bytes]]:
    """Each synthetic subtask, with a finished and an empty one, as a v6 file and as a v7 file
    whose subtasks carry `ref` as refCheckpointId: the same operators, one more field per subtask."""
    pairs = []
    for s in SYNTHETIC_SUBTASKS:
        files = [_file(v, [_operator(v, [(0, dataclasses.replace(s, ref_checkpoint_id=ref)), (2, FINISHED),
                                         (1, Subtask(ref_checkpoint_id=ref))])]) for v in (6, 7)]
        assert files[0] is not None and files[1] is not None
        pairs.append((files[0], files[1]))
    return pairs


@pytest.mark.parametrize("ref", [None, 41])
def test_a_new_version_without_a_fast_reader_reads_through_its_own_definition(
        v7: serializers.MetadataV2V3SerializerBase, ref: int | None, monkeypatch: pytest.MonkeyPatch) -> None:
    assert type(v7).FAST_READER is None  # v6 declares one; v7 does not inherit it
    for data6, data7 in _v6_and_v7_pairs(ref):
        read6 = parse_metadata(data6, "fp/_metadata", "/sp/")
        read7 = parse_metadata(data7, "fp/_metadata", "/sp/")
        assert read7.version == 7 and _canon(read7.operator_states) == _canon(read6.operator_states)
        _assert_same(data7, monkeypatch)


def test_the_v3_fast_reader_would_misread_v7_and_the_equivalence_check_sees_it(
        v7: serializers.MetadataV2V3SerializerBase, monkeypatch: pytest.MonkeyPatch) -> None:
    """The trap the per-version declaration closes: v6's fast reader on v7 subtasks goes wrong, and
    comparing with the definition (what the tests above do for every version) catches it."""
    pairs = _v6_and_v7_pairs(None)
    slow = [_outcome(data7, "/sp/", fast_paths=False) for _, data7 in pairs]
    monkeypatch.setattr(v7, "FAST_READER", V3_SUBTASK_LAYOUT)
    fast = [_outcome(data7, "/sp/") for _, data7 in pairs]
    assert all(s[0] != "error" for s in slow)
    assert sum(f != s for f, s in zip(fast, slow, strict=True)) >= len(pairs) // 2


def test_a_fast_reader_cannot_be_declared_for_a_version_it_was_not_written_for() -> None:
    with pytest.raises(TypeError, match="not written for that version"):
        class Wrong(MetadataV6Serializer):
            VERSION = 7
            FAST_READER = V3_SUBTASK_LAYOUT


# ---- the other fast paths ------------------------------------------------------------------

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


@pytest.mark.parametrize("subtask_loop", ["compiled"], indirect=True)  # the compiled loop only: it is the subject
def test_the_compiled_subtask_loop_reads_the_committed_fixtures(subtask_loop: str) -> None:
    """The compiled loop is built and takes real Flink files' subtasks itself, building the same objects."""
    calls: list[int] = []
    real = fast_reader._compiled

    class Counting:
        def read_subtasks(self, *args: Any) -> tuple[int, int]:
            taken, pos = real.read_subtasks(*args)  # type: ignore[union-attr]
            calls.append(taken)
            return taken, pos

    with pytest.MonkeyPatch.context() as m:
        m.setattr(fast_reader, "_compiled", Counting())
        for data in FIXTURE_FILES:
            assert _outcome(data, "/sp/dir/") == _outcome(data, "/sp/dir/", fast_paths=False)
    assert sum(calls) > 100


def test_inline_state_is_a_view_of_the_file_not_a_copy() -> None:
    """Inline state handles of real Flink files keep views into the file's bytes (issue 34), read by
    either loop; `data` still gives the same bytes as a `bytes` object, and the sizes are unchanged."""
    seen = 0
    for data in FIXTURE_FILES:
        m = parse_metadata(data, "fp/_metadata", "/sp/")
        for o in m.operator_states:
            for s in o.subtask_states.values():
                for h in (*s.managed_operator_state, *s.raw_operator_state, *s.managed_keyed_state,
                          *s.raw_keyed_state):
                    inline = getattr(h, "delegate", None)
                    if isinstance(inline, ByteStreamStateHandle):
                        assert inline.view.obj is data and inline.view.readonly
                        assert isinstance(inline.data, bytes) and inline.data == bytes(inline.view)
                        assert inline.state_size == len(inline.data) == h.state_size
                        seen += 1
    assert seen > 100


def test_parsing_leaves_the_cyclic_collector_as_it_found_it() -> None:
    """`parse_metadata` pauses the cyclic GC while it builds the model (issue 34) and restores its state,
    after a good file and after a bad one; a caller that disabled it finds it still disabled."""
    import gc
    good, bad = FIXTURE_FILES[0], FIXTURE_FILES[0][:40]
    was = gc.isenabled()
    try:
        for enabled in (True, False):
            (gc.enable if enabled else gc.disable)()
            parse_metadata(good, "fp/_metadata", "/sp/")
            assert gc.isenabled() is enabled
            with pytest.raises(MetadataFormatError):
                parse_metadata(bad, "fp/_metadata", "/sp/")
            assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()

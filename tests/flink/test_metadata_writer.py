"""The `_metadata` writer is the exact inverse of the reader (upgrade_gate/flink/metadata/writer.py).

Real files: every `_metadata` committed under tests/fixtures/ (restores, savepoints, state-schemas,
checkpoints; 140 files written by Flink 1.20.5, 2.0.2 and 2.3.0) is read, with and without the fast
paths, and written back byte for byte. They cover

* format v3 (Flink 1.20 writing `MetadataV3Serializer`): inline, relative-file, key-groups (tag 12) and
  canonical-savepoint (tag 7) handles, operator state (tag 4), coordinator state, V1 input and output
  channel handles of unaligned checkpoints, FINISHED subtasks, fully finished operators;
* v4 (1.20): the above plus absolute file handles, incremental RocksDB handles (tag 11), file-merging
  operator handles (tag 17, empty ones too) over segment (15) and empty-segment (16) handles, and the
  Java-serialized properties trailer of savepoints and checkpoints;
* v5 (2.0): the same with operator names and uids (present and absent);
* v6 (2.3): the same with V2 channel handles, merged input and output handles (FLINK-33734).

Built by hand, because no fixture holds them: key-groups handles of tag 3 (no state handle id, also
nested as a stream handle), incremental handles of tag 5, changelog handles (tags 8, 14, 9, 10, 13),
master states, raw operator and raw keyed state, V2 per-channel handles (types 1 and 2), non-ASCII
text (NUL, supplementary characters), and every version 3-6 of one model; each is written, read back
both ways and compared. A v4 file re-labelled as v3 without its trailer is the v3 bytes Flink would
write. Their bytes are also checked against encodings written here from Flink's source, not by the
writer. Version 2 and models the format cannot hold are refused with a message.
"""

from __future__ import annotations

import dataclasses
import struct
from pathlib import Path

import pytest

from tests.metadata_support import MetadataBuilder
from upgrade_gate.flink.metadata import parse_metadata
from upgrade_gate.flink.metadata.handle_writer import (
    ChannelStateHandleWriterV1,
    ChannelStateHandleWriterV2,
    encode_modified_utf8,
    write_keyed_handle,
    write_stream_handle,
)
from upgrade_gate.flink.metadata.handles import DeserializationContext, read_keyed_handle, read_stream_handle
from upgrade_gate.flink.metadata.model import (
    FINISHED_SUBTASK,
    ByteStreamStateHandle,
    ChangelogStateBackendHandleImpl,
    ChangelogStateHandleStreamImpl,
    CheckpointMetadata,
    FileStateHandle,
    HandleAndLocalPath,
    IncrementalRemoteKeyedStateHandle,
    InMemoryChangelogStateHandle,
    InputChannelStateHandle,
    KeyGroupRange,
    KeyGroupsSavepointStateHandle,
    KeyGroupsStateHandle,
    MasterState,
    MergedInputChannelStateHandle,
    MergedResultSubpartitionStateHandle,
    Mode,
    OperatorState,
    OperatorStreamStateHandle,
    OperatorSubtaskState,
    RelativeFileStateHandle,
    ResultSubpartitionStateHandle,
    StateMetaInfo,
)
from upgrade_gate.flink.metadata.reader import BoundedReader
from upgrade_gate.flink.metadata.writer import serialize_metadata

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
FILES = sorted(FIXTURES.rglob("_metadata"))


def _version(data: bytes) -> int:
    return struct.unpack_from(">i", data, 4)[0]


def _read(path: Path, fast_paths: bool = True) -> CheckpointMetadata:
    return parse_metadata(path.read_bytes(), str(path), str(path.parent), fast_paths=fast_paths)


def _first_difference(a: bytes, b: bytes) -> str:
    i = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    return f"first difference at offset {i} of {len(a)} / {len(b)} bytes: {a[i:i + 16].hex()} != {b[i:i + 16].hex()}"


# ---- every real file, byte for byte ---------------------------------------------------------------

def _kinds(obj: object, found: set[str]) -> set[str]:
    if isinstance(obj, tuple | list):
        for x in obj:
            _kinds(x, found)
    elif isinstance(obj, dict):
        for x in obj.values():
            _kinds(x, found)
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        found.add(getattr(obj, "kind", type(obj).__name__))
        if isinstance(obj, OperatorSubtaskState) and obj.finished:
            found.add("finished subtask")
        if isinstance(obj, OperatorState):
            found.update(k for k, on in (("fully finished operator", obj.fully_finished),
                                         ("coordinator state", obj.coordinator_state is not None),
                                         ("operator name", obj.name is not None),
                                         ("operator uid", obj.uid is not None)) if on)
        for f in dataclasses.fields(obj):
            _kinds(getattr(obj, f.name), found)
    return found


def test_the_fixtures_hold_every_version_and_the_handle_kinds_the_docstring_names() -> None:
    by_version: dict[int, set[str]] = {}
    for path in FILES:
        m = _read(path)
        _kinds(m, by_version.setdefault(m.version, set()))
    assert len(FILES) >= 140
    common = {"ByteStreamStateHandle", "RelativeFileStateHandle", "KeyGroupsStateHandle",
              "KeyGroupsSavepointStateHandle", "OperatorStreamStateHandle", "coordinator state", "finished subtask",
              "fully finished operator"}
    merging = {"FileMergingOperatorStreamStateHandle", "EmptyFileMergingOperatorStreamStateHandle",
               "SegmentFileStateHandle", "EmptySegmentFileStateHandle", "IncrementalRemoteKeyedStateHandle"}
    assert sorted(by_version) == [3, 4, 5, 6]
    assert common | {"InputChannelStateHandle", "ResultSubpartitionStateHandle"} <= by_version[3]
    assert common | merging | {"FileStateHandle", "InputChannelStateHandle", "CheckpointProperties"} <= by_version[4]
    assert common | merging | {"operator name", "operator uid"} <= by_version[5]
    assert common | merging | {"FileStateHandle", "MergedInputChannelStateHandle",
                               "MergedResultSubpartitionStateHandle", "operator name"} <= by_version[6]


@pytest.mark.parametrize("fast_paths", [True, False], ids=["fast", "definitions"])
@pytest.mark.parametrize("path", FILES, ids=[str(p.parent.relative_to(FIXTURES)) for p in FILES])
def test_every_fixture_is_written_back_byte_for_byte(path: Path, fast_paths: bool) -> None:
    data = path.read_bytes()
    written = serialize_metadata(_read(path, fast_paths))
    assert written == data, _first_difference(written, data)


def test_a_changed_operator_id_changes_those_16_bytes_and_nothing_else() -> None:
    """What a repair does: the same savepoint under another operator ID."""
    path = next(p for p in FILES if "rocksdb-native" in str(p) and _version(p.read_bytes()) == 6)
    data = path.read_bytes()
    m = _read(path)
    op = next(o for o in m.operator_states if o.state_size > 0)
    new_id = bytes(range(16))
    repaired = dataclasses.replace(m, operator_states=tuple(
        dataclasses.replace(o, operator_id=new_id) if o is op else o for o in m.operator_states))
    written = serialize_metadata(repaired)
    changed = [i for i, (a, b) in enumerate(zip(written, data, strict=True)) if a != b]
    at = data.index(op.operator_id)
    assert len(written) == len(data) and changed and at <= changed[0] and changed[-1] < at + 16
    back = parse_metadata(written, str(path), str(path.parent))
    assert [o.operator_id for o in back.operator_states] == [o.operator_id for o in repaired.operator_states]
    assert back == repaired


def test_a_v4_file_relabelled_as_v3_is_the_v4_file_without_its_trailer() -> None:
    path = next(p for p in FILES if _version(p.read_bytes()) == 4 and "checkpoint-unaligned" in str(p))
    data = path.read_bytes()
    m = _read(path)
    assert any(s.input_channel_state for o in m.operator_states for s in o.subtask_states.values())
    v3 = dataclasses.replace(m, version=3, properties=None)
    written = serialize_metadata(v3)
    trailer = len(m.properties.raw)
    assert written == data[:4] + struct.pack(">i", 3) + data[8:len(data) - trailer]
    for fast_paths in (True, False):
        assert parse_metadata(written, str(path), str(path.parent), fast_paths=fast_paths) == v3


# ---- synthetic models: what no fixture holds ----------------------------------------------------

BASE = "/savepoints/savepoint-1a2b3c"
BACKEND = "0f8fad5b-d9cb-469f-a165-70867728950e"
PROPERTIES = next(_read(p).properties for p in FILES if _version(p.read_bytes()) == 4)
ODD_TEXT = "zustand-\u00e4 \u0000 \U0001f600 \u4e2d"  # 2-byte, NUL, supplementary, 3-byte characters


def _relative(name: str, size: int) -> RelativeFileStateHandle:
    return RelativeFileStateHandle(f"{BASE}/{name}", name, size)


INCREMENTAL_V1 = IncrementalRemoteKeyedStateHandle(
    BACKEND, KeyGroupRange(0, 63), 7,
    (HandleAndLocalPath("000012.sst", FileStateHandle("s3://bucket/shared/000012.sst", 1000)),),
    (HandleAndLocalPath("MANIFEST-000004", ByteStreamStateHandle("manifest", b"\x01\x02")),),
    _relative("meta-1", 200), -1)
INCREMENTAL_V2 = dataclasses.replace(INCREMENTAL_V1, persisted_size=1234, state_handle_id="incremental-1")
KEY_GROUPS_V1 = KeyGroupsStateHandle(KeyGroupRange(64, 66), (10, 20, 30), _relative("kg-1", 99))
NESTED_KEY_GROUPS = KeyGroupsStateHandle(KeyGroupRange(0, 1), (5, 6), KeyGroupsStateHandle(
    KeyGroupRange(0, 1), (1, 2), FileStateHandle("/data/kg-nested", 9)), "kg-2")
IN_MEMORY = InMemoryChangelogStateHandle(KeyGroupRange(0, 3), ((0, b"put"), (-1, b"meta"), (3, b"")), 5, 9, "mem-1")
STREAM_V2 = ChangelogStateHandleStreamImpl(
    KeyGroupRange(0, 3), ((FileStateHandle("/dstl/log-1", 50), 0), (_relative("log-2", 70), 12)), 120, 80,
    "log-handle-1", "dstl-s3")
STREAM_V1 = ChangelogStateHandleStreamImpl(
    KeyGroupRange(0, 3), ((FileStateHandle("/dstl/log-0", 40), 4),), 40, 40, "log-handle-0", "filesystem",
    v1_tag=True)
BACKEND_V2 = ChangelogStateBackendHandleImpl((INCREMENTAL_V2,), (IN_MEMORY, STREAM_V2), KeyGroupRange(0, 63), 12, 10,
                                             4321, "changelog-1")
BACKEND_V1 = ChangelogStateBackendHandleImpl((KEY_GROUPS_V1,), (STREAM_V1,), KeyGroupRange(64, 66), 10, 10, 99,
                                             "changelog-0", v1_tag=True)
OPERATOR_STATE = OperatorStreamStateHandle(
    {ODD_TEXT: StateMetaInfo((0, 17), Mode.SPLIT_DISTRIBUTE), "union": StateMetaInfo((30,), Mode.UNION),
     "broadcast": StateMetaInfo((), Mode.BROADCAST)}, ByteStreamStateHandle(f"{BASE}/op-\u00e4", b"state bytes"))


def _channels(version: int) -> tuple[tuple, tuple]:
    inputs: tuple = (InputChannelStateHandle(1, (0, 2), _relative("ch-in", 30), (0, 10), 30),)
    outputs: tuple = (ResultSubpartitionStateHandle(1, (0, 1), FileStateHandle("/ch/out", 8), (0,), 8),)
    if version >= 6:
        inputs += (MergedInputChannelStateHandle(1, 64, _relative("merged-in", 64), b"\x00\x01offsets"),)
        outputs += (MergedResultSubpartitionStateHandle(1, 32, None, b""),)
    return inputs, outputs


def synthetic(version: int) -> CheckpointMetadata:
    """One model with every rare handle kind the given version can hold."""
    inputs, outputs = _channels(version)
    subtasks = {  # not in index order: the writer keeps the model's order, as Flink keeps its map's
        2: OperatorSubtaskState(raw_operator_state=(OPERATOR_STATE,), managed_keyed_state=(BACKEND_V2,),
                                raw_keyed_state=(NESTED_KEY_GROUPS,)),
        0: OperatorSubtaskState(managed_operator_state=(OPERATOR_STATE,), managed_keyed_state=(INCREMENTAL_V1,),
                                raw_keyed_state=(BACKEND_V1,), input_channel_state=inputs,
                                result_subpartition_state=outputs),
        1: FINISHED_SUBTASK,
        3: OperatorSubtaskState(managed_keyed_state=(KEY_GROUPS_V1,)),
        4: OperatorSubtaskState(),
    }
    named = version >= 5
    operators = (
        OperatorState(bytes(range(16)), ODD_TEXT if named else None, "uid-\u00e4" if named else None, 5, 128,
                      ByteStreamStateHandle("coordinator", b"\x00coordinator"), subtasks),
        OperatorState(bytes(range(16, 32)), "finished" if named else None, None, 2, 128, None, {},
                      fully_finished=True),
        OperatorState(b"\xff" * 16, None, "only-uid" if named else None, 1, 1, None, {0: OperatorSubtaskState()}),
    )
    masters = (MasterState("hook-\u00e4\u0000\U0001f600", 3, b"\x00\x01payload"), MasterState("empty", 1, b""))
    return CheckpointMetadata(version, 42, masters, operators, PROPERTIES if version >= 4 else None,
                              "synthetic/_metadata")


@pytest.mark.parametrize("version", [3, 4, 5, 6])
def test_a_synthetic_model_of_every_rare_kind_reads_back_equal(version: int) -> None:
    model = synthetic(version)
    data = serialize_metadata(model)
    for fast_paths in (True, False):
        back = parse_metadata(data, "synthetic/_metadata", BASE, fast_paths=fast_paths)
        assert back == model
        assert [list(o.subtask_states) for o in back.operator_states] == [[2, 0, 1, 3, 4], [], [0]]
        keyed = back.operator_states[0].subtask_states[0].raw_keyed_state[0]
        assert keyed.v1_tag and keyed.non_materialized[0].v1_tag  # tags 8 and 10 stay as they were read
        assert serialize_metadata(back) == data
    assert data[:8] == struct.pack(">ii", 0x4960672D, version)


# ---- the bytes of rare handles, written here from Flink's source -----------------------------------

def _stream_bytes(h: object) -> bytes:
    out = bytearray()
    write_stream_handle(out, h)
    return bytes(out)


def _range(b: MetadataBuilder, start: int, n: int) -> MetadataBuilder:
    return b.int(start).int(n)


REL_META = MetadataBuilder().byte(6).utf("meta-1").long(200).bytes()
KEY_GROUPS_BODY = _range(MetadataBuilder(), 64, 3).long(10).long(20).long(30).byte(6).utf("kg-1").long(99).bytes()
INCREMENTAL_BODY = (MetadataBuilder().int(1).utf("000012.sst").byte(2).long(1000).utf("s3://bucket/shared/000012.sst")
                    .int(1).utf("MANIFEST-000004").byte(1).utf("manifest").int(2).raw(b"\x01\x02").bytes())
IN_MEMORY_BYTES = (_range(MetadataBuilder().byte(9), 0, 4).long(5).long(9).int(3).int(0).int(3).raw(b"put")
                   .int(-1).int(4).raw(b"meta").int(3).int(0).utf("mem-1").bytes())
STREAM_V2_BYTES = (_range(MetadataBuilder().byte(13), 0, 4).int(2).long(0).byte(2).long(50).utf("/dstl/log-1")
                   .long(12).byte(6).utf("log-2").long(70).long(120).long(80).utf("log-handle-1").utf("dstl-s3")
                   .bytes())
STREAM_V1_BYTES = (_range(MetadataBuilder().byte(10), 0, 4).int(1).long(4).byte(2).long(40).utf("/dstl/log-0")
                   .long(40).long(40).utf("log-handle-0").bytes())
FLINK_BYTES = {  # (handle, the bytes MetadataV2V3SerializerBase#serializeKeyedStateHandle writes)
    "key-groups, tag 3": (KEY_GROUPS_V1, b"\x03" + KEY_GROUPS_BODY),
    "key-groups, tag 12": (dataclasses.replace(KEY_GROUPS_V1, state_handle_id="kg-9"),
                           b"\x0c" + KEY_GROUPS_BODY + MetadataBuilder().utf("kg-9").bytes()),
    "savepoint key-groups, tag 7": (KeyGroupsSavepointStateHandle(KEY_GROUPS_V1.key_group_range, KEY_GROUPS_V1.offsets,
                                                                  KEY_GROUPS_V1.delegate),
                                    b"\x07" + KEY_GROUPS_BODY),
    "incremental, tag 5": (INCREMENTAL_V1, _range(MetadataBuilder().byte(5).long(7).utf(BACKEND), 0, 64).raw(REL_META)
                           .raw(INCREMENTAL_BODY).bytes()),
    "incremental, tag 11": (INCREMENTAL_V2, _range(MetadataBuilder().byte(11).long(7).utf(BACKEND), 0, 64).long(1234)
                            .raw(REL_META).raw(INCREMENTAL_BODY).utf("incremental-1").bytes()),
    "in-memory changelog, tag 9": (IN_MEMORY, IN_MEMORY_BYTES),
    "changelog stream, tag 13": (STREAM_V2, STREAM_V2_BYTES),
    "changelog stream, tag 10": (STREAM_V1, STREAM_V1_BYTES),
    "changelog backend, tag 14": (dataclasses.replace(BACKEND_V2, materialized=(), non_materialized=(IN_MEMORY,)),
                                  _range(MetadataBuilder().byte(14), 0, 64).long(4321).int(0).int(1)
                                  .raw(IN_MEMORY_BYTES).long(10).long(12).utf("changelog-1").bytes()),
    "changelog backend, tag 8": (BACKEND_V1, _range(MetadataBuilder().byte(8), 64, 3).long(99).int(1)
                                 .raw(b"\x03" + KEY_GROUPS_BODY).int(1).raw(STREAM_V1_BYTES).long(10)
                                 .utf("changelog-0").bytes()),
}


@pytest.mark.parametrize("name", sorted(FLINK_BYTES))
def test_rare_keyed_handles_are_the_bytes_flink_writes_and_read_back(name: str) -> None:
    handle, expected = FLINK_BYTES[name]
    out = bytearray()
    write_keyed_handle(out, handle)
    assert bytes(out) == expected
    r = BoundedReader(expected, "handle")
    assert read_keyed_handle(r, DeserializationContext(BASE)) == handle and not r.remaining()


def test_a_key_groups_handle_nested_as_a_stream_handle_is_tag_3_without_an_id() -> None:
    data = _stream_bytes(KEY_GROUPS_V1)
    assert data == b"\x03" + KEY_GROUPS_BODY
    assert read_stream_handle(BoundedReader(data, "h"), DeserializationContext(BASE)) == KEY_GROUPS_V1


def test_channel_handles_are_untagged_before_v6_and_typed_from_v6() -> None:
    inputs, outputs = _channels(6)
    body = MetadataBuilder().int(1).int(0).int(2).int(2).long(0).long(10).long(30).byte(6).utf("ch-in").long(30).bytes()
    merged = MetadataBuilder().int(1).long(32).byte(0).int(0).bytes()
    v1, v2 = bytearray(), bytearray()
    ChannelStateHandleWriterV1().write_input(v1, inputs[0])
    ChannelStateHandleWriterV2().write_input(v2, inputs[0])
    ChannelStateHandleWriterV2().write_output(v2, outputs[1])
    assert bytes(v1) == body
    assert bytes(v2) == b"\x01" + body + b"\x04" + merged


def test_text_is_written_in_java_modified_utf8() -> None:
    """`writeUTF`: NUL as C0 80, a supplementary character as two 3-byte surrogates."""
    assert encode_modified_utf8("a\u0000b") == b"a\xc0\x80b"
    assert encode_modified_utf8("\u00e4\u4e2d") == "\u00e4\u4e2d".encode()
    assert encode_modified_utf8("\U0001f600") == b"\xed\xa0\xbd\xed\xb8\x80"
    m = dataclasses.replace(synthetic(6), master_states=(MasterState("\U0001f600\u0000", 1, b"x"),))
    data = serialize_metadata(m)
    assert struct.pack(">H", 8) + b"\xed\xa0\xbd\xed\xb8\x80\xc0\x80" in data
    assert parse_metadata(data, "utf/_metadata", BASE).master_states == m.master_states


def test_finished_subtasks_and_fully_finished_operators_are_flinks_negative_numbers() -> None:
    op = OperatorState(b"\x01" * 16, None, None, 3, 128, None, {2: FINISHED_SUBTASK})
    done = OperatorState(b"\x02" * 16, None, None, 3, 128, None, {}, fully_finished=True)
    data = serialize_metadata(dataclasses.replace(synthetic(3), master_states=(), operator_states=(op, done)))
    assert data.endswith(b"\x01" * 16 + struct.pack(">iib", 3, 128, 0) + struct.pack(">ii", 1, -3)
                         + b"\x02" * 16 + struct.pack(">iibi", 3, 128, 0, -1))


# ---- what cannot be written ------------------------------------------------------------------------

def test_version_2_is_refused_with_a_message() -> None:
    with pytest.raises(ValueError, match=r"format version 2 \(Flink 1\.3-1\.10\) cannot be written; "):
        serialize_metadata(dataclasses.replace(synthetic(3), version=2))
    with pytest.raises(ValueError, match="format version 7 cannot be written; the writer knows versions 3, 4, 5, 6"):
        serialize_metadata(dataclasses.replace(synthetic(6), version=7))


def _with_subtask(version: int, subtask: OperatorSubtaskState) -> CheckpointMetadata:
    m = synthetic(version)
    op = dataclasses.replace(m.operator_states[2], subtask_states={0: subtask})
    return dataclasses.replace(m, operator_states=(op,))


def _renamed(version: int, name: str | None) -> CheckpointMetadata:
    m = synthetic(version)
    return dataclasses.replace(m, operator_states=(dataclasses.replace(m.operator_states[2], name=name),))


REFUSED = {
    "names in v4": (_renamed(4, "map"), "format version 4 has no operator name or uid"),
    "empty name in v5": (_renamed(5, ""), "operator name is the empty string, which Flink refuses"),
    "properties in v3": (dataclasses.replace(synthetic(3), properties=PROPERTIES),
                         "format version 3 has no checkpoint properties"),
    "no properties in v4": (dataclasses.replace(synthetic(4), properties=None),
                            "format version 4 ends with the checkpoint properties, and there are none"),
    "properties without bytes": (dataclasses.replace(synthetic(6), properties=dataclasses.replace(PROPERTIES, raw=b"")),
                                 r"without their serialized bytes \(CheckpointProperties.raw\)"),
    "properties unlike their bytes": (
        dataclasses.replace(synthetic(6), properties=dataclasses.replace(PROPERTIES, name="Renamed")),
        "differ from what their raw bytes say"),
    "merged channel handle in v5": (_with_subtask(5, OperatorSubtaskState(input_channel_state=_channels(6)[0][1:])),
                                    "format versions 3-5 write only InputChannelStateHandle"),
    "two keyed handles": (_with_subtask(6, OperatorSubtaskState(managed_keyed_state=(KEY_GROUPS_V1, KEY_GROUPS_V1))),
                          "2 handles of managed keyed state; Flink writes at most one"),
    "a backend id that is no UUID": (
        _with_subtask(6, OperatorSubtaskState(managed_keyed_state=(dataclasses.replace(INCREMENTAL_V1,
                                                                                       backend_id="backend"),))),
        "backend id 'backend' is not a UUID in Flink's form"),
    "a tag-5 handle with a checkpointed size": (
        _with_subtask(6, OperatorSubtaskState(managed_keyed_state=(dataclasses.replace(INCREMENTAL_V1,
                                                                                       persisted_size=5),))),
        r"without a state handle id \(tag 5\) has no checkpointed size"),
    "a subtask index beyond the parallelism": (
        dataclasses.replace(synthetic(6), operator_states=(dataclasses.replace(
            synthetic(6).operator_states[2], subtask_states={1: OperatorSubtaskState()}),)),
        r"subtask index 1 is outside \[0, 1\)"),
    "a string over 65535 bytes": (
        dataclasses.replace(synthetic(6), master_states=(MasterState("\u00e4" * 40000, 1, b""),)),
        "master state name is 80000 bytes in modified UTF-8; Java's writeUTF allows at most 65535"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_model_the_format_cannot_hold_is_refused_with_a_message(case: str) -> None:
    model, message = REFUSED[case]
    with pytest.raises(ValueError, match=message):
        serialize_metadata(model)

"""Serializers of state handles: the inverse of handles.py and channel.py.

Flink's `MetadataV2V3SerializerBase#serializeStreamStateHandle`, `#serializeKeyedStateHandle` and
`#serializeOperatorStateHandle`, and `ChannelStateHandleSerializerV1` / `V2`. Each function appends to
a `bytearray` exactly the bytes the matching reader function consumes, so reading what was written
gives an equal object, and writing what was read from a file Flink wrote gives that file's bytes.

Flink's writer always uses the newest tag of a handle (12, 11, 14, 13); our reader records which tag
it read: a key-groups or incremental handle without a state handle id came from tag 3 or 5, a
changelog handle carries `v1_tag`. So older files are written back with their own tags. A handle
the reader could never have produced (an empty string where Flink refuses one, a backend id that
is not a UUID, a key-groups handle with an id where Flink writes none) is refused with a
`ValueError` naming the problem: writing it would silently lose or change information.
"""

from __future__ import annotations

import re
import struct
import uuid
from collections.abc import Callable

from upgrade_gate.flink.metadata.channel import (
    INPUT_CHANNEL_STATE_HANDLE,
    MERGED_INPUT_CHANNEL_STATE_HANDLE,
    MERGED_RESULT_SUBPARTITION_STATE_HANDLE,
    RESULT_SUBPARTITION_STATE_HANDLE,
)
from upgrade_gate.flink.metadata.handles import (
    BYTE_STREAM_STATE_HANDLE,
    CHANGELOG_BYTE_INCREMENT_HANDLE,
    CHANGELOG_FILE_INCREMENT_HANDLE,
    CHANGELOG_FILE_INCREMENT_HANDLE_V2,
    CHANGELOG_HANDLE,
    CHANGELOG_HANDLE_V2,
    EMPTY_SEGMENT_FILE_HANDLE,
    FILE_STREAM_STATE_HANDLE,
    INCREMENTAL_KEY_GROUPS_HANDLE,
    INCREMENTAL_KEY_GROUPS_HANDLE_V2,
    KEY_GROUPS_HANDLE,
    KEY_GROUPS_HANDLE_V2,
    NULL_HANDLE,
    PARTITIONABLE_OPERATOR_STATE_HANDLE,
    RELATIVE_STREAM_STATE_HANDLE,
    SAVEPOINT_KEY_GROUPS_HANDLE,
    SEGMENT_FILE_HANDLE,
    SEGMENT_PARTITIONABLE_OPERATOR_STATE_HANDLE,
)
from upgrade_gate.flink.metadata.model import (
    EMPTY_KEY_GROUP_RANGE,
    ByteStreamStateHandle,
    ChangelogStateBackendHandleImpl,
    ChangelogStateHandleStreamImpl,
    EmptySegmentFileStateHandle,
    FileMergingOperatorStreamStateHandle,
    FileStateHandle,
    HandleAndLocalPath,
    IncrementalRemoteKeyedStateHandle,
    InMemoryChangelogStateHandle,
    InputChannelStateHandle,
    KeyGroupRange,
    KeyGroupsSavepointStateHandle,
    KeyGroupsStateHandle,
    MergedInputChannelStateHandle,
    MergedResultSubpartitionStateHandle,
    OperatorStreamStateHandle,
    RelativeFileStateHandle,
    ResultSubpartitionStateHandle,
    SegmentFileStateHandle,
)

__all__ = ["ChannelStateHandleWriterV1", "ChannelStateHandleWriterV2", "encode_modified_utf8", "pack_int",
           "pack_long", "write_keyed_handle", "write_operator_handle", "write_stream_handle", "write_utf"]

pack_int = struct.Struct(">i").pack
pack_long = struct.Struct(">q").pack
_pack_ints = struct.Struct(">ii").pack
_pack_short = struct.Struct(">H").pack
_TAGS = tuple(bytes((t,)) for t in range(256))  # one byte per tag, built once
_NULL = _TAGS[NULL_HANDLE]
_SCOPES = {"EXCLUSIVE": 0, "SHARED": 1}  # `CheckpointedStateScope` ordinals
_SUPPLEMENTARY = re.compile("[\U00010000-\U0010FFFF]")


def _surrogate_pair(m: re.Match[str]) -> str:
    c = ord(m.group()) - 0x10000
    return chr(0xD800 | c >> 10) + chr(0xDC00 | c & 0x3FF)


def encode_modified_utf8(text: str) -> bytes:
    """Java's modified UTF-8 (`DataOutputStream.writeUTF` without the length): NUL as C0 80,
    characters beyond the BMP as their two UTF-16 surrogates of 3 bytes each."""
    if text.isascii():
        raw = text.encode("ascii")
        return raw.replace(b"\x00", b"\xc0\x80") if b"\x00" in raw else raw
    text = _SUPPLEMENTARY.sub(_surrogate_pair, text)
    return text.encode("utf-8", "surrogatepass").replace(b"\x00", b"\xc0\x80")


def write_utf(out: bytearray, text: str, what: str) -> None:
    """`DataOutputStream.writeUTF`: u16 length, then modified UTF-8 (Java refuses over 65535 bytes)."""
    if type(text) is str and text.isascii():  # nearly every string: no call, no regular expression
        raw = text.encode("ascii")
        if b"\x00" in raw:
            raw = raw.replace(b"\x00", b"\xc0\x80")
    elif type(text) is str:
        raw = encode_modified_utf8(text)
    else:
        raise ValueError(f"{what}: expected a string, found {type(text).__name__}")
    if len(raw) > 0xFFFF:
        raise ValueError(f"{what} is {len(raw)} bytes in modified UTF-8; Java's writeUTF allows at most 65535")
    out += _pack_short(len(raw))
    out += raw


def _key_group_range(out: bytearray, rng: KeyGroupRange, what: str) -> int:
    """Start and number of key groups (`KeyGroupRange.of` makes every empty range (0, -1))."""
    n = rng.end - rng.start + 1
    if rng.start < 0 or n < 0 or (n == 0 and rng != EMPTY_KEY_GROUP_RANGE):
        raise ValueError(f"{what}: key-group range [{rng.start}, {rng.end}] is not one Flink writes "
                         f"(the empty range is [0, -1])")
    out += _pack_ints(rng.start, n)
    return n


def _longs(out: bytearray, values: tuple[int, ...]) -> None:
    if values:
        out += struct.pack(f">{len(values)}q", *values)


# ---- stream handles -------------------------------------------------------------------------

def _byte_stream(out: bytearray, h: ByteStreamStateHandle) -> None:
    out += _TAGS[BYTE_STREAM_STATE_HANDLE]
    write_utf(out, h.handle_name, "byte-stream handle name")
    out += pack_int(len(h.view))
    out += h.view


def _relative_file(out: bytearray, h: RelativeFileStateHandle) -> None:
    """Only the relative path is written; the reader resolves it against the snapshot directory."""
    out += _TAGS[RELATIVE_STREAM_STATE_HANDLE]
    write_utf(out, h.relative_path, "relative file path")
    out += pack_long(h.size)


def _file(out: bytearray, h: FileStateHandle) -> None:
    out += _TAGS[FILE_STREAM_STATE_HANDLE]
    out += pack_long(h.size)
    write_utf(out, h.path, "file path")


def _segment(out: bytearray, h: SegmentFileStateHandle) -> None:
    scope = _SCOPES.get(h.scope)
    if scope is None:
        raise ValueError(f"segment file handle {h.path}: scope {h.scope!r} is not EXCLUSIVE or SHARED")
    out += _TAGS[SEGMENT_FILE_HANDLE]
    out += pack_long(h.start_pos)
    out += pack_long(h.size)
    out += pack_int(scope)
    write_utf(out, h.path, "segment physical file path")
    write_utf(out, h.logical_file_id, "logical file id")


def _empty_segment(out: bytearray, h: EmptySegmentFileStateHandle) -> None:
    """Flink's singleton: only its tag is written, so it has no other path or position."""
    if h != EmptySegmentFileStateHandle():
        raise ValueError(f"an EmptySegmentFileStateHandle is Flink's singleton (path 'empty', position 0), "
                         f"found path {h.path!r}, position {h.start_pos}")
    out += _TAGS[EMPTY_SEGMENT_FILE_HANDLE]


def _key_groups_body(out: bytearray, h: KeyGroupsStateHandle) -> None:
    n = _key_group_range(out, h.key_group_range, "key-groups handle")
    if len(h.offsets) != n:
        raise ValueError(f"key-groups handle of key groups [{h.key_group_range.start}, {h.key_group_range.end}] "
                         f"has {len(h.offsets)} offsets; Flink writes one per key group ({n})")
    _longs(out, h.offsets)
    write_stream_handle(out, h.delegate)


def _stream_key_groups(out: bytearray, h: KeyGroupsStateHandle) -> None:
    """A key-groups handle as a stream handle (a delegate): tag 3, never with a state handle id."""
    if h.state_handle_id is not None:
        raise ValueError("a key-groups handle nested as a stream handle is written without its state handle id "
                         f"({h.state_handle_id!r}): only keyed state keeps one")
    out += _TAGS[KEY_GROUPS_HANDLE]
    _key_groups_body(out, h)


def _stream_savepoint_key_groups(out: bytearray, h: KeyGroupsSavepointStateHandle) -> None:
    raise ValueError("a KeyGroupsSavepointStateHandle nested as a stream handle would be read back as a plain "
                     "KeyGroupsStateHandle (Flink writes tag 3 there)")


_STREAM_WRITERS: dict[type, Callable[[bytearray, object], None]] = {
    ByteStreamStateHandle: _byte_stream,  # type: ignore[dict-item]
    RelativeFileStateHandle: _relative_file,  # type: ignore[dict-item]
    FileStateHandle: _file,  # type: ignore[dict-item]
    SegmentFileStateHandle: _segment,  # type: ignore[dict-item]
    EmptySegmentFileStateHandle: _empty_segment,  # type: ignore[dict-item]
    KeyGroupsStateHandle: _stream_key_groups,  # type: ignore[dict-item]
    KeyGroupsSavepointStateHandle: _stream_savepoint_key_groups,  # type: ignore[dict-item]
}


def write_stream_handle(out: bytearray, h: object) -> None:
    """`serializeStreamStateHandle`: a tag (0 = none), then the handle."""
    if h is None:
        out += _NULL
        return
    writer = _STREAM_WRITERS.get(type(h))
    if writer is None:
        raise ValueError(f"cannot write a {type(h).__name__} as a stream state handle")
    writer(out, h)


# ---- keyed handles --------------------------------------------------------------------------

def _keyed_key_groups(out: bytearray, h: KeyGroupsStateHandle) -> None:
    """Tag 12 with its state handle id, or tag 3 (Flink before 1.16) when it was read without one."""
    if h.state_handle_id is None:
        out += _TAGS[KEY_GROUPS_HANDLE]
        _key_groups_body(out, h)
    else:
        out += _TAGS[KEY_GROUPS_HANDLE_V2]
        _key_groups_body(out, h)
        write_utf(out, h.state_handle_id, "state handle id")


def _keyed_savepoint_key_groups(out: bytearray, h: KeyGroupsSavepointStateHandle) -> None:
    """Tag 7: Flink writes no state handle id for canonical savepoints."""
    if h.state_handle_id is not None:
        raise ValueError(f"a KeyGroupsSavepointStateHandle is written without a state handle id, found "
                         f"{h.state_handle_id!r}")
    out += _TAGS[SAVEPOINT_KEY_GROUPS_HANDLE]
    _key_groups_body(out, h)


def _check_backend_id(backend_id: str) -> None:
    """Flink writes `UUID.toString()`; the reader gives that string back for every file Flink wrote."""
    try:
        canonical = str(uuid.UUID(backend_id)) if type(backend_id) is str else None
    except ValueError:
        canonical = None
    if canonical != backend_id:
        raise ValueError(f"incremental keyed state handle: backend id {backend_id!r} is not a UUID in Flink's "
                         f"form (8-4-4-4-12 lowercase hex digits, as UUID.toString() writes it)")


def _handle_list(out: bytearray, items: tuple[HandleAndLocalPath, ...], what: str) -> None:
    out += pack_int(len(items))
    for item in items:
        write_utf(out, item.local_path, f"local path of {what}")
        write_stream_handle(out, item.handle)


def _incremental(out: bytearray, h: IncrementalRemoteKeyedStateHandle) -> None:
    """Tag 11 with checkpointed size and state handle id, or tag 5 (before Flink 1.16) without both."""
    v2 = h.state_handle_id is not None
    if not v2 and h.persisted_size != -1:
        raise ValueError(f"incremental keyed state handle without a state handle id (tag 5) has no checkpointed "
                         f"size, found {h.persisted_size}: give it a state handle id (tag 11) or -1")
    _check_backend_id(h.backend_id)
    out += _TAGS[INCREMENTAL_KEY_GROUPS_HANDLE_V2 if v2 else INCREMENTAL_KEY_GROUPS_HANDLE]
    out += pack_long(h.checkpoint_id)
    write_utf(out, h.backend_id, "backend id")
    _key_group_range(out, h.key_group_range, "incremental keyed state handle")
    if v2:
        out += pack_long(h.persisted_size)
    write_stream_handle(out, h.meta_state_handle)
    _handle_list(out, h.shared_state, "shared state files")
    _handle_list(out, h.private_state, "private state files")
    if v2:
        write_utf(out, h.state_handle_id, "state handle id")  # type: ignore[arg-type]


def _keyed_list(out: bytearray, handles: tuple, what: str) -> None:
    out += pack_int(len(handles))
    for h in handles:
        if h is None:
            raise ValueError(f"{what} of a changelog state-backend handle cannot hold a null handle")
        write_keyed_handle(out, h)


def _changelog_backend(out: bytearray, h: ChangelogStateBackendHandleImpl) -> None:
    """Tag 14; tag 8 (no checkpoint id) for a handle read from one, if its ids still agree."""
    v1 = h.v1_tag and h.checkpoint_id == h.materialization_id
    out += _TAGS[CHANGELOG_HANDLE if v1 else CHANGELOG_HANDLE_V2]
    _key_group_range(out, h.key_group_range, "changelog state-backend handle")
    out += pack_long(h.persisted_size)
    _keyed_list(out, h.materialized, "materialized handles")
    _keyed_list(out, h.non_materialized, "non-materialized handles")
    out += pack_long(h.materialization_id)
    if not v1:
        out += pack_long(h.checkpoint_id)
    write_utf(out, h.state_handle_id, "state handle id")


def _in_memory_changelog(out: bytearray, h: InMemoryChangelogStateHandle) -> None:
    out += _TAGS[CHANGELOG_BYTE_INCREMENT_HANDLE]
    _key_group_range(out, h.key_group_range, "in-memory changelog handle")
    out += pack_long(h.from_sequence)
    out += pack_long(h.to_sequence)
    out += pack_int(len(h.changes))
    for key_group, change in h.changes:
        out += _pack_ints(key_group, len(change))
        out += change
    write_utf(out, h.state_handle_id, "state handle id")


def _changelog_stream(out: bytearray, h: ChangelogStateHandleStreamImpl) -> None:
    """Tag 13; tag 10 (no storage identifier: "filesystem") for a handle read from one, if it still says so."""
    v1 = h.v1_tag and h.storage_identifier == "filesystem"
    out += _TAGS[CHANGELOG_FILE_INCREMENT_HANDLE if v1 else CHANGELOG_FILE_INCREMENT_HANDLE_V2]
    _key_group_range(out, h.key_group_range, "changelog stream handle")
    out += pack_int(len(h.handles_and_offsets))
    for handle, offset in h.handles_and_offsets:
        out += pack_long(offset)
        write_stream_handle(out, handle)
    out += pack_long(h.size)
    out += pack_long(h.persisted_size)
    write_utf(out, h.state_handle_id, "state handle id")
    if not v1:
        write_utf(out, h.storage_identifier, "storage identifier")


_KEYED_WRITERS: dict[type, Callable[[bytearray, object], None]] = {
    KeyGroupsStateHandle: _keyed_key_groups,  # type: ignore[dict-item]
    KeyGroupsSavepointStateHandle: _keyed_savepoint_key_groups,  # type: ignore[dict-item]
    IncrementalRemoteKeyedStateHandle: _incremental,  # type: ignore[dict-item]
    ChangelogStateBackendHandleImpl: _changelog_backend,  # type: ignore[dict-item]
    InMemoryChangelogStateHandle: _in_memory_changelog,  # type: ignore[dict-item]
    ChangelogStateHandleStreamImpl: _changelog_stream,  # type: ignore[dict-item]
}


def write_keyed_handle(out: bytearray, h: object) -> None:
    """`serializeKeyedStateHandle`: a tag (0 = none), then the handle."""
    if h is None:
        out += _NULL
        return
    writer = _KEYED_WRITERS.get(type(h))
    if writer is None:
        raise ValueError(f"cannot write a {type(h).__name__} as a keyed state handle")
    writer(out, h)


# ---- operator-state handles -----------------------------------------------------------------

def write_operator_handle(out: bytearray, h: OperatorStreamStateHandle) -> None:
    """`serializeOperatorStateHandle`: tag 4, or 17 with the file-merging directories (FLIP-306)."""
    cls = type(h)
    merging = cls is FileMergingOperatorStreamStateHandle
    if not merging and cls is not OperatorStreamStateHandle:
        raise ValueError(f"cannot write a {cls.__name__} as an operator state handle")
    out += _TAGS[SEGMENT_PARTITIONABLE_OPERATOR_STATE_HANDLE if merging else PARTITIONABLE_OPERATOR_STATE_HANDLE]
    states = h.state_name_to_partition_offsets
    out += pack_int(len(states))
    for name, info in states.items():
        write_utf(out, name, "operator state name")
        out += _TAGS[info.mode.value]
        out += pack_int(len(info.offsets))
        _longs(out, info.offsets)
    if merging:
        if not isinstance(h.delegate, SegmentFileStateHandle | EmptySegmentFileStateHandle):
            raise ValueError("a file-merging operator state handle needs a segment file handle as its delegate, "
                             f"found {type(h.delegate).__name__}")
        write_utf(out, h.task_owned_dir, "task-owned directory")  # type: ignore[attr-defined]
        write_utf(out, h.shared_dir, "shared directory")  # type: ignore[attr-defined]
        out += _TAGS[1 if h.is_empty else 0]  # type: ignore[attr-defined]
    write_stream_handle(out, h.delegate)


# ---- channel state --------------------------------------------------------------------------

def _channel_body(out: bytearray, h: InputChannelStateHandle | ResultSubpartitionStateHandle) -> None:
    """`ChannelStateHandleSerializerV1#serializeChannelStateHandle`: the size comes before the delegate."""
    first, second = h.info
    out += _pack_ints(h.subtask_index, first)
    out += pack_int(second)
    out += pack_int(len(h.offsets))
    _longs(out, h.offsets)
    out += pack_long(h.size)
    write_stream_handle(out, h.delegate)


def _merged_body(out: bytearray, h: MergedInputChannelStateHandle | MergedResultSubpartitionStateHandle) -> None:
    """`ChannelStateHandleSerializerV2#serializeMergedChannelStateHandle`: offsets stay opaque bytes."""
    out += pack_int(h.subtask_index)
    out += pack_long(h.size)
    write_stream_handle(out, h.delegate)
    out += pack_int(len(h.serialized_channel_offsets))
    out += h.serialized_channel_offsets


class ChannelStateHandleWriterV1:
    """Format v3–v5: one untagged handle per channel; merged handles do not exist there."""

    def write_input(self, out: bytearray, h: object) -> None:
        if type(h) is not InputChannelStateHandle:
            raise ValueError(f"format versions 3-5 write only InputChannelStateHandle as input channel state, "
                             f"found {type(h).__name__} (merged handles need version 6)")
        _channel_body(out, h)

    def write_output(self, out: bytearray, h: object) -> None:
        if type(h) is not ResultSubpartitionStateHandle:
            raise ValueError(f"format versions 3-5 write only ResultSubpartitionStateHandle as output channel "
                             f"state, found {type(h).__name__} (merged handles need version 6)")
        _channel_body(out, h)


class ChannelStateHandleWriterV2:
    """Format v6: a type byte, then a per-channel or a merged handle."""

    def write_input(self, out: bytearray, h: object) -> None:
        cls = type(h)
        if cls is InputChannelStateHandle:
            out += _TAGS[INPUT_CHANNEL_STATE_HANDLE]
            _channel_body(out, h)  # type: ignore[arg-type]
        elif cls is MergedInputChannelStateHandle:
            out += _TAGS[MERGED_INPUT_CHANNEL_STATE_HANDLE]
            _merged_body(out, h)  # type: ignore[arg-type]
        else:
            raise ValueError(f"cannot write a {cls.__name__} as input channel state")

    def write_output(self, out: bytearray, h: object) -> None:
        cls = type(h)
        if cls is ResultSubpartitionStateHandle:
            out += _TAGS[RESULT_SUBPARTITION_STATE_HANDLE]
            _channel_body(out, h)  # type: ignore[arg-type]
        elif cls is MergedResultSubpartitionStateHandle:
            out += _TAGS[MERGED_RESULT_SUBPARTITION_STATE_HANDLE]
            _merged_body(out, h)  # type: ignore[arg-type]
        else:
            raise ValueError(f"cannot write a {cls.__name__} as result subpartition state")

"""Deserializers of state handles: Flink's `MetadataV2V3SerializerBase` (handle part).

Tags are Flink's constants. Stream-handle tags are read with `read()` (unsigned), keyed and
operator handle tags with `readByte()` (signed), as Flink does. Relative file handles are
resolved against the snapshot's directory (`DeserializationContext`).
"""

from __future__ import annotations

import struct
import uuid

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
    KeyedStateHandle,
    KeyGroupRange,
    KeyGroupsSavepointStateHandle,
    KeyGroupsStateHandle,
    Mode,
    OperatorStreamStateHandle,
    RelativeFileStateHandle,
    SegmentFileStateHandle,
    StateMetaInfo,
    StreamStateHandle,
)
from upgrade_gate.flink.metadata.reader import BoundedReader

NULL_HANDLE = 0
BYTE_STREAM_STATE_HANDLE = 1
FILE_STREAM_STATE_HANDLE = 2
KEY_GROUPS_HANDLE = 3
PARTITIONABLE_OPERATOR_STATE_HANDLE = 4
INCREMENTAL_KEY_GROUPS_HANDLE = 5
RELATIVE_STREAM_STATE_HANDLE = 6
SAVEPOINT_KEY_GROUPS_HANDLE = 7
CHANGELOG_HANDLE = 8
CHANGELOG_BYTE_INCREMENT_HANDLE = 9
CHANGELOG_FILE_INCREMENT_HANDLE = 10
INCREMENTAL_KEY_GROUPS_HANDLE_V2 = 11
KEY_GROUPS_HANDLE_V2 = 12
CHANGELOG_FILE_INCREMENT_HANDLE_V2 = 13
CHANGELOG_HANDLE_V2 = 14
SEGMENT_FILE_HANDLE = 15
EMPTY_SEGMENT_FILE_HANDLE = 16
SEGMENT_PARTITIONABLE_OPERATOR_STATE_HANDLE = 17

_SCOPES = ("EXCLUSIVE", "SHARED")
_MODES = tuple(Mode)
_MAX_DEPTH = 8  # nesting of stream handles (key-groups delegate) and changelog handles


class DeserializationContext:
    """Resolves relative paths against the snapshot directory, as Flink's context does."""

    __slots__ = ("_prefix", "base")

    def __init__(self, base: str | None) -> None:
        self.base = base
        # computed once: every relative handle of the file is resolved against the same directory
        self._prefix = None if base is None else base.rstrip("/") + "/"

    def resolve(self, relative: str) -> str | None:
        prefix = self._prefix
        if prefix is None:
            return None
        return prefix + relative


def read_key_group_range(r: BoundedReader) -> tuple[KeyGroupRange, int]:
    """`KeyGroupRange.of(start, start + num - 1)`; returns the range and `num`."""
    at = r.pos
    start, num = r.read_two_ints("key-group range (start, count)")
    if start < 0 or num < 0 or start + num - 1 > 0x7FFFFFFF:
        r.fail(f"expected a key-group range with start >= 0 and count >= 0, found start {start}, count {num}", at)
    rng = KeyGroupRange(start, start + num - 1) if num > 0 else EMPTY_KEY_GROUP_RANGE
    return rng, num


def read_stream_handle(r: BoundedReader, ctx: DeserializationContext, depth: int = 0) -> StreamStateHandle | None:
    at = r.pos
    tag = r.read_ubyte("stream state handle tag")
    if tag == NULL_HANDLE:
        return None
    if tag == BYTE_STREAM_STATE_HANDLE:
        name = r.read_utf("byte-stream handle name")
        n = r.read_count("inline state bytes", 1)
        return ByteStreamStateHandle(name, r.read_bytes(n, "inline state bytes"))
    if tag == FILE_STREAM_STATE_HANDLE:
        size = r.read_long("file state size")
        return FileStateHandle(r.read_utf("file path"), size)
    if tag == RELATIVE_STREAM_STATE_HANDLE:
        rel = r.read_utf("relative file path")
        size = r.read_long("file state size")
        path = ctx.resolve(rel)
        if path is None:
            r.fail("Cannot deserialize a RelativeFileStateHandle without a context to make it relative to.", at)
        return RelativeFileStateHandle(path, rel, size)
    if tag == KEY_GROUPS_HANDLE:
        return _key_groups(r, ctx, KeyGroupsStateHandle, False, depth)
    if tag == SEGMENT_FILE_HANDLE:
        start_pos = r.read_long("segment start position")
        size = r.read_long("segment size")
        scope_at = r.pos
        scope = r.read_int("segment scope")
        if not 0 <= scope < len(_SCOPES):
            r.fail(f"expected a checkpointed-state scope (0 or 1), found {scope}", scope_at)
        path = r.read_utf("segment physical file path")
        return SegmentFileStateHandle(path, start_pos, size, _SCOPES[scope], r.read_utf("logical file id"))
    if tag == EMPTY_SEGMENT_FILE_HANDLE:
        return EmptySegmentFileStateHandle()
    r.fail(f"expected stream state handle tag (0, 1, 2, 3, 6, 15 or 16), found {tag}", at)


def _key_groups(r: BoundedReader, ctx: DeserializationContext, cls: type[KeyGroupsStateHandle],
                with_id: bool, depth: int) -> KeyGroupsStateHandle:
    if depth > _MAX_DEPTH:
        r.fail("stream state handles nested too deeply")
    rng, num = read_key_group_range(r)
    at = r.pos
    if num * 8 > r.remaining():
        r.fail(f"{num} key-group offsets need {num * 8} bytes, only {r.remaining()} left", at)
    offsets = r.read_long_array(num, "key-group offsets")
    delegate = read_stream_handle(r, ctx, depth + 1)
    handle_id = r.read_utf("state handle id") if with_id else None
    return cls(rng, offsets, delegate, handle_id)


def _handle_map(r: BoundedReader, ctx: DeserializationContext, what: str) -> tuple[HandleAndLocalPath, ...]:
    n = r.read_count(what, 3)
    return tuple(HandleAndLocalPath(r.read_utf("local path"), read_stream_handle(r, ctx)) for _ in range(n))


def _backend_id(raw: str) -> str:
    """Flink parses a UUID, or (pre FLINK-6964 files) name-UUIDs the string's UTF-8 bytes."""
    try:
        return str(uuid.UUID(raw)) if raw.count("-") == 4 else str(uuid.uuid3(_NO_NAMESPACE, raw))
    except ValueError:
        return str(uuid.uuid3(_NO_NAMESPACE, raw))


class _NoNamespace:
    """`UUID.nameUUIDFromBytes` is MD5 of the bytes alone; uuid3 prepends the namespace bytes."""

    bytes = b""


_NO_NAMESPACE = _NoNamespace()  # type: ignore[assignment]


def read_keyed_handle(r: BoundedReader, ctx: DeserializationContext, depth: int = 0) -> KeyedStateHandle | None:
    at = r.pos
    tag = r.read_byte("keyed state handle tag")
    if tag == NULL_HANDLE:
        return None
    if tag == KEY_GROUPS_HANDLE:
        return _key_groups(r, ctx, KeyGroupsStateHandle, False, depth)
    if tag == KEY_GROUPS_HANDLE_V2:
        return _key_groups(r, ctx, KeyGroupsStateHandle, True, depth)
    if tag == SAVEPOINT_KEY_GROUPS_HANDLE:
        return _key_groups(r, ctx, KeyGroupsSavepointStateHandle, False, depth)
    if tag in (INCREMENTAL_KEY_GROUPS_HANDLE, INCREMENTAL_KEY_GROUPS_HANDLE_V2):
        v2 = tag == INCREMENTAL_KEY_GROUPS_HANDLE_V2
        checkpoint_id = r.read_long("checkpoint id")
        backend = r.read_utf("backend id")
        rng, _ = read_key_group_range(r)
        persisted = r.read_long("checkpointed size") if v2 else -1
        meta = read_stream_handle(r, ctx)
        shared = _handle_map(r, ctx, "shared state files")
        private = _handle_map(r, ctx, "private state files")
        handle_id = r.read_utf("state handle id") if v2 else None
        return IncrementalRemoteKeyedStateHandle(_backend_id(backend), rng, checkpoint_id, shared, private, meta,
                                                 persisted, handle_id)
    if tag in (CHANGELOG_HANDLE, CHANGELOG_HANDLE_V2):
        if depth > _MAX_DEPTH:
            r.fail("changelog handles nested too deeply", at)
        rng, _ = read_key_group_range(r)
        persisted = r.read_long("checkpointed size")
        materialized = _keyed_list(r, ctx, "materialized handles", depth)
        non_materialized = _keyed_list(r, ctx, "non-materialized handles", depth)
        materialization_id = r.read_long("materialization id")
        checkpoint_id = r.read_long("checkpoint id") if tag == CHANGELOG_HANDLE_V2 else materialization_id
        handle_id = r.read_utf("state handle id")
        return ChangelogStateBackendHandleImpl(materialized, non_materialized, rng, checkpoint_id,
                                               materialization_id, persisted, handle_id)
    if tag == CHANGELOG_BYTE_INCREMENT_HANDLE:
        rng, _ = read_key_group_range(r)
        from_seq = r.read_long("sequence number (from)")
        to_seq = r.read_long("sequence number (to)")
        n = r.read_count("changes", 8)
        changes = []
        for _ in range(n):
            key_group = r.read_int("change key group")
            size = r.read_count("change bytes", 1)
            changes.append((key_group, r.read_bytes(size, "change bytes")))
        return InMemoryChangelogStateHandle(rng, tuple(changes), from_seq, to_seq, r.read_utf("state handle id"))
    if tag in (CHANGELOG_FILE_INCREMENT_HANDLE, CHANGELOG_FILE_INCREMENT_HANDLE_V2):
        rng, _ = read_key_group_range(r)
        n = r.read_count("changelog stream handles", 9)
        pairs = []
        for _ in range(n):
            offset = r.read_long("changelog offset")
            pairs.append((read_stream_handle(r, ctx), offset))
        size = r.read_long("changelog size")
        persisted = r.read_long("checkpointed size")
        handle_id = r.read_utf("state handle id")
        storage = r.read_utf("storage identifier") if tag == CHANGELOG_FILE_INCREMENT_HANDLE_V2 else "filesystem"
        return ChangelogStateHandleStreamImpl(rng, tuple(pairs), size, persisted, handle_id, storage)
    r.fail(f"expected keyed state handle tag (0, 3, 5, 7, 8, 9, 10, 11, 12, 13 or 14), found {tag}", at)


def _keyed_list(r: BoundedReader, ctx: DeserializationContext, what: str, depth: int) -> tuple[KeyedStateHandle, ...]:
    n = r.read_count(what, 1)
    out = []
    for _ in range(n):
        at = r.pos
        h = read_keyed_handle(r, ctx, depth + 1)
        if h is None:
            r.fail(f"Unexpected null keyed state handle in {what} of a changelog state-backend handle", at)
        out.append(h)
    return tuple(out)


def read_operator_handle(r: BoundedReader, ctx: DeserializationContext) -> OperatorStreamStateHandle | None:
    at = r.pos
    tag = r.read_byte("operator state handle tag")
    if tag == NULL_HANDLE:
        return None
    if tag not in (PARTITIONABLE_OPERATOR_STATE_HANDLE, SEGMENT_PARTITIONABLE_OPERATOR_STATE_HANDLE):
        r.fail(f"expected operator-state handle tag (0, 4 or 17), found {tag}", at)
    n = r.read_count("operator state names", 7)
    states: dict[str, StateMetaInfo] = {}
    for _ in range(n):
        name = r.read_utf("operator state name")
        mode_at = r.pos
        mode = r.read_byte("distribution mode")
        if not 0 <= mode < len(_MODES):
            r.fail(f"expected distribution mode (0 SPLIT_DISTRIBUTE, 1 UNION or 2 BROADCAST), found {mode}", mode_at)
        k = r.read_count("partition offsets", 8)
        states[name] = StateMetaInfo(r.read_long_array(k, "partition offsets"), _MODES[mode])
    if tag == PARTITIONABLE_OPERATOR_STATE_HANDLE:
        return OperatorStreamStateHandle(states, read_stream_handle(r, ctx))
    task_owned = r.read_utf("task-owned directory")
    shared = r.read_utf("shared directory")
    empty = r.read_bool("is-empty flag")
    d_at = r.pos
    delegate = read_stream_handle(r, ctx)
    if not isinstance(delegate, SegmentFileStateHandle | EmptySegmentFileStateHandle):
        r.fail("expected a segment file handle as delegate of a file-merging operator state handle", d_at)
    return FileMergingOperatorStreamStateHandle(states, delegate, task_owned, shared, empty)


# ---- fast paths -------------------------------------------------------------------------
# Nearly every handle in a real savepoint has one of a few layouts: an operator-state handle (tag
# 4) with ASCII state names over an inline or file delegate, a key-groups handle over a
# (relative) file. The functions below read those layouts straight from `data` with local
# variables instead of one reader call (and one `what=` string) per field. They never raise and
# never report: they return `(handle, new_pos)`, or None as soon as anything is unusual (a rarer
# tag, non-ASCII text, a count or length that does not fit in the bytes left), and the caller
# then reads the same bytes again with the general functions above, which give the same result
# or the exact error message. Every count is checked against `end - pos` before it is used.

_INT_AT = struct.Struct(">i").unpack_from
_LONG_AT = struct.Struct(">q").unpack_from
_TWO_INTS_AT = struct.Struct(">ii").unpack_from
_unpack_from = struct.unpack_from


def _longs_at(data: bytes, pos: int, k: int) -> tuple[int, ...]:
    """`k` longs at `pos`; the caller has checked `0 <= k` and `8 * k <= end - pos`."""
    if k == 0:
        return ()
    if k == 1:
        return _LONG_AT(data, pos)
    return _unpack_from(f">{k}q", data, pos)


def _ascii_utf_at(data: bytes, pos: int, end: int) -> tuple[str, int] | None:
    """A `writeUTF` string at `pos` that is all there and ASCII: (text, offset after it), else None."""
    if end - pos < 2:
        return None
    stop = pos + 2 + (data[pos] << 8 | data[pos + 1])
    if stop > end:
        return None
    raw = data[pos + 2:stop]
    return (raw.decode("ascii"), stop) if raw.isascii() else None


def fast_stream_handle(data: bytes, pos: int, end: int,
                       ctx: DeserializationContext) -> tuple[StreamStateHandle | None, int] | None:
    """Tags 0, 1, 2 and 6 (what `read_stream_handle` reads at depth > 0 falls back as well)."""
    if pos >= end:
        return None
    tag = data[pos]
    pos += 1
    if tag == NULL_HANDLE:
        return None, pos
    if tag == BYTE_STREAM_STATE_HANDLE:
        text = _ascii_utf_at(data, pos, end)
        if text is None or end - text[1] < 4:
            return None
        name, stop = text
        n = _INT_AT(data, stop)[0]
        pos = stop + 4
        if n < 0 or n > end - pos:
            return None
        return ByteStreamStateHandle(name, data[pos:pos + n]), pos + n
    if tag == RELATIVE_STREAM_STATE_HANDLE:
        prefix = ctx._prefix
        text = _ascii_utf_at(data, pos, end) if prefix is not None else None
        if text is None or end - text[1] < 8:
            return None
        relative, stop = text
        return RelativeFileStateHandle(prefix + relative, relative, _LONG_AT(data, stop)[0]), stop + 8
    if tag == FILE_STREAM_STATE_HANDLE:
        if end - pos < 10:
            return None
        size = _LONG_AT(data, pos)[0]
        text = _ascii_utf_at(data, pos + 8, end)
        if text is None:
            return None
        return FileStateHandle(text[0], size), text[1]
    return None


def fast_keyed_handle(data: bytes, pos: int, end: int,
                      ctx: DeserializationContext) -> tuple[KeyedStateHandle | None, int] | None:
    """Tags 0, 3, 7 and 12 (key-groups handles) over a delegate `fast_stream_handle` reads."""
    if pos >= end:
        return None
    tag = data[pos]
    pos += 1
    if tag == NULL_HANDLE:
        return None, pos
    if tag == SAVEPOINT_KEY_GROUPS_HANDLE:
        cls: type[KeyGroupsStateHandle] = KeyGroupsSavepointStateHandle
    elif tag in (KEY_GROUPS_HANDLE, KEY_GROUPS_HANDLE_V2):
        cls = KeyGroupsStateHandle
    else:
        return None
    if end - pos < 8:
        return None
    start, num = _TWO_INTS_AT(data, pos)
    pos += 8
    if start < 0 or num < 0 or start + num - 1 > 0x7FFFFFFF or num * 8 > end - pos:
        return None
    offsets = _longs_at(data, pos, num)
    found = fast_stream_handle(data, pos + 8 * num, end, ctx)
    if found is None:
        return None
    delegate, pos = found
    handle_id = None
    if tag == KEY_GROUPS_HANDLE_V2:
        text = _ascii_utf_at(data, pos, end)
        if text is None:
            return None
        handle_id, pos = text
    rng = KeyGroupRange(start, start + num - 1) if num > 0 else EMPTY_KEY_GROUP_RANGE
    return cls(rng, offsets, delegate, handle_id), pos


def fast_operator_handle(data: bytes, pos: int, end: int,
                         ctx: DeserializationContext) -> tuple[OperatorStreamStateHandle | None, int] | None:
    """Tags 0 and 4 with ASCII state names, over a delegate `fast_stream_handle` reads."""
    if pos >= end:
        return None
    tag = data[pos]
    pos += 1
    if tag == NULL_HANDLE:
        return None, pos
    if tag != PARTITIONABLE_OPERATOR_STATE_HANDLE or end - pos < 4:
        return None
    n = _INT_AT(data, pos)[0]
    pos += 4
    if n < 0 or n * 7 > end - pos:
        return None
    states: dict[str, StateMetaInfo] = {}
    modes = _MODES
    for _ in range(n):
        if end - pos < 2:
            return None
        stop = pos + 2 + (data[pos] << 8 | data[pos + 1])
        if end - stop < 5:
            return None
        name = data[pos + 2:stop]
        mode = data[stop]
        if mode > 2 or not name.isascii():
            return None
        k = _INT_AT(data, stop + 1)[0]
        pos = stop + 5
        if k < 0 or k * 8 > end - pos:
            return None
        states[name.decode("ascii")] = StateMetaInfo(_longs_at(data, pos, k), modes[mode])
        pos += 8 * k
    found = fast_stream_handle(data, pos, end, ctx)
    if found is None:
        return None
    return OperatorStreamStateHandle(states, found[0]), found[1]

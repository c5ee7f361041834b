"""Deserializers of state handles: Flink's `MetadataV2V3SerializerBase` (handle part).

Tags are Flink's constants. Stream-handle tags are read with `read()` (unsigned), keyed and
operator handle tags with `readByte()` (signed), as Flink does. Relative file handles are
resolved against the snapshot's directory (`DeserializationContext`). These functions define
every handle layout; fast_reader.py reads the common ones faster and is checked against them.
handle_writer.py is their inverse: what it needs to write a handle back with the tag it was read
from is kept in the model (a missing state handle id: tags 3 and 5; `v1_tag`: tags 8 and 10).
"""

from __future__ import annotations

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

__all__ = ["BYTE_STREAM_STATE_HANDLE", "CHANGELOG_BYTE_INCREMENT_HANDLE", "CHANGELOG_FILE_INCREMENT_HANDLE",
           "CHANGELOG_FILE_INCREMENT_HANDLE_V2", "CHANGELOG_HANDLE", "CHANGELOG_HANDLE_V2",
           "EMPTY_SEGMENT_FILE_HANDLE", "FILE_STREAM_STATE_HANDLE", "INCREMENTAL_KEY_GROUPS_HANDLE",
           "INCREMENTAL_KEY_GROUPS_HANDLE_V2", "KEY_GROUPS_HANDLE", "KEY_GROUPS_HANDLE_V2", "NULL_HANDLE",
           "PARTITIONABLE_OPERATOR_STATE_HANDLE", "RELATIVE_STREAM_STATE_HANDLE", "SAVEPOINT_KEY_GROUPS_HANDLE",
           "SEGMENT_FILE_HANDLE", "SEGMENT_PARTITIONABLE_OPERATOR_STATE_HANDLE", "DeserializationContext",
           "backend_uuid", "read_key_group_range", "read_keyed_handle", "read_operator_handle", "read_stream_handle"]

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

    __slots__ = ("_data", "_view", "base", "fast_paths", "prefix")

    def __init__(self, base: str | None, fast_paths: bool = True) -> None:
        self.base = base
        # computed once: every relative handle of the file is resolved against the same directory
        self.prefix = None if base is None else base.rstrip("/") + "/"
        # False: every byte is read by the per-version definitions alone (see fast_reader.py)
        self.fast_paths = fast_paths
        self._data: bytes | None = None
        self._view: memoryview | None = None

    def view_of(self, data: bytes) -> memoryview:
        """One read-only view of the file's bytes, made once per file: inline state handles keep slices
        of it instead of copies of their bytes (`ByteStreamStateHandle.view`, issue 34)."""
        if self._data is not data:
            self._view = memoryview(data) if type(data) is bytes else memoryview(bytes(data))
            self._data = data
        return self._view  # type: ignore[return-value]

    def resolve(self, relative: str) -> str | None:
        prefix = self.prefix
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
        start = r.skip(n, "inline state bytes")
        return ByteStreamStateHandle(name, ctx.view_of(r.data)[start:start + n])
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


_UUID_CHARS = frozenset("0123456789abcdef-")


def _canonical_uuid(raw: str) -> bool:
    """Whether `raw` is in `UUID.toString()`'s own form (8-4-4-4-12 lowercase hex digits): then it is its own
    reading, the form every Flink writes today. No regex: it would be compiled by every process that imports
    this module, `check`s included."""
    return (len(raw) == 36 and raw[8] == raw[13] == raw[18] == raw[23] == "-" and raw.count("-") == 4
            and _UUID_CHARS.issuperset(raw))


def backend_uuid(raw: str) -> str:
    """Flink parses a UUID, or (pre FLINK-6964 files) name-UUIDs the string's UTF-8 bytes
    (`MetadataV2V3SerializerBase#deserializeKeyedStateHandle`). A string already in `UUID.toString()`'s form
    is returned as it is, without building a `uuid.UUID` (a native savepoint has one per subtask)."""
    if _canonical_uuid(raw):
        return raw
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
        return IncrementalRemoteKeyedStateHandle(backend_uuid(backend), rng, checkpoint_id, shared, private, meta,
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
                                               materialization_id, persisted, handle_id, tag == CHANGELOG_HANDLE)
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
        return ChangelogStateHandleStreamImpl(rng, tuple(pairs), size, persisted, handle_id, storage,
                                              tag == CHANGELOG_FILE_INCREMENT_HANDLE)
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


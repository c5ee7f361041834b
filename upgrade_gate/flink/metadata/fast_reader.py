"""The reader's fast layer: the bytes of common subtasks read without a reader call per field.

`serializers.py` (per-version layouts) and `handles.py` (state handles) are the one definition of
the `_metadata` format. This module is an optimisation of them and nothing more:

* A serializer uses a fast reader only if its own class declares one (`FAST_READER`, never
  inherited) and the reader lists that serializer's version in `versions`. A new format version
  (Flink's `MetadataV7Serializer` appends a `refCheckpointId` to every subtask) therefore reads
  through its own `read_subtask_state` until someone writes and declares a fast reader for it.
* Whatever a fast reader does not recognise (a rarer handle tag, non-ASCII text, channel state,
  a bad count, truncation) is handed to the serializer's own reading at the same offset, so the
  result, and for bad input the exact error and offset, are always the definition's.
* tests/flink/test_metadata_fastpath.py reads every registered version both ways (real Flink files
  and synthetic ones, truncated and mutated) and requires identical objects or errors.

The functions below never raise: they return `(value, offset after it)`, or None as soon as
anything is unusual. Every count is checked against `end - pos` before it is used.
"""

from __future__ import annotations

import struct
from dataclasses import fields
from types import ModuleType
from typing import Protocol

from upgrade_gate.flink.metadata.handles import (
    BYTE_STREAM_STATE_HANDLE,
    FILE_STREAM_STATE_HANDLE,
    INCREMENTAL_KEY_GROUPS_HANDLE,
    INCREMENTAL_KEY_GROUPS_HANDLE_V2,
    KEY_GROUPS_HANDLE,
    KEY_GROUPS_HANDLE_V2,
    NULL_HANDLE,
    PARTITIONABLE_OPERATOR_STATE_HANDLE,
    RELATIVE_STREAM_STATE_HANDLE,
    SAVEPOINT_KEY_GROUPS_HANDLE,
    DeserializationContext,
    backend_uuid,
)
from upgrade_gate.flink.metadata.model import (
    EMPTY_KEY_GROUP_RANGE,
    FINISHED_SUBTASK,
    ByteStreamStateHandle,
    FileStateHandle,
    HandleAndLocalPath,
    KeyedStateHandle,
    KeyGroupRange,
    KeyGroupsSavepointStateHandle,
    KeyGroupsStateHandle,
    Mode,
    OperatorState,
    OperatorStreamStateHandle,
    OperatorSubtaskState,
    RelativeFileStateHandle,
    StateMetaInfo,
    StreamStateHandle,
    new_byte_stream_handle,
    new_handle_and_local_path,
    new_incremental_handle,
    new_operator_state,
    new_operator_stream_handle,
    new_relative_file_handle,
    new_state_meta_info,
    new_subtask_state,
)
from upgrade_gate.flink.metadata.reader import BoundedReader

__all__ = ["V3_SUBTASK_LAYOUT", "FastReader", "SubtaskSerializer", "fast_keyed_handle", "fast_operator_handle",
           "fast_stream_handle"]

_MODES = tuple(Mode)

# ---- handles ------------------------------------------------------------------------------
# Nearly every handle in a real savepoint has one of a few layouts: an operator-state handle (tag
# 4) with ASCII state names over an inline or file delegate, a key-groups handle over a
# (relative) file. These are read straight from `data` with local variables instead of one
# reader call (and one `what=` string) per field. Handle tags are not versioned by the file
# version (`MetadataV2V3SerializerBase#deserializeStreamStateHandle`), so these serve every fast reader.

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
    if tag == BYTE_STREAM_STATE_HANDLE:  # the usual delegate of operator state: its name read in place
        if end - pos < 2:
            return None
        stop = pos + 2 + (data[pos] << 8 | data[pos + 1])
        if end - stop < 4:
            return None
        name = data[pos + 2:stop]
        n = _INT_AT(data, stop)[0]
        pos = stop + 4
        if n < 0 or n > end - pos or not name.isascii():
            return None
        return new_byte_stream_handle(name.decode("ascii"), ctx.view_of(data)[pos:pos + n]), pos + n
    if tag == RELATIVE_STREAM_STATE_HANDLE:
        prefix = ctx.prefix
        text = _ascii_utf_at(data, pos, end) if prefix is not None else None
        if text is None or end - text[1] < 8:
            return None
        relative, stop = text
        return new_relative_file_handle(prefix + relative, relative, _LONG_AT(data, stop)[0]), stop + 8
    if tag == FILE_STREAM_STATE_HANDLE:
        if end - pos < 10:
            return None
        size = _LONG_AT(data, pos)[0]
        text = _ascii_utf_at(data, pos + 8, end)
        if text is None:
            return None
        return FileStateHandle(text[0], size), text[1]
    return None


def _handle_map(data: bytes, pos: int, end: int,
                ctx: DeserializationContext) -> tuple[tuple[HandleAndLocalPath, ...], int] | None:
    """`handles._handle_map`: an int count, then (ASCII local path, stream handle `fast_stream_handle` reads)."""
    if end - pos < 4:
        return None
    n = _INT_AT(data, pos)[0]
    pos += 4
    if n < 0 or n * 3 > end - pos:  # the definition's bound: at least 3 bytes an entry
        return None
    entries = []
    prefix = ctx.prefix
    for _ in range(n):
        # the local path, then (nearly always) a relative file handle, read in place: ~90,000 a file in the
        # 1,000-subtask benchmark, where two calls an entry were a third of the parse
        if end - pos < 2:
            return None
        stop = pos + 2 + (data[pos] << 8 | data[pos + 1])
        if end - stop < 3:
            return None
        local = data[pos + 2:stop]
        if not local.isascii():
            return None
        if data[stop] == RELATIVE_STREAM_STATE_HANDLE and prefix is not None:
            pos = stop + 1
            stop = pos + 2 + (data[pos] << 8 | data[pos + 1])
            if end - stop < 8:
                return None
            relative = data[pos + 2:stop]
            if not relative.isascii():
                return None
            name = relative.decode("ascii")
            handle: StreamStateHandle | None = new_relative_file_handle(prefix + name, name, _LONG_AT(data, stop)[0])
            pos = stop + 8
        else:
            found = fast_stream_handle(data, stop, end, ctx)
            if found is None:
                return None
            handle, pos = found
        entries.append(new_handle_and_local_path(local.decode("ascii"), handle))
    return tuple(entries), pos


def _incremental_handle(data: bytes, pos: int, end: int, tag: int,
                        ctx: DeserializationContext) -> tuple[KeyedStateHandle, int] | None:
    """Tags 5 and 11 (`IncrementalRemoteKeyedStateHandle`: RocksDB incremental checkpoints and native savepoints),
    from after the tag: checkpoint id, backend id, key-group range, (11:) persisted size, the meta stream handle,
    the shared and the private files, (11:) the state handle id. A native savepoint has one per subtask with
    ~20 file handles, which `handles.read_keyed_handle` reads at a reader call a field."""
    if end - pos < 8:
        return None
    checkpoint_id = _LONG_AT(data, pos)[0]
    text = _ascii_utf_at(data, pos + 8, end)
    if text is None:
        return None
    backend, pos = text
    v2 = tag == INCREMENTAL_KEY_GROUPS_HANDLE_V2
    if end - pos < (16 if v2 else 8):
        return None
    start, num = _TWO_INTS_AT(data, pos)
    if start < 0 or num < 0 or start + num - 1 > 0x7FFFFFFF:
        return None
    pos += 8
    persisted = -1
    if v2:
        persisted = _LONG_AT(data, pos)[0]
        pos += 8
    found = fast_stream_handle(data, pos, end, ctx)
    if found is None:
        return None
    meta, pos = found
    shared = _handle_map(data, pos, end, ctx)
    if shared is None:
        return None
    private = _handle_map(data, shared[1], end, ctx)
    if private is None:
        return None
    pos = private[1]
    handle_id = None
    if v2:
        text = _ascii_utf_at(data, pos, end)
        if text is None:
            return None
        handle_id, pos = text
    rng = KeyGroupRange(start, start + num - 1) if num > 0 else EMPTY_KEY_GROUP_RANGE
    return new_incremental_handle(backend_uuid(backend), rng, checkpoint_id, shared[0], private[0], meta, persisted,
                                  handle_id), pos


def fast_keyed_handle(data: bytes, pos: int, end: int,
                      ctx: DeserializationContext) -> tuple[KeyedStateHandle | None, int] | None:
    """Tags 0, 3, 7 and 12 (key-groups handles) over a delegate `fast_stream_handle` reads; 5 and 11
    (`_incremental_handle`)."""
    if pos >= end:
        return None
    tag = data[pos]
    pos += 1
    if tag == NULL_HANDLE:
        return None, pos
    if tag in (INCREMENTAL_KEY_GROUPS_HANDLE, INCREMENTAL_KEY_GROUPS_HANDLE_V2):
        return _incremental_handle(data, pos, end, tag, ctx)
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
        states[name.decode("ascii")] = new_state_meta_info(_LONG_AT(data, pos) if k == 1 else _longs_at(data, pos, k),
                                                           modes[mode])
        pos += 8 * k
    found = fast_stream_handle(data, pos, end, ctx)
    if found is None:
        return None
    return new_operator_stream_handle(states, found[0]), found[1]


# ---- subtasks -----------------------------------------------------------------------------

class SubtaskSerializer(Protocol):
    """The part of a serializer a fast reader hands unusual bytes back to: the format's definition."""

    VERSION: int
    OPERATOR_NAME_AND_UID: bool  # v5+: two strings before the operator id

    def read_operator_state(self, r: BoundedReader, ctx: DeserializationContext) -> OperatorState:
        """One operator state, from its first byte, as this version lays it out."""

    def read_subtask_state(self, r: BoundedReader, ctx: DeserializationContext) -> OperatorSubtaskState:
        """One subtask state (after its index), as this version lays it out."""

    def read_subtasks(self, r: BoundedReader, ctx: DeserializationContext, parallelism: int,
                      n: int) -> dict[int, OperatorSubtaskState]:
        """`n` (index, subtask state) entries of one operator, as this version lays them out."""


class FastReader:
    """A fast reading of one operator/subtask layout, valid for the format versions in `versions`.

    `versions` is checked when a serializer declares the reader (serializers.py), so using it for
    another version is a decision made here, next to the code that would have to be right for it.
    """

    def __init__(self, name: str, versions: frozenset[int]) -> None:
        self.name = name
        self.versions = versions

    def __repr__(self) -> str:
        return f"FastReader({self.name}, versions {sorted(self.versions)})"

    def operator_head(self, r: BoundedReader) -> tuple[bytes, int, int, int] | None:
        """Id, parallelism, max parallelism and subtask count, or None (then `r` has not moved)."""
        return None

    def read_operators(self, serializer: SubtaskSerializer, r: BoundedReader, ctx: DeserializationContext,
                       n: int) -> tuple[OperatorState, ...]:
        """What `n` calls of `serializer.read_operator_state(r, ctx)` return, and `r` where they leave it."""
        return tuple(serializer.read_operator_state(r, ctx) for _ in range(n))

    def read_subtasks(self, serializer: SubtaskSerializer, r: BoundedReader, ctx: DeserializationContext,
                      parallelism: int, n: int) -> dict[int, OperatorSubtaskState]:
        """What `serializer.read_subtasks(r, ctx, parallelism, n)` returns, and `r` where it leaves it."""
        return serializer.read_subtasks(r, ctx, parallelism, n)


# A subtask with no state at all: no operator handles (two 0 flags), no keyed handles (two null
# tags), no channel handles (two 0 counts). Most subtasks of a real job look like this.
_EMPTY_SUBTASK_BYTES = bytes(4 + 4 + 1 + 1 + 4 + 4)
_EMPTY_SUBTASK = OperatorSubtaskState()
_NO_CHANNEL_STATE = bytes(4 + 4)  # no input channel and no result subpartition handles
_MIN_SUBTASK_ENTRY = 4  # an index; serializers.py bounds the count with the same size

_NO_CONTEXT = DeserializationContext(None)  # `operator_head` takes no coordinator state: nothing to resolve
# After the 16-byte operator id: parallelism, max parallelism, the null stream-handle tag of
# "no coordinator state" (skipped) and the number of subtask states.
_HEAD_AT = struct.Struct(">iixi").unpack_from
_HEAD_BYTES = 16 + 4 + 4 + 1 + 4


# `n` empty subtasks with indices 0 .. n-1 in order, the bytes of nearly every stateless operator.
_MAX_EMPTY_RUN = 64
_EMPTY_RUNS = tuple(b"".join(struct.pack(">i", i) + _EMPTY_SUBTASK_BYTES for i in range(n))
                    for n in range(_MAX_EMPTY_RUN + 1))


def _head_at(data: bytes, pos: int, end: int, ctx: DeserializationContext
             ) -> tuple[bytes, int, int, ByteStreamStateHandle | None, int, int] | None:
    """An operator head at `pos`: (id, parallelism, max parallelism, coordinator state, subtask count,
    offset after), or None for an unusual coordinator handle, a negative or oversized field, or truncation.

    Coordinator state (sources have it) is none or inline bytes, which `fast_stream_handle` reads; the
    definition requires a `ByteStreamStateHandle` there, which is what tag 1 gives."""
    if end - pos < _HEAD_BYTES:
        return None
    tag = data[pos + 24]
    if tag == NULL_HANDLE:
        parallelism, max_parallelism, n = _HEAD_AT(data, pos + 16)
        coordinator = None
        after = pos + _HEAD_BYTES
    elif tag == BYTE_STREAM_STATE_HANDLE:
        parallelism, max_parallelism = _TWO_INTS_AT(data, pos + 16)
        found = fast_stream_handle(data, pos + 24, end, ctx)
        if found is None or end - found[1] < 4:
            return None
        coordinator, after = found
        n = _INT_AT(data, after)[0]
        after += 4
    else:
        return None
    if parallelism < 0 or max_parallelism < 0 or n < 0 or n * _MIN_SUBTASK_ENTRY > end - after:
        return None
    return data[pos:pos + 16], parallelism, max_parallelism, coordinator, n, after


def _flagged_operator_handle(data: bytes, pos: int, end: int, ctx: DeserializationContext) -> tuple[tuple, int] | None:
    """An int flag, then an operator handle if it is set: ((handle,) or (), offset after), or None."""
    if end - pos < 4:
        return None
    if not _INT_AT(data, pos)[0]:
        return (), pos + 4
    found = fast_operator_handle(data, pos + 4, end, ctx)
    if found is None:
        return None
    return ((found[0],) if found[0] is not None else ()), found[1]


def _keyed_handles(data: bytes, pos: int, end: int, ctx: DeserializationContext) -> tuple[tuple, int] | None:
    """A keyed handle: ((handle,) or (), offset after), or None."""
    found = fast_keyed_handle(data, pos, end, ctx)
    if found is None:
        return None
    return ((found[0],) if found[0] is not None else ()), found[1]


_ZERO_INT = bytes(4)  # an unset has-operator-state flag, or 0 channel handles


def _common_subtask(data: bytes, pos: int, end: int,
                    ctx: DeserializationContext) -> tuple[OperatorSubtaskState, int] | None:
    """A subtask whose handles all have the common layouts above and no channel state.

    Managed and raw operator state, managed and raw keyed state, in that order; an unset flag or a
    null keyed tag (what most fields of a stateful subtask hold) is taken without a call."""
    zero_int = _ZERO_INT
    if data.startswith(zero_int, pos, end):
        managed_op: tuple = ()
        pos += 4
    else:  # the flag is set (or the bytes end: then the handle's bounds checks fail)
        found = fast_operator_handle(data, pos + 4, end, ctx)
        if found is None:
            return None
        managed_op = (found[0],) if found[0] is not None else ()
        pos = found[1]
    if data.startswith(zero_int, pos, end):
        raw_op: tuple = ()
        pos += 4
    else:
        found = _flagged_operator_handle(data, pos, end, ctx)
        if found is None:
            return None
        raw_op, pos = found
    keyed = []
    for _ in range(2):  # managed, then raw keyed state
        if pos < end and data[pos] == NULL_HANDLE:
            keyed.append(())
            pos += 1
        else:
            found = _keyed_handles(data, pos, end, ctx)
            if found is None:
                return None
            keyed.append(found[0])
            pos = found[1]
    if not data.startswith(_NO_CHANNEL_STATE, pos, end):
        return None
    return new_subtask_state(managed_op, raw_op, keyed[0], keyed[1]), pos + 8


def _hand_over(serializer: SubtaskSerializer, r: BoundedReader, ctx: DeserializationContext, parallelism: int,
               left: int, subtasks: dict[int, OperatorSubtaskState], pos: int) -> dict[int, OperatorSubtaskState]:
    """The last `left` entries, from `pos` on, read by the serializer itself (which reports bad ones)."""
    r.pos = pos
    subtasks.update(serializer.read_subtasks(r, ctx, parallelism, left))
    return subtasks


class _V3SubtaskLayout(FastReader):
    """Operators and subtasks as `MetadataV3Serializer` lays them out, for v3 to v6.

    From the operator id on, an operator and its subtask entries are the same bytes in v3 to v6
    (`MetadataV4Serializer`, `MetadataV5Serializer`, `MetadataV6Serializer`): v4 only appends the
    properties trailer after all operators, v5 only
    puts name and uid before the id (the serializer reads them before calling this), v6 only
    changes how channel handles are encoded, and this reader takes only subtasks without channel
    handles (two 0 counts, the same bytes in every version). It does not fit v2 (duration and
    legacy count per subtask, no finished markers) nor Flink's v7 (a field after every subtask).
    `read_operators` reads v5's name and uid itself when the serializer's `OPERATOR_NAME_AND_UID`
    says they are there.
    """

    def operator_head(self, r: BoundedReader) -> tuple[bytes, int, int, int] | None:
        """An operator without coordinator state (most have none): one unpack for four reader calls.

        None (a coordinator, a negative or oversized field) leaves `r` where it was: the
        serializer reads it, and reports.
        """
        head = _head_at(r.data, r.pos, r.end, _NO_CONTEXT)
        if head is None or head[3] is not None:
            return None
        r.pos = head[5]
        return head[0], head[1], head[2], head[4]

    def read_operators(self, serializer: SubtaskSerializer, r: BoundedReader, ctx: DeserializationContext,
                       n: int) -> tuple[OperatorState, ...]:
        """`n` operator states, most without a serializer call.

        Per operator this replaced five calls (the serializer's per-version methods, two `read_utf`
        and the head) with one loop body: a job has ~50 operators. An operator whose name or uid (v5+)
        is not plain ASCII, or whose head `_head_at` does not take (a rare coordinator handle, a bad field),
        is read by `serializer.read_operator_state` from its first byte, so it and its errors are the
        definition's. The subtasks of a stateless operator (indices 0 .. n-1, all empty: most operators)
        are one comparison with `_EMPTY_RUNS`; any others go through `read_subtasks`.
        """
        named = serializer.OPERATOR_NAME_AND_UID
        data = r.data
        end = r.end
        operators: list[OperatorState] = []
        append = operators.append
        for _ in range(n):
            pos = r.pos
            name = uid = None
            if named:
                text = _ascii_utf_at(data, pos, end)
                if text is not None:
                    name, pos = text
                    text = _ascii_utf_at(data, pos, end)
                if text is None:
                    append(serializer.read_operator_state(r, ctx))
                    continue
                uid, pos = text
            head = _head_at(data, pos, end, ctx)
            if head is None:
                append(serializer.read_operator_state(r, ctx))
                continue
            op_id, parallelism, max_parallelism, coordinator, count, pos = head
            run = _EMPTY_RUNS[count] if count <= _MAX_EMPTY_RUN else None
            if run is not None and count <= parallelism and data.startswith(run, pos, end):
                r.pos = pos + len(run)  # a stateless operator: one comparison for all its subtasks
                subtasks = dict.fromkeys(range(count), _EMPTY_SUBTASK)
            else:
                r.pos = pos
                subtasks = self.read_subtasks(serializer, r, ctx, parallelism, count)
            append(new_operator_state(op_id, name or None, uid or None, parallelism, max_parallelism, coordinator,
                                      subtasks))
        return tuple(operators)

    def read_subtasks(self, serializer: SubtaskSerializer, r: BoundedReader, ctx: DeserializationContext,
                      parallelism: int, n: int) -> dict[int, OperatorSubtaskState]:
        """`n` (index, subtask state) entries; a negative index -i-1 marks subtask i as finished.

        The hottest loop of the reader (a job has ~3 subtasks per operator, most of them empty):
        the offset lives in a local, finished, empty and common-layout subtasks are taken without
        reader calls. Any other subtask goes to `serializer.read_subtask_state` at the same
        offset; a truncated or out-of-range index hands the rest of the operator to
        `serializer.read_subtasks`, which reports it. Entries read by the serializer update the
        dict exactly as its own loop would (a repeated index keeps its first position).
        """
        data = r.data
        end = r.end
        pos = r.pos
        int_at = _INT_AT
        is_empty_at = data.startswith
        empty = _EMPTY_SUBTASK_BYTES
        empty_bytes = len(empty)
        subtasks: dict[int, OperatorSubtaskState] = {}
        compiled = _compiled
        view = ctx.view_of(data) if compiled is not None else None
        i = 0
        while i < n:
            if compiled is not None:  # as many entries as the compiled loop takes, then one here
                taken, pos = compiled.read_subtasks(data, view, ctx.prefix, pos, end, parallelism, n - i, subtasks)
                i += taken
                if i == n:
                    break
            if end - pos < 4:
                return _hand_over(serializer, r, ctx, parallelism, n - i, subtasks, pos)  # truncated
            raw = int_at(data, pos)[0]
            index = raw if raw >= 0 else -raw - 1
            if index >= parallelism:
                return _hand_over(serializer, r, ctx, parallelism, n - i, subtasks, pos)  # out of range
            pos += 4
            if raw < 0:
                subtasks[index] = FINISHED_SUBTASK
            elif is_empty_at(empty, pos, end):
                subtasks[index] = _EMPTY_SUBTASK
                pos += empty_bytes
            else:
                found = _common_subtask(data, pos, end, ctx)
                if found is None:
                    r.pos = pos
                    subtasks[index] = serializer.read_subtask_state(r, ctx)
                    pos = r.pos
                else:
                    subtasks[index], pos = found
            i += 1
        r.pos = pos
        return subtasks


V3_SUBTASK_LAYOUT: FastReader = _V3SubtaskLayout("v3 subtask layout", frozenset({3, 4, 5, 6}))


def _load_compiled() -> ModuleType | None:
    """The compiled subtask loop (`_fastsubtasks.c`, built by `pip install -e .`), configured with the
    model's classes and slots; None where it was not built (no compiler) and no Spark executor was shipped
    the built file (`hashing.shipped_extensions`): the Python loop above reads alone.

    Its results and errors are this module's (it stops before any entry it does not take);
    tests/flink/test_metadata_fastpath.py reads every input with and without it."""
    try:
        import upgrade_gate.flink.metadata._fastsubtasks as _fastsubtasks  # the module, not its package
    except ImportError:  # not built, or our packages came as a zip: maybe Spark shipped the file beside it
        from hashing.shipped_extensions import load_shipped

        _fastsubtasks = load_shipped(_EXTENSION)
        if _fastsubtasks is None:
            return None
    layouts = (
        (OperatorSubtaskState, SUBTASK_SLOTS), (OperatorStreamStateHandle, ("state_name_to_partition_offsets",
                                                                            "delegate")),
        (StateMetaInfo, ("offsets", "mode")), (KeyGroupsStateHandle, KEY_GROUPS_SLOTS),
        (KeyGroupsSavepointStateHandle, KEY_GROUPS_SLOTS), (KeyGroupRange, ("start", "end")),
        (ByteStreamStateHandle, ("handle_name", "view")), (RelativeFileStateHandle, ("path", "relative_path", "size")),
        (FileStateHandle, ("path", "size")))
    for cls, names in layouts:  # a field added to a class cannot be silently left unset by the C code
        declared = tuple(f.name for f in fields(cls))
        if declared != names:
            raise RuntimeError(f"{cls.__name__} fields {declared} differ from _fastsubtasks' slots {names}")
    _fastsubtasks.configure(*layouts, EMPTY_KEY_GROUP_RANGE, _MODES, _EMPTY_SUBTASK, FINISHED_SUBTASK)
    return _fastsubtasks


SUBTASK_SLOTS = ("managed_operator_state", "raw_operator_state", "managed_keyed_state", "raw_keyed_state",
                 "input_channel_state", "result_subpartition_state", "finished", "channel_state_size", "state_size",
                 "has_state")
KEY_GROUPS_SLOTS = ("key_group_range", "offsets", "delegate", "state_handle_id")
_EXTENSION = "upgrade_gate.flink.metadata._fastsubtasks"
_compiled: ModuleType | None = _load_compiled()
COMPILED = _compiled is not None  # whether subtasks are read by the compiled loop (bench and tests report it)
# what reads subtasks, for logs and reports: "compiled" or "python" (`spark_jobs.common.note_subtask_loop`)
IMPLEMENTATION = "compiled" if COMPILED else "python"

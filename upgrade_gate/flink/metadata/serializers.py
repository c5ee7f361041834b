"""Per-version metadata serializers, looked up by version number (Flink's `MetadataSerializers`).

`MetadataV2V3SerializerBase` holds the shared body (checkpoint id, master states, subtask
states); each version overrides what it changed: v2 (1.3–1.10) vestigial fields, v3 (1.11)
coordinator state, channel state and finished markers, v4 (1.16) the properties trailer, v5
(2.0) operator name and uid, v6 (2.1) typed/merged channel handles.
"""

from __future__ import annotations

import struct
from abc import ABC, abstractmethod

from upgrade_gate.flink.metadata.channel import ChannelStateHandleSerializerV1, ChannelStateHandleSerializerV2
from upgrade_gate.flink.metadata.errors import MetadataFormatError
from upgrade_gate.flink.metadata.handles import (
    NULL_HANDLE,
    DeserializationContext,
    fast_keyed_handle,
    fast_operator_handle,
    read_keyed_handle,
    read_operator_handle,
    read_stream_handle,
)
from upgrade_gate.flink.metadata.java_serialization import read_checkpoint_properties
from upgrade_gate.flink.metadata.model import (
    FINISHED_SUBTASK,
    ByteStreamStateHandle,
    CheckpointMetadata,
    MasterState,
    OperatorState,
    OperatorSubtaskState,
    new_operator_state,
    new_subtask_state,
)
from upgrade_gate.flink.metadata.reader import BoundedReader

MASTER_STATE_MAGIC_NUMBER = 0xC96B1696 - (1 << 32)  # as a signed int

# Smallest possible encodings, used to bound counts before reading them.
_MIN_OPERATOR_STATE = 16 + 4 + 4 + 4
_MIN_SUBTASK_ENTRY = 4


class MetadataV2V3SerializerBase(ABC):
    VERSION = 0

    def deserialize(self, r: BoundedReader, ctx: DeserializationContext) -> CheckpointMetadata:
        at = r.pos
        checkpoint_id = r.read_long("checkpoint id")
        if checkpoint_id < 0:
            r.fail(f"invalid checkpoint ID: {checkpoint_id}", at)
        at = r.pos
        n_master = r.read_int("number of master states")
        if n_master < 0:
            r.fail(f"invalid number of master states: {n_master}", at)
        if n_master * 9 > r.remaining():
            r.fail(f"number of master states {n_master} exceeds the bytes left ({r.remaining()})", at)
        masters = tuple(self._master_state(r) for _ in range(n_master))
        n_ops = r.read_count("operator states", _MIN_OPERATOR_STATE)
        operators = tuple(self.read_operator_state(r, ctx) for _ in range(n_ops))
        properties = self.read_properties(r)
        return CheckpointMetadata(self.VERSION, checkpoint_id, masters, operators, properties, r.source)

    def read_properties(self, r: BoundedReader):  # type: ignore[no-untyped-def]
        return None

    def _master_state(self, r: BoundedReader) -> MasterState:
        at = r.pos
        magic = r.read_int("master state magic number")
        if magic != MASTER_STATE_MAGIC_NUMBER:
            r.fail(f"incorrect magic number in master state: expected 0xc96b1696, found {magic & 0xFFFFFFFF:#010x}", at)
        at = r.pos
        n = r.read_int("master state length")
        if n <= 0:
            r.fail(f"found zero or negative length for master state bytes: {n}", at)
        if n > r.remaining():
            r.fail(f"master state length {n} exceeds the bytes left ({r.remaining()})", at)
        inner = BoundedReader(r.data, r.source, r.pos, r.pos + n)
        r.pos += n
        version = inner.read_int("master state version")
        name = inner.read_utf("master state name")
        size = inner.read_count("master state bytes", 1)
        data = inner.read_bytes(size, "master state bytes")
        if inner.remaining():
            inner.fail("found trailing bytes in master state")
        return MasterState(name, version, data)

    @abstractmethod
    def read_operator_state(self, r: BoundedReader, ctx: DeserializationContext) -> OperatorState:
        """Each format version lays out an operator state differently (flink-internals.md §6.3)."""

    def _operator_id(self, r: BoundedReader) -> bytes:
        return r.read_bytes(16, "operator id")

    def _parallelism(self, r: BoundedReader) -> tuple[int, int]:
        at = r.pos
        parallelism, max_parallelism = r.read_two_ints("parallelism and max parallelism")
        if parallelism < 0 or max_parallelism < 0:
            r.fail(f"expected parallelism and max parallelism >= 0, found {parallelism} and {max_parallelism}", at)
        return parallelism, max_parallelism

    def read_subtask_state(self, r: BoundedReader, ctx: DeserializationContext) -> OperatorSubtaskState:
        managed_op = read_operator_handle(r, ctx) if r.read_int("has-managed-operator-state flag") != 0 else None
        raw_op = read_operator_handle(r, ctx) if r.read_int("has-raw-operator-state flag") != 0 else None
        managed_keyed = read_keyed_handle(r, ctx)
        raw_keyed = read_keyed_handle(r, ctx)
        inputs, outputs = self.read_channel_state(r, ctx)
        return OperatorSubtaskState(
            (managed_op,) if managed_op is not None else (),
            (raw_op,) if raw_op is not None else (),
            (managed_keyed,) if managed_keyed is not None else (),
            (raw_keyed,) if raw_keyed is not None else (),
            inputs, outputs)

    def read_channel_state(self, r: BoundedReader, ctx: DeserializationContext) -> tuple[tuple, tuple]:
        return (), ()

    @staticmethod
    def _check_index(r: BoundedReader, index: int, parallelism: int, at: int) -> None:
        if not 0 <= index < parallelism:
            r.fail(f"subtask index {index} is outside [0, {parallelism}) (the operator's parallelism)", at)


class MetadataV2Serializer(MetadataV2V3SerializerBase):
    """Flink 1.3–1.10: a vestigial chain length per operator, duration and legacy count per subtask."""

    VERSION = 2

    def read_operator_state(self, r: BoundedReader, ctx: DeserializationContext) -> OperatorState:
        op_id = self._operator_id(r)
        parallelism, max_parallelism = self._parallelism(r)
        at = r.pos
        chain_length = r.read_int("chain length")
        if chain_length != 1:
            r.fail(f"expected chain length 1 (chained operator states were removed in Flink 1.3), found {chain_length}",
                   at)
        n = r.read_count("subtask states", _MIN_SUBTASK_ENTRY)
        subtasks: dict[int, OperatorSubtaskState] = {}
        for _ in range(n):
            at = r.pos
            index = r.read_int("subtask index")
            self._check_index(r, index, parallelism, at)
            subtasks[index] = self.read_subtask_state(r, ctx)
        return OperatorState(op_id, None, None, parallelism, max_parallelism, None, subtasks)

    def read_subtask_state(self, r: BoundedReader, ctx: DeserializationContext) -> OperatorSubtaskState:
        r.read_long("subtask duration (unused)")
        at = r.pos
        legacy = r.read_int("number of legacy operator states")
        if legacy != 0:
            r.fail(f"expected no legacy operator state (Flink 1.3+ files), found {legacy}", at)
        return super().read_subtask_state(r, ctx)


# A v3+ subtask with no state at all: no operator handles (two 0 flags), no keyed handles (two
# null tags), no channel handles (two 0 counts). Most subtasks of a real job look like this.
_EMPTY_SUBTASK_BYTES = bytes(4 + 4 + 1 + 1 + 4 + 4)
_EMPTY_SUBTASK = OperatorSubtaskState()
_NO_CHANNEL_STATE = bytes(4 + 4)  # v3+: no input channel and no result subpartition handles

_INT_AT = struct.Struct(">i").unpack_from
# v3+ operator without coordinator state, after the 16-byte id: parallelism, max parallelism, the
# null stream-handle tag (skipped) and the number of subtask states.
_HEAD_AT = struct.Struct(">iixi").unpack_from
_HEAD_BYTES = 16 + 4 + 4 + 1 + 4


def _fast_operator_head(r: BoundedReader) -> tuple[bytes, int, int, int] | None:
    """Id, parallelism, max parallelism and subtask count of a v3+ operator without coordinator state.

    Most operators have none, so one unpack replaces four reader calls. None (a coordinator, a
    negative or oversized field) leaves `r` where it was: the general path reads it, and reports.
    """
    data = r.data
    pos = r.pos
    left = r.end - pos - _HEAD_BYTES
    if left < 0 or data[pos + 24] != NULL_HANDLE:
        return None
    parallelism, max_parallelism, n = _HEAD_AT(data, pos + 16)
    if parallelism < 0 or max_parallelism < 0 or n < 0 or n * _MIN_SUBTASK_ENTRY > left:
        return None
    r.pos = pos + _HEAD_BYTES
    return data[pos:pos + 16], parallelism, max_parallelism, n


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
    """A keyed handle: ((handle,) or (), offset after), or None to fall back to the general reader."""
    found = fast_keyed_handle(data, pos, end, ctx)
    if found is None:
        return None
    return ((found[0],) if found[0] is not None else ()), found[1]


_SUBTASK_READERS = (_flagged_operator_handle, _flagged_operator_handle, _keyed_handles, _keyed_handles)


def _fast_subtask(data: bytes, pos: int, end: int,
                  ctx: DeserializationContext) -> tuple[OperatorSubtaskState, int] | None:
    """A v3+ subtask whose handles all have the common layouts (`handles.fast_*`), no channel state.

    Returns the state and the offset after it, or None to have the general reader read the same
    bytes (and raise its exact error if they are bad).
    """
    parts = []
    for read in _SUBTASK_READERS:  # managed and raw operator state, managed and raw keyed state
        found = read(data, pos, end, ctx)
        if found is None:
            return None
        part, pos = found
        parts.append(part)
    if not data.startswith(_NO_CHANNEL_STATE, pos, end):
        return None
    return new_subtask_state(*parts), pos + 8


class MetadataV3Serializer(MetadataV2V3SerializerBase):
    """Flink 1.11–1.15: coordinator state, channel state, FLIP-147 finished markers."""

    VERSION = 3
    channel = ChannelStateHandleSerializerV1()

    def read_subtask_state(self, r: BoundedReader, ctx: DeserializationContext) -> OperatorSubtaskState:
        pos = r.pos
        n = len(_EMPTY_SUBTASK_BYTES)
        if r.end - pos >= n and r.data[pos:pos + n] == _EMPTY_SUBTASK_BYTES:
            r.pos = pos + n  # what the general path below reads, byte for byte, without the calls
            return _EMPTY_SUBTASK
        return super().read_subtask_state(r, ctx)

    def read_operator_state(self, r: BoundedReader, ctx: DeserializationContext) -> OperatorState:
        return self._operator_body(r, ctx, None, None)

    def _operator_body(self, r: BoundedReader, ctx: DeserializationContext,
                       name: str | None, uid: str | None) -> OperatorState:
        head = _fast_operator_head(r)
        if head is not None:
            op_id, parallelism, max_parallelism, n = head
            return new_operator_state(op_id, name, uid, parallelism, max_parallelism, None,
                                      self._subtasks(r, ctx, parallelism, n))
        op_id = self._operator_id(r)
        parallelism, max_parallelism = self._parallelism(r)
        at = r.pos
        coordinator = read_stream_handle(r, ctx)
        if coordinator is not None and not isinstance(coordinator, ByteStreamStateHandle):
            r.fail(f"expected a ByteStreamStateHandle (or none) as coordinator state, found {coordinator.kind}", at)
        at = r.pos
        n = r.read_int("number of subtask states")
        if n < 0:  # FullyFinishedOperatorState
            if coordinator is not None:
                r.fail("a fully finished operator cannot have coordinator state", at)
            return OperatorState(op_id, name, uid, parallelism, max_parallelism, None, {}, fully_finished=True)
        if n * _MIN_SUBTASK_ENTRY > r.remaining():
            r.fail(f"number of subtask states {n} exceeds the bytes left ({r.remaining()})", at)
        return new_operator_state(op_id, name, uid, parallelism, max_parallelism, coordinator,
                                  self._subtasks(r, ctx, parallelism, n))

    def _subtasks(self, r: BoundedReader, ctx: DeserializationContext,
                  parallelism: int, n: int) -> dict[int, OperatorSubtaskState]:
        """`n` (index, subtask state) entries; a negative index -i-1 marks subtask i as finished.

        The hottest loop of the reader (a job has ~3 subtasks per operator, most of them empty):
        the offset lives in a local, empty and common-layout subtasks are taken without reader
        calls, anything else is handed to `read_subtask_state` at the same offset.
        """
        data = r.data
        end = r.end
        pos = r.pos
        int_at = _INT_AT
        is_empty_at = data.startswith
        empty = _EMPTY_SUBTASK_BYTES
        empty_bytes = len(empty)
        subtasks: dict[int, OperatorSubtaskState] = {}
        for _ in range(n):
            if end - pos < 4:
                r.pos = pos
                r.read_int("subtask index")  # raises: truncated
            raw = int_at(data, pos)[0]
            index = raw if raw >= 0 else -raw - 1
            if index >= parallelism:
                self._check_index(r, index, parallelism, pos)  # raises
            pos += 4
            if raw < 0:
                subtasks[index] = FINISHED_SUBTASK
            elif is_empty_at(empty, pos, end):
                subtasks[index] = _EMPTY_SUBTASK
                pos += empty_bytes
            else:
                found = _fast_subtask(data, pos, end, ctx)
                if found is None:
                    r.pos = pos
                    subtasks[index] = self.read_subtask_state(r, ctx)
                    pos = r.pos
                else:
                    subtasks[index], pos = found
        r.pos = pos
        return subtasks

    def read_channel_state(self, r: BoundedReader, ctx: DeserializationContext) -> tuple[tuple, tuple]:
        ch = self.channel
        n = r.read_count("input channel state handles", 1)
        inputs = tuple(ch.read_input(r, ctx) for _ in range(n))
        n = r.read_count("result subpartition state handles", 1)
        outputs = tuple(ch.read_output(r, ctx) for _ in range(n))
        return inputs, outputs


class MetadataV4Serializer(MetadataV3Serializer):
    """Flink 1.16–1.20: the Java-serialized `CheckpointProperties` follow the operator states."""

    VERSION = 4

    def read_properties(self, r: BoundedReader):  # type: ignore[no-untyped-def]
        return read_checkpoint_properties(r)


class MetadataV5Serializer(MetadataV4Serializer):
    """Flink 2.0: operator name and uid ("" = absent) before the operator id."""

    VERSION = 5

    def read_operator_state(self, r: BoundedReader, ctx: DeserializationContext) -> OperatorState:
        name = r.read_utf("operator name")
        uid = r.read_utf("operator uid")
        return self._operator_body(r, ctx, name or None, uid or None)


class MetadataV6Serializer(MetadataV5Serializer):
    """Flink 2.1–2.3: typed channel handles, possibly merged per subtask."""

    VERSION = 6
    channel = ChannelStateHandleSerializerV2()  # type: ignore[assignment]


SERIALIZERS: dict[int, MetadataV2V3SerializerBase] = {
    s.VERSION: s() for s in (MetadataV2Serializer, MetadataV3Serializer, MetadataV4Serializer,
                             MetadataV5Serializer, MetadataV6Serializer)
}


def get_serializer(version: int, source: str, offset: int) -> MetadataV2V3SerializerBase:
    """`MetadataSerializers.getSerializer`; Flink's message for unknown versions is kept verbatim."""
    if version == 1:
        raise MetadataFormatError(source, offset, "This savepoint / checkpoint version (Flink 1.1 / 1.2) is no "
                                                  "longer supported.")
    try:
        return SERIALIZERS[version]
    except KeyError:
        raise MetadataFormatError(source, offset, f"Unrecognized checkpoint version number: {version}") from None

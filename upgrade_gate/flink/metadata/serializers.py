"""Per-version metadata serializers, looked up by version number (Flink's `MetadataSerializers`).

`MetadataV2V3SerializerBase` holds the shared body (checkpoint id, master states, subtask
states); each version overrides what it changed: v2 (1.3–1.10) vestigial fields, v3 (1.11)
coordinator state, channel state and finished markers, v4 (1.16) the properties trailer, v5
(2.0) operator name and uid, v6 (2.1) typed/merged channel handles. These methods are the one
definition of each layout. A version may also declare a fast reader (`FAST_READER`, see
fast_reader.py) for its common subtasks; a version that declares none is read by these methods
alone, whatever its parent class declared. Which Flink release writes and reads which version is
`hashing.versions.FlinkVersion`'s rule, not this module's.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TypeVar

from upgrade_gate.flink.metadata.channel import ChannelStateHandleSerializerV1, ChannelStateHandleSerializerV2
from upgrade_gate.flink.metadata.checkpoint_properties import read_checkpoint_properties
from upgrade_gate.flink.metadata.errors import MetadataFormatError
from upgrade_gate.flink.metadata.fast_reader import V3_SUBTASK_LAYOUT, FastReader
from upgrade_gate.flink.metadata.handles import (
    DeserializationContext,
    read_keyed_handle,
    read_operator_handle,
    read_stream_handle,
)
from upgrade_gate.flink.metadata.model import (
    FINISHED_SUBTASK,
    ByteStreamStateHandle,
    CheckpointMetadata,
    MasterState,
    OperatorState,
    OperatorSubtaskState,
    new_operator_state,
)
from upgrade_gate.flink.metadata.reader import BoundedReader

__all__ = ["SERIALIZERS", "MetadataV2Serializer", "MetadataV2V3SerializerBase", "MetadataV3Serializer",
           "MetadataV4Serializer", "MetadataV5Serializer", "MetadataV6Serializer", "get_serializer", "register"]

MASTER_STATE_MAGIC_NUMBER = 0xC96B1696 - (1 << 32)  # as a signed int

# Smallest possible encodings, used to bound counts before reading them.
_MIN_OPERATOR_STATE = 16 + 4 + 4 + 4
_MIN_SUBTASK_ENTRY = 4


_S = TypeVar("_S", bound="MetadataV2V3SerializerBase")

# Flink's `MetadataSerializers`: format version -> the serializer that reads it.
SERIALIZERS: dict[int, MetadataV2V3SerializerBase] = {}


def register(cls: type[_S]) -> type[_S]:
    """Make `cls` the reader of its format version (a class decorator)."""
    if "VERSION" not in cls.__dict__:
        raise TypeError(f"{cls.__name__} does not declare its format VERSION")
    SERIALIZERS[cls.VERSION] = cls()
    return cls


class MetadataV2V3SerializerBase(ABC):
    VERSION = 0
    # The fast reader of this version's common subtasks (fast_reader.py), or None. Each class
    # declares its own: a class that does not is read without one (see __init_subclass__).
    FAST_READER: FastReader | None = None

    def __init_subclass__(cls, **kwargs: object) -> None:
        """A fast reader is never inherited, and only one written for this version may be declared.

        Flink's next version (`MetadataV7Serializer`) extends v6 and appends a field to every
        subtask: inherited, v6's fast reader would read its subtasks without that field.
        """
        super().__init_subclass__(**kwargs)
        if "FAST_READER" not in cls.__dict__:
            cls.FAST_READER = None
        fast = cls.FAST_READER
        if fast is not None and ("VERSION" not in cls.__dict__ or cls.VERSION not in fast.versions):
            raise TypeError(f"{cls.__name__} (format version {cls.VERSION}) declares {fast!r}, which is not "
                            f"written for that version")

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
        fast = self.FAST_READER
        if fast is not None and ctx.fast_paths:
            operators = fast.read_operators(self, r, ctx, n_ops)
        else:
            operators = tuple(self.read_operator_state(r, ctx) for _ in range(n_ops))
        properties = self.read_properties(r)
        return CheckpointMetadata(self.VERSION, checkpoint_id, masters, operators, properties, r.source, ctx.base)

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
        """Each format version lays out an operator state differently
        (`MetadataV2V3SerializerBase#deserializeOperatorState` and its v4-v6 overrides)."""

    def _operator_id(self, r: BoundedReader) -> bytes:
        return r.read_bytes(16, "operator id")

    def _parallelism(self, r: BoundedReader) -> tuple[int, int]:
        at = r.pos
        parallelism, max_parallelism = r.read_two_ints("parallelism and max parallelism")
        if parallelism < 0 or max_parallelism < 0:
            r.fail(f"expected parallelism and max parallelism >= 0, found {parallelism} and {max_parallelism}", at)
        return parallelism, max_parallelism

    def read_subtask_state(self, r: BoundedReader, ctx: DeserializationContext) -> OperatorSubtaskState:
        """One subtask's state after its index (Flink's `deserializeSubtaskState`)."""
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

    @abstractmethod
    def read_subtasks(self, r: BoundedReader, ctx: DeserializationContext,
                      parallelism: int, n: int) -> dict[int, OperatorSubtaskState]:
        """`n` (index, subtask state) entries of one operator: the definition, without fast paths."""

    def subtask_states(self, r: BoundedReader, ctx: DeserializationContext,
                       parallelism: int, n: int) -> dict[int, OperatorSubtaskState]:
        """`read_subtasks`, through this version's fast reader if it declares one."""
        fast = self.FAST_READER
        if fast is not None and ctx.fast_paths:
            return fast.read_subtasks(self, r, ctx, parallelism, n)
        return self.read_subtasks(r, ctx, parallelism, n)

    @staticmethod
    def _check_index(r: BoundedReader, index: int, parallelism: int, at: int) -> None:
        if not 0 <= index < parallelism:
            r.fail(f"subtask index {index} is outside [0, {parallelism}) (the operator's parallelism)", at)


@register
class MetadataV2Serializer(MetadataV2V3SerializerBase):
    """Flink 1.3–1.10: a vestigial chain length per operator, duration and legacy count per subtask."""

    VERSION = 2
    FAST_READER = None  # files of Flink 1.3–1.10 are rare; the definition reads them

    def read_operator_state(self, r: BoundedReader, ctx: DeserializationContext) -> OperatorState:
        op_id = self._operator_id(r)
        parallelism, max_parallelism = self._parallelism(r)
        at = r.pos
        chain_length = r.read_int("chain length")
        if chain_length != 1:
            r.fail(f"expected chain length 1 (chained operator states were removed in Flink 1.3), found {chain_length}",
                   at)
        n = r.read_count("subtask states", _MIN_SUBTASK_ENTRY)
        subtasks = self.subtask_states(r, ctx, parallelism, n)
        return OperatorState(op_id, None, None, parallelism, max_parallelism, None, subtasks)

    def read_subtasks(self, r: BoundedReader, ctx: DeserializationContext,
                      parallelism: int, n: int) -> dict[int, OperatorSubtaskState]:
        """No finished markers before v3: every index is a plain subtask index."""
        subtasks: dict[int, OperatorSubtaskState] = {}
        for _ in range(n):
            at = r.pos
            index = r.read_int("subtask index")
            self._check_index(r, index, parallelism, at)
            subtasks[index] = self.read_subtask_state(r, ctx)
        return subtasks

    def read_subtask_state(self, r: BoundedReader, ctx: DeserializationContext) -> OperatorSubtaskState:
        r.read_long("subtask duration (unused)")
        at = r.pos
        legacy = r.read_int("number of legacy operator states")
        if legacy != 0:
            r.fail(f"expected no legacy operator state (Flink 1.3+ files), found {legacy}", at)
        return super().read_subtask_state(r, ctx)


@register
class MetadataV3Serializer(MetadataV2V3SerializerBase):
    """Flink 1.11–1.15: coordinator state, channel state, FLIP-147 finished markers."""

    VERSION = 3
    FAST_READER = V3_SUBTASK_LAYOUT
    OPERATOR_NAME_AND_UID = False  # v5 adds them; a fast reader reads them when this says so
    channel = ChannelStateHandleSerializerV1()

    def read_operator_state(self, r: BoundedReader, ctx: DeserializationContext) -> OperatorState:
        return self._operator_body(r, ctx, None, None)

    def _operator_body(self, r: BoundedReader, ctx: DeserializationContext,
                       name: str | None, uid: str | None) -> OperatorState:
        """Everything from the operator id on (v5 reads name and uid before it)."""
        fast = self.FAST_READER if ctx.fast_paths else None
        if fast is not None:
            head = fast.operator_head(r)
            if head is not None:
                op_id, parallelism, max_parallelism, n = head
                return new_operator_state(op_id, name, uid, parallelism, max_parallelism, None,
                                          fast.read_subtasks(self, r, ctx, parallelism, n))
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
                                  self.subtask_states(r, ctx, parallelism, n))

    def read_subtasks(self, r: BoundedReader, ctx: DeserializationContext,
                      parallelism: int, n: int) -> dict[int, OperatorSubtaskState]:
        """A negative index -i-1 marks subtask i as finished (FLIP-147); no state follows it."""
        subtasks: dict[int, OperatorSubtaskState] = {}
        for _ in range(n):
            at = r.pos
            raw = r.read_int("subtask index")
            index = raw if raw >= 0 else -raw - 1
            self._check_index(r, index, parallelism, at)
            subtasks[index] = FINISHED_SUBTASK if raw < 0 else self.read_subtask_state(r, ctx)
        return subtasks

    def read_channel_state(self, r: BoundedReader, ctx: DeserializationContext) -> tuple[tuple, tuple]:
        ch = self.channel
        n = r.read_count("input channel state handles", 1)
        inputs = tuple(ch.read_input(r, ctx) for _ in range(n))
        n = r.read_count("result subpartition state handles", 1)
        outputs = tuple(ch.read_output(r, ctx) for _ in range(n))
        return inputs, outputs


@register
class MetadataV4Serializer(MetadataV3Serializer):
    """Flink 1.16–1.20: the Java-serialized `CheckpointProperties` follow the operator states."""

    VERSION = 4
    FAST_READER = V3_SUBTASK_LAYOUT

    def read_properties(self, r: BoundedReader):  # type: ignore[no-untyped-def]
        return read_checkpoint_properties(r)


@register
class MetadataV5Serializer(MetadataV4Serializer):
    """Flink 2.0: operator name and uid ("" = absent) before the operator id."""

    VERSION = 5
    FAST_READER = V3_SUBTASK_LAYOUT
    OPERATOR_NAME_AND_UID = True

    def read_operator_state(self, r: BoundedReader, ctx: DeserializationContext) -> OperatorState:
        name = r.read_utf("operator name")
        uid = r.read_utf("operator uid")
        return self._operator_body(r, ctx, name or None, uid or None)


@register
class MetadataV6Serializer(MetadataV5Serializer):
    """Flink 2.1–2.3: typed channel handles, possibly merged per subtask."""

    VERSION = 6
    FAST_READER = V3_SUBTASK_LAYOUT
    channel = ChannelStateHandleSerializerV2()  # type: ignore[assignment]


def get_serializer(version: int, source: str, offset: int) -> MetadataV2V3SerializerBase:
    """`MetadataSerializers.getSerializer`; Flink's message for unknown versions is kept verbatim."""
    if version == 1:
        raise MetadataFormatError(source, offset, "This savepoint / checkpoint version (Flink 1.1 / 1.2) is no "
                                                  "longer supported.")
    try:
        return SERIALIZERS[version]
    except KeyError:
        raise MetadataFormatError(source, offset, f"Unrecognized checkpoint version number: {version}") from None

"""Writer of `_metadata` files (format versions 3–6, Flink 1.11–2.3): the inverse of the reader.

`serialize_metadata(metadata)` gives the bytes Flink's `Checkpoints.storeCheckpointMetadata` writes
for the same checkpoint: the header (magic number, version), then the body as
`MetadataV2V3SerializerBase#serializeMetadata` and `MetadataV3Serializer` .. `MetadataV6Serializer`
lay it out. It exists so that a savepoint can be written anew with changed operator IDs, and it is
held to one rule: `serialize_metadata(parse_metadata(data)) == data` for every file Flink wrote
(tests/flink/test_metadata_writer.py checks every committed fixture), and `parse_metadata` of what it
writes equals the model it was given.

What the reader does not model is kept where it is read: the v4+ properties trailer is Java
serialization, parsed lossily into `CheckpointProperties` and copied back from its `raw` bytes.
Whatever the reader could not give back (a name in a version without names, a trailer in v3,
properties whose fields disagree with their bytes, more than one handle where Flink writes one) is
refused with a `ValueError` rather than written differently. Version 2 (Flink 1.3–1.10) is read but
never written: Flink itself has written version 3 or later since 1.11.
"""

from __future__ import annotations

import struct

from upgrade_gate.flink.metadata.checkpoint_properties import read_checkpoint_properties
from upgrade_gate.flink.metadata.checkpoints import HEADER_MAGIC_NUMBER
from upgrade_gate.flink.metadata.errors import MetadataFormatError
from upgrade_gate.flink.metadata.handle_writer import (
    ChannelStateHandleWriterV1,
    ChannelStateHandleWriterV2,
    pack_int,
    pack_long,
    write_keyed_handle,
    write_operator_handle,
    write_stream_handle,
    write_utf,
)
from upgrade_gate.flink.metadata.model import (
    ByteStreamStateHandle,
    CheckpointMetadata,
    CheckpointProperties,
    MasterState,
    OperatorState,
    OperatorSubtaskState,
)
from upgrade_gate.flink.metadata.reader import BoundedReader
from upgrade_gate.flink.metadata.serializers import MASTER_STATE_MAGIC_NUMBER

__all__ = ["WRITABLE_VERSIONS", "serialize_metadata"]

_HEADER = struct.Struct(">ii")
# A subtask without any state: no operator handles (two 0 flags), no keyed handles (two null tags),
# no channel handles (two 0 counts). Most subtasks of a real job are this.
_EMPTY_SUBTASK = bytes(4 + 4 + 1 + 1 + 4 + 4)
_ONE = pack_int(1)
_ZERO = pack_int(0)
_FULLY_FINISHED = pack_int(-1)  # `MetadataV3Serializer#serializeOperatorState` writes -1 as the count


class MetadataV3Writer:
    """Flink 1.11–1.15 (`MetadataV3Serializer`): coordinator state, channel state, finished markers."""

    VERSION = 3
    NAMES = False  # v5 writes operator name and uid before the id
    channel: ChannelStateHandleWriterV1 | ChannelStateHandleWriterV2 = ChannelStateHandleWriterV1()

    def write(self, out: bytearray, metadata: CheckpointMetadata) -> None:
        """`MetadataV2V3SerializerBase#serializeMetadata`, then the properties (v4+)."""
        if metadata.checkpoint_id < 0:
            raise ValueError(f"checkpoint id {metadata.checkpoint_id} is negative; Flink refuses to read it")
        out += pack_long(metadata.checkpoint_id)
        out += pack_int(len(metadata.master_states))
        for master in metadata.master_states:
            _master_state(out, master)
        out += pack_int(len(metadata.operator_states))
        for op in metadata.operator_states:
            self.write_operator(out, op)
        self.write_properties(out, metadata.properties)

    def write_properties(self, out: bytearray, properties: CheckpointProperties | None) -> None:
        if properties is not None:
            raise ValueError(f"format version {self.VERSION} has no checkpoint properties (Flink 1.16's v4 added "
                             f"them); write version 4 or later, or drop the properties")

    def write_operator(self, out: bytearray, op: OperatorState) -> None:
        """`MetadataV3Serializer#serializeOperatorState` (v5 writes name and uid first)."""
        where = f"operator {op.operator_id.hex()}"
        if self.NAMES:
            _name(out, op.name, f"{where}: operator name")
            _name(out, op.uid, f"{where}: operator uid")
        elif op.name is not None or op.uid is not None:
            raise ValueError(f"{where}: format version {self.VERSION} has no operator name or uid (Flink 2.0's v5 "
                             f"added them), found name {op.name!r}, uid {op.uid!r}")
        if type(op.operator_id) is not bytes or len(op.operator_id) != 16:
            raise ValueError(f"operator id {op.operator_id!r} is not 16 bytes")
        out += op.operator_id  # the reader keeps Flink's lower part, then upper part, as they are written
        if op.parallelism < 0 or op.max_parallelism < 0:
            raise ValueError(f"{where}: parallelism {op.parallelism} and max parallelism {op.max_parallelism} "
                             f"must be >= 0")
        out += pack_int(op.parallelism)
        out += pack_int(op.max_parallelism)
        coordinator = op.coordinator_state
        if coordinator is not None and type(coordinator) is not ByteStreamStateHandle:
            raise ValueError(f"{where}: coordinator state must be a ByteStreamStateHandle, found "
                             f"{type(coordinator).__name__}")
        write_stream_handle(out, coordinator)
        if op.fully_finished:
            if coordinator is not None or op.subtask_states:
                raise ValueError(f"{where}: a fully finished operator has no coordinator state and no subtask "
                                 f"states (Flink writes only the count -1)")
            out += _FULLY_FINISHED
            return
        subtasks = op.subtask_states
        out += pack_int(len(subtasks))
        parallelism = op.parallelism
        empty = _EMPTY_SUBTASK
        for index, subtask in subtasks.items():
            if type(index) is not int or not 0 <= index < parallelism:
                raise ValueError(f"{where}: subtask index {index!r} is outside [0, {parallelism}) "
                                 f"(the operator's parallelism)")
            if subtask.finished:  # FLIP-147: -index-1, and no state
                if subtask.has_state:
                    raise ValueError(f"{where}: finished subtask {index} holds state; Flink writes none for it")
                out += pack_int(-index - 1)
            elif not subtask.has_state:
                out += pack_int(index)
                out += empty
            else:
                out += pack_int(index)
                self.write_subtask(out, subtask, where, index)

    def write_subtask(self, out: bytearray, s: OperatorSubtaskState, where: str, index: int) -> None:
        """`MetadataV3Serializer#serializeSubtaskState`: the base's four singletons, then channel state."""
        for handles, what in ((s.managed_operator_state, "managed operator state"),
                              (s.raw_operator_state, "raw operator state")):
            if handles:
                out += _ONE
                write_operator_handle(out, _singleton(handles, where, index, what))
            else:
                out += _ZERO
        write_keyed_handle(out, _singleton(s.managed_keyed_state, where, index, "managed keyed state"))
        write_keyed_handle(out, _singleton(s.raw_keyed_state, where, index, "raw keyed state"))
        channel = self.channel
        out += pack_int(len(s.input_channel_state))
        for h in s.input_channel_state:
            channel.write_input(out, h)
        out += pack_int(len(s.result_subpartition_state))
        for h in s.result_subpartition_state:
            channel.write_output(out, h)


class MetadataV4Writer(MetadataV3Writer):
    """Flink 1.16–1.20 (`MetadataV4Serializer`): the Java-serialized `CheckpointProperties` last."""

    VERSION = 4

    def write_properties(self, out: bytearray, properties: CheckpointProperties | None) -> None:
        """The trailer's bytes as they were read, once they are checked to still say what the fields say."""
        if properties is None:
            raise ValueError(f"format version {self.VERSION} ends with the checkpoint properties, and there are none")
        raw = properties.raw
        if not raw:
            raise ValueError("checkpoint properties without their serialized bytes (CheckpointProperties.raw): "
                             "the trailer is Java serialization and is copied from the file it was read from")
        r = BoundedReader(raw, "checkpoint properties")
        try:
            parsed = read_checkpoint_properties(r)
        except MetadataFormatError as exc:
            raise ValueError(f"checkpoint properties: their raw bytes are not Flink's trailer ({exc.detail})") from None
        if r.remaining() or parsed != properties:
            raise ValueError(f"checkpoint properties {properties!r} differ from what their raw bytes say ({parsed!r}); "
                             f"the bytes are written, so change both or neither")
        out += raw


class MetadataV5Writer(MetadataV4Writer):
    """Flink 2.0 (`MetadataV5Serializer`): operator name and uid ("" = none) before the operator id."""

    VERSION = 5
    NAMES = True


class MetadataV6Writer(MetadataV5Writer):
    """Flink 2.1–2.3 (`MetadataV6Serializer`): typed channel handles, possibly merged per subtask."""

    VERSION = 6
    channel = ChannelStateHandleWriterV2()


WRITERS: dict[int, MetadataV3Writer] = {w.VERSION: w() for w in (MetadataV3Writer, MetadataV4Writer,
                                                                    MetadataV5Writer, MetadataV6Writer)}
WRITABLE_VERSIONS = frozenset(WRITERS)


def _name(out: bytearray, value: str | None, what: str) -> None:
    """v5: a missing name or uid is written as "", so "" itself cannot be one (Flink refuses it too)."""
    if value == "":
        raise ValueError(f"{what} is the empty string, which Flink refuses (it writes \"\" for none)")
    write_utf(out, "" if value is None else value, what)


def _singleton(handles: tuple, where: str, index: int, what: str) -> object:
    """`MetadataV2V3SerializerBase#extractSingleton`: at most one handle of each kind per subtask."""
    if not handles:
        return None
    if len(handles) != 1:
        raise ValueError(f"{where}, subtask {index}: {len(handles)} handles of {what}; Flink writes at most one")
    return handles[0]


def _master_state(out: bytearray, state: MasterState) -> None:
    """`serializeMasterState`: magic number, then length-prefixed version, name and payload."""
    body = bytearray(pack_int(state.version))
    write_utf(body, state.name, "master state name")
    body += pack_int(len(state.data))
    body += state.data
    out += pack_int(MASTER_STATE_MAGIC_NUMBER)
    out += pack_int(len(body))
    out += body


def serialize_metadata(metadata: CheckpointMetadata) -> bytes:
    """The `_metadata` bytes of `metadata` in its format version (`metadata.version`, 3 to 6).

    Raises ValueError for version 2 and unknown versions, and for a model the format cannot hold.
    """
    version = metadata.version
    if version == 2:
        raise ValueError("format version 2 (Flink 1.3-1.10) cannot be written; Flink 1.11+ writes version 3 or "
                         "later: write this checkpoint as version 3 (dataclasses.replace(metadata, version=3)) "
                         "for a Flink that reads it (1.11+)")
    writer = WRITERS.get(version)
    if writer is None:
        raise ValueError(f"format version {version} cannot be written; the writer knows versions "
                         f"{', '.join(map(str, sorted(WRITERS)))} (Flink 1.11-2.3)")
    out = bytearray(_HEADER.pack(HEADER_MAGIC_NUMBER, version))
    try:
        writer.write(out, metadata)
    except struct.error as exc:  # an int or long out of range: Java's field would not hold it either
        raise ValueError(f"a number does not fit its field in the version-{version} format: {exc}") from None
    return bytes(out)

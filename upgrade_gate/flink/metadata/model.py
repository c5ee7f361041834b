"""The values a `_metadata` file holds, named after Flink's classes.

Frozen dataclasses, one per Flink class the deserializer creates. `state_size` is what Flink's
`getStateSize()` returns for the same object, so operator sizes agree with Flink to the byte.
`kind` is Flink's simple class name (used by the detailed JSON view compared with Flink's).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from enum import Enum

from hashing.frozen import fast_init

__all__ = ["EMPTY_KEY_GROUP_RANGE", "FINISHED_SUBTASK", "ByteStreamStateHandle", "ChangelogStateBackendHandleImpl",
           "ChangelogStateHandleStreamImpl", "CheckpointMetadata", "CheckpointProperties",
           "EmptySegmentFileStateHandle", "FileMergingOperatorStreamStateHandle", "FileStateHandle",
           "HandleAndLocalPath", "InMemoryChangelogStateHandle", "IncrementalRemoteKeyedStateHandle",
           "InputChannelStateHandle", "InputStateHandle", "KeyGroupRange", "KeyGroupsSavepointStateHandle",
           "KeyGroupsStateHandle", "KeyedStateHandle", "MasterState", "MergedInputChannelStateHandle",
           "MergedResultSubpartitionStateHandle", "Mode", "OperatorState", "OperatorStateHandle",
           "OperatorStreamStateHandle", "OperatorSubtaskState", "OutputStateHandle", "RelativeFileStateHandle",
           "ResultSubpartitionStateHandle", "SegmentFileStateHandle", "StateMetaInfo", "StreamStateHandle",
           "new_byte_stream_handle", "new_handle_and_local_path", "new_incremental_handle", "new_operator_state",
           "new_operator_stream_handle", "new_relative_file_handle", "new_state_meta_info", "new_subtask_state"]


class Mode(Enum):
    """`OperatorStateHandle.Mode`, by ordinal."""

    SPLIT_DISTRIBUTE = 0
    UNION = 1
    BROADCAST = 2


@dataclass(frozen=True, slots=True)
class KeyGroupRange:
    """`KeyGroupRange`: inclusive [start, end]; the empty range is (0, -1)."""

    start: int
    end: int

    @property
    def number_of_key_groups(self) -> int:
        return self.end - self.start + 1


EMPTY_KEY_GROUP_RANGE = KeyGroupRange(0, -1)


# ---- stream (leaf) handles --------------------------------------------------------------
def _bytes_view(data: bytes | bytearray | memoryview) -> memoryview:
    """A read-only view of immutable bytes: a view over a `bytes` object is kept, anything else copied once."""
    if type(data) is memoryview and type(data.obj) is bytes and data.format == "B" and data.c_contiguous:
        return data
    return memoryview(bytes(data))


@dataclass(frozen=True, slots=True, init=False, repr=False)
class ByteStreamStateHandle:
    """State bytes inline in `_metadata` (below the small-file threshold).

    The reader keeps `view`, a zero-copy view into the bytes of the whole `_metadata` file, not a copy:
    copying every inline handle out of a 9 MB file page-faulted fresh memory for each parse and made
    the reader's system time nearly half its CPU (docs/performance.md, issue 34). `data` gives the
    bytes as a `bytes` object for a consumer that wants one (a copy, made only when asked); code that
    only needs a prefix or to write the bytes back uses `view`. Equality and hash are those of
    (name, bytes), as before; the handle pickles as (name, bytes).
    """

    handle_name: str
    view: memoryview
    kind = "ByteStreamStateHandle"

    def __init__(self, handle_name: str, data: bytes | bytearray | memoryview) -> None:
        object.__setattr__(self, "handle_name", handle_name)
        object.__setattr__(self, "view", _bytes_view(data))

    @property
    def data(self) -> bytes:
        return self.view.tobytes()

    @property
    def state_size(self) -> int:
        return len(self.view)

    def __repr__(self) -> str:
        return f"ByteStreamStateHandle(handle_name={self.handle_name!r}, data={self.data!r})"

    def __reduce__(self) -> tuple[type, tuple[str, bytes]]:
        return ByteStreamStateHandle, (self.handle_name, self.data)


@dataclass(frozen=True, slots=True)
class FileStateHandle:
    path: str
    size: int
    kind = "FileStateHandle"

    @property
    def state_size(self) -> int:
        return self.size


@dataclass(frozen=True, slots=True)
class RelativeFileStateHandle:
    """A file named relative to the snapshot directory; `path` is resolved against it."""

    path: str
    relative_path: str
    size: int
    kind = "RelativeFileStateHandle"

    @property
    def state_size(self) -> int:
        return self.size


@dataclass(frozen=True, slots=True)
class SegmentFileStateHandle:
    """A segment of a merged physical file (FLIP-306 file merging)."""

    path: str
    start_pos: int
    size: int
    scope: str
    logical_file_id: str
    kind = "SegmentFileStateHandle"

    @property
    def state_size(self) -> int:
        return self.size


@dataclass(frozen=True, slots=True)
class EmptySegmentFileStateHandle:
    """Flink's singleton for "no bytes written": path `empty`, position 0, size 0."""

    path: str = "empty"
    start_pos: int = 0
    kind = "EmptySegmentFileStateHandle"

    @property
    def state_size(self) -> int:
        return 0


# ---- keyed handles ----------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class KeyGroupsStateHandle:
    """Full snapshot of a key-group range: one offset per key group into `delegate`."""

    key_group_range: KeyGroupRange
    offsets: tuple[int, ...]
    delegate: StreamStateHandle | None
    state_handle_id: str | None = None
    kind = "KeyGroupsStateHandle"

    @property
    def state_size(self) -> int:
        return self.delegate.state_size if self.delegate is not None else 0


@dataclass(frozen=True, slots=True)
class KeyGroupsSavepointStateHandle(KeyGroupsStateHandle):
    """Canonical-format savepoint keyed state (tag 7)."""

    kind = "KeyGroupsSavepointStateHandle"


@dataclass(frozen=True, slots=True)
class HandleAndLocalPath:
    local_path: str
    handle: StreamStateHandle | None


@dataclass(frozen=True, slots=True)
class IncrementalRemoteKeyedStateHandle:
    """RocksDB/ForSt incremental checkpoint or native savepoint: SST files plus a meta handle."""

    backend_id: str
    key_group_range: KeyGroupRange
    checkpoint_id: int
    shared_state: tuple[HandleAndLocalPath, ...]
    private_state: tuple[HandleAndLocalPath, ...]
    meta_state_handle: StreamStateHandle | None
    persisted_size: int  # -1 = unknown (tag 5): Flink then uses the state size
    state_handle_id: str | None = None
    kind = "IncrementalRemoteKeyedStateHandle"

    @property
    def state_size(self) -> int:
        total = self.meta_state_handle.state_size if self.meta_state_handle is not None else 0
        for h in self.shared_state:
            total += h.handle.state_size if h.handle is not None else 0
        for h in self.private_state:
            total += h.handle.state_size if h.handle is not None else 0
        return total

    @property
    def checkpointed_size(self) -> int:
        return self.state_size if self.persisted_size == -1 else self.persisted_size


@dataclass(frozen=True, slots=True)
class ChangelogStateBackendHandleImpl:
    """Changelog state backend: materialized handles plus changelog (non-materialized) handles."""

    materialized: tuple[KeyedStateHandle, ...]
    non_materialized: tuple[KeyedStateHandle, ...]
    key_group_range: KeyGroupRange
    checkpoint_id: int
    materialization_id: int
    persisted_size: int
    state_handle_id: str
    # read from tag 8 (written before Flink added the checkpoint id, tag 14): the writer keeps the tag
    v1_tag: bool = field(default=False, compare=False, repr=False)
    kind = "ChangelogStateBackendHandleImpl"

    @property
    def state_size(self) -> int:
        return sum(h.state_size for h in self.materialized) + sum(h.state_size for h in self.non_materialized)

    @property
    def checkpointed_size(self) -> int:
        return self.persisted_size


@dataclass(frozen=True, slots=True)
class InMemoryChangelogStateHandle:
    key_group_range: KeyGroupRange
    changes: tuple[tuple[int, bytes], ...]
    from_sequence: int
    to_sequence: int
    state_handle_id: str
    kind = "InMemoryChangelogStateHandle"

    @property
    def state_size(self) -> int:
        return sum(len(b) for _, b in self.changes)

    @property
    def checkpointed_size(self) -> int:
        return self.state_size


@dataclass(frozen=True, slots=True)
class ChangelogStateHandleStreamImpl:
    key_group_range: KeyGroupRange
    handles_and_offsets: tuple[tuple[StreamStateHandle | None, int], ...]
    size: int
    persisted_size: int
    state_handle_id: str
    storage_identifier: str
    # read from tag 10 (written before Flink added the storage identifier, tag 13): the writer keeps the tag
    v1_tag: bool = field(default=False, compare=False, repr=False)
    kind = "ChangelogStateHandleStreamImpl"

    @property
    def state_size(self) -> int:
        return self.size

    @property
    def checkpointed_size(self) -> int:
        return self.persisted_size


# ---- operator-state handles -------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class StateMetaInfo:
    """`OperatorStateHandle.StateMetaInfo`: one offset per list element (partition), and the mode."""

    offsets: tuple[int, ...]
    mode: Mode


@dataclass(frozen=True, slots=True)
class OperatorStreamStateHandle:
    state_name_to_partition_offsets: dict[str, StateMetaInfo]
    delegate: StreamStateHandle | None
    kind = "OperatorStreamStateHandle"

    @property
    def state_size(self) -> int:
        return self.delegate.state_size if self.delegate is not None else 0


@dataclass(frozen=True, slots=True)
class FileMergingOperatorStreamStateHandle(OperatorStreamStateHandle):
    """Operator state in a merged file (tag 17); `is_empty` gives Flink's Empty... subclass."""

    task_owned_dir: str = ""
    shared_dir: str = ""
    is_empty: bool = False

    @property
    def kind(self) -> str:  # type: ignore[override]
        return "EmptyFileMergingOperatorStreamStateHandle" if self.is_empty else "FileMergingOperatorStreamStateHandle"


# ---- channel state (unaligned checkpoints) ----------------------------------------------
@dataclass(frozen=True, slots=True)
class InputChannelStateHandle:
    subtask_index: int
    info: tuple[int, int]  # (gate index, input channel index)
    delegate: StreamStateHandle | None
    offsets: tuple[int, ...]
    size: int
    kind = "InputChannelStateHandle"

    @property
    def state_size(self) -> int:
        return self.size


@dataclass(frozen=True, slots=True)
class ResultSubpartitionStateHandle:
    subtask_index: int
    info: tuple[int, int]  # (partition index, subpartition index)
    delegate: StreamStateHandle | None
    offsets: tuple[int, ...]
    size: int
    kind = "ResultSubpartitionStateHandle"

    @property
    def state_size(self) -> int:
        return self.size


@dataclass(frozen=True, slots=True)
class MergedInputChannelStateHandle:
    """v6: all input channels of a subtask stored in one delegate, offsets serialized opaquely."""

    subtask_index: int
    size: int
    delegate: StreamStateHandle | None
    serialized_channel_offsets: bytes
    kind = "MergedInputChannelStateHandle"

    @property
    def state_size(self) -> int:
        return self.size


@dataclass(frozen=True, slots=True)
class MergedResultSubpartitionStateHandle:
    subtask_index: int
    size: int
    delegate: StreamStateHandle | None
    serialized_channel_offsets: bytes
    kind = "MergedResultSubpartitionStateHandle"

    @property
    def state_size(self) -> int:
        return self.size


StreamStateHandle = (ByteStreamStateHandle | FileStateHandle | RelativeFileStateHandle | SegmentFileStateHandle
                     | EmptySegmentFileStateHandle | KeyGroupsStateHandle)
KeyedStateHandle = (KeyGroupsStateHandle | IncrementalRemoteKeyedStateHandle | ChangelogStateBackendHandleImpl
                    | InMemoryChangelogStateHandle | ChangelogStateHandleStreamImpl)
OperatorStateHandle = OperatorStreamStateHandle
InputStateHandle = InputChannelStateHandle | MergedInputChannelStateHandle
OutputStateHandle = ResultSubpartitionStateHandle | MergedResultSubpartitionStateHandle


# ---- subtasks, operators, the checkpoint ------------------------------------------------
def _handles_size(managed_op: tuple, raw_op: tuple, managed_keyed: tuple, raw_keyed: tuple) -> int:
    """Bytes of a subtask's operator and keyed handles (plain loops: this runs per subtask read)."""
    total = 0
    for h in managed_op:
        total += h.state_size
    for h in raw_op:
        total += h.state_size
    for h in managed_keyed:
        total += h.state_size
    for h in raw_keyed:
        total += h.state_size
    return total


@dataclass(frozen=True, slots=True)
class OperatorSubtaskState:
    """At most one handle of each kind per subtask (Flink's writer enforces singletons)."""

    managed_operator_state: tuple[OperatorStateHandle, ...] = ()
    raw_operator_state: tuple[OperatorStateHandle, ...] = ()
    managed_keyed_state: tuple[KeyedStateHandle, ...] = ()
    raw_keyed_state: tuple[KeyedStateHandle, ...] = ()
    input_channel_state: tuple[InputStateHandle, ...] = ()
    result_subpartition_state: tuple[OutputStateHandle, ...] = ()
    finished: bool = False
    # sizes are summed once: the simulator, the report and fleet scans ask for them again and again
    channel_state_size: int = field(init=False, repr=False, compare=False)
    state_size: int = field(init=False, repr=False, compare=False)
    has_state: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Runs for every subtask of every file read (fleet scans parse thousands): plain loops over
        # locals, no generator or tuple-of-groups per call.
        inputs = self.input_channel_state
        outputs = self.result_subpartition_state
        managed_op = self.managed_operator_state
        raw_op = self.raw_operator_state
        managed_keyed = self.managed_keyed_state
        raw_keyed = self.raw_keyed_state
        channel = 0
        for h in inputs:
            channel += h.state_size
        for h in outputs:
            channel += h.state_size
        set_field = object.__setattr__
        set_field(self, "channel_state_size", channel)
        set_field(self, "state_size", channel + _handles_size(managed_op, raw_op, managed_keyed, raw_keyed))
        # Flink's OperatorSubtaskState.hasState(): any handle at all, even an empty one
        set_field(self, "has_state", bool(managed_op or raw_op or managed_keyed or raw_keyed or inputs or outputs))


FINISHED_SUBTASK = OperatorSubtaskState(finished=True)


@fast_init
@dataclass(frozen=True, slots=True)
class OperatorState:
    """One operator's state: `operator_id` is the 16 raw bytes of Flink's `OperatorID`."""

    operator_id: bytes
    name: str | None
    uid: str | None
    parallelism: int
    max_parallelism: int
    coordinator_state: ByteStreamStateHandle | None
    subtask_states: dict[int, OperatorSubtaskState]
    fully_finished: bool = False
    # worked out once when built: the gate asks them of every operator of every pass over a savepoint
    state_size: int = field(init=False, repr=False, compare=False)
    operator_id_hex: str = field(init=False, repr=False, compare=False)
    has_state: bool = field(init=False, repr=False, compare=False)  # `assignment.load_validation.has_state`

    def __post_init__(self) -> None:
        _set_derived(self, self.operator_id, self.coordinator_state, self.subtask_states)


# ---- constructors for the reader ----------------------------------------------------------
# The generated `__init__` of a frozen dataclass sets every field with `object.__setattr__`. The
# reader builds ~50 operator states and dozens of subtask states per file, and fleet scans parse
# thousands of files, which made construction over a third of the reader's time. These functions build
# the same objects (every slot, the summed sizes included) by calling the slots' descriptors
# directly, at about half the cost. The slot lists are checked against the dataclasses at import,
# so a field added to either class cannot be silently left unset here.

def _slot_setters(cls: type, names: tuple[str, ...]) -> tuple[Callable[[object, object], None], ...]:
    declared = tuple(f.name for f in fields(cls))
    if declared != names:
        raise RuntimeError(f"{cls.__name__} fields {declared} differ from the reader's constructor {names}")
    return tuple(cls.__dict__[name].__set__ for name in names)


_new = object.__new__
(_set_managed_op, _set_raw_op, _set_managed_keyed, _set_raw_keyed, _set_inputs, _set_outputs, _set_finished,
 _set_channel_size, _set_subtask_size, _set_has_state) = _slot_setters(OperatorSubtaskState, (
    "managed_operator_state", "raw_operator_state", "managed_keyed_state", "raw_keyed_state",
    "input_channel_state", "result_subpartition_state", "finished", "channel_state_size", "state_size",
    "has_state"))
(_set_offsets, _set_mode) = _slot_setters(StateMetaInfo, ("offsets", "mode"))
(_set_states, _set_delegate) = _slot_setters(OperatorStreamStateHandle, ("state_name_to_partition_offsets", "delegate"))
(_set_handle_name, _set_view) = _slot_setters(ByteStreamStateHandle, ("handle_name", "view"))
(_set_operator_id, _set_name, _set_uid, _set_parallelism, _set_max_parallelism, _set_coordinator,
 _set_subtask_states, _set_fully_finished, _set_operator_size, _set_operator_hex,
 _set_operator_has_state) = _slot_setters(OperatorState, (
    "operator_id", "name", "uid", "parallelism", "max_parallelism", "coordinator_state", "subtask_states",
    "fully_finished", "state_size", "operator_id_hex", "has_state"))
(_set_path, _set_relative_path, _set_size) = _slot_setters(RelativeFileStateHandle, ("path", "relative_path", "size"))
(_set_local_path, _set_handle) = _slot_setters(HandleAndLocalPath, ("local_path", "handle"))
_INCREMENTAL_SETTERS = _slot_setters(IncrementalRemoteKeyedStateHandle, (
    "backend_id", "key_group_range", "checkpoint_id", "shared_state", "private_state", "meta_state_handle",
    "persisted_size", "state_handle_id"))


def new_state_meta_info(offsets: tuple[int, ...], mode: Mode) -> StateMetaInfo:
    """`StateMetaInfo(offsets, mode)`: built once per operator-state name of every subtask read."""
    m = _new(StateMetaInfo)
    _set_offsets(m, offsets)
    _set_mode(m, mode)
    return m


def new_operator_stream_handle(states: dict[str, StateMetaInfo],
                               delegate: StreamStateHandle | None) -> OperatorStreamStateHandle:
    """`OperatorStreamStateHandle(states, delegate)`: the operator state of most stateful subtasks."""
    h = _new(OperatorStreamStateHandle)
    _set_states(h, states)
    _set_delegate(h, delegate)
    return h


def new_byte_stream_handle(handle_name: str, view: memoryview) -> ByteStreamStateHandle:
    """`ByteStreamStateHandle(handle_name, view)` for the reader: `view` is a slice of the file's view
    (a read-only view of `bytes`, what `ByteStreamStateHandle.__init__` would keep as it is)."""
    h = _new(ByteStreamStateHandle)
    _set_handle_name(h, handle_name)
    _set_view(h, view)
    return h


def new_relative_file_handle(path: str, relative_path: str, size: int) -> RelativeFileStateHandle:
    """`RelativeFileStateHandle(path, relative_path, size)`: a RocksDB native savepoint has one per SST file of
    every subtask (18 per subtask in the 1,000-subtask benchmark)."""
    h = _new(RelativeFileStateHandle)
    _set_path(h, path)
    _set_relative_path(h, relative_path)
    _set_size(h, size)
    return h


def new_handle_and_local_path(local_path: str, handle: StreamStateHandle | None) -> HandleAndLocalPath:
    """`HandleAndLocalPath(local_path, handle)`: one per file of an incremental or native RocksDB handle."""
    h = _new(HandleAndLocalPath)
    _set_local_path(h, local_path)
    _set_handle(h, handle)
    return h


def new_incremental_handle(*values: object) -> IncrementalRemoteKeyedStateHandle:
    """`IncrementalRemoteKeyedStateHandle(*values)`, all eight fields in their order."""
    h = _new(IncrementalRemoteKeyedStateHandle)
    for set_field, value in zip(_INCREMENTAL_SETTERS, values, strict=True):
        set_field(h, value)
    return h


def new_subtask_state(managed_op: tuple[OperatorStateHandle, ...], raw_op: tuple[OperatorStateHandle, ...],
                      managed_keyed: tuple[KeyedStateHandle, ...],
                      raw_keyed: tuple[KeyedStateHandle, ...]) -> OperatorSubtaskState:
    """`OperatorSubtaskState(managed_op, raw_op, managed_keyed, raw_keyed)`: no channel state, not finished."""
    s = _new(OperatorSubtaskState)
    _set_managed_op(s, managed_op)
    _set_raw_op(s, raw_op)
    _set_managed_keyed(s, managed_keyed)
    _set_raw_keyed(s, raw_keyed)
    _set_inputs(s, ())
    _set_outputs(s, ())
    _set_finished(s, False)
    _set_channel_size(s, 0)
    _set_subtask_size(s, _handles_size(managed_op, raw_op, managed_keyed, raw_keyed))
    _set_has_state(s, bool(managed_op or raw_op or managed_keyed or raw_keyed))
    return s


def new_operator_state(operator_id: bytes, name: str | None, uid: str | None, parallelism: int,
                       max_parallelism: int, coordinator_state: ByteStreamStateHandle | None,
                       subtask_states: dict[int, OperatorSubtaskState]) -> OperatorState:
    """`OperatorState(operator_id, ..., subtask_states)` of an operator that is not fully finished."""
    o = _new(OperatorState)
    _set_operator_id(o, operator_id)
    _set_name(o, name)
    _set_uid(o, uid)
    _set_parallelism(o, parallelism)
    _set_max_parallelism(o, max_parallelism)
    _set_coordinator(o, coordinator_state)
    _set_subtask_states(o, subtask_states)
    _set_fully_finished(o, False)
    _set_derived(o, operator_id, coordinator_state, subtask_states)
    return o


def _set_derived(o: OperatorState, operator_id: bytes, coordinator_state: ByteStreamStateHandle | None,
                 subtask_states: dict[int, OperatorSubtaskState]) -> None:
    """The fields an `OperatorState` works out from the others (its size, hex ID, whether it holds state)."""
    total = 0
    holds = coordinator_state is not None
    if holds:
        total = coordinator_state.state_size  # type: ignore[union-attr]
    for s in subtask_states.values():
        total += s.state_size
        holds = holds or s.has_state
    _set_operator_size(o, total)
    _set_operator_hex(o, operator_id.hex())
    _set_operator_has_state(o, holds)


@dataclass(frozen=True, slots=True)
class MasterState:
    name: str
    version: int
    data: bytes


@dataclass(frozen=True, slots=True)
class CheckpointProperties:
    """What v4+ files record about the snapshot (Java-serialized `CheckpointProperties`)."""

    is_savepoint: bool
    format_type: str | None  # CANONICAL | NATIVE for savepoints
    name: str | None  # SnapshotType.getName(): "Savepoint", "Terminate Savepoint", "Checkpoint", ...
    post_checkpoint_action: str | None = None
    sharing_files_strategy: str | None = None
    flags: dict[str, bool] = field(default_factory=dict)
    # The trailer exactly as Flink wrote it (`ObjectOutputStream.writeObject`): the fields above are a
    # lossy reading of it, and the writer (writer.py) copies these bytes back. Equality ignores them.
    raw: bytes = field(default=b"", compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class CheckpointMetadata:
    version: int
    checkpoint_id: int
    master_states: tuple[MasterState, ...]
    operator_states: tuple[OperatorState, ...]
    properties: CheckpointProperties | None
    source: str = ""
    # the directory relative handles were resolved against, as the reader was given it (`os.path.realpath` of a
    # local snapshot folder, `s3://bucket/dir`): the savepoint pointer Flink prints (`gate.check.savepoint_pointer`)
    base_dir: str | None = field(default=None, compare=False, repr=False)

"""The serializer versions a connector wrote into a savepoint: the headers of split, enumerator, writer and
committer state.

A connector's state is bytes its own `SimpleVersionedSerializer` wrote, each preceded by that serializer's version,
so a connector-only upgrade can change what the bytes mean without any state Flink itself describes changing. Where
the versions are (the same in Flink 1.20 and 2.3, read from both releases' classes):

* splits: `SourceOperator`'s "SourceReaderState" operator list state (`BytePrimitiveArraySerializer` elements:
  int length, then the bytes), each element written by `SimpleVersionedListState` through
  `SimpleVersionedSerialization.writeVersionAndSerialize`: int version, int length, the split's bytes. The version is
  the source's `getSplitSerializer().getVersion()`.
* enumerator: the operator's coordinator state, `SourceCoordinator#toBytes`: int coordinator serde version
  (`SourceCoordinatorSerdeUtils#writeCoordinatorSerdeVersion`, 1), int `getEnumeratorCheckpointSerializer()
  .getVersion()`, int length, the enumerator checkpoint.
* writer state: `StatefulSinkWriterStateHandler`'s "writer_raw_states", a `SimpleVersionedListState` over the sink's
  `getWriterStateSerializer()`: the same element layout as the splits.
* committables: `CommitterOperator`'s "streaming_committer_raw_states", a `SimpleVersionedListState` over
  `CommittableCollectorSerializer` (Flink's own, version 2 in both releases); the connector's committable serializer
  version is nested inside it, one per committable (`upgrade_gate.flink.committables`), and that is the version
  reported for this state.

Only the headers are read (8 bytes per element; a committer's elements whole, to reach the nested committables),
through the caller's opener; the savepoint is never written.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import StrEnum

from hashing.frozen import fast_init
from upgrade_gate.flink.committables import committable_versions
from upgrade_gate.flink.metadata.model import CheckpointMetadata, OperatorState
from upgrade_gate.flink.state_meta.streams import MAX_PROXY_BYTES, Opener, StateFileError, local_opener, stream_of

__all__ = ["COORDINATOR", "STATE_NAMES", "ConnectorState", "VersionsMemo", "WrittenVersions", "connector_state_names",
           "read_connector_versions"]


class ConnectorState(StrEnum):
    SPLITS = "splits"
    ENUMERATOR = "enumerator"
    WRITER_STATE = "writer state"
    COMMITTABLES = "committables"


# descriptor name -> what it holds (SourceOperator#SPLITS_STATE_DESC, StatefulSinkWriterStateHandler
# #WRITER_RAW_STATES_DESC, CommitterOperator#STREAMING_COMMITTER_RAW_STATES_DESC)
STATE_NAMES: dict[str, ConnectorState] = {
    "SourceReaderState": ConnectorState.SPLITS,
    "writer_raw_states": ConnectorState.WRITER_STATE,
    "streaming_committer_raw_states": ConnectorState.COMMITTABLES,
}
COORDINATOR = "coordinator"
SPLITS_STATE = "SourceReaderState"


@fast_init
@dataclass(frozen=True, slots=True)
class WrittenVersions:
    """The serializer versions one connector state of one savepoint operator was written with. `versions`: the
    distinct versions of its elements, ascending (empty: no element, e.g. every split finished); `elements`: how many
    (of a committer's state: how many committables, the collector's own elements do not count); `unread`: why the
    headers could not be read (a missing state file, a layout not read), else None."""

    operator_id: str
    name: str | None
    uid: str | None
    state: ConnectorState
    state_name: str
    versions: tuple[int, ...]
    elements: int
    unread: str | None = None


def connector_state_names(op: OperatorState) -> set[str]:
    """The connector states' descriptor names an operator's snapshot holds (no stream is read)."""
    names: set[str] = set()
    for s in op.subtask_states.values():
        for h in (*s.managed_operator_state, *s.raw_operator_state):
            names.update(n for n in h.state_name_to_partition_offsets if n in STATE_NAMES)
    return names


def _list_versions(op: OperatorState, name: str, source: str, opener: Opener) -> tuple[list[int], str | None]:
    """The version header of every element of operator list state `name`, over all subtasks; of a committer's state
    the versions of the committables nested in each element."""
    versions: list[int] = []
    for s in op.subtask_states.values():
        for h in s.managed_operator_state:
            meta = h.state_name_to_partition_offsets.get(name)
            if meta is None or not meta.offsets:
                continue
            ref = stream_of(h.delegate, source)
            if ref is None:
                continue
            if STATE_NAMES[name] is ConnectorState.COMMITTABLES:
                found, unread = committable_versions(ref, meta.offsets, name, opener)
                versions += found
                if unread is not None:
                    return versions, unread
                continue
            need = max(meta.offsets) + 8
            if need > MAX_PROXY_BYTES:
                return versions, f"{ref.source}: list state {name} ends past {MAX_PROXY_BYTES} bytes"
            try:
                data, _ = opener(ref, need)
            except StateFileError as exc:
                return versions, str(exc)
            for off in meta.offsets:
                if off + 8 > len(data):
                    return versions, f"{ref.source}: element of {name} at offset {off} is past the stream's end"
                # BytePrimitiveArraySerializer's length, then SimpleVersionedSerialization's version
                versions.append(struct.unpack_from(">i", data, off + 4)[0])
    return versions, None


def _enumerator_version(op: OperatorState) -> int | None:
    """`SourceCoordinator#toBytes`: serde version 1, then the enumerator serializer's version."""
    handle = op.coordinator_state
    if handle is None or handle.data is None or len(handle.data) < 8:
        return None
    serde, version = struct.unpack_from(">ii", handle.data, 0)
    return version if serde == 1 else None


# id(op.subtask_states) -> (the subtask states, the coordinator state, the metadata's source, the operator's rows):
# what `read_connector_versions` read of an operator's state handles, for its next call on the same handles
VersionsMemo = dict[int, tuple[object, object, str, tuple[WrittenVersions, ...]]]


def read_connector_versions(metadata: CheckpointMetadata, opener: Opener = local_opener,
                            only: set[str] | None = None, memo: VersionsMemo | None = None
                            ) -> tuple[WrittenVersions, ...]:
    """Every connector state of the savepoint (of the operators whose hex id is in `only`, if given) with the
    versions written. The enumerator is read only of an operator that holds "SourceReaderState": its coordinator is
    a `SourceCoordinator` then, and other coordinators' bytes mean something else.

    `memo`: the caller's record of operators already read (`gate.findings.SavepointFacts.connector_versions`). Each
    pass of a check asks again, and a repair's re-check asks of a savepoint whose operators hold the very handles of
    the original's under another ID (`repair.rewrite.apply_plan`); the versions are the handles' bytes, so they are
    read once and only the operator's ID, name and uid are its own."""
    out: list[WrittenVersions] = []
    for op in metadata.operator_states:
        oid = op.operator_id_hex
        if (only is not None and oid not in only) or not op.has_state:  # no handle: no connector state
            continue
        known = memo.get(id(op.subtask_states)) if memo is not None else None
        if known is not None and known[0] is op.subtask_states and known[1] is op.coordinator_state \
                and known[2] == metadata.source:
            name, uid = op.name or None, op.uid or None
            out += [w if (w.operator_id, w.name, w.uid) == (oid, name, uid)
                    else WrittenVersions(oid, name, uid, w.state, w.state_name, w.versions, w.elements, w.unread)
                    for w in known[3]]
            continue
        start = len(out)
        _operator_versions(op, oid, metadata.source, opener, out)
        if memo is not None:
            memo[id(op.subtask_states)] = (op.subtask_states, op.coordinator_state, metadata.source,
                                           tuple(out[start:]))
    return tuple(out)


def _operator_versions(op: OperatorState, oid: str, source: str, opener: Opener, out: list[WrittenVersions]) -> None:
    """`read_connector_versions` of one operator, appended to `out`."""
    names = connector_state_names(op)
    for name in sorted(names):
        versions, unread = _list_versions(op, name, source, opener)
        out.append(WrittenVersions(oid, op.name or None, op.uid or None, STATE_NAMES[name], name,
                                   tuple(sorted(set(versions))), len(versions), unread))
    if SPLITS_STATE in names and op.coordinator_state is not None:
        v = _enumerator_version(op)
        out.append(WrittenVersions(oid, op.name or None, op.uid or None, ConnectorState.ENUMERATOR, COORDINATOR,
                                   (v,) if v is not None else (), 1 if v is not None else 0,
                                   None if v is not None else "coordinator state is not a SourceCoordinator's"))

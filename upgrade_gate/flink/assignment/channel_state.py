"""Unaligned-checkpoint channel state: `StateAssignmentOperation.reDistributeResultSubpartitionStates` /
`reDistributeInputChannelStates`, and how the tasks then recover the in-flight buffers.

An unaligned checkpoint stores in-flight buffers twice over: a job vertex's *output operator* (the
chain's tail, first in Flink's list) holds result-subpartition state (buffers it had produced but not
sent), its *input operator* (the head, last) input-channel state (buffers received but not processed).
On restore Flink hands them to the same operators again and the tasks replay them before new input.

What real Flink 1.20 and 2.3 do (tests/fixtures/checkpoints/, flink_bridge/generate_checkpoint_restores.py):

* The redistribution runs only where channel state is involved (FLINK-31963): the output side when the
  vertex's output operator holds output state or a downstream vertex's input operator holds input
  state, the input side when its input operator holds input state or an upstream vertex's output
  operator holds output state. Then `checkForUnsupportedToplogyChanges` refuses a vertex where an
  operator other than the expected one holds that kind of state (an exchange with persisted data is
  now chained). An exchange that became chained on *both* sides is never looked at: the job runs and
  the buffers are dropped (`dropped_channel_state`).
* When the vertex's parallelism changed, the partitioner's `SubtaskStateMapper` maps old to new
  subtasks; FORWARD and RESCALE are `UNSUPPORTED` and refuse (`UnsupportedOperationException`).
* At the same parallelism the handles go back to the same subtask unchanged; a task then writes each
  buffer into its (sub)partition or channel index. When the new exchange has fewer subpartitions or
  channels (rebalance -> rescale) the task fails with `ArrayIndexOutOfBoundsException`; when the
  exchange now partitions by key but did not before, the replayed records reach subtasks that do not
  own their key group and the keyed operator fails (`IllegalArgumentException`). Both are task
  failures after the job was scheduled, recorded here (`ChannelTopology.task_failures`) and raised by
  the caller once every vertex is assigned.

`check_channel_state(task)` without a topology keeps the plain per-vertex check (no gating), for
callers that have no neighbours to look at.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass, field

from hashing.graph import Partitioner, StreamGraph, StreamNode
from hashing.keygroups import compute_default_max_parallelism
from upgrade_gate.flink.assignment.errors import RestoreFailure
from upgrade_gate.flink.assignment.keyed_state import key_group_partitions
from upgrade_gate.flink.assignment.task_state_assignment import OperatorRestore, TaskStateAssignment
from upgrade_gate.flink.metadata.model import OperatorState

__all__ = ["UNSUPPORTED_RESCALE", "ChannelTopology", "channel_indexes", "check_channel_state",
           "dropped_channel_state"]

# `SubtaskStateMapper.UNSUPPORTED` (the mapper of ForwardPartitioner and RescalePartitioner, both directions)
UNSUPPORTED_RESCALE = ("Cannot rescale the given pointwise partitioner.\nDid you change the partitioner to forward "
                       "or rescale?\nIt may also help to add an explicit shuffle().")
_UNSUPPORTED_MAPPER = (Partitioner.FORWARD, Partitioner.RESCALE)
_POINTWISE = (Partitioner.FORWARD, Partitioner.RESCALE, Partitioner.FORWARD_FOR_CONSECUTIVE_HASH)
_KEYED = (Partitioner.HASH, Partitioner.FORWARD_FOR_CONSECUTIVE_HASH)
_CHAINED = ("Cannot recover from unaligned checkpoint when topology changes, such that data exchanges with "
            "persisted data are now chained.\nThe following operators contain channel state: [{}]")
_INDEX = "Index {} out of bounds for length {}"
_KEY_GROUP = ("Key group {} is not in KeyGroupRange{{startKeyGroup={}, endKeyGroup={}}}. Unless you're directly "
              "using low level state access APIs, this is most likely caused by non-deterministic shuffle key "
              "(hashCode and equals implementation).")


def channel_indexes(handle: object) -> list[tuple[int, int]]:
    """(gate or partition index, channel or subpartition index) of every channel a handle holds data for.

    A v6 "merged" handle keeps them in `serializedChannelOffsets`
    (`AbstractMergedChannelStateHandle#serializeChannelOffsets`: int count, then per channel two ints,
    the size as a long, an int count of offsets and the offsets as longs); a malformed one yields what
    could be read."""
    info = getattr(handle, "info", None)
    if info is not None:
        return [tuple(info)] if getattr(handle, "offsets", (1,)) else []
    data: bytes = getattr(handle, "serialized_channel_offsets", b"") or b""
    out: list[tuple[int, int]] = []
    if len(data) < 4:
        return out
    (count,), pos = struct.unpack_from(">i", data), 4
    for _ in range(max(0, min(count, len(data) // 20))):
        if pos + 20 > len(data):
            break
        a, b, _size, n = struct.unpack_from(">iiqi", data, pos)
        pos += 20 + 8 * max(n, 0)
        if n > 0:
            out.append((a, b))
    return out


def _indexes(state: OperatorState | None, kind: str) -> dict[int, list[tuple[int, int]]]:
    """Per old subtask, the channels that hold `kind` ("input_channel_state" / "result_subpartition_state")."""
    if state is None:
        return {}
    out: dict[int, list[tuple[int, int]]] = {}
    for i, sub in sorted(state.subtask_states.items()):
        found = [ix for h in getattr(sub, kind) for ix in channel_indexes(h)]
        if found:
            out[i] = found
    return out


def _has(state: OperatorState | None, kind: str) -> bool:
    """Whether a subtask of `state` holds channel state of `kind` (a loop: asked of every vertex's ends)."""
    if state is not None:
        for s in state.subtask_states.values():
            if getattr(s, kind):
                return True
    return False


def _holders(task: TaskStateAssignment, kind: str, expected: OperatorRestore | None) -> list[str]:
    return [r.pair.generated.hex() for r in task.operators
            if r is not expected and _has(r.old, kind)]


def _pointwise_consumers(upstream: int, up_p: int, down_p: int) -> int:
    """Subpartitions of one upstream subtask on a POINTWISE edge (`EdgeManagerBuildUtil`)."""
    if up_p >= down_p:
        return 1
    return sum(1 for j in range(down_p) if j * up_p // down_p == upstream)


@dataclass(frozen=True)
class _Exchange:
    """One job edge: the producing and consuming vertex (by head node), its partitioner, both end operators."""

    up: int
    down: int
    partitioner: Partitioner
    source: StreamNode
    target: StreamNode


def _key(node: StreamNode) -> str:
    return f"uid:{node.uid}" if node.uid else f"name:{node.name}"


@dataclass
class ChannelTopology:
    """The job edges between vertices and which end holds channel state: what Flink's
    `TaskStateAssignment#hasUpstreamOutputStates` / `hasDownstreamInputStates` look at."""

    inputs: dict[int, list[_Exchange]]  # consuming vertex head -> its input gates, in order
    outputs: dict[int, list[_Exchange]]  # producing vertex head -> its produced partitions, in order
    parallelism: dict[int, int]
    input_state: dict[int, bool]  # the vertex's input operator holds input-channel state
    output_state: dict[int, bool]  # its output operator holds result-subpartition state
    max_parallelism: dict[int, int]
    # the partitioner of the same exchange in the job that wrote the snapshot (by its end operators' uid
    # or name), when that job's graph is known
    old_partitioners: dict[tuple[str, str], Partitioner] = field(default_factory=dict)
    task_failures: list[RestoreFailure] = field(default_factory=list)

    @classmethod
    def of(cls, per_vertex: Iterable[list[OperatorRestore]], graph: StreamGraph,
           old_graph: StreamGraph | None = None) -> ChannelTopology:
        head_of: dict[int, int] = {}
        parallelism: dict[int, int] = {}
        input_state: dict[int, bool] = {}
        output_state: dict[int, bool] = {}
        max_parallelism: dict[int, int] = {}
        for restores in per_vertex:
            if not restores:
                continue
            vertex = restores[0].vertex
            head = vertex.vertex.head
            parallelism[head] = vertex.parallelism
            max_parallelism[head] = vertex.max_parallelism
            for r in restores:
                head_of[r.node_id] = head
            input_state[head] = _has(restores[-1].old, "input_channel_state")
            output_state[head] = _has(restores[0].old, "result_subpartition_state")
        inputs: dict[int, list[_Exchange]] = {h: [] for h in parallelism}
        outputs: dict[int, list[_Exchange]] = {h: [] for h in parallelism}
        for e in graph.edges:
            up, down = head_of.get(e.source), head_of.get(e.target)
            if up is None or down is None or up == down:
                continue
            ex = _Exchange(up, down, e.partitioner, graph.by_id[e.source], graph.by_id[e.target])
            outputs[up].append(ex)
            inputs[down].append(ex)
        old: dict[tuple[str, str], Partitioner] = {}
        if old_graph is not None:
            for e in old_graph.edges:
                old[(_key(old_graph.by_id[e.source]), _key(old_graph.by_id[e.target]))] = e.partitioner
        return cls(inputs, outputs, parallelism, input_state, output_state, max_parallelism, old)

    def downstream_has_input_state(self, head: int) -> bool:
        return any(self.input_state.get(x.down, False) for x in self.outputs.get(head, ()))

    def upstream_has_output_state(self, head: int) -> bool:
        return any(self.output_state.get(x.up, False) for x in self.inputs.get(head, ()))

    def raise_task_failures(self) -> None:
        """The first task failure recorded while assigning (tasks fail only after every vertex was assigned)."""
        if self.task_failures:
            raise self.task_failures[0]


def _check_chained(task: TaskStateAssignment, kind: str, expected: OperatorRestore | None) -> None:
    offending = _holders(task, kind, expected)
    if offending:
        raise RestoreFailure(_CHAINED.format(", ".join(offending)), stage="channel state")


def check_channel_state(task: TaskStateAssignment, topology: ChannelTopology | None = None) -> None:
    """Raise what Flink raises while redistributing this vertex's channel state; record task failures."""
    if topology is None:
        offending = [r.pair.generated.hex() for r in task.operators if r.old is not None and (
            (_has(r.old, "input_channel_state") and r is not task.input_operator)
            or (_has(r.old, "result_subpartition_state") and r is not task.output_operator))]
        if offending:
            raise RestoreFailure(_CHAINED.format(", ".join(offending)), stage="channel state")
        return
    head = task.vertex.vertex.head
    new_p = task.vertex.parallelism
    if topology.output_state.get(head) or topology.downstream_has_input_state(head):
        _check_chained(task, "result_subpartition_state", task.output_operator)
        out = task.output_operator.old if task.output_operator else None
        if out is not None and out.parallelism != new_p:
            if any(x.partitioner in _UNSUPPORTED_MAPPER for x in topology.outputs.get(head, ())):
                raise RestoreFailure(UNSUPPORTED_RESCALE, "java.lang.UnsupportedOperationException",
                                     stage="channel state")
        elif out is not None:
            _same_parallelism_outputs(topology, head, out)
    if topology.input_state.get(head) or topology.upstream_has_output_state(head):
        _check_chained(task, "input_channel_state", task.input_operator)
        inp = task.input_operator.old if task.input_operator else None
        if inp is not None and inp.parallelism != new_p:
            if any(x.partitioner in _UNSUPPORTED_MAPPER for x in topology.inputs.get(head, ())):
                raise RestoreFailure(UNSUPPORTED_RESCALE, "java.lang.UnsupportedOperationException",
                                     stage="channel state")
        elif inp is not None:
            _same_parallelism_inputs(topology, head, inp)


def _record(topology: ChannelTopology, message: str, java_class: str) -> None:
    topology.task_failures.append(RestoreFailure(message, java_class, stage="task recovery"))


def _same_parallelism_outputs(topology: ChannelTopology, head: int, state: OperatorState) -> None:
    """Each subtask writes its buffers back into (partition, subpartition): both must still exist."""
    partitions = topology.outputs.get(head, [])
    for i, found in _indexes(state, "result_subpartition_state").items():
        for part, sub in found:
            if part >= len(partitions):
                return _record(topology, _INDEX.format(part, len(partitions)),
                               "java.lang.ArrayIndexOutOfBoundsException")
            x = partitions[part]
            down_p = topology.parallelism[x.down]
            count = (_pointwise_consumers(i, topology.parallelism[head], down_p)
                     if x.partitioner in _POINTWISE else down_p)
            if sub >= count:
                return _record(topology, _INDEX.format(sub, count), "java.lang.ArrayIndexOutOfBoundsException")
    return None


def _same_parallelism_inputs(topology: ChannelTopology, head: int, state: OperatorState) -> None:
    """Replayed records go back to the same subtask: wrong when the exchange now partitions by key."""
    gates = topology.inputs.get(head, [])
    if not _indexes(state, "input_channel_state"):
        return
    for x in gates:
        before = topology.old_partitioners.get((_key(x.source), _key(x.target)))
        if before is not None and x.partitioner in _KEYED and before not in _KEYED:
            p = topology.parallelism[head]
            maxp = topology.max_parallelism.get(head) or compute_default_max_parallelism(p)
            ranges = key_group_partitions(maxp, p)
            if len(ranges) > 1:  # a record of subtask 1's first key group replayed on subtask 0
                start, end = ranges[0]
                _record(topology, _KEY_GROUP.format(ranges[1][0], start, end), "java.lang.IllegalArgumentException")
            return


def dropped_channel_state(tasks: Iterable[TaskStateAssignment], topology: ChannelTopology) -> list[str]:
    """Operators whose in-flight buffers Flink never looks at: their exchange is now chained on both sides,
    so no vertex's redistribution runs and the job starts without them (the records are lost)."""
    out = []
    for task in tasks:
        head = task.vertex.vertex.head
        out_checked = topology.output_state.get(head) or topology.downstream_has_input_state(head)
        in_checked = topology.input_state.get(head) or topology.upstream_has_output_state(head)
        for r in task.operators:
            if r.old is None:
                continue
            if (_has(r.old, "result_subpartition_state") and not out_checked) or (
                    _has(r.old, "input_channel_state") and not in_checked):
                out.append(r.pair.generated.hex())
    return out


def _per_vertex(operators: dict[int, OperatorRestore], vertices: Iterable[object]) -> list[list[OperatorRestore]]:
    """The matched operators grouped by job vertex, tail first (Flink's order), as `assign_states` built them."""
    out = []
    for v in vertices:
        restores = [operators[p.node_id] for p in v.operators if p.node_id in operators]  # type: ignore[attr-defined]
        if restores:
            out.append(restores)
    return out


def _names(restores: Iterable[OperatorRestore]) -> str:
    return ", ".join(f"'{r.old.name or r.pair.name}'" if r.old is not None else f"'{r.pair.name}'"
                     for r in restores)


def explain(operators: dict[int, OperatorRestore], vertices: Iterable[object], graph: StreamGraph) -> list[str]:
    """Plain sentences for the report: what happens to the in-flight data of an unaligned checkpoint.

    `operators` and `vertices` are a successful `Assignment`'s; nothing is said when the snapshot holds
    no channel state (every savepoint, every aligned checkpoint)."""
    per_vertex = _per_vertex(operators, vertices)
    holders = [r for restores in per_vertex for r in restores
               if r.old is not None and any(s.channel_state_size or s.input_channel_state
                                            or s.result_subpartition_state for s in r.old.subtask_states.values())]
    if not holders:
        return []
    nbytes = sum(s.channel_state_size for r in holders for s in r.old.subtask_states.values())  # type: ignore[union-attr]
    topology = ChannelTopology.of(per_vertex, graph)
    tasks = [TaskStateAssignment(restores[0].vertex, restores) for restores in per_vertex]
    dropped = set(dropped_channel_state(tasks, topology))
    kept = [r for r in holders if r.pair.generated.hex() not in dropped]
    out = [f"This snapshot is an unaligned checkpoint: it holds {nbytes} bytes of in-flight records (buffers "
           f"that were on the wire between operators when it was taken), at {_names(holders)}."]
    if kept:
        rescaled = [r for r in kept if r.old is not None and r.old.parallelism != r.vertex.parallelism]
        out.append(f"Flink gives the in-flight records of {_names(kept)} back to the same exchanges and replays "
                   f"them before any new input, so each is processed once"
                   + (f"; {_names(rescaled)} changed parallelism, so the records are redistributed by the "
                      f"exchange's partitioner first (a keyed exchange filters them by key group)." if rescaled
                      else "."))
    if dropped:
        out.append(f"The in-flight records of {_names(r for r in holders if r.pair.generated.hex() in dropped)} "
                   f"cannot be restored: the exchange they were on is now chained on both sides, so Flink never "
                   f"looks at them and the job starts without them. Those records are lost; take an aligned "
                   f"checkpoint or a savepoint of the old job before this change.")
    return out

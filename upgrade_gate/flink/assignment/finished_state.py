"""`VertexFinishedStateChecker` (FLIP-147): finished operators may only be restored consistently.

Per job vertex, each operator's state is ALL_RUNNING, PARTIALLY_FINISHED or FULLY_FINISHED (an
operator without state counts as ALL_RUNNING). A vertex mixing them fails; a FULLY_FINISHED vertex
needs all its predecessors FULLY_FINISHED; a PARTIALLY_FINISHED one needs fully finished
predecessors over ALL_TO_ALL edges and predecessors that are not ALL_RUNNING over POINTWISE ones
(an ALL_TO_ALL edge from a predecessor wins over a POINTWISE one). Flink throws a
`FlinkRuntimeException` with the texts below.
"""

from __future__ import annotations

from hashing.graph import Partitioner, StreamGraph
from upgrade_gate.flink.assignment.errors import RestoreFailure
from upgrade_gate.flink.assignment.task_state_assignment import OperatorRestore

__all__ = ["ALL_RUNNING", "FULLY_FINISHED", "PARTIALLY_FINISHED", "operator_finished_state",
           "validate_operators_finished_state"]

ALL_RUNNING, PARTIALLY_FINISHED, FULLY_FINISHED = "ALL_RUNNING", "PARTIALLY_FINISHED", "FULLY_FINISHED"
_ORDINAL = (ALL_RUNNING, PARTIALLY_FINISHED, FULLY_FINISHED)  # `VertexFinishedState`'s order: Flink sorts by it
# `StreamPartitioner.isPointwise()`: these connect job vertices POINTWISE, every other one ALL_TO_ALL
_POINTWISE = (Partitioner.FORWARD, Partitioner.RESCALE, Partitioner.FORWARD_FOR_CONSECUTIVE_HASH)
_FLINK_RUNTIME_EXCEPTION = "org.apache.flink.util.FlinkRuntimeException"


def operator_finished_state(r: OperatorRestore) -> str:
    st = r.old
    if st is None:
        return ALL_RUNNING
    if st.fully_finished:
        return FULLY_FINISHED
    if any(s.finished for s in st.subtask_states.values()):
        return PARTIALLY_FINISHED
    return ALL_RUNNING


def validate_operators_finished_state(per_vertex: list[list[OperatorRestore]], graph: StreamGraph) -> None:
    vertex_state: dict[int, str] = {}
    head_of: dict[int, int] = {}
    for restores in per_vertex:
        if not restores:
            continue
        vertex = restores[0].vertex
        states = {operator_finished_state(r) for r in restores}
        for r in restores:
            head_of[r.node_id] = vertex.vertex.head
        if len(states) > 1:
            listed = ", ".join(sorted(states, key=_ORDINAL.index))
            raise RestoreFailure(f"Can not restore vertex {vertex.name}({vertex.id_hex}) which contain mixed operator "
                                 f"finished state: [{listed}]", _FLINK_RUNTIME_EXCEPTION, stage="finished state")
        vertex_state[vertex.vertex.head] = states.pop()
    for restores in per_vertex:
        if not restores:
            continue
        vertex = restores[0].vertex
        state = vertex_state[vertex.vertex.head]
        if state == ALL_RUNNING:
            continue
        # predecessor vertex (by head) -> pointwise?; an ALL_TO_ALL edge from it wins over a POINTWISE one
        pointwise: dict[int, bool] = {}
        members = {r.node_id for r in restores}
        for n in sorted(members):
            for e in graph.in_edges[n]:
                if e.source in members:
                    continue
                up = head_of.get(e.source, -1)
                pointwise[up] = pointwise.get(up, True) and e.partitioner in _POINTWISE
        where = f"Task vertex {vertex.name}({vertex.id_hex})"
        for up, is_pointwise in pointwise.items():
            up_state = vertex_state.get(up, ALL_RUNNING)
            if state == FULLY_FINISHED and up_state != FULLY_FINISHED:
                raise RestoreFailure(
                    "Illegal JobGraph modification. Cannot run a program with fully finished vertices predeceased "
                    f"with the ones not fully finished. {where} has a predecessor not fully finished",
                    _FLINK_RUNTIME_EXCEPTION, stage="finished state")
            if state == PARTIALLY_FINISHED and not is_pointwise and up_state != FULLY_FINISHED:
                kind = "all running" if up_state == ALL_RUNNING else "partially finished"
                raise RestoreFailure(
                    "Illegal JobGraph modification. Cannot run a program with partially finished vertices "
                    "predeceased with running or partially finished ones and connected via the ALL_TO_ALL edges. "
                    f"{where} has a {kind} predecessor", _FLINK_RUNTIME_EXCEPTION, stage="finished state")
            if state == PARTIALLY_FINISHED and is_pointwise and up_state == ALL_RUNNING:
                raise RestoreFailure(
                    "Illegal JobGraph modification. Cannot run a program with partially finished vertices "
                    f"predeceased with all running ones. {where} has a all running predecessor",
                    _FLINK_RUNTIME_EXCEPTION, stage="finished state")

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

__all__ = ["ALL_RUNNING", "FULLY_FINISHED", "PARTIALLY_FINISHED", "explain", "operator_finished_state",
           "validate_operators_finished_state"]

ALL_RUNNING, PARTIALLY_FINISHED, FULLY_FINISHED = "ALL_RUNNING", "PARTIALLY_FINISHED", "FULLY_FINISHED"
_ORDINAL = (ALL_RUNNING, PARTIALLY_FINISHED, FULLY_FINISHED)  # `VertexFinishedState`'s order: Flink sorts by it
# `StreamPartitioner.isPointwise()`: these connect job vertices POINTWISE, every other one ALL_TO_ALL
_POINTWISE = (Partitioner.FORWARD, Partitioner.RESCALE, Partitioner.FORWARD_FOR_CONSECUTIVE_HASH)
_FLINK_RUNTIME_EXCEPTION = "org.apache.flink.util.FlinkRuntimeException"


def operator_finished_state(r: OperatorRestore) -> str:
    """`VertexFinishedStateChecker`'s state of one operator. A plain loop, not any(): it runs for every
    operator of every restore a fleet check simulates."""
    st = r.old
    if st is None:
        return ALL_RUNNING
    if st.fully_finished:
        return FULLY_FINISHED
    for s in st.subtask_states.values():
        if s.finished:
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


def _label(r: OperatorRestore) -> str:
    return f"'{(r.old.name if r.old is not None else None) or r.pair.name}'"


def explain(operators: dict[int, OperatorRestore], graph: StreamGraph) -> list[str]:
    """Plain sentences for the report about operators that had finished when the snapshot was taken.

    What real Flink 1.20 and 2.3 did with them (tests/fixtures/checkpoints/*/finished-*): a job vertex
    whose operators all finished is deployed as finished: no state comes back, it never runs or emits
    again, and what it had sent before the snapshot is already in its consumers' state; an operator
    fed only by finished ones gets end-of-input at once and finishes too. Partially finished operators
    restore only their running subtasks' state."""
    finished: list[OperatorRestore] = []
    partial: list[OperatorRestore] = []
    for r in operators.values():  # each operator's state once
        state = operator_finished_state(r)
        if state == FULLY_FINISHED and r.old is not None:
            finished.append(r)
        elif state == PARTIALLY_FINISHED:
            partial.append(r)
    out: list[str] = []
    if finished:
        names = ", ".join(_label(r) for r in finished)
        out.append(f"{names} had finished before this snapshot was taken (a bounded input ran out; FLIP-147): "
                   f"Flink restores {'it' if len(finished) == 1 else 'them'} as finished. Nothing is restored into "
                   f"{'it' if len(finished) == 1 else 'them'}, {'it does' if len(finished) == 1 else 'they do'} "
                   f"not run or emit again, and what {'it' if len(finished) == 1 else 'they'} emitted before the "
                   f"snapshot is already in the downstream operators' restored state.")
        done = {r.node_id for r in finished}
        fed_only = [r for r in operators.values() if r.node_id not in done and graph.in_edges.get(r.node_id)
                    and all(e.source in done for e in graph.in_edges[r.node_id])]
        if fed_only:
            out.append(f"{', '.join(_label(r) for r in fed_only)} {'is' if len(fed_only) == 1 else 'are'} fed only by "
                       f"finished operators: {'it gets' if len(fed_only) == 1 else 'they get'} end-of-input at once "
                       f"and finish{'es' if len(fed_only) == 1 else ''} without processing a record.")
        out.append("A finished operator cannot take a new operator chained to it (Flink 1.20 and 2.x refuse a job "
                   "vertex that mixes finished and running operators); add new operators behind a finished one in "
                   "their own chain (startNewChain or disableChaining).")
    if partial:
        out.append(f"Some subtasks of {', '.join(_label(r) for r in partial)} had finished before the snapshot: "
                   f"only the running subtasks' state is restored, the finished ones start finished.")
    return out

"""`VertexFinishedStateChecker` (FLIP-147): finished operators may only be restored consistently.

Per job vertex, each operator's state is ALL_RUNNING, PARTIALLY_FINISHED or FULLY_FINISHED (an
operator without state counts as ALL_RUNNING). A vertex mixing them fails; a FULLY_FINISHED vertex
needs all its predecessors FULLY_FINISHED; a PARTIALLY_FINISHED one needs fully finished
predecessors over all-to-all edges.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hashing.graph import Partitioner, StreamGraph
from upgrade_gate.flink.assignment.errors import RestoreFailure

if TYPE_CHECKING:
    from upgrade_gate.flink.assignment.state_assignment import OperatorRestore

ALL_RUNNING, PARTIALLY_FINISHED, FULLY_FINISHED = "ALL_RUNNING", "PARTIALLY_FINISHED", "FULLY_FINISHED"
_POINTWISE = (Partitioner.FORWARD, Partitioner.RESCALE, Partitioner.FORWARD_FOR_CONSECUTIVE_HASH)


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
            raise RestoreFailure(f"Can not restore vertex {vertex.name}({vertex.id_hex}) which contain mixed operator "
                                 f"finished state: {sorted(states)}", stage="finished state")
        vertex_state[vertex.vertex.head] = states.pop()
    for restores in per_vertex:
        if not restores:
            continue
        vertex = restores[0].vertex
        state = vertex_state[vertex.vertex.head]
        if state == ALL_RUNNING:
            continue
        members = {r.node_id for r in restores}
        for n in members:
            for e in graph.in_edges[n]:
                if e.source in members:
                    continue
                up = vertex_state.get(head_of.get(e.source, -1), ALL_RUNNING)
                if state == FULLY_FINISHED and up != FULLY_FINISHED:
                    raise RestoreFailure(
                        "Illegal JobGraph modification. Cannot run a program with fully finished vertices predeceased "
                        "with the ones not fully finished. Task vertex " + vertex.name + "(" + vertex.id_hex + ") has "
                        "a predecessor not fully finished", stage="finished state")
                if state == PARTIALLY_FINISHED and e.partitioner not in _POINTWISE and up != FULLY_FINISHED:
                    raise RestoreFailure(
                        "Illegal JobGraph modification. Cannot run a program with partially finished vertices "
                        "predeceased with running or partially finished ones and connected via the ALL_TO_ALL edges. "
                        "Task vertex " + vertex.name + "(" + vertex.id_hex + ") has a all running predecessor",
                        stage="finished state")

"""`VertexFinishedStateChecker.validateOperatorsFinishedState` (FLIP-147),
upgrade_gate/flink/assignment/finished_state.py.

From Flink's class: every operator of a vertex must have the same finished state (an operator without
state is ALL_RUNNING; the set is listed sorted by `VertexFinishedState` ordinal); a FULLY_FINISHED
vertex needs FULLY_FINISHED predecessors; a PARTIALLY_FINISHED vertex needs FULLY_FINISHED predecessors
over ALL_TO_ALL edges and predecessors that are not ALL_RUNNING over POINTWISE edges (an ALL_TO_ALL edge
from a predecessor wins). Failures are `FlinkRuntimeException`s with the texts below.
"""

from __future__ import annotations

import pytest

from hashing.graph import Partitioner
from tests.flink.support import graph, oid, operator, pair, vertex
from upgrade_gate.flink.assignment.errors import RestoreFailure
from upgrade_gate.flink.assignment.finished_state import (
    ALL_RUNNING,
    FULLY_FINISHED,
    PARTIALLY_FINISHED,
    operator_finished_state,
    validate_operators_finished_state,
)
from upgrade_gate.flink.assignment.task_state_assignment import OperatorRestore
from upgrade_gate.flink.metadata.model import FINISHED_SUBTASK, OperatorSubtaskState

RUNNING = "running"


def _state(kind: str | None, op: bytes):
    if kind is None:
        return None
    if kind == FULLY_FINISHED:
        return operator(op, fully_finished=True)
    if kind == PARTIALLY_FINISHED:
        return operator(op, subtasks={0: FINISHED_SUBTASK, 1: OperatorSubtaskState()})
    return operator(op)


def _restores(v, states: dict[int, str | None]) -> list[OperatorRestore]:
    return [OperatorRestore(p, v, old=_state(states[p.node_id], p.generated)) for p in v.operators]


def _two_vertices(up: str | None, down: str | None, *partitioners: Partitioner):
    """Vertex `up` (node 1) feeding vertex `down` (node 2) over the given edges."""
    a, b = vertex(pair(1, oid(1))), vertex(pair(2, oid(2)))
    per_vertex = [_restores(a, {1: up}), _restores(b, {2: down})]
    return per_vertex, graph(edges=[(1, 2, p) for p in partitioners]), b


def test_operator_finished_state() -> None:
    v = vertex(pair(1, oid(1)))
    assert [operator_finished_state(r) for k in (None, RUNNING, PARTIALLY_FINISHED, FULLY_FINISHED)
            for r in _restores(v, {1: k})] == [ALL_RUNNING, ALL_RUNNING, PARTIALLY_FINISHED, FULLY_FINISHED]


def test_a_vertex_mixing_finished_states_fails() -> None:
    v = vertex(pair(1, oid(1), name="src"), pair(2, oid(2), name="map"))
    with pytest.raises(RestoreFailure) as e:
        validate_operators_finished_state([_restores(v, {1: FULLY_FINISHED, 2: PARTIALLY_FINISHED})], graph(
            edges=[(1, 2, Partitioner.FORWARD)]))
    assert e.value.message == (f"Can not restore vertex src -> map({oid(1).hex()}) which contain mixed operator "
                               "finished state: [PARTIALLY_FINISHED, FULLY_FINISHED]")
    assert e.value.java_class == "org.apache.flink.util.FlinkRuntimeException"


def test_an_operator_without_state_in_a_finished_vertex_is_all_running() -> None:
    v = vertex(pair(1, oid(1)), pair(2, oid(2)))
    with pytest.raises(RestoreFailure, match=r"mixed operator finished state: \[ALL_RUNNING, FULLY_FINISHED\]"):
        validate_operators_finished_state([_restores(v, {1: FULLY_FINISHED, 2: None})], graph(
            edges=[(1, 2, Partitioner.FORWARD)]))


def test_a_fully_finished_vertex_needs_fully_finished_predecessors() -> None:
    per_vertex, g, _ = _two_vertices(RUNNING, FULLY_FINISHED, Partitioner.RESCALE)
    with pytest.raises(RestoreFailure) as e:
        validate_operators_finished_state(per_vertex, g)
    assert e.value.message == (
        "Illegal JobGraph modification. Cannot run a program with fully finished vertices predeceased with the ones "
        f"not fully finished. Task vertex op2({oid(2).hex()}) has a predecessor not fully finished")
    per_vertex, g, _ = _two_vertices(FULLY_FINISHED, FULLY_FINISHED, Partitioner.HASH)
    validate_operators_finished_state(per_vertex, g)


@pytest.mark.parametrize(("up", "kind"), [(RUNNING, "all running"), (PARTIALLY_FINISHED, "partially finished")])
def test_a_partially_finished_vertex_needs_fully_finished_all_to_all_predecessors(up: str, kind: str) -> None:
    per_vertex, g, _ = _two_vertices(up, PARTIALLY_FINISHED, Partitioner.HASH)
    with pytest.raises(RestoreFailure) as e:
        validate_operators_finished_state(per_vertex, g)
    assert e.value.message == (
        "Illegal JobGraph modification. Cannot run a program with partially finished vertices predeceased with "
        "running or partially finished ones and connected via the ALL_TO_ALL edges. "
        f"Task vertex op2({oid(2).hex()}) has a {kind} predecessor")


def test_a_partially_finished_vertex_needs_started_pointwise_predecessors() -> None:
    per_vertex, g, _ = _two_vertices(RUNNING, PARTIALLY_FINISHED, Partitioner.RESCALE)
    with pytest.raises(RestoreFailure) as e:
        validate_operators_finished_state(per_vertex, g)
    assert e.value.message == (
        "Illegal JobGraph modification. Cannot run a program with partially finished vertices predeceased with all "
        f"running ones. Task vertex op2({oid(2).hex()}) has a all running predecessor")
    for up in (PARTIALLY_FINISHED, FULLY_FINISHED):
        per_vertex, g, _ = _two_vertices(up, PARTIALLY_FINISHED, Partitioner.RESCALE)
        validate_operators_finished_state(per_vertex, g)


def test_an_all_to_all_edge_from_a_predecessor_wins_over_a_pointwise_one() -> None:
    per_vertex, g, _ = _two_vertices(PARTIALLY_FINISHED, PARTIALLY_FINISHED, Partitioner.RESCALE, Partitioner.HASH)
    with pytest.raises(RestoreFailure, match="connected via the ALL_TO_ALL edges"):
        validate_operators_finished_state(per_vertex, g)


def test_running_vertices_are_not_checked() -> None:
    per_vertex, g, _ = _two_vertices(FULLY_FINISHED, RUNNING, Partitioner.HASH)
    validate_operators_finished_state(per_vertex, g)

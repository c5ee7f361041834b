"""`TaskStateAssignment`: the per-vertex restore record (upgrade_gate/flink/assignment/task_state_assignment.py).

Flink's constructor: `hasNonFinishedState = any(getNumberCollectedStates() > 0)`, `isFullyFinished =
any(isFullyFinished())` and then `checkState(allMatch(isFullyFinished), "JobVertex could not have mixed
finished and unfinished operators")`; `outputOperatorID` is `getOperatorIDs().get(0)` (the chain's
tail), `inputOperatorID` the last one (the head).
"""

from __future__ import annotations

import pytest

from tests.flink.support import oid, operator, pair, vertex
from upgrade_gate.flink.assignment.errors import RestoreFailure
from upgrade_gate.flink.assignment.task_state_assignment import OperatorRestore, TaskStateAssignment


def _task(*states) -> TaskStateAssignment:
    """A chain of len(states) operators, head first; `None` = no state in the savepoint."""
    pairs = [pair(i + 1, oid(i + 1)) for i in range(len(states))]
    v = vertex(*pairs)
    by_node = dict(zip([p.node_id for p in pairs], states, strict=True))
    return TaskStateAssignment(v, [OperatorRestore(p, v, old=by_node[p.node_id]) for p in v.operators])


def test_output_operator_is_the_tail_and_input_operator_the_head() -> None:
    task = _task(None, None, None)
    assert (task.input_operator.node_id, task.output_operator.node_id) == (1, 3)
    assert [r.node_id for r in task.operators] == [3, 2, 1]


def test_a_vertex_with_running_state() -> None:
    task = _task(operator(oid(1)), None)
    assert task.has_non_finished_state and not task.is_fully_finished
    assert task.old_states == [task.input_operator.old]


def test_a_vertex_without_state_has_nothing_to_assign() -> None:
    task = _task(None, None)
    assert not task.has_non_finished_state and not task.is_fully_finished and task.old_states == []


def test_a_fully_finished_vertex() -> None:
    task = _task(operator(oid(1), fully_finished=True), operator(oid(2), fully_finished=True))
    assert task.is_fully_finished and not task.has_non_finished_state


def test_mixed_fully_finished_and_running_operators_are_refused() -> None:
    with pytest.raises(RestoreFailure) as e:
        _task(operator(oid(1), fully_finished=True), operator(oid(2)))
    assert e.value.message == "JobVertex could not have mixed finished and unfinished operators"
    assert e.value.java_class == "java.lang.IllegalStateException"

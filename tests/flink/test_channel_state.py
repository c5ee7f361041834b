"""Unaligned-checkpoint channel state (`StateAssignmentOperation.checkForUnsupportedToplogyChanges`),
upgrade_gate/flink/assignment/channel_state.py.

Input-channel state may only belong to `TaskStateAssignment.inputOperatorID` (the chain's head) and
result-subpartition state only to `outputOperatorID` (the tail); any other operator holding it means a
persisted exchange is now chained, and Flink throws an `IllegalStateException` listing the operator ids
(a Java `List.toString()`).
"""

from __future__ import annotations

import pytest

from tests.flink.support import channel_in, channel_out, oid, operator, pair, vertex
from upgrade_gate.flink.assignment.channel_state import check_channel_state
from upgrade_gate.flink.assignment.errors import RestoreFailure
from upgrade_gate.flink.assignment.task_state_assignment import OperatorRestore, TaskStateAssignment
from upgrade_gate.flink.metadata.model import OperatorSubtaskState


def _chain(head: OperatorSubtaskState | None, tail: OperatorSubtaskState | None) -> TaskStateAssignment:
    v = vertex(pair(1, oid(1)), pair(2, oid(2)))  # head 1 -> tail 2
    subs = {1: head, 2: tail}
    return TaskStateAssignment(v, [OperatorRestore(p, v, old=None if subs[p.node_id] is None else
                                                   operator(p.generated, parallelism=1,
                                                            subtasks={0: subs[p.node_id]}))
                                   for p in v.operators])


def _message(op: bytes) -> str:
    return ("Cannot recover from unaligned checkpoint when topology changes, such that data exchanges with "
            f"persisted data are now chained.\nThe following operators contain channel state: [{op.hex()}]")


def test_input_state_on_the_head_and_output_state_on_the_tail_restore() -> None:
    check_channel_state(_chain(OperatorSubtaskState(input_channel_state=channel_in()),
                               OperatorSubtaskState(result_subpartition_state=channel_out())))


def test_input_state_on_a_chained_operator_fails() -> None:
    with pytest.raises(RestoreFailure) as e:
        check_channel_state(_chain(None, OperatorSubtaskState(input_channel_state=channel_in())))
    assert e.value.message == _message(oid(2))
    assert e.value.java_class == "java.lang.IllegalStateException"


def test_output_state_on_a_chain_head_fails() -> None:
    with pytest.raises(RestoreFailure) as e:
        check_channel_state(_chain(OperatorSubtaskState(result_subpartition_state=channel_out()), None))
    assert e.value.message == _message(oid(1))


def test_a_single_operator_vertex_may_hold_both() -> None:
    v = vertex(pair(1, oid(1)))
    st = operator(oid(1), parallelism=1, subtasks={0: OperatorSubtaskState(input_channel_state=channel_in(),
                                                                          result_subpartition_state=channel_out())})
    check_channel_state(TaskStateAssignment(v, [OperatorRestore(v.operators[0], v, old=st)]))

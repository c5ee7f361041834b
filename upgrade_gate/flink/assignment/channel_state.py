"""Unaligned-checkpoint channel state (`StateAssignmentOperation.checkForUnsupportedToplogyChanges`).

Only the vertex's input operator (`TaskStateAssignment.inputOperatorID`: the chain's head, last in
Flink's list) may hold input-channel state, and only its output operator (`outputOperatorID`: the
tail, first) result-subpartition state; otherwise the topology changed so that a persisted exchange
is now chained, and Flink refuses the restore.
"""

from __future__ import annotations

from upgrade_gate.flink.assignment.errors import RestoreFailure
from upgrade_gate.flink.assignment.task_state_assignment import TaskStateAssignment

__all__ = ["check_channel_state"]


def check_channel_state(task: TaskStateAssignment) -> None:
    """Raise Flink's `IllegalStateException` when an operator other than the expected one has channel state."""
    input_op, output_op = task.input_operator, task.output_operator
    offending = []
    for r in task.operators:
        if r.old is None:
            continue
        subs = r.old.subtask_states.values()
        has_input = any(s.input_channel_state for s in subs)
        has_output = any(s.result_subpartition_state for s in subs)
        if (has_input and r is not input_op) or (has_output and r is not output_op):
            offending.append(r.pair.generated.hex())
    if offending:
        raise RestoreFailure("Cannot recover from unaligned checkpoint when topology changes, such that data "
                             "exchanges with persisted data are now chained.\nThe following operators contain "
                             f"channel state: [{', '.join(offending)}]", stage="channel state")

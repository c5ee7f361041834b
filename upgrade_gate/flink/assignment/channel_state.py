"""Unaligned-checkpoint channel state (`TaskStateAssignment`): only the chain's input operator (head,
last in Flink's list) may hold input-channel state and only its output operator (tail, first) result-
subpartition state; otherwise the topology changed so that a persisted exchange is now chained.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from upgrade_gate.flink.assignment.errors import RestoreFailure

if TYPE_CHECKING:
    from upgrade_gate.flink.assignment.job import ExecutionJobVertex
    from upgrade_gate.flink.assignment.state_assignment import OperatorRestore


def check_channel_state(vertex: ExecutionJobVertex, restores: list[OperatorRestore]) -> None:
    if not restores:
        return
    output_op, input_op = restores[0], restores[-1]
    offending = []
    for r in restores:
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


def channel_state_bytes(r: OperatorRestore) -> int:
    if r.old is None:
        return 0
    return sum(s.channel_state_size for s in r.old.subtask_states.values())

"""`TaskStateAssignment`: the per-job-vertex record of a restore, and the per-operator record inside it.

Flink keeps what one job vertex gets back in `TaskStateAssignment` (the vertex, the old state of
each of its operators keyed by generated id, `hasNonFinishedState`, `isFullyFinished`, the input
and output operators), separate from `StateAssignmentOperation` (which builds and fills it) and
from the checkers that read it. This module is that record, so the matching
(`state_assignment`), the channel-state check (`channel_state`) and FLIP-147's finished-state
check (`finished_state`) all import it and none of them imports another.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from hashing.job_graph import OperatorIDPair
from upgrade_gate.flink.assignment import errors
from upgrade_gate.flink.assignment.job import ExecutionJobVertex
from upgrade_gate.flink.assignment.keyed_state import KeyedPiece
from upgrade_gate.flink.assignment.operator_state_repartitioner import NewSubtaskOperatorState
from upgrade_gate.flink.metadata.model import OperatorState

__all__ = ["MIXED_FINISHED_MSG", "OperatorRestore", "TaskStateAssignment"]

# `TaskStateAssignment`'s constructor: checkState(allMatch(isFullyFinished), <this>)
MIXED_FINISHED_MSG = "JobVertex could not have mixed finished and unfinished operators"
# (keyed, managed operator, raw operator) state, each a list over the new subtasks
Handout = tuple[list[list[KeyedPiece]], list[NewSubtaskOperatorState], list[NewSubtaskOperatorState]]


@dataclass
class OperatorRestore:
    """What one operator of the new job gets back (one entry of Flink's `oldState` map, then its
    per-subtask managed/raw operator and keyed state)."""

    pair: OperatorIDPair
    vertex: ExecutionJobVertex
    matched_by: str = "none"  # generated | alternative | none
    matched_id: bytes | None = None
    old: OperatorState | None = None
    overwritten: OperatorState | None = None  # naive mode: found, then replaced by an empty state
    max_parallelism: int = 0  # the vertex's, after adopting the savepoint's
    key_groups: list[tuple[int, int]] = field(default_factory=list)
    coordinator_restored: bool | None = None  # None: no coordinator state in the savepoint
    finished_on_restore: bool = False
    # what each new subtask gets (`keyed`, `managed_operator`, `raw_operator`), worked out on first read
    _handout: Callable[[], Handout] | None = field(default=None, repr=False, compare=False)
    _handed: Handout | None = field(default=None, repr=False, compare=False)

    @property
    def node_id(self) -> int:
        return self.pair.node_id

    def hand_out_later(self, compute: Callable[[], Handout]) -> None:
        """Set how the old state is split over the new subtasks, computed only when someone reads it.

        The split cannot fail (Flink's failures are all decided before it: `state_assignment`), and only the
        per-subtask view (`check --rescale`, `operators[].rescale`) reads it: a fleet check of 10,000 jobs
        skips what was 17 % of its restore simulation (docs/performance.md, "Spark jobs")."""
        self._handout, self._handed = compute, None

    def _split(self) -> Handout:
        if self._handed is None:
            self._handed = self._handout() if self._handout is not None else ([], [], [])
            self._handout = None
        return self._handed

    # per new subtask; [] when the old operator has none of that kind (nothing to hand out)
    @property
    def keyed(self) -> list[list[KeyedPiece]]:
        return self._split()[0]

    @property
    def managed_operator(self) -> list[NewSubtaskOperatorState]:
        return self._split()[1]

    @property
    def raw_operator(self) -> list[NewSubtaskOperatorState]:
        return self._split()[2]


@dataclass
class TaskStateAssignment:
    """One job vertex's restore: its operators in Flink's order (tail first, head last).

    Built after matching; like Flink's constructor it computes `hasNonFinishedState` and
    `isFullyFinished` once and refuses a vertex that mixes fully finished operators with
    unfinished ones (`checkState`, an `IllegalStateException`)."""

    vertex: ExecutionJobVertex
    operators: list[OperatorRestore]
    # the savepoint states matched to this vertex's operators (Flink's non-empty `oldState` entries)
    old_states: list[OperatorState] = field(init=False)
    # `hasNonFinishedState`: a matched operator has subtask states and is not fully finished
    has_non_finished_state: bool = field(init=False)
    # `isFullyFinished`: a matched operator is a `FullyFinishedOperatorState`
    is_fully_finished: bool = field(init=False)

    def __post_init__(self) -> None:
        old = [r.old for r in self.operators if r.old is not None]
        self.old_states = old
        self.has_non_finished_state = any(s.subtask_states and not s.fully_finished for s in old)
        self.is_fully_finished = any(s.fully_finished for s in old)
        if self.is_fully_finished and not all(s.fully_finished for s in old):
            raise errors.RestoreFailure(MIXED_FINISHED_MSG, stage="state assignment")

    @property
    def output_operator(self) -> OperatorRestore | None:
        """`outputOperatorID`: the chain's tail, index 0 of `getOperatorIDs()`."""
        return self.operators[0] if self.operators else None

    @property
    def input_operator(self) -> OperatorRestore | None:
        """`inputOperatorID`: the chain's head, the last of `getOperatorIDs()`."""
        return self.operators[-1] if self.operators else None

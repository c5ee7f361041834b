"""`Checkpoints.loadAndValidateCheckpoint`: which savepoint operators the new job can take at all.

Every id of every `OperatorIDPair` (generated and alternatives) maps to its job vertex. Savepoint
state under an id no vertex knows fails the restore, unless it is empty (skipped; never a
failure, even without `--allowNonRestoredState`) or `allowNonRestoredState` is set (dropped).
Matched state whose max parallelism differs from the vertex's fails unless the vertex may adopt it.

A checkpoint recovered from HA metadata (the Kubernetes operator's `last-state` upgrade) skips that
validation: `CheckpointCoordinator.restoreInitialCheckpointIfPresent` hands it to `StateAssignmentOperation`
with `allowNonRestoredState` false, whose `checkStateMappingCompleteness` refuses every operator the new job
lacks, empty or not (`from_ha_metadata`).
"""

from __future__ import annotations

from dataclasses import dataclass

from hashing.frozen import fast_init
from upgrade_gate.flink.assignment import errors
from upgrade_gate.flink.assignment.job import ExecutionJobVertex
from upgrade_gate.flink.metadata.model import CheckpointMetadata, OperatorState

__all__ = ["LoadResult", "has_state", "load_and_validate"]


def has_state(op: OperatorState) -> bool:
    """Flink: coordinator state present, or any subtask state with `hasState()`; worked out when the
    `OperatorState` is built (the gate asks it of every savepoint operator of every job in a fleet check)."""
    return op.has_state


@fast_init
@dataclass(frozen=True)
class LoadResult:
    kept: dict[bytes, OperatorState]  # savepoint operator id -> state, in file order
    skipped_empty: tuple[OperatorState, ...]  # unmatched, no state: ignored by Flink
    dropped: tuple[OperatorState, ...]  # unmatched with state, dropped by allowNonRestoredState: lost


def load_and_validate(metadata: CheckpointMetadata, vertices: list[ExecutionJobVertex], pointer: str,
                      allow_non_restored_state: bool, from_ha_metadata: bool = False) -> LoadResult:
    vertex_of: dict[bytes, ExecutionJobVertex] = {}
    for v in vertices:
        for pair in v.operators:
            vertex_of[pair.generated] = v
            for alt in pair.alternatives:
                vertex_of[alt] = v
    kept: dict[bytes, OperatorState] = {}
    skipped: list[OperatorState] = []
    dropped: list[OperatorState] = []
    if from_ha_metadata and not allow_non_restored_state:  # checkStateMappingCompleteness runs before anything else
        missing = next((op for op in metadata.operator_states if op.operator_id not in vertex_of), None)
        if missing is not None:
            raise errors.no_operator_for_state(missing.operator_id_hex)
    for op in metadata.operator_states:
        v = vertex_of.get(op.operator_id)
        if v is not None:
            # a recovered checkpoint's max parallelism is checked by the assignment (`max_parallelism_changed`)
            if (from_ha_metadata or v.max_parallelism == op.max_parallelism
                    or v.can_rescale_max_parallelism(op.max_parallelism)):
                kept[op.operator_id] = op
            else:
                raise errors.max_parallelism_mismatch(op.operator_id_hex, op.max_parallelism, v.max_parallelism)
        elif allow_non_restored_state:
            (dropped if has_state(op) else skipped).append(op)
        elif has_state(op):
            raise errors.non_restored_state(pointer, op.operator_id_hex)
        else:
            skipped.append(op)
    return LoadResult(kept, tuple(skipped), tuple(dropped))

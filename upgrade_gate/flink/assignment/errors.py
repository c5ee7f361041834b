"""Restore failures with Flink's exact message texts (`StateAssignmentOperation`, `Checkpoints`; checked
against real runs).

A `RestoreFailure` is not bad input: it is the verdict RESTORE_FAILS, and its `message` is what
Flink prints (the innermost cause of the job's failure), so users can search for it.
"""

from __future__ import annotations

__all__ = ["RestoreFailure", "max_parallelism_changed", "max_parallelism_mismatch", "no_operator_for_state",
           "non_restored_state", "parallelism_above_configured_max", "parallelism_above_restored_max",
           "unreadable_version"]


class RestoreFailure(Exception):
    """Flink would refuse this restore; `message` is Flink's text, `java_class` the exception it throws."""

    def __init__(self, message: str, java_class: str = "java.lang.IllegalStateException", stage: str = "",
                 max_parallelism: tuple[int, int] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.java_class = java_class
        self.stage = stage
        # (the savepoint's, the new job's) when the max parallelism changed: what `repair --max-parallelism` needs
        self.max_parallelism = max_parallelism


def non_restored_state(pointer: str, operator_id: str) -> RestoreFailure:
    return RestoreFailure(
        f"Failed to rollback to checkpoint/savepoint {pointer}. Cannot map checkpoint/savepoint state for operator "
        f"{operator_id} to the new program, because the operator is not available in the new program. If you want "
        f"to allow to skip this, you can set the --allowNonRestoredState option on the CLI.",
        stage="load validation")


def no_operator_for_state(operator_id: str) -> RestoreFailure:
    """`StateAssignmentOperation.checkStateMappingCompleteness`: a checkpoint handed over through HA metadata is
    not filtered by `Checkpoints.loadAndValidateCheckpoint`, so every operator it holds, with state or without,
    must exist in the new job (docs/guide.md, "Kubernetes upgrade modes")."""
    return RestoreFailure(f"There is no operator for the state {operator_id}", stage="state assignment")


def max_parallelism_mismatch(operator_id: str, old: int, new: int) -> RestoreFailure:
    # The first %s is CheckpointMetadata.toString(), the literal "Checkpoint Metadata", not the path.
    return RestoreFailure(
        f"Failed to rollback to checkpoint/savepoint Checkpoint Metadata. Max parallelism mismatch between "
        f"checkpoint/savepoint state and new program. Cannot map operator {operator_id} with max parallelism {old} "
        f"to new program with max parallelism {new}. This indicates that the program has been changed in a "
        f"non-compatible way after the checkpoint/savepoint.", stage="load validation", max_parallelism=(old, new))


def parallelism_above_configured_max(vertex_name: str, parallelism: int, max_parallelism: int) -> RestoreFailure:
    """`ExecutionJobVertex`'s constructor: the scheduler refuses the job while building the execution
    graph, before any state is read (so before every restore-time check)."""
    return RestoreFailure(
        f"Vertex {vertex_name}'s parallelism ({parallelism}) is higher than the max parallelism ({max_parallelism}). "
        f"Please lower the parallelism or increase the max parallelism.", "org.apache.flink.runtime.JobException",
        stage="execution graph")


def parallelism_above_restored_max(job_vertex_id: str, max_parallelism: int, parallelism: int) -> RestoreFailure:
    return RestoreFailure(
        f"The state for task {job_vertex_id} can not be restored. The maximum parallelism ({max_parallelism}) of the "
        f"restored state is lower than the configured parallelism ({parallelism}). Please reduce the parallelism of "
        f"the task to be lower or equal to the maximum parallelism.", stage="state assignment")


def max_parallelism_changed(vertex: str, old: int, new: int) -> RestoreFailure:
    return RestoreFailure(
        f"The maximum parallelism ({old}) with which the latest checkpoint of the execution job vertex {vertex} has "
        f"been taken and the current maximum parallelism ({new}) changed. This is currently not supported.",
        stage="state assignment", max_parallelism=(old, new))


def unreadable_version(version: int) -> RestoreFailure:
    return RestoreFailure(f"Unrecognized checkpoint version number: {version}",
                          "java.lang.IllegalArgumentException", stage="metadata load")

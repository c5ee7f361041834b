"""Where the new job's state comes from, by the Flink Kubernetes Operator's `spec.job.upgradeMode`.

The same graph change restores differently by mode, so a spec that passes in one mode can crash-loop in another
(docs/guide.md, "Kubernetes upgrade modes"):

* `savepoint`: the operator suspends the job with a savepoint and submits the new job from it, with the spec's
  `allowNonRestoredState` (Flink's `Checkpoints.loadAndValidateCheckpoint` path): what `check` simulates by default.
* `last-state`: the operator hands the latest checkpoint over through HA metadata. The new JobMaster recovers it
  from its checkpoint store and calls `CheckpointCoordinator.restoreInitialCheckpointIfPresent`, which passes
  `allowNonRestoredState = false` to `StateAssignmentOperation` whatever the spec says (FLINK-39513; every release
  in `hashing.versions.RELEASES` does, tests/flink/test_ha_restore_bytecode.py reads it from Flink's bytecode), and
  `checkStateMappingCompleteness` then refuses every operator of the checkpoint the new job lacks, even one with
  no state. The operator does not use HA metadata across a Flink version change, and a `FlinkSessionJob` is
  restored from the latest retained checkpoint as from a savepoint: those take the savepoint path, and so does a
  `FlinkBlueGreenDeployment`, whose Green deployment starts from a savepoint of Blue.
* `stateless`, the operator's default when the spec names no mode: the operator cancels the job and starts the new
  one from empty state: every state is lost.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["UPGRADE_MODES", "RestorePath", "restore_path"]

UPGRADE_MODES = ("savepoint", "last-state", "stateless")


class RestorePath(StrEnum):
    """How the new job gets the snapshot `check` reads."""

    SAVEPOINT = "savepoint"  # as `flink run -s`: loadAndValidateCheckpoint, allowNonRestoredState honoured
    HA_METADATA = "ha-metadata"  # recovered checkpoint: allowNonRestoredState ignored, every operator must map
    EMPTY = "empty"  # no restore at all

    @property
    def explanation(self) -> str:
        return _EXPLANATION[self]


_EXPLANATION = {
    RestorePath.SAVEPOINT: "",
    RestorePath.HA_METADATA: (
        "upgradeMode last-state: the new job recovers the latest checkpoint through HA metadata, where Flink ignores "
        "allowNonRestoredState (CheckpointCoordinator.restoreInitialCheckpointIfPresent, FLINK-39513) and refuses "
        "every operator of the checkpoint the new job lacks, even a stateless one; the job fails at every start and "
        "the operator restarts it: check the latest checkpoint (pass it with --savepoint) and keep every operator "
        "id, or switch to upgradeMode savepoint for this change"),
    RestorePath.EMPTY: (
        "upgradeMode stateless (the operator's default when the spec names none): the operator cancels the job and "
        "starts the new one from empty state; nothing in the savepoint is restored (set upgradeMode savepoint or "
        "last-state to keep it)"),
}


def restore_path(upgrade_mode: str | None, *, session_job: bool = False, flink_version_changed: bool = False,
                 blue_green: bool = False) -> RestorePath:
    """The operator's upgrade decision for a healthy running job (its "Upgrade Decision" table). An unset mode is
    the operator's default (`JobSpec.upgradeMode = STATELESS`): the job restarts from empty state."""
    if upgrade_mode in (None, "", "stateless"):
        return RestorePath.EMPTY
    if upgrade_mode == "last-state" and not (session_job or flink_version_changed or blue_green):
        return RestorePath.HA_METADATA
    return RestorePath.SAVEPOINT

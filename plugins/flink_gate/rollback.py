"""Upgrade one job with a way back: if the new job does not restore, restart the old one.

The gate simulates the restore from operator ids, max parallelism and key groups; it cannot see
everything (a state type whose serializer changed, code that throws while restoring). Design §9:
"an upgrade never stops the old job without a completed savepoint, and it rolls back when the new
job does not restore". So after `steps.perform_upgrade` (stop-with-savepoint, re-gate, run the
new jar from that savepoint):

* verification waits until every subtask of the new job is RUNNING (a task restores its state
  while INITIALIZING), and that Flink restored it from our savepoint;
* if starting or verifying the new job fails after the old job was stopped, the new job is
  cancelled (if it exists) and the old version is resubmitted from the *same* upgrade savepoint
  (`rollback_jar` / `rollback_jar_id`, `rollback_main_class`), then verified the same way;
* every step is recorded in the job's state file, so a retried task neither rolls back twice
  nor starts a second copy of either job. The savepoint is never modified or deleted.

The run still fails (`UpgradeRolledBack`): the old version is running again, the upgrade is not done.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from flink_gate import gate
from flink_gate.hooks.flink_rest import FlinkRestError, FlinkRestHook
from flink_gate.steps import perform_upgrade, verify_upgrade

ROLLBACK_KEYS = ("rollback_jar", "rollback_jar_id", "rollback_main_class")


class UpgradeRolledBack(RuntimeError):
    """The new job did not restore; the old version was restarted from the upgrade savepoint."""


class RollbackFailed(RuntimeError):
    """The new job did not restore and the old one could not be restarted: a person must act."""


def _hook(p: dict[str, Any]) -> FlinkRestHook:
    return FlinkRestHook(p.get("flink_conn_id") or "flink_default")


def _read(state_file: Path) -> dict[str, Any]:
    return json.loads(state_file.read_text()) if state_file.exists() else {}


def default_target_dir(p: dict[str, Any], savepoint_root: str) -> dict[str, Any]:
    """Stop-with-savepoint into `<savepoint root>/<job>/` unless told otherwise, so the upgrade
    savepoint is where the gate's "latest" looks for the job's next check (and a rollback)."""
    if p.get("savepoint_target_dir") or not savepoint_root:
        return p
    return {**p, "savepoint_target_dir": f"{savepoint_root.rstrip('/')}/{p['job_name']}"}


def verify_restored(p: dict[str, Any], job_id: str, savepoint: str) -> dict[str, Any]:
    """Every subtask RUNNING (state restored) and restored from `savepoint`, per Flink."""
    _hook(p).wait_until_restored(job_id, timeout=float(p.get("timeout_s", 600)))
    return verify_upgrade(p, {"new_job_id": job_id, "savepoint": savepoint})


def upgrade_with_rollback(p: dict[str, Any], state_file: Path, graph_path: str) -> dict[str, Any]:
    """Upgrade and verify; on failure after the old job stopped, roll back and raise."""
    try:
        upgraded = perform_upgrade(p, state_file, graph_path)
        verified = verify_restored(p, upgraded["new_job_id"], upgraded["savepoint"])
        return {**verified, "savepoint": upgraded["savepoint"], "old_job_id": upgraded.get("old_job_id")}
    except Exception as exc:
        state = _read(state_file)
        if "savepoint" not in state:
            raise  # the old job was never stopped: nothing to roll back
        rolled = roll_back(p, state_file, reason=f"{type(exc).__name__}: {exc}")
        raise UpgradeRolledBack(
            f"{p['job_name']}: the new version did not restore ({str(exc)[:800]}); rolled back: the old "
            f"version runs again as job {rolled['rollback_job_id']}, restored from {state['savepoint']}") from exc


def roll_back(p: dict[str, Any], state_file: Path, reason: str) -> dict[str, Any]:
    """Cancel the new job (if any) and resubmit the old version from the upgrade savepoint."""
    state = _read(state_file)
    hook = _hook(p)
    savepoint = state["savepoint"]
    state.setdefault("rollback_reason", reason[:2000])
    if "rollback_job_id" not in state:
        if state.get("new_job_id"):
            try:
                hook.cancel(state["new_job_id"])
            except FlinkRestError as exc:
                raise RollbackFailed(f"could not cancel the new job {state['new_job_id']} before rolling back: "
                                     f"{exc}; the old version was NOT restarted (savepoint {savepoint})") from exc
        jar_id = p.get("rollback_jar_id") or state.get("rollback_jar_id")
        if not jar_id:
            if not p.get("rollback_jar"):
                raise RollbackFailed(f"{p['job_name']}: the new job did not restore and no rollback_jar was given; "
                                     f"restart the old version from {savepoint} by hand ({reason[:500]})")
            jar_id = hook.upload_jar(str(p["rollback_jar"]).removeprefix("file://"))
            state["rollback_jar_id"] = jar_id
            gate.write_json(state_file, state)
        try:
            state["rollback_job_id"] = hook.run_jar(jar_id, entry_class=p.get("rollback_main_class") or None,
                                                    savepoint_path=savepoint, allow_non_restored_state=False,
                                                    parallelism=p.get("rollback_parallelism") or None)
        except FlinkRestError as exc:
            raise RollbackFailed(f"{p['job_name']}: restarting the old version from {savepoint} failed: {exc}") from exc
        gate.write_json(state_file, state)
    try:
        state["rollback_verified"] = verify_restored(p, state["rollback_job_id"], savepoint)
    except (FlinkRestError, RuntimeError) as exc:
        raise RollbackFailed(f"{p['job_name']}: the rolled-back job {state['rollback_job_id']} did not restore "
                             f"from {savepoint}: {exc}") from exc
    gate.write_json(state_file, state)
    return state

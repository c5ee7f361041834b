"""Upgrade one job with a way back: if the new job does not restore, restart the old one.

The gate simulates the restore from operator ids, max parallelism and key groups; it cannot see
everything (a state type whose serializer changed, code that throws while restoring). The
promise: an upgrade never stops the old job without a completed savepoint, and it rolls back when
the new job does not restore. So after `upgrade_machine.perform_upgrade` (stop-with-savepoint, re-gate, run
the new jar from that savepoint; see the state machine in `steps.py`):

* verification waits until every subtask of the new job is RUNNING (a task restores its state
  while INITIALIZING), and that Flink restored it from our savepoint;
* on a *definite* failure after the old job was stopped (the new job failed, the re-gate refused
  the savepoint, Flink refused the jar), the new job is cancelled (until Flink says it ended)
  and the old version is resubmitted from the *same* upgrade savepoint (`rollback_jar` /
  `rollback_jar_id`, `rollback_main_class`) under a job id recorded before the submission,
  then verified the same way;
* an *unknown* outcome that reconciliation could not settle (the cluster unreachable for longer
  than the hook's retries) changes nothing: the task fails and its retry resumes from the record.

Every step is recorded in the job's upgrade record (object store, conditional writes) under the
job's lease, so a retried task (on any worker) neither rolls back twice nor starts a second copy
of either job. The savepoint is never modified or deleted.

The run still fails after a rollback (`UpgradeRolledBack`): the old version runs again, verified,
and the upgrade is not done.
"""

from __future__ import annotations

from typing import Any

from flink_gate import upgrade_records
from flink_gate.hooks.flink_rest import TERMINAL_JOB_STATES, FlinkRestError, FlinkRestUnknown, new_flink_id
from flink_gate.upgrade_machine import (
    ACTIVE,
    GateRefused,
    NeedsOperator,
    UpgradeNotStarted,
    WaitFor,
    holder_of,
    perform_upgrade,
    rest_hook,
    restore_point,
    start_job,
    stop_and_find_savepoint,
    verify_upgrade,
)
from flink_gate.upgrade_records import TERMINAL_STATES, LeaseLost, LeaseSlow, StoreUnavailable, UpgradeRecord
from upgrade_gate.gate.flink_config import parse_settings

ROLLBACK_KEYS = ("rollback_jar", "rollback_jar_id", "rollback_main_class")
PLAN_KEYS = ("jar", "main_class", "flink_jar_id", "parallelism", "flink_settings", "allow_non_restored_state",
             "savepoint_target_dir", "timeout_s", "rollback_parallelism", "repair_savepoint", *ROLLBACK_KEYS)


class UpgradeRolledBack(RuntimeError):
    """The new job did not restore; the old version was restarted from the upgrade savepoint."""


class RollbackFailed(NeedsOperator):
    """The new job did not restore and the old one could not be restarted: a person must act."""


def default_target_dir(p: dict[str, Any], savepoint_root: str) -> dict[str, Any]:
    """Stop-with-savepoint into `<savepoint root>/<job>/` unless told otherwise, so the upgrade
    savepoint is where the gate's "latest" looks for the job's next check (and a rollback)."""
    if p.get("savepoint_target_dir") or not savepoint_root:
        return p
    return {**p, "savepoint_target_dir": f"{savepoint_root.rstrip('/')}/{p['job_name']}"}


def verify_restored(p: dict[str, Any], job_id: str, savepoint: str) -> dict[str, Any]:
    """Every subtask RUNNING (state restored) and restored from `savepoint`, per Flink."""
    return verify_upgrade(p, {"new_job_id": job_id, "savepoint": savepoint})


class UpgradeInterrupted(RuntimeError):
    """The upgrade could not go on now (the cluster or the store did not answer, the lease was lost); the
    message says, in words, where the job stands, and the task's retry resumes from the record."""


def run_upgrade(p: dict[str, Any], graph_path: str) -> dict[str, Any]:
    """The whole upgrade of one job under its lease: begin (or resume) the record, upgrade, verify,
    roll back on a definite failure. Returns the verified outcome; raises otherwise.

    Whatever interrupts it (an unanswered cluster, an unreachable object store, a lost lease) is raised as
    `UpgradeInterrupted`, whose message says where the job stands ("acme is stopped; savepoint … exists; a
    retry resumes"), never a bare timeout."""
    holder = holder_of(p)
    known: dict[str, Any] = {}
    try:
        with upgrade_records.exclusive(p, holder) as (record, lease):
            begin(p, record, lease, holder)
            known = record.doc
            try:
                return upgrade_with_rollback(p, record, graph_path, lease)
            finally:
                known = record.doc
    except (UpgradeRolledBack, NeedsOperator, UpgradeNotStarted, GateRefused, upgrade_records.LeaseHeld, WaitFor):
        raise  # WaitFor: a deferrable step waits; the lease is kept (not final) and the record says where it is
    except (LeaseLost, upgrade_records.Conflict) as exc:
        # a lost fencing write, or a record someone else wrote since we read it: another run took the job over
        raise UpgradeInterrupted(f"{p['job_name']}: when this run last looked, {where_it_stands(known)}; then "
                                 f"another run took the job over ({type(exc).__name__}: {exc}). This run sent "
                                 "nothing more to the cluster; the run holding the lease settles the job") from exc
    except Exception as exc:
        raise UpgradeInterrupted(f"{p['job_name']}: {where_it_stands(known)}; the upgrade was interrupted "
                                 f"({type(exc).__name__}: {str(exc)[:600]}); a retry resumes") from exc


def where_it_stands(doc: dict[str, Any]) -> str:
    """The job's state, in words, from the last record this run saw (the cluster may have moved on since)."""
    state, old, sp = doc.get("state"), doc.get("old_job_id"), doc.get("savepoint")
    if not doc or state in (None, "planned", "not-started"):
        return "the running job was not touched"
    if state == "stopping":
        return (f"job {old} may be stopping with a savepoint (trigger {doc.get('trigger')}); until a retry finds "
                "out, it is either still running or stopped with that savepoint")
    if state == "stopped":
        return f"job {old} is stopped; savepoint {sp} exists; the new version was not started yet"
    if state == "starting":
        return (f"job {old} is stopped; savepoint {sp} exists; the new version may be starting as job "
                f"{doc.get('new_job_id')}")
    if state == "rolling-back":
        return (f"job {old} is stopped; savepoint {sp} exists; the old version may be restarting as job "
                f"{doc.get('rollback_job_id')}")
    if state == "running-verified":
        return f"the new version runs as job {doc.get('new_job_id')}, restored from {restore_point(doc)}"
    if state == "rolled-back-verified":
        return f"the old version runs again as job {doc.get('rollback_job_id')}, restored from {sp}"
    return f"the upgrade record says {state}: {doc.get('outcome', '')[:300]}"


def begin(p: dict[str, Any], record: UpgradeRecord, lease: Any, holder: str) -> None:
    """Make the job's record this run's: resume our own, or settle an abandoned one, then plan.

    An abandoned record (another run's, not final: its lease expired and we took it over) is first fenced
    (a conditional write naming us: the previous holder's later record writes lose), then reconciled with
    the cluster and brought to a final state with *its* plan (see `settle`). The ids that holder recorded
    (its trigger, its new and rollback job ids) are kept as `stale_ids`: a request it sent before it was
    paused may still reach the cluster, and a job so started is a stale copy any later run cancels."""
    doc = record.doc
    if doc and doc.get("run") == holder:
        return  # an Airflow retry of this run: resume from the record (final states are replayed)
    stale = list(doc.get("stale_ids") or []) if doc else []
    if doc and doc.get("state") not in TERMINAL_STATES:
        stale += [doc[k] for k in ("new_job_id", "rollback_job_id") if doc.get(k)]
        record.save(taken_over_by=holder, stale_ids=sorted(set(stale)))
        settle(p, record, lease)
    stale = [j for j in stale if j != live_job(record)]  # a copy the settling verified is the job, not stale
    cancelled = cancel_stale_copies(p, record, stale, lease)
    previous = {k: record.get(k) for k in ("run", "state", "savepoint", "new_job_id", "rollback_job_id")
                if record.get(k) is not None}
    record.doc = {"previous": previous} if previous else {}
    if stale:
        record.doc["stale_ids"] = sorted(set(stale))
    if cancelled:
        record.doc["stale_cancelled"] = cancelled  # the report of this run says which copy it stopped
    record.save(state="planned", run=holder, plan={k: p.get(k) for k in PLAN_KEYS if p.get(k) is not None})


def live_job(record: UpgradeRecord) -> str | None:
    """The job id the record says is the job now: never a stale copy, whatever list it is on."""
    if record.state == "running-verified":
        return record.get("new_job_id")
    if record.state == "rolled-back-verified":
        return record.get("rollback_job_id")
    if record.state in ("planned", "stopping", "not-started"):
        return record.get("old_job_id")
    return None


def cancel_stale_copies(p: dict[str, Any], record: UpgradeRecord, stale: list[str], lease: Any = None,
                        keep: tuple[str, ...] = ()) -> list[str]:
    """Cancel every active job whose id a holder that lost its lease recorded (`stale_ids`), except the
    verified copy (`keep`, and the one the record says runs). Such a job was started by a request that
    reached the cluster after its sender lost the lease: it restored an older savepoint and is a second copy.
    Returns the ids cancelled."""
    if not stale:
        return []
    hook = rest_hook(p)
    current = {live_job(record), *keep}
    cancelled = []
    for jid in stale:
        if jid in current:
            continue
        job = hook.job_or_none(jid)
        if job is not None and job.get("state") in ACTIVE:
            if lease is not None:
                lease.fence()
            hook.cancel(jid, wait=float(p.get("timeout_s", 600)))
            cancelled.append(jid)
    if cancelled:
        record.save(stale_cancelled=sorted(set(record.get("stale_cancelled") or []) | set(cancelled)))
    return cancelled


def settle(p: dict[str, Any], record: UpgradeRecord, lease: Any) -> None:
    """Bring another run's unfinished upgrade to a final state, from the cluster's truth.

    planned: nothing was sent. stopping: the stop is reconciled by its trigger id (never sent ->
    not-started). Afterwards: the new job, if it runs restored from the savepoint, is verified;
    otherwise the old version is rolled back with the abandoned run's plan."""
    # settling and rolling back wait in the task (rare paths): only the forward upgrade's waits are deferred
    q = {**p, **(record.get("plan") or {}), "defer_waits": False}
    hook = rest_hook(q)
    if record.state == "needs-operator":
        raise NeedsOperator(f"{record.job_name}: the previous upgrade ({record.get('run')}) needs an operator: "
                            f"{record.get('outcome')}. Resolve it, then delete {record.where}")
    if record.state == "planned":
        record.save(state="not-started", outcome=f"abandoned by {record.get('run')} before the stop")
        return
    if record.state == "stopping":
        try:
            record.save(state="stopped", savepoint=stop_and_find_savepoint(hook, q, record, lease.fence,
                                                                                 post=False))
        except UpgradeNotStarted as exc:
            record.save(state="not-started", outcome=str(exc))
            return
    if record.state in ("stopped", "starting") and record.get("new_job_id"):
        job = hook.job_or_none(record["new_job_id"])
        if job is not None and job.get("state") in ("CREATED", "INITIALIZING", "RUNNING"):  # started: verify it
            try:
                verified = verify_restored(q, record["new_job_id"], restore_point(record))
            except (FlinkRestError, RuntimeError):
                verified = None  # did not restore: roll back below
            if verified is not None:
                record.save(state="running-verified", verified=verified, outcome="finished by a later run")
                return
    roll_back(q, record, reason=f"abandoned by {record.get('run')} in state {record.state}", lease=lease)


def upgrade_with_rollback(p: dict[str, Any], record: UpgradeRecord, graph_path: str,
                          lease: Any = None) -> dict[str, Any]:
    """Upgrade and verify; on a definite failure after the old job stopped, roll back and raise."""
    if record.state == "running-verified":
        return _result(record)
    if record.state == "rolled-back-verified":
        raise _rolled_back(p, record)
    if record.state == "not-started":
        raise UpgradeNotStarted(f"{p['job_name']}: {record.get('outcome')}")
    if record.state == "needs-operator":
        raise NeedsOperator(f"{p['job_name']}: {record.get('outcome')}")
    if record.state == "rolling-back":
        roll_back(p, record, reason=record.get("rollback_reason", ""), lease=lease)
        raise _rolled_back(p, record)
    try:
        upgraded = perform_upgrade(p, record, graph_path, lease)
        verified = verify_restored(p, upgraded["new_job_id"], restore_point(upgraded))
        old = rest_hook(p).job_or_none(record["old_job_id"])
        if old is not None and old.get("state") not in TERMINAL_JOB_STATES:
            raise NeedsOperator(f"{p['job_name']}: the new job runs but the old job {record['old_job_id']} is "
                                f"{old.get('state')}: two copies; cancel one")
        # a request of a holder that lost its lease may have landed meanwhile: one copy, ours
        cancel_stale_copies(p, record, list(record.get("stale_ids") or []), lease, keep=(upgraded["new_job_id"],))
        record.save(state="running-verified", verified=verified)
        return _result(record)
    except UpgradeNotStarted as exc:
        record.save(state="not-started", outcome=str(exc)[:2000])
        raise
    except NeedsOperator as exc:
        record.save(state="needs-operator", outcome=str(exc)[:2000])
        raise
    except (LeaseLost, LeaseSlow, StoreUnavailable, FlinkRestUnknown, WaitFor):
        # a deferred wait; or nothing is decided on an unknown outcome or an unreachable store: a retry resumes
        raise
    except Exception as exc:
        if record.state not in ("stopped", "starting"):
            raise  # the old job was never stopped: nothing to roll back
        if isinstance(exc, GateRefused) or not record.get("new_job_id") or record.state == "stopped":
            reason = f"{type(exc).__name__}: {exc}"
        else:
            reason = f"the new version did not restore ({type(exc).__name__}: {str(exc)[:800]})"
        roll_back(p, record, reason=reason, lease=lease)
        raise _rolled_back(p, record) from exc


def _result(record: UpgradeRecord) -> dict[str, Any]:
    return {**record["verified"], "savepoint": record["savepoint"], "start_from": restore_point(record),
            "old_job_id": record.get("old_job_id"), "new_job_id": record.get("new_job_id"), "record": record.where}


def _rolled_back(p: dict[str, Any], record: UpgradeRecord) -> UpgradeRolledBack:
    return UpgradeRolledBack(
        f"{p['job_name']}: {record.get('rollback_reason', 'the upgrade failed')}; rolled back: the old version "
        f"runs again as job {record['rollback_job_id']}, restored from {record['savepoint']} (verified)")


def rollback_configuration(p: dict[str, Any], record: UpgradeRecord) -> dict[str, str] | None:
    """The old version comes back under the name Flink ran it with (`flink_job_name`, read from the cluster before
    the stop) when the run names its jobs by `-D pipeline.name` (`flink_settings`): those settings are the *new*
    version's and are not reused, so without this the old version would restart under its main class's default
    name and the next run, looking for a RUNNING job of the run's name, would not find it. Whichever of
    `pipeline.name` and the job's own `execute(name)` Flink lets win, the name is the one the old job had. Sent only
    then: `flinkConfiguration` of a jar run is Flink 1.17+ (`JarRequestBody`), and such a run already used it."""
    named = any(k == "pipeline.name" for k, _ in parse_settings(p.get("flink_settings") or ()))
    name = record.get("flink_job_name")
    return {"pipeline.name": str(name)} if named and name else None


def roll_back(p: dict[str, Any], record: UpgradeRecord, reason: str, lease: Any = None) -> dict[str, Any]:
    """Cancel the new job (if any, until Flink says it ended) and resubmit the old version from the
    upgrade savepoint under a pre-recorded job id; verify it. `rolled-back-verified` or `RollbackFailed`."""
    p = {**p, "defer_waits": False}  # a rollback waits in the task: it runs rarely, and must not stop half-way
    hook = rest_hook(p)
    check = lease.fence if lease is not None else None  # the fencing step before every acting call
    savepoint = record["savepoint"]
    if record.state != "rolling-back":
        record.save(state="rolling-back", rollback_reason=reason[:2000],
                    rollback_job_id=record.get("rollback_job_id") or new_flink_id())
    try:
        new = record.get("new_job_id")
        if new and hook.job_or_none(new) is not None:
            if check:
                check()
            state = hook.cancel(new, wait=float(p.get("timeout_s", 600)))
            if state not in TERMINAL_JOB_STATES:
                raise RollbackFailed(f"{p['job_name']}: the new job {new} is still {state} after cancelling; the old "
                                     f"version was NOT restarted (savepoint {savepoint})")
        jar_id = record.get("rollback_jar_id") or p.get("rollback_jar_id")
        if not jar_id:
            if not p.get("rollback_jar"):
                raise RollbackFailed(f"{p['job_name']}: {reason[:500]}; no rollback_jar was given: restart the old "
                                     f"version from {savepoint} by hand")
            jar_id = hook.upload_jar(str(p["rollback_jar"]).removeprefix("file://"))
            record.save(rollback_jar_id=jar_id)
        try:
            start_job(hook, p, record, "rollback_job_id", jar_id,
                      (record.get("old_job_id"), record.get("new_job_id")), check,
                      entry_class=p.get("rollback_main_class") or None, savepoint_path=savepoint,
                      allow_non_restored_state=False, parallelism=p.get("rollback_parallelism") or None,
                      flink_configuration=rollback_configuration(p, record))
        except FlinkRestUnknown:
            raise
        except FlinkRestError as exc:
            raise RollbackFailed(f"{p['job_name']}: restarting the old version from {savepoint} failed: {exc}") from exc
        try:
            verified = verify_restored(p, record["rollback_job_id"], savepoint)
        except FlinkRestUnknown:
            raise
        except (FlinkRestError, RuntimeError) as exc:
            raise RollbackFailed(f"{p['job_name']}: the rolled-back job {record['rollback_job_id']} did not restore "
                                 f"from {savepoint}: {exc}") from exc
    except RollbackFailed as exc:
        record.save(state="needs-operator", outcome=str(exc)[:2000])
        raise
    record.save(state="rolled-back-verified", rollback_verified=verified)
    return dict(record.doc)

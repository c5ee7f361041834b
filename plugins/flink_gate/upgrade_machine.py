"""The crash-safe upgrade of one job through Flink's REST API: stop with a savepoint, re-gate it, start the
new version from it, verify. `rollback.py` adds the way back and runs the whole under the job's lease; the
DAG tasks (`steps.py`, `rolling.py`) call it.

Each job's upgrade is a durable record (`upgrade_records.py`: the
object store, conditional writes, one lease per job) that moves through these states:

    planned ──> stopping ──> stopped(savepoint) ──> starting ──> running-verified
       │           │                │                  │
       │           │                └──────────────────┴──> rolling-back ──> rolled-back-verified
       │           │                                              │
       └───────────┴──> not-started (old job never stopped)       └──> needs-operator

* stopping: the trigger id is recorded *before* `POST /jobs/{id}/stop` carries it (`triggerId`).
* stopped: Flink reported the savepoint COMPLETED (by trigger id, or, when the trigger expired from
  Flink's cache, in the finished job's checkpoint statistics).
* starting: the new job id is recorded *before* `POST /jars/{id}/run` carries it (`jobId`).
* running-verified / rolled-back-verified: every subtask RUNNING and Flink says the job restored
  from exactly the recorded savepoint. Only then does a run report "upgraded" or "rolled back".
* needs-operator: the cluster shows something the steps will not guess about (the old job gone
  without a savepoint, a foreign copy running); the message says what was seen.

After any call whose outcome is unknown (timeout, reset, 5xx; `FlinkRestUnknown`) the steps look
the job up by its recorded id (and by name) and the savepoint up by its trigger id before
deciding; a retried task resumes from the record and the cluster and never repeats a stop or a
start. A definite failure after the stop (the new job fails to restore, the re-gate refuses the
savepoint, Flink refuses the jar) rolls back to the old version from the same savepoint.
"""

from __future__ import annotations

import time
from typing import Any

from flink_gate import gate
from flink_gate.hooks.flink_rest import (
    FlinkRestError,
    FlinkRestHook,
    FlinkRestUnknown,
    new_flink_id,
    restore_progress,
)
from flink_gate.hooks.storage import SavepointStorageHook
from flink_gate.upgrade_records import UpgradeRecord
from upgrade_gate.gate.flink_config import parse_settings


class NeedsOperator(RuntimeError):
    """The cluster is in a state the steps will not guess about; the message says what to do."""


class UpgradeNotStarted(RuntimeError):
    """The upgrade did not happen and the old job was never stopped: it still runs."""


class GateRefused(RuntimeError):
    """The stop-with-savepoint is not acceptable for the new graph; the new job was not started."""


class WaitFor(Exception):
    """A deferrable step (`p["defer_waits"]`) reached a wait: Flink is still completing the recorded savepoint
    (`kind` "savepoint", `job_id`, `trigger_id`) or restoring the recorded new job (`kind` "restored", `job_id`).

    Everything acted so far is in the record; the task hands `wait` to a trigger (`flink_gate.triggers.flink_waits`)
    that only polls, and the resumed step continues from the record and the cluster (never a second stop or start)."""

    def __init__(self, wait: dict[str, str]) -> None:
        super().__init__(f"waiting for {wait.get('kind')} of job {wait.get('job_id')}")
        self.wait = wait


ACTIVE = ("INITIALIZING", "CREATED", "RUNNING", "RESTARTING", "FAILING", "CANCELLING", "RECONCILING")


def holder_of(p: dict[str, Any]) -> str:
    """Who holds a job's lease: the DAG run (its Airflow retries are the same holder)."""
    return f"{p.get('dag_id') or 'manual'}/{p.get('run_id') or 'manual'}"


def rest_hook(p: dict[str, Any]) -> FlinkRestHook:
    return FlinkRestHook(p.get("flink_conn_id") or "flink_default", timeout=float(p.get("rest_timeout_s") or 30))


def _old_job(hook: FlinkRestHook, p: dict[str, Any]) -> dict[str, Any] | None:
    if p.get("flink_job_id"):
        return {"jid": p["flink_job_id"], **hook.job_details(p["flink_job_id"])}
    running = hook.find_jobs(p["job_name"], ("RUNNING",))
    return running[-1] if running else None  # the oldest running job of that name is the one to replace


def _grace(p: dict[str, Any]) -> float:
    """How long a request whose answer was lost may still take effect on the cluster."""
    return float(p.get("reconcile_grace_s") or 30)


def _no_other_copy(hook: FlinkRestHook, record: UpgradeRecord, keep: tuple[str, ...]) -> None:
    """Before starting a job: no job of that name may be active besides `keep` (never two copies)."""
    name = record.get("flink_job_name")
    if not name:
        return
    others = [j for j in hook.find_jobs(name) if j.get("state") in ACTIVE and j["jid"] not in keep]
    if others:
        raise NeedsOperator(f"{record.job_name}: refusing to start another copy: job(s) "
                            f"{', '.join(j['jid'] + ' ' + str(j.get('state')) for j in others)} called {name!r} "
                            "are active. Stop the extra copy, then retry the task.")


MAX_POSTS = 3
REPOST_PAUSE_S = 2.0


def stop_and_find_savepoint(hook: FlinkRestHook, p: dict[str, Any], record: UpgradeRecord,
                            check: Any = None, *, post: bool = True) -> str:
    """Drive the recorded stop-with-savepoint to its savepoint, reconciling by trigger id.

    The trigger id was written to the record before the first POST, so whatever happened to that
    POST (lost answer, 5xx, reset, delay) the cluster can be asked: Flink knows the trigger (wait
    for it), or does not and the old job still runs (POST again with the same id: Flink's
    `DispatcherCachedOperationsHandler` registers a trigger id once, so a repeat is a no-op), or
    the job finished and its checkpoint statistics name the savepoint. `post=False` only looks
    (a later run settling an abandoned record): a stop that never reached Flink is not sent."""
    old, trigger = record["old_job_id"], record["trigger"]
    deadline = time.monotonic() + float(p.get("timeout_s", 600))
    posts, posted_at = 0, 0.0
    while True:
        try:
            status, job, found = _look_at_stop(hook, old, trigger)
        except FlinkRestUnknown as exc:
            # Flink may have taken the stop already: a few failed reads must not end the upgrade with the job
            # stopped (that left no copy running for 16 minutes); keep asking until the step's deadline
            if time.monotonic() > deadline:
                raise FlinkRestUnknown(f"{record.job_name}: the cluster did not answer for {p.get('timeout_s', 600)}s "
                                       f"while job {old} may be stopping with savepoint {trigger} ({exc}); a retry "
                                       "resumes from the record and asks again") from exc
            hook.log.warning("stop %s of job %s: the cluster did not answer (%s); asking again", trigger, old, exc)
            time.sleep(1.0)
            continue
        if status is not None:
            if status.get("status", {}).get("id") == "COMPLETED":
                op = status.get("operation") or {}
                if op.get("location"):
                    return str(op["location"])
                cause = ((op.get("failure-cause") or {}).get("stack-trace") or "").strip()
                reason = cause.splitlines()[0] if cause else "no location and no cause reported"
                if found:
                    # our stop failed because the job had already finished with a savepoint: a stop a holder sent
                    # before it lost its lease, delivered late, got there first (Flink: "could not find Flink
                    # job"); that savepoint is the job's final state
                    hook.log.warning("stop %s of job %s failed (%s); the job finished with savepoint %s: using it",
                                     trigger, old, reason, found)
                    return found
                if job is not None and job.get("state") in ACTIVE:
                    raise UpgradeNotStarted(f"{record.job_name}: stop-with-savepoint of job {old} failed ({reason}); "
                                            "the old job was not stopped and still runs")
                raise NeedsOperator(f"{record.job_name}: stop-with-savepoint of job {old} failed ({reason}) and the "
                                    f"job is {job and job.get('state')}: restart it from its last checkpoint")
        else:
            state = job.get("state") if job else None
            if state == "FINISHED":
                if found:
                    return found
                raise NeedsOperator(f"{record.job_name}: job {old} FINISHED but Flink reports no savepoint for "
                                    f"trigger {trigger}; find its last savepoint and restart it by hand")
            if state not in ACTIVE:
                raise NeedsOperator(f"{record.job_name}: job {old} is {state or 'unknown to the cluster'} and Flink "
                                    f"knows no savepoint {trigger}: nothing safe to restart from automatically")
            if not post:
                raise UpgradeNotStarted(f"{record.job_name}: the stop {trigger} never reached Flink; job {old} "
                                        "still runs")
            since = time.monotonic() - posted_at
            if posts >= MAX_POSTS and since > _grace(p):
                raise FlinkRestUnknown(f"{record.job_name}: Flink never acknowledged stop-with-savepoint {trigger} "
                                       f"of job {old} ({posts} attempts); it still runs; a retry resumes")
            if posts < MAX_POSTS and (not posts or since > REPOST_PAUSE_S):
                if check:
                    check()
                posts, posted_at = posts + 1, time.monotonic()
                try:
                    hook.stop_with_savepoint(old, p.get("savepoint_target_dir") or None, trigger_id=trigger)
                except FlinkRestUnknown as exc:
                    hook.log.warning("stop-with-savepoint %s: outcome unknown (%s); asking the cluster", trigger, exc)
                except FlinkRestError as exc:
                    if hook.savepoint_status_or_none(old, trigger) is None:
                        job = hook.job_or_none(old)
                        if job is not None and job.get("state") in ACTIVE:
                            raise UpgradeNotStarted(f"{record.job_name}: Flink refused to stop job {old}: {exc}; "
                                                    "the old job still runs") from exc
                        # no longer running: stopped meanwhile (a stop a holder sent before it lost its lease,
                        # delivered late); the next look finds the savepoint it finished with, or says why not
                continue
        if time.monotonic() > deadline:
            raise FlinkRestUnknown(f"{record.job_name}: savepoint {trigger} of job {old} not completed after "
                                   f"{p.get('timeout_s', 600)}s; a retry resumes waiting for it")
        if p.get("defer_waits") and status is not None:  # Flink has the stop and is writing the savepoint
            raise WaitFor({"kind": "savepoint", "job_id": old, "trigger_id": trigger})
        time.sleep(0.5)


def _look_at_stop(hook: FlinkRestHook, old: str, trigger: str
                  ) -> tuple[dict[str, Any] | None, dict[str, Any] | None, str | None]:
    """One look at a stop in flight: the trigger's status, the old job, and (once it FINISHED without a
    savepoint of this trigger: Flink forgot the trigger, or the stop failed because another stop got there first)
    the savepoint its checkpoint statistics name. Raises `FlinkRestUnknown` when the
    cluster does not answer, so the caller asks again rather than deciding on half a look."""
    status = hook.savepoint_status_or_none(old, trigger)
    completed = status is not None and status.get("status", {}).get("id") == "COMPLETED"
    if status is not None and (not completed or (status.get("operation") or {}).get("location")):
        return status, None, None
    # no such trigger, or it failed: if the job FINISHED, something else stopped it with a savepoint
    job = hook.job_or_none(old)
    found = hook.last_savepoint(old) if job is not None and job.get("state") == "FINISHED" else None
    return status, job, found


def start_job(hook: FlinkRestHook, p: dict[str, Any], record: UpgradeRecord, id_field: str, jar_id: str,
              keep: tuple[str, ...], check: Any = None, **run: Any) -> None:
    """Start the job whose id was recorded in `record[id_field]` before the first POST.

    If the answer is lost, the job id says what happened: the cluster knows it (started), or does
    not, and it is POSTed again with the same id. That is safe even if the first request is still
    on its way: Flink's Dispatcher refuses a second job with an id it already has
    (`DuplicateJobSubmissionException`). Raises `FlinkRestError` only when Flink definitely
    refused to start it, `FlinkRestUnknown` when it never answered (a retry resumes)."""
    jid = record[id_field]
    posts, posted_at, last = 0, 0.0, ""
    while True:
        if hook.job_or_none(jid) is not None:
            return
        since = time.monotonic() - posted_at
        if posts >= MAX_POSTS:
            if since > _grace(p):
                raise FlinkRestUnknown(f"{record.job_name}: job {jid} did not appear after {posts} submissions "
                                       f"whose outcome is unknown (last: {last}); a retry looks again")
            time.sleep(1.0)
            continue
        if posts and since < REPOST_PAUSE_S:
            time.sleep(0.5)
            continue
        _no_other_copy(hook, record, keep)
        if check:
            check()
        posts, posted_at = posts + 1, time.monotonic()
        try:
            hook.run_jar(jar_id, job_id=jid, **run)
            return
        except FlinkRestUnknown as exc:
            last = str(exc)[:500]
            hook.log.warning("run of %s as job %s: outcome unknown (%s); asking the cluster", jar_id, jid, exc)
        except FlinkRestError:
            if hook.job_or_none(jid) is not None:  # a repeat refused because the first one started it
                return
            raise


def perform_upgrade(p: dict[str, Any], record: UpgradeRecord, graph_path: str, lease: Any = None) -> dict[str, Any]:
    """planned -> stopping -> stopped -> starting: stop the old job with a savepoint, re-gate that
    savepoint, start the new jar from it. Resumes from whatever state the record is in; every
    id (trigger, new job) is recorded before the request that uses it."""
    hook = rest_hook(p)
    check = lease.fence if lease is not None else None  # the fencing step before every acting call

    if record.state == "planned":
        old = _old_job(hook, p)
        if old is None:
            record.save(state="not-started", outcome=f"no RUNNING Flink job called {p['job_name']!r}")
            raise UpgradeNotStarted(f"no RUNNING Flink job called {p['job_name']!r} (and no flink_job_id given)")
        if check:
            check()
        record.save(state="stopping", old_job_id=old["jid"], flink_job_name=old.get("name") or p["job_name"],
                    trigger=new_flink_id())

    if record.state == "stopping":
        record.save(state="stopped", savepoint=stop_and_find_savepoint(hook, p, record, check))

    if record.state == "stopped":
        # The savepoint we stopped with is the one that will be restored: gate it too, so nothing
        # changed between the check and the stop can slip through.
        storage = SavepointStorageHook(p.get("aws_conn_id") or None)
        metadata, _ = storage.load_savepoint(record["savepoint"])
        recheck = gate.run_check(metadata, graph_path, hasher=p["hasher"], matching=p["matching"],
                                 allow_non_restored_state=bool(p["allow_non_restored_state"]),
                                 flink_version=p.get("flink_version"), settings=p.get("flink_settings") or ()).to_json()
        start_from = record["savepoint"]
        waivers_client = storage.s3_client if storage.is_s3(p.get("waivers") or "") else None
        if not gate.gate_decision(recheck, p, client=waivers_client).passes:
            if not p.get("repair_savepoint"):
                raise GateRefused(f"the stop-with-savepoint {record['savepoint']} is {recheck['verdict']} for the new "
                                  "graph; the new job was NOT started")
            from flink_gate.repair_step import repaired_savepoint  # only an approved repair needs it

            repaired, how = repaired_savepoint(p, record, graph_path, storage)
            if repaired is None:
                raise GateRefused(f"the stop-with-savepoint {record['savepoint']} is {recheck['verdict']} for the new "
                                  f"graph and {how}; the new job was NOT started")
            storage.log.info("%s", how)
            start_from = repaired
        jar_id = record.get("jar_id") or p.get("flink_jar_id") or hook.upload_jar(p["jar"].removeprefix("file://"))
        record.save(state="starting", jar_id=jar_id, new_job_id=new_flink_id(), start_from=start_from)

    if record.state == "starting":
        start_job(hook, p, record, "new_job_id", record["jar_id"], (record["old_job_id"],), check,
                  entry_class=p.get("main_class") or None, savepoint_path=restore_point(record),
                  allow_non_restored_state=bool(p["allow_non_restored_state"]),
                  parallelism=p.get("parallelism") or None,
                  # the -D pairs the gate checked and the export built the graph with (`dag_parts.job_settings_params`)
                  flink_configuration=dict(parse_settings(p.get("flink_settings") or ())) or None)
    return dict(record.doc)


def restore_point(record: Any) -> str:
    """What the new job starts from: the stop-with-savepoint, or its repaired copy (`repair_step`)."""
    return str(record.get("start_from") or record["savepoint"])


def verify_upgrade(p: dict[str, Any], upgraded: dict[str, Any]) -> dict[str, Any]:
    """The new job runs and Flink says it restored from our savepoint; otherwise fail loudly."""
    hook = rest_hook(p)
    job_id = upgraded["new_job_id"]
    if p.get("defer_waits") and restore_progress(hook.job_details(job_id)) == "pending":
        raise WaitFor({"kind": "restored", "job_id": job_id})  # "ended" is reported by the wait below, at once
    # every subtask RUNNING, not only the job: tasks restore their state while INITIALIZING
    hook.wait_until_restored(job_id, timeout=float(p.get("timeout_s", 600)))
    restored = hook.restored_from(job_id)
    if restored is None or restored.rstrip("/") != upgraded["savepoint"].rstrip("/"):
        raise RuntimeError(f"job {job_id} is RUNNING but restored from {restored!r}, not {upgraded['savepoint']!r}")
    return {"job_id": job_id, "restored_from": restored, "state": "RUNNING"}

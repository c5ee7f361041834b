"""Bodies of the `flink_upgrade_gate` tasks; the DAG file only wires them.

Checking is idempotent: fetch pins the exact `_metadata` object ("latest" is resolved once, and
later steps read that object); work files and the published report are replaced atomically,
keyed by job and run id.

Upgrading is crash-safe. Each job's upgrade is a durable record (`upgrade_records.py`: the
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

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from flink_gate import gate, upgrade_records
from flink_gate.hooks.flink_rest import FlinkRestError, FlinkRestHook, FlinkRestUnknown, new_flink_id
from flink_gate.hooks.storage import SavepointStorageHook
from flink_gate.reports import ReportStore, safe_name
from flink_gate.upgrade_records import UpgradeRecord
from hashing.migration import v2_to_v3
from upgrade_gate.cli import report_html
from upgrade_gate.gate import policy
from upgrade_gate.storage.objects import read_graph
from upgrade_gate.storage.state_files import state_stream_opener

REPO = Path(__file__).resolve().parents[2]


def work_root() -> Path:
    env = os.environ.get("UPGRADE_GATE_WORK_DIR")
    if env:
        return Path(env)
    return Path(os.environ.get("AIRFLOW_HOME") or Path.home() / "airflow") / "gate-work"


def run_dir(job: str, run_id: str) -> Path:
    return work_root() / upgrade_records.report_name(job) / safe_name(run_id)


def report_url(job: str, run_id: str) -> str:
    """Link to the report in the Airflow UI (the API server's base URL from the config)."""
    from flink_gate.views.app import URL_PREFIX

    try:
        from airflow.configuration import conf

        base = conf.get("api", "base_url", fallback="") or ""
    except Exception:
        base = ""
    base = base.rstrip("/") or "http://127.0.0.1:8080"
    return f"{base}{URL_PREFIX}/report/{safe_name(job)}/{safe_name(run_id)}"


def _params(context: Any) -> dict[str, Any]:
    return dict(context["params"])


def _savepoint_root(params: dict[str, Any]) -> str:
    if params.get("savepoint_root"):
        return str(params["savepoint_root"])
    from airflow.sdk import Variable

    return str(Variable.get("upgrade_gate_savepoint_root", default="") or "")


def _catalogue() -> str:
    from airflow.sdk import Variable

    return str(Variable.get("upgrade_gate_catalogue", default="") or "")


# ---- fetch --------------------------------------------------------------------------------
def fetch_savepoint(context: Any) -> dict[str, Any]:
    """Find and parse the savepoint's `_metadata`; hand on the exact object and its size."""
    p = _params(context)
    hook = SavepointStorageHook(p.get("aws_conn_id") or None)
    uri = gate.savepoint_location(p["savepoint"], p["job_name"], _savepoint_root(p))
    # "latest" named the job's own folder: its savepoints may carry several JobIDs and are still one job
    metadata, source = hook.load_savepoint(uri, job_folder=uri != (p["savepoint"] or "").strip())
    summary = gate.savepoint_summary(metadata, source)
    summary["requested"] = uri
    return summary


def fetch_graph(context: Any) -> dict[str, Any]:
    """Bring the new job graph into the run's work directory as a one-job catalogue.

    A spec / execution plan is copied from storage; a jar (+ main class) is turned into a spec
    by the core's exporter (`upgrade-gate export`, real Flink, nothing is run)."""
    p = _params(context)
    job = p["job_name"]
    rdir = run_dir(job, context["ti"].run_id)
    catalogue = rdir / "catalogue"
    if catalogue.exists():
        shutil.rmtree(catalogue)
    catalogue.mkdir(parents=True)
    target = catalogue / f"{safe_name(job)}.json"
    p["graph"] = gate.graph_location(p.get("graph"), job, p.get("jar"), _catalogue)
    if p.get("graph"):
        data = SavepointStorageHook(p.get("aws_conn_id") or None).read_bytes(p["graph"])
        if str(p["graph"]).lower().endswith((".yaml", ".yml")):
            target = target.with_suffix(".yaml")
        target.write_bytes(data)
        source = p["graph"]
    elif p.get("jar"):
        jar = p["jar"]
        if "://" in jar and not jar.startswith("file:"):
            local_jar = rdir / Path(jar).name
            local_jar.write_bytes(SavepointStorageHook(p.get("aws_conn_id") or None).read_bytes(jar, 512 << 20))
            jar = str(local_jar)
        cmd = [sys.executable, "-m", "upgrade_gate", "export", "--jar", jar.removeprefix("file://"),
               "--flink-version", "1.20" if str(p.get("flink_version", "2.3")).startswith("1.") else "2.3",
               "-o", str(target)]
        if p.get("main_class"):
            cmd += ["--main-class", p["main_class"]]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        if proc.returncode != 0:
            raise RuntimeError(f"exporting the job graph of {p['jar']} failed: {proc.stderr.strip()[-2000:]}")
        source = f"{p['jar']} ({p.get('main_class') or 'manifest Main-Class'})"
    else:
        raise gate.BadInput("give the new job graph: `graph` (spec or plan JSON URI) or `jar` (+ `main_class`)")
    return {"graph_path": str(target), "catalogue": str(catalogue),
            "graph_source": source}


# ---- simulate -----------------------------------------------------------------------------
def compute_operator_ids(context: Any, graph: dict[str, Any]) -> dict[str, Any]:
    """The new graph's V2 and V3 operator IDs, in-process through the core (the same call `upgrade-gate
    mapping` makes): one graph takes milliseconds, where a Spark session took a minute to start. Spark
    stays for fleets (`flink_fleet_scan`), where it pays (docs/design.md, "Where Spark pays")."""
    p = _params(context)
    rows = v2_to_v3(read_graph(graph["graph_path"]).graph, p.get("flink_version") or None)
    return {"nodes": len(rows), "hasher": p["hasher"],
            "ids": [{"node_id": r.node_id, "name": r.name, "v2_id": r.v2_id, "v3_id": r.v3_id,
                     "restores_by": r.restores_by} for r in rows]}


def simulate_restore(context: Any, savepoint: dict[str, Any], graph: dict[str, Any],
                     ids: dict[str, Any]) -> dict[str, Any]:
    """Run the core's restore simulation, publish the report, return the verdict for the gate."""
    p = _params(context)
    ti = context["ti"]
    job = p["job_name"]
    hook = SavepointStorageHook(p.get("aws_conn_id") or None)
    metadata, source = hook.load_savepoint(savepoint["metadata_uri"])
    result = gate.run_check(metadata, graph["graph_path"], hasher=p["hasher"], matching=p["matching"],
                            allow_non_restored_state=bool(p["allow_non_restored_state"]),
                            flink_version=p.get("flink_version"))
    check = result.to_json()
    client = hook.s3_client if hook.is_s3(metadata.source or "") else None
    check["repair"] = gate.repair_offer(result, metadata, graph["graph_path"], hasher=p["hasher"],
                                        matching=p["matching"], flink_version=p.get("flink_version"),
                                        opener=state_stream_opener(client), savepoint=source)
    states = state_map(hook, metadata)
    if states is not None:  # the view's State section lists every state, not only the flagged ones
        check["states"] = states
    url = report_url(upgrade_records.report_name(job), ti.run_id)
    meta = {"dag_id": ti.dag_id, "run_id": ti.run_id, "savepoint": source, "graph": graph["graph_source"],
            "hasher": p["hasher"], "matching": p["matching"],
            "allow_non_restored_state": bool(p["allow_non_restored_state"]),
            "flink_version": p.get("flink_version"), "mode": p.get("mode"), "operator_ids": ids}
    gate.write_json(run_dir(job, ti.run_id) / "check.json", check)
    page = report_html.render_html(result, new_graph=read_graph(graph["graph_path"]), states=states,
                                   repair=check["repair"])
    path = ReportStore().publish(upgrade_records.report_name(job), ti.run_id, check, page, meta)
    # XCom gets the verdict's fields, bounded; every state's serializers and a large job's per-subtask detail
    # stay in check.json and the report
    lean = gate.for_xcom({k: v for k, v in check.items() if k != "states"}, str(path / "check.json"))
    return {"job": job, "verdict": check["verdict"], "check": lean, "savepoint": source, "report_url": url,
            "report_dir": str(path), "report_job": upgrade_records.report_name(job),
            "report_run": safe_name(ti.run_id)}


def state_map(hook: SavepointStorageHook, metadata: Any) -> dict[str, list[dict[str, Any]]] | None:
    """Every operator's states (`report_html.state_map`), their state files read through the connection's own
    S3 client. None if they cannot be read: the report then lists the states the gate flags, as it does for a
    published check.json without them."""
    try:
        client = hook.s3_client if hook.is_s3(metadata.source or "") else None
        return report_html.state_map(metadata, opener=state_stream_opener(client))
    except Exception as exc:  # the verdict stands on _metadata alone; the State section is its explanation
        hook.log.warning("state meta information of %s not read: %s", metadata.source, exc)
        return None


# ---- decide / upgrade / verify ------------------------------------------------------------
def decide(context: Any) -> list[str] | None:
    p = _params(context)
    if p.get("mode") != "upgrade":
        return None  # check only: everything after the gate is skipped
    # One upgrade per job: refuse now, before anyone approves, if another run holds the job's lease.
    upgrade_records.refuse_if_leased({**p, **_run_ids(context)}, holder_of({**p, **_run_ids(context)}))
    return ["approve"] if p.get("require_approval", True) else ["no_approval_needed"]


def approval_note(context: Any) -> None:
    """`on_success_callback` of the `approve` task: who answered, and what, becomes a note of the run.

    Airflow's ApprovalOperator records the answer in its HITL detail and skips the upgrade on
    Reject, but the run itself would read as a plain green run. The sentence goes to XCom under
    `NOTE_XCOM_KEY`, which the plugin's listener (`flink_gate.listeners`) copies into the task and
    run notes: "REJECTED by gate-admin at …: nothing was upgraded"."""
    from flink_gate.outcome import NOTE_XCOM_KEY, clip

    answer = getattr(context["task"], "hitl_summary_extra", None) or {}
    user = answer.get("responded_by_user") or {}
    who = (user.get("name") or user.get("id")) if isinstance(user, dict) else getattr(user, "name", None)
    chosen = (answer.get("chosen_options") or ["?"])[0]
    at = answer.get("responded_at") or "?"
    job = _params(context).get("job_name")
    if chosen == "Approve":
        text = f"APPROVED by {who or 'unknown'} at {at}: upgrading {job}"
    else:
        text = f"REJECTED by {who or 'unknown'} at {at}: nothing was upgraded, {job} was left running"
    context["ti"].xcom_push(key=NOTE_XCOM_KEY, value=clip(text))


class NeedsOperator(RuntimeError):
    """The cluster is in a state the steps will not guess about; the message says what to do."""


class UpgradeNotStarted(RuntimeError):
    """The upgrade did not happen and the old job was never stopped: it still runs."""


class GateRefused(RuntimeError):
    """The stop-with-savepoint is not acceptable for the new graph; the new job was not started."""


ACTIVE = ("INITIALIZING", "CREATED", "RUNNING", "RESTARTING", "FAILING", "CANCELLING", "RECONCILING")


def _run_ids(context: Any) -> dict[str, str]:
    ti = context["ti"]
    return {"dag_id": ti.dag_id, "run_id": ti.run_id}


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


def upgrade(context: Any, verdict: dict[str, Any]) -> dict[str, Any]:
    """The upgrade task: stop, re-gate, start, verify (and roll back), under the job's lease."""
    from flink_gate.rollback import run_upgrade

    p = {**_params(context), **_run_ids(context)}
    rdir = run_dir(p["job_name"], p["run_id"])
    return run_upgrade(p, str(next((rdir / "catalogue").iterdir())))


def release_lease(context: Any) -> None:
    """`on_failure_callback` of the `upgrade` task (called once no retry is left): give the job's lease back,
    so the next run settles the interrupted upgrade at once instead of waiting out the lease."""
    p = {**_params(context), **_run_ids(context)}
    try:
        if upgrade_records.release_after_final_failure(p, holder_of(p)):
            context["ti"].log.warning("released the upgrade lease of %s held by the failed run", p["job_name"])
    except Exception as exc:  # the lease then expires on its own
        context["ti"].log.error("could not release the upgrade lease of %s: %s", p["job_name"], exc)


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
                                 flink_version=p.get("flink_version")).to_json()
        start_from = record["savepoint"]
        if not policy.decide(recheck, p.get("accept_state_loss")).passes:
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
                  parallelism=p.get("parallelism") or None)
    return dict(record.doc)


def restore_point(record: Any) -> str:
    """What the new job starts from: the stop-with-savepoint, or its repaired copy (`repair_step`)."""
    return str(record.get("start_from") or record["savepoint"])


def verify(context: Any, upgraded: dict[str, Any]) -> dict[str, Any]:
    return verify_upgrade(_params(context), {**upgraded, "savepoint": restore_point(upgraded)})


def verify_upgrade(p: dict[str, Any], upgraded: dict[str, Any]) -> dict[str, Any]:
    """The new job runs and Flink says it restored from our savepoint; otherwise fail loudly."""
    hook = rest_hook(p)
    job_id = upgraded["new_job_id"]
    # every subtask RUNNING, not only the job: tasks restore their state while INITIALIZING
    hook.wait_until_restored(job_id, timeout=float(p.get("timeout_s", 600)))
    restored = hook.restored_from(job_id)
    if restored is None or restored.rstrip("/") != upgraded["savepoint"].rstrip("/"):
        raise RuntimeError(f"job {job_id} is RUNNING but restored from {restored!r}, not {upgraded['savepoint']!r}")
    return {"job_id": job_id, "restored_from": restored, "state": "RUNNING"}

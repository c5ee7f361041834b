"""Bodies of the `flink_upgrade_gate` tasks; the DAG file only wires them.

The whole check is one task (`check`): fetch the savepoint and the new graph (a jar is exported by
real Flink), compute the operator IDs, simulate the restore and publish the report, in one process.
As five tasks each step paid an Airflow task start-up (3–23 s) for under a second of work
(docs/performance.md, "Gate: trigger to verdict"); the steps stay separate functions here.

Checking is idempotent: the fetch pins the exact `_metadata` object ("latest" is resolved once, and
the simulation reads that object); work files and the published report are replaced atomically,
keyed by job and run id.

The upgrade task runs the crash-safe upgrade of `upgrade_machine.py` (with the way back of `rollback.py`).
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
import time
from typing import Any

from flink_gate import gate, job_export, upgrade_records
from flink_gate.hooks.storage import SavepointStorageHook
from flink_gate.paths import report_url, run_dir
from flink_gate.reports import ReportStore, safe_name
from flink_gate.rollback import run_upgrade
from flink_gate.upgrade_machine import holder_of, restore_point, verify_upgrade
from hashing.migration import v2_to_v3
from upgrade_gate.report.html import render_html
from upgrade_gate.report.states import state_map as states_by_operator
from upgrade_gate.storage.objects import read_graph
from upgrade_gate.storage.state_files import read_savepoint_states, state_stream_opener

# the task's log: Airflow 3 routes the standard library's logging of a task process into the task log
log = logging.getLogger(__name__)


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


# ---- the check task ----------------------------------------------------------------------
def check(context: Any) -> dict[str, Any]:
    """The `check` task: savepoint, graph, operator IDs, simulated restore and report, in one process.

    Returns only what later tasks read: the `gate` operator's input (verdict, the lean check, the report URL);
    the approval's body pulls `report_url` from it. The savepoint comes first: a path that names nothing fails
    before a jar export starts a JVM."""
    timings: dict[str, float] = {}

    def timed(name: str, step: Any, *args: Any) -> Any:
        start = time.monotonic()
        out = step(context, *args)
        timings[name] = round(time.monotonic() - start, 2)
        return out

    savepoint = timed("savepoint", fetch_savepoint)
    graph = timed("graph", fetch_graph)
    ids = timed("operator ids", compute_operator_ids, graph)
    result = timed("restore + report", simulate_restore, savepoint, graph, ids)
    log.info("%s: verdict %s; seconds per step: %s", result["job"], result["verdict"], timings)
    return result


# ---- fetch --------------------------------------------------------------------------------
def fetch_savepoint(context: Any) -> tuple[Any, str]:
    """Find and parse the savepoint's `_metadata`: the parsed metadata and the exact object it was read from
    (the simulation reads that one, never "latest" again)."""
    p = _params(context)
    hook = SavepointStorageHook(p.get("aws_conn_id") or None)
    uri = gate.savepoint_location(p["savepoint"], p["job_name"], _savepoint_root(p))
    # "latest" named the job's own folder: its savepoints may carry several JobIDs and are still one job
    metadata, source = hook.load_savepoint(uri, job_folder=uri != (p["savepoint"] or "").strip())
    log.info("savepoint %s (asked for %s): %s", source, uri, gate.savepoint_summary(metadata, source))
    return metadata, source


def fetch_graph(context: Any) -> dict[str, Any]:
    """Bring the new job graph into the run's work directory as a one-job catalogue.

    A spec / execution plan is copied from storage; a jar (+ main class) is turned into a spec
    by the core's exporter with the job's own settings (`flink_gate.job_export`: real Flink, nothing is run).
    The client's config file (`flink_config`) is brought here too: the check judges it."""
    p = _params(context)
    job = p["job_name"]
    rdir = run_dir(job, context["ti"].run_id)
    catalogue = rdir / "catalogue"
    if catalogue.exists():
        shutil.rmtree(catalogue)
    catalogue.mkdir(parents=True)
    target = catalogue / f"{safe_name(job)}.json"
    exported: dict[str, Any] | None = None
    storage = SavepointStorageHook(p.get("aws_conn_id") or None)
    config = job_export.local_config(p, rdir, storage)  # the export reads it, and the check judges it
    p["graph"] = gate.graph_location(p.get("graph"), job, p.get("jar"), _catalogue)
    if p.get("graph"):
        data = storage.read_bytes(p["graph"])
        if str(p["graph"]).lower().endswith((".yaml", ".yml")):
            target = target.with_suffix(".yaml")
        target.write_bytes(data)
        source = p["graph"]
    elif p.get("jar"):
        export = job_export.export_jar(p, rdir, target, storage, config, log)
        source = f"{p['jar']} ({p.get('main_class') or 'manifest Main-Class'}); {export.assumptions}"
        exported = export.to_json()
    else:
        raise gate.BadInput("give the new job graph: `graph` (spec or plan JSON URI) or `jar` (+ `main_class`)")
    return {"graph_path": str(target), "catalogue": str(catalogue), "graph_source": source, "export": exported,
            "flink_config_path": config}


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


def simulate_restore(context: Any, savepoint: tuple[Any, str], graph: dict[str, Any],
                     ids: dict[str, Any]) -> dict[str, Any]:
    """Run the core's restore simulation on the fetched savepoint, publish the report, return the verdict for
    the gate."""
    p = _params(context)
    ti = context["ti"]
    job = p["job_name"]
    hook = SavepointStorageHook(p.get("aws_conn_id") or None)
    metadata, source = savepoint
    client = hook.s3_client if hook.is_s3(metadata.source or "") else None
    loaded = read_graph(graph["graph_path"])  # once: the check and the repair offer share it
    result = gate.run_check(metadata, loaded, hasher=p["hasher"], matching=p["matching"],
                            allow_non_restored_state=bool(p["allow_non_restored_state"]),
                            flink_version=p.get("flink_version"), settings=p.get("flink_settings") or (),
                            flink_config=graph.get("flink_config_path"), opener=state_stream_opener(client))
    exported = graph.get("export")
    if exported and exported["warnings"]:  # the export's guesses belong to the verdict: JSON, report, alert
        result = dataclasses.replace(result, warnings=(*exported["warnings"], *result.warnings))
    check = result.to_json()
    if exported:
        check["export"] = exported
    check["repair"] = gate.repair_offer(result, metadata, loaded, hasher=p["hasher"],
                                        matching=p["matching"], flink_version=p.get("flink_version"),
                                        opener=state_stream_opener(client), savepoint=source)
    # the gate's decision with the run's waivers and accept_state_loss: the gate task, the alert and the report read it
    check["gate"] = gate.gate_decision(check, p, client=hook.s3_client if hook.is_s3(p.get("waivers") or "")
                                       else None).to_json()
    states = state_map(hook, metadata)
    if states is not None:  # the view's State section lists every state, not only the flagged ones
        check["states"] = states
    url = report_url(upgrade_records.report_name(job), ti.run_id)
    meta = {"dag_id": ti.dag_id, "run_id": ti.run_id, "savepoint": source, "graph": graph["graph_source"],
            "hasher": p["hasher"], "matching": p["matching"],
            "allow_non_restored_state": bool(p["allow_non_restored_state"]),
            "flink_version": p.get("flink_version"), "mode": p.get("mode"), "operator_ids": ids}
    gate.write_json(run_dir(job, ti.run_id) / "check.json", check)
    page = render_html(check, new_graph=loaded, states=states, repair=check["repair"])
    path = ReportStore().publish(upgrade_records.report_name(job), ti.run_id, check, page, meta)
    # XCom gets the verdict's fields, bounded; every state's serializers and a large job's per-subtask detail
    # stay in check.json and the report
    lean = gate.for_xcom({k: v for k, v in check.items() if k != "states"}, str(path / "check.json"))
    return {"job": job, "verdict": check["verdict"], "check": lean, "savepoint": source, "report_url": url,
            "report_dir": str(path), "report_job": upgrade_records.report_name(job),
            "report_run": safe_name(ti.run_id)}


def state_map(hook: SavepointStorageHook, metadata: Any) -> dict[str, list[dict[str, Any]]] | None:
    """Every operator's states (`upgrade_gate.report.states.state_map`), their state files read through the
    connection's own S3 client. None if they cannot be read: the report then lists the states the gate flags, as it
    does for a published check.json without them."""
    try:
        client = hook.s3_client if hook.is_s3(metadata.source or "") else None
        return states_by_operator(read_savepoint_states(metadata, state_stream_opener(client)))
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
        text = f"APPROVED by {who or 'unknown'} at {at}: the upgrade of {job} went ahead"
    else:
        text = f"REJECTED by {who or 'unknown'} at {at}: nothing was upgraded, {job} was left running"
    context["ti"].xcom_push(key=NOTE_XCOM_KEY, value=clip(text))


def _run_ids(context: Any) -> dict[str, str]:
    ti = context["ti"]
    return {"dag_id": ti.dag_id, "run_id": ti.run_id}


def upgrade(context: Any, verdict: dict[str, Any], defer_waits: bool = False) -> dict[str, Any]:
    """The upgrade task: stop, re-gate, start, verify (and roll back), under the job's lease.

    `defer_waits`: raise `upgrade_machine.WaitFor` at a wait for Flink instead of waiting (the task defers;
    `operators.upgrade`); the lease is kept and the next call resumes from the record."""
    p = {**_params(context), **_run_ids(context), "defer_waits": defer_waits}
    rdir = run_dir(p["job_name"], p["run_id"])
    return run_upgrade(p, str(next((rdir / "catalogue").iterdir())))


def release_lease(context: Any) -> None:
    """`on_failure_callback` of the `upgrade` task (called once no retry is left): give the job's lease back,
    so the next run settles the interrupted upgrade at once instead of waiting out the lease."""
    p = {**_params(context), **_run_ids(context)}
    try:
        if upgrade_records.release_after_final_failure(p, holder_of(p)):
            log.warning("released the upgrade lease of %s held by the failed run", p["job_name"])
    except Exception as exc:  # the lease then expires on its own
        log.error("could not release the upgrade lease of %s: %s", p["job_name"], exc)


def verify(context: Any, upgraded: dict[str, Any], defer_waits: bool = False) -> dict[str, Any]:
    """The new job restored from the upgrade's savepoint; the run's note says so (not only "approved").
    `defer_waits`: a restore still under way raises `WaitFor` instead of being waited for here."""
    from flink_gate.outcome import NOTE_XCOM_KEY, clip

    verified = verify_upgrade({**_params(context), "defer_waits": defer_waits},
                              {**upgraded, "savepoint": restore_point(upgraded)})
    log.info("%s: Flink job %s is RUNNING with every subtask, restored from %s", _params(context).get("job_name"),
             verified["job_id"], verified["restored_from"])
    context["ti"].xcom_push(key=NOTE_XCOM_KEY, value=clip(
        f"UPGRADED: {_params(context).get('job_name')} runs as Flink job {verified['job_id']}, restored from "
        f"{verified['restored_from']} (was {upgraded.get('old_job_id')})"))
    return verified



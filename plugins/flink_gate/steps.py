"""Bodies of the `flink_upgrade_gate` tasks; the DAG file only wires them.

Every step is idempotent (design §9):
* fetch pins the exact `_metadata` object ("latest" is resolved once, and later steps read that
  object), so a retry of a later step sees the same savepoint;
* files written under the run's work directory and the published report are replaced
  atomically, keyed by job and run id;
* `upgrade` asks the Flink cluster what already happened before acting (old job still running?
  new job already started from the savepoint?) so a retry never stops or starts a job twice.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from flink_gate import acceptance, gate
from flink_gate.hooks.flink_rest import FlinkRestError, FlinkRestHook
from flink_gate.hooks.storage import SavepointStorageHook
from flink_gate.reports import ReportStore, safe_name

REPO = Path(__file__).resolve().parents[2]
SPARK_FLEET_IDS = REPO / "spark_jobs" / "fleet_ids.py"


def work_root() -> Path:
    env = os.environ.get("UPGRADE_GATE_WORK_DIR")
    if env:
        return Path(env)
    return Path(os.environ.get("AIRFLOW_HOME") or Path.home() / "airflow") / "gate-work"


def run_dir(job: str, run_id: str) -> Path:
    return work_root() / safe_name(job) / safe_name(run_id)


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


# ---- fetch --------------------------------------------------------------------------------
def fetch_savepoint(context: Any) -> dict[str, Any]:
    """Find and parse the savepoint's `_metadata`; hand on the exact object and its size."""
    p = _params(context)
    hook = SavepointStorageHook(p.get("aws_conn_id") or None)
    uri = gate.savepoint_location(p["savepoint"], p["job_name"], _savepoint_root(p))
    metadata, source = hook.load_savepoint(uri)
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
        raise ValueError("give the new job graph: `graph` (spec or plan JSON URI) or `jar` (+ `main_class`)")
    return {"graph_path": str(target), "catalogue": str(catalogue), "ids_table": str(rdir / "ids.parquet"),
            "graph_source": source}


# ---- simulate -----------------------------------------------------------------------------
def spark_ids_agree(ids_table: str, graph_path: str, hasher: str, flink_version: str | None) -> dict[str, Any]:
    """Compare the Spark job's operator IDs with the core's for this graph (they must be equal)."""
    import pyarrow.parquet as pq

    table = pq.read_table(ids_table).to_pylist()
    errors = [r["error"] for r in table if r.get("error")]
    if errors:
        raise ValueError(f"the Spark operator-ID job could not read the graph: {errors[0]}")
    core = gate.graph_node_ids(graph_path, hasher, flink_version)
    expected = {n["node_id"]: n["generated_id"] for n in core["nodes"]}
    column = "v3_id" if hasher == "v3" else "v2_id"
    got = {int(r["node_id"]): r[column] for r in table}
    if got != expected:
        raise RuntimeError(f"Spark's operator IDs differ from the core's for {graph_path}: {got} != {expected}")
    return {"nodes": len(table), "hasher": hasher,
            "ids": [{"node_id": r["node_id"], "name": r["name"], "v2_id": r["v2_id"], "v3_id": r["v3_id"],
                     "restores_by": r["restores_by"]} for r in table]}


def simulate_restore(context: Any, savepoint: dict[str, Any], graph: dict[str, Any]) -> dict[str, Any]:
    """Run the core's restore simulation, publish the report, return the verdict for the gate."""
    p = _params(context)
    ti = context["ti"]
    job = p["job_name"]
    hook = SavepointStorageHook(p.get("aws_conn_id") or None)
    metadata, source = hook.load_savepoint(savepoint["metadata_uri"])
    ids = spark_ids_agree(graph["ids_table"], graph["graph_path"], p["hasher"], p.get("flink_version"))
    result = gate.run_check(metadata, graph["graph_path"], hasher=p["hasher"], matching=p["matching"],
                            allow_non_restored_state=bool(p["allow_non_restored_state"]),
                            flink_version=p.get("flink_version"))
    check = result.to_json()
    url = report_url(job, ti.run_id)
    meta = {"dag_id": ti.dag_id, "run_id": ti.run_id, "savepoint": source, "graph": graph["graph_source"],
            "hasher": p["hasher"], "matching": p["matching"],
            "allow_non_restored_state": bool(p["allow_non_restored_state"]),
            "flink_version": p.get("flink_version"), "mode": p.get("mode"), "spark_ids": ids}
    gate.write_json(run_dir(job, ti.run_id) / "check.json", check)
    path = ReportStore().publish(job, ti.run_id, check, gate.render_html(result), meta)
    return {"job": job, "verdict": check["verdict"], "check": check, "savepoint": source, "report_url": url,
            "report_dir": str(path), "report_run": safe_name(ti.run_id)}


# ---- decide / upgrade / verify ------------------------------------------------------------
def decide(context: Any) -> list[str] | None:
    p = _params(context)
    if p.get("mode") != "upgrade":
        return None  # check only: everything after the gate is skipped
    return ["approve"] if p.get("require_approval", True) else ["no_approval_needed"]


def _old_job(hook: FlinkRestHook, p: dict[str, Any]) -> dict[str, Any] | None:
    if p.get("flink_job_id"):
        return {"jid": p["flink_job_id"], **hook.job_details(p["flink_job_id"])}
    running = hook.find_jobs(p["job_name"], ("RUNNING",))
    return running[-1] if running else None  # the oldest running job of that name is the one to replace


def upgrade(context: Any, verdict: dict[str, Any]) -> dict[str, Any]:
    """The upgrade task: `perform_upgrade` with the run's params and work directory."""
    p = _params(context)
    rdir = run_dir(p["job_name"], context["ti"].run_id)
    return perform_upgrade(p, rdir / "upgrade-state.json", str(next((rdir / "catalogue").iterdir())))


def perform_upgrade(p: dict[str, Any], state_file: Path, graph_path: str) -> dict[str, Any]:
    """Stop the old job with a savepoint, re-check that savepoint, start the new jar from it.

    Idempotent against the cluster: every step is recorded in `state_file` as soon as Flink
    acknowledged it, so a retry finds the old job already stopped (and its savepoint) and the new
    job already started from it, and does nothing twice."""
    state: dict[str, Any] = json.loads(state_file.read_text()) if state_file.exists() else {}
    hook = FlinkRestHook(p.get("flink_conn_id") or "flink_default")

    if "savepoint" not in state:
        old = _old_job(hook, p)
        if old is None:
            raise FlinkRestError(f"no RUNNING Flink job called {p['job_name']!r} (and no flink_job_id given)")
        trigger = hook.stop_with_savepoint(old["jid"], p.get("savepoint_target_dir") or None)
        state.update(old_job_id=old["jid"], trigger=trigger)
        gate.write_json(state_file, state)
        state["savepoint"] = hook.wait_for_savepoint(old["jid"], trigger, timeout=float(p.get("timeout_s", 600)))
        gate.write_json(state_file, state)

    if "new_job_id" not in state:
        # The savepoint we stop with is the one that will be restored: gate it too, so nothing
        # changed between the check and the stop can slip through.
        metadata, _ = SavepointStorageHook(p.get("aws_conn_id") or None).load_savepoint(state["savepoint"])
        recheck = gate.run_check(metadata, graph_path, hasher=p["hasher"], matching=p["matching"],
                                 allow_non_restored_state=bool(p["allow_non_restored_state"]),
                                 flink_version=p.get("flink_version")).to_json()
        if not acceptance.decide(recheck, p.get("accept_state_loss")).passes:
            raise RuntimeError(f"the stop-with-savepoint {state['savepoint']} is {recheck['verdict']} for the new "
                               "graph; the new job was NOT started (restart the old job from this savepoint)")
        jar_id = p.get("flink_jar_id") or hook.upload_jar(p["jar"].removeprefix("file://"))
        state["jar_id"] = jar_id
        state["new_job_id"] = hook.run_jar(jar_id, entry_class=p.get("main_class") or None,
                                           savepoint_path=state["savepoint"],
                                           allow_non_restored_state=bool(p["allow_non_restored_state"]),
                                           parallelism=p.get("parallelism") or None)
        gate.write_json(state_file, state)
    return state


def verify(context: Any, upgraded: dict[str, Any]) -> dict[str, Any]:
    return verify_upgrade(_params(context), upgraded)


def verify_upgrade(p: dict[str, Any], upgraded: dict[str, Any]) -> dict[str, Any]:
    """The new job runs and Flink says it restored from our savepoint; otherwise fail loudly."""
    hook = FlinkRestHook(p.get("flink_conn_id") or "flink_default")
    job_id = upgraded["new_job_id"]
    # every subtask RUNNING, not only the job: tasks restore their state while INITIALIZING
    hook.wait_until_restored(job_id, timeout=float(p.get("timeout_s", 600)))
    restored = hook.restored_from(job_id)
    if restored is None or restored.rstrip("/") != upgraded["savepoint"].rstrip("/"):
        raise RuntimeError(f"job {job_id} is RUNNING but restored from {restored!r}, not {upgraded['savepoint']!r}")
    return {"job_id": job_id, "restored_from": restored, "state": "RUNNING"}

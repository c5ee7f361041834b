"""Rolling upgrades in waves: one canary, then batches of N; every job gated on zero state loss.

`plan_waves` is pure. `roll_out` walks the waves in order and, per job: reads the job's newest
savepoint, simulates the restore with the core (`upgrade_gate.gate.check`), and, only if SAFE and in
upgrade mode, stops the job with a savepoint and starts the new jar from it (`upgrade_machine.perform_upgrade`,
which gates that final savepoint again) and verifies the restore. The rollout stops at the first
blocked gate or failed upgrade/restore; the outcome says which jobs were upgraded, which one
stopped it (and why), and which were left untouched.

Only SAFE passes, or a STATE_LOSS whose every lost state is waived: by the repository's waivers file (the
`waivers` param, `.upgrade-gate.yaml`) or the job's `accept_state_loss` (`gate.gate_decision`, which calls
`upgrade_gate.gate.policy`; allowNonRestoredState alone never does). If the new job does not restore in
reality, the old version is restarted from the upgrade savepoint (`rollback.py`, `rollback_jar`).

Progress is kept in `<work>/_rolling/<run>/rollout.json`, written after every job, so a retried
task resumes where it stopped. What protects the jobs is not that file but each job's upgrade
record and lease in the object store (`upgrade_records.py`): a retry (on any worker) resumes
every job from its record and the cluster and never stops or starts a job twice, and a job that
another DAG run is upgrading is refused, naming that run. Files and reports are keyed by
`upgrade_records.report_name` (the exact name, or a hash-suffixed key when the name is not a
safe path segment), so `orders v2` and `orders_v2` never share one.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flink_gate import gate
from flink_gate.alerts import build_alert
from flink_gate.hooks.storage import SavepointStorageHook
from flink_gate.paths import report_url, work_root
from flink_gate.reports import ReportStore, safe_name
from flink_gate.rollback import ROLLBACK_KEYS, UpgradeInterrupted, default_target_dir, run_upgrade
from flink_gate.steps import state_map
from flink_gate.upgrade_machine import holder_of
from flink_gate.upgrade_records import refuse_if_leased, release_after_final_failure, report_name
from upgrade_gate.report.html import render_html
from upgrade_gate.storage.objects import read_graph
from upgrade_gate.storage.state_files import state_stream_opener

# the task's log: Airflow 3 routes the standard library's logging of a task process into the task log
log = logging.getLogger(__name__)

JOB_KEYS = ("graph", "jar", "main_class", "flink_job_id", "flink_jar_id", "savepoint", "parallelism", "flink_settings",
            # explicitly accepted state loss, per-job allowNonRestoredState, the way back
            "accept_state_loss", "allow_non_restored_state", "savepoint_target_dir", "repair_savepoint",
            *ROLLBACK_KEYS)


def plan_waves(jobs: list[str], canary: int, batch_size: int) -> list[list[str]]:
    """[[canary…], [batch 1…], …]: the canary wave first, then batches of `batch_size`."""
    if len(set(jobs)) != len(jobs):
        raise ValueError("a job is listed twice")
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    canary = max(0, min(canary, len(jobs)))
    waves = [jobs[:canary]] if canary else []
    rest = jobs[canary:]
    waves += [rest[i:i + batch_size] for i in range(0, len(rest), batch_size)]
    return waves


def rollout_dir(run_id: str) -> Path:
    return work_root() / "_rolling" / safe_name(run_id)


def _job_params(common: dict[str, Any], job: dict[str, Any]) -> dict[str, Any]:
    p = {**common, **{k: job[k] for k in JOB_KEYS if k in job}, "job_name": job["job_name"]}
    p.setdefault("savepoint", "latest")
    return p


def graph_file(p: dict[str, Any], rdir: Path, storage: SavepointStorageHook | None = None) -> str:
    """The job's new graph in the run's work directory (fetched again if a resumed task runs elsewhere)."""
    path = rdir / "graphs" / f"{report_name(p['job_name'])}.json"
    if storage is not None or not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes((storage or SavepointStorageHook(p.get("aws_conn_id") or None)).read_bytes(p["graph"]))
    return str(path)


def _check_job(p: dict[str, Any], rdir: Path, savepoint_root: str) -> tuple[dict[str, Any], str, str]:
    storage = SavepointStorageHook(p.get("aws_conn_id") or None)
    uri = gate.savepoint_location(p.get("savepoint", "latest"), p["job_name"], savepoint_root)
    # "latest" named the job's own folder: its savepoints may carry several JobIDs and are still one job
    metadata, source = storage.load_savepoint(uri, job_folder=uri != (p.get("savepoint", "latest") or "").strip())
    graph_path = graph_file(p, rdir, storage)
    client = storage.s3_client if storage.is_s3(metadata.source or "") else None
    loaded = read_graph(graph_path)  # once: the check and the repair offer share it
    result = gate.run_check(metadata, loaded, hasher=p["hasher"], matching=p["matching"],
                            allow_non_restored_state=bool(p["allow_non_restored_state"]),
                            flink_version=p.get("flink_version"), settings=p.get("flink_settings") or (),
                            opener=state_stream_opener(client))
    check = result.to_json()
    check["repair"] = gate.repair_offer(result, metadata, loaded, hasher=p["hasher"], matching=p["matching"],
                                        flink_version=p.get("flink_version"), opener=state_stream_opener(client),
                                        savepoint=source)
    states = state_map(storage, metadata)  # the report's State section, read as the single-job gate reads it
    if states is not None:
        check["states"] = states
    page = render_html(result, new_graph=loaded, states=states, repair=check["repair"])
    return {"result": result, "check": check, "html": page}, source, graph_path


def _s3_for(p: dict[str, Any]) -> Any | None:
    """The job's S3 client when its waivers file is an `s3://` object (read through the storage layer)."""
    storage = SavepointStorageHook(p.get("aws_conn_id") or None)
    return storage.s3_client if storage.is_s3(p.get("waivers") or "") else None


@dataclass
class Gated:
    """One job's gate in a rollout: whether it may be upgraded, why, and the new graph it was checked against."""

    passes: bool
    verdict: str
    reason: str  # the gate decision's reason
    how: str  # the reason as an upgraded job reports it (names a repaired savepoint)
    graph_path: str


@dataclass
class Rollout:
    """What a `roll_out` task works with: the run's params, its jobs, and the progress file it resumes from."""

    context: Any
    params: dict[str, Any]
    jobs: dict[str, dict[str, Any]]
    common: dict[str, Any]
    rdir: Path
    progress_file: Path
    progress: dict[str, Any]
    savepoint_root: str
    store: ReportStore

    @classmethod
    def open(cls, context: Any) -> Rollout:
        params = dict(context["params"])
        rdir = rollout_dir(context["ti"].run_id)
        rdir.mkdir(parents=True, exist_ok=True)
        progress_file = rdir / "rollout.json"
        progress: dict[str, Any] = (json.loads(progress_file.read_text()) if progress_file.exists()
                                    else {"jobs": {}, "stopped_by": None})
        return cls(context, params, {j["job_name"]: j for j in params["jobs"]},
                   {k: v for k, v in params.items() if k not in ("jobs", "canary", "batch_size")}, rdir, progress_file,
                   progress, params.get("savepoint_root") or _variable("upgrade_gate_savepoint_root"), ReportStore())

    def job_params(self, name: str) -> dict[str, Any]:
        ti = self.context["ti"]
        return {**_job_params(self.common, self.jobs[name]), "dag_id": ti.dag_id, "run_id": ti.run_id}

    def save(self) -> None:
        gate.write_json(self.progress_file, self.progress)

    def gate_job(self, p: dict[str, Any], wave_no: int, notifiers: list[Any]) -> Gated:
        """Check the job's newest savepoint against its new graph, publish the report; alert if blocked."""
        ti, name = self.context["ti"], p["job_name"]
        if self.params.get("mode") == "upgrade":
            refuse_if_leased(p, holder_of(p))  # another run is upgrading this job: refuse at once
        checked, source, graph_path = _check_job(p, self.rdir, self.savepoint_root)
        check = checked["check"]
        self.store.publish(report_name(name), ti.run_id, check, checked["html"],
                           {"dag_id": ti.dag_id, "run_id": ti.run_id, "savepoint": source, "graph": p["graph"],
                            "hasher": p["hasher"], "matching": p["matching"], "wave": wave_no,
                            "allow_non_restored_state": bool(p["allow_non_restored_state"])})
        decision = gate.gate_decision(check, p, client=_s3_for(p))
        repair = not decision.passes and gate.proceeds_by_repair(check, {**p, "mode": self.params.get("mode")})
        if not decision.passes and not repair:
            alert = build_alert(check, job=name, run_id=ti.run_id, dag_id=ti.dag_id, savepoint=source,
                                report_url=report_url(report_name(name), ti.run_id))
            for n in notifiers:
                try:
                    n({**self.context, "gate_alert": alert.to_payload()})
                except Exception as exc:  # the rollout stops regardless
                    log.error("notifier %s failed: %s", type(n).__name__, exc)
        how = f"{decision.reason}; repaired savepoint" if repair else decision.reason
        return Gated(decision.passes or repair, check["verdict"], decision.reason, how, graph_path)


def roll_out(context: Any, waves: list[list[str]], notifiers: list[Any]) -> dict[str, Any]:
    """Job by job, wave by wave, each upgrade waiting in this task (see `rolling_deferred` for the other way)."""
    ro = Rollout.open(context)
    progress = ro.progress
    for wave_no, wave in enumerate(waves):
        for name in wave:
            if progress["stopped_by"]:
                break
            done = progress["jobs"].get(name, {})
            if done.get("status") in ("upgraded", "checked"):
                continue
            p = ro.job_params(name)
            try:
                gated = ro.gate_job(p, wave_no, notifiers)
                if not gated.passes:
                    progress["jobs"][name] = {"status": "blocked", "wave": wave_no, "verdict": gated.verdict,
                                              "gate": gated.reason}
                    progress["stopped_by"] = {"job": name, "reason": f"gate: {gated.reason}"}
                elif ro.params.get("mode") == "upgrade":
                    verified = run_upgrade(default_target_dir(p, ro.savepoint_root), gated.graph_path)
                    progress["jobs"][name] = {"status": "upgraded", "wave": wave_no, "verdict": gated.verdict,
                                              "gate": gated.how, **verified}
                else:
                    progress["jobs"][name] = {"status": "checked", "wave": wave_no, "verdict": gated.verdict,
                                              "gate": gated.reason}
            except UpgradeInterrupted as exc:
                # the job may be stopped: record it and fail the task, so that Airflow's retry resumes this
                # job from its upgrade record (never a "failed" job the retry skips, with the job stopped)
                progress["jobs"][name] = {"status": "interrupted", "wave": wave_no, "error": str(exc)[:2000]}
                ro.save()
                raise
            except Exception as exc:
                progress["jobs"][name] = {"status": "failed", "wave": wave_no, "error": str(exc)[:2000]}
                progress["stopped_by"] = {"job": name, "reason": f"{type(exc).__name__}: {str(exc)[:500]}"}
            ro.save()
        if progress["stopped_by"]:
            break
    return outcome(progress, waves)


def release_leases(context: Any) -> None:
    """`on_failure_callback` of `roll_out` (called once no retry is left): give back the lease of every job
    this run still holds, so the next run settles it at once instead of waiting out the lease."""
    params, ti = dict(context["params"]), context["ti"]
    holder = holder_of({"dag_id": ti.dag_id, "run_id": ti.run_id})
    common = {k: v for k, v in params.items() if k not in ("jobs", "canary", "batch_size")}
    for job in params.get("jobs") or []:
        try:
            if release_after_final_failure(_job_params(common, job), holder):
                log.warning("released the upgrade lease of %s held by the failed run %s", job["job_name"], holder)
        except Exception as exc:  # the lease then expires on its own
            log.error("could not release the upgrade lease of %s: %s", job.get("job_name"), exc)


def report_url_of(job: str, run_id: str) -> str:
    """Where the UI shows the report this rollout published for `job`."""
    return report_url(report_name(job), run_id)


def outcome(progress: dict[str, Any], waves: list[list[str]]) -> dict[str, Any]:
    every = [j for w in waves for j in w]
    status = {j: progress["jobs"].get(j, {}).get("status") for j in every}
    return {
        "upgraded": [j for j in every if status[j] == "upgraded"],
        "checked_safe": [j for j in every if status[j] == "checked"],
        "stopped_at": progress["stopped_by"],
        "skipped": [j for j in every if status[j] in ("blocked", "failed")],
        "left": [j for j in every if status[j] is None],
        "waves": waves,
        "jobs": progress["jobs"],
    }


def _variable(key: str) -> str:
    from airflow.sdk import Variable

    return str(Variable.get(key, default="") or "")

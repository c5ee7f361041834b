"""Bodies of the `flink_fleet_scan` tasks after the Spark jobs: publish, summarise, alert.

The verdicts come from `spark_jobs/fleet_check.py` (the core's `check_upgrade` per job, in the
executors). Here each job's row becomes a report in the same store the gate DAG publishes to
(the UI view lists both), and the scan sends one alert, a digest (`alerts.FleetDigest`: counts by verdict,
the worst jobs, the summary link), however many jobs it blocked: a 1,000-job scan sent 290 alerts
before (issue 32). The digest is recorded in the summary report's meta, so a retried task does not
alert twice for the same run. A job that could not be checked (verdict ERROR) is counted, never alerted
on as blocked.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from flink_gate.alerts import FleetDigest, worst_jobs
from flink_gate.paths import report_url, work_root
from flink_gate.reports import ReportStore, report_name, safe_name
from upgrade_gate.gate import policy
from upgrade_gate.report.fleet import render_fleet
from upgrade_gate.report.html import render_report
from upgrade_gate.vocabulary import Verdict

FLEET_REPORT_JOB = "fleet-scan"  # the pseudo-job the fleet summary is published under


def fleet_dir(run_id: str) -> Path:
    return work_root() / "_fleet" / safe_name(run_id)


def check_from_row(row: dict[str, Any]) -> dict[str, Any]:
    """A fleet_check verdict row in the `check` contract's shape (the fields the row carries; the
    operator rows fleet_check writes for blocked jobs, `operator_rows`)."""
    losses = json.loads(row.get("losses") or "[]")
    operators = row.get("operator_rows")
    return {"verdict": row.get("verdict") or "ERROR", "restore_succeeds": row.get("restore_succeeds"),
            "flink_error": row.get("flink_error"), "hasher": row.get("hasher"), "matching": row.get("matching"),
            "flink_version": row.get("flink_version"), "savepoint": row.get("metadata"), "graph": row.get("spec"),
            "operators": json.loads(operators) if isinstance(operators, str) else list(operators or []),
            "losses": losses, "remedies": json.loads(row.get("remedies") or "[]"),
            "verdict_with_remedies": row.get("verdict_with_remedies"), "warnings": list(row.get("warnings") or []),
            "state_bytes": row.get("state_bytes"), "lost_bytes": row.get("lost_bytes"), "error": row.get("error"),
            "repair": json.loads(row["repair"]) if row.get("repair") else None,
            # fleet_check's decision with the scan's waivers file (`upgrade_gate.gate.policy`), for a non-SAFE job
            "gate": json.loads(row["gate"]) if row.get("gate") else None}


def fleet_row(job: str, check: dict[str, Any]) -> dict[str, Any]:
    """One line of the fleet summary table: job x verdict x bytes at risk."""
    return {"job": job, "verdict": check["verdict"], "bytes_at_risk": int(check.get("lost_bytes") or 0),
            "state_bytes": check.get("state_bytes"), "verdict_with_remedies": check.get("verdict_with_remedies"),
            "error": check.get("error"), "flink_error": check.get("flink_error"),
            "repairable": bool((check.get("repair") or {}).get("repairable"))}


def publish(context: Any, summary: dict[str, Any], check_dir: str) -> dict[str, Any]:
    """One report per job, and the fleet summary under the pseudo-job `fleet-scan`."""
    import pyarrow.parquet as pq

    ti = context["ti"]
    store = ReportStore()
    rows = pq.read_table(str(Path(check_dir) / "verdicts")).to_pylist()
    blocked, table = [], []
    for row in rows:
        check = check_from_row(row)
        table.append(fleet_row(row["job"], check))
        store.publish(report_name(row["job"]), ti.run_id, check, render_report(check),
                      {"dag_id": ti.dag_id, "run_id": ti.run_id, "savepoint": row.get("metadata"),
                       "graph": row.get("spec"), "hasher": row.get("hasher"), "matching": row.get("matching"),
                       "allow_non_restored_state": row.get("allow_non_restored_state"), "source": "fleet_scan"})
        passes = row.get("gate_passes")  # False, or None on a table written without it: the verdict decides
        if passes is False or (passes is None and check["verdict"] in Verdict.__members__
                               and policy.blocks(check["verdict"])):
            blocked.append(row["job"])
    # the fleet's own "verdict" is the gate word of fleet_check's summary: PASS or BLOCK
    fleet_check = {"verdict": str(summary.get("gate") or "BLOCK"), "operators": [],
                   "losses": [], "remedies": [], "summary": summary, "jobs": table}
    # the standalone report.html lists each verdict's worst jobs and points to the rest: the Parquet and the view
    standalone = render_fleet(summary, table, full_list=str(Path(check_dir) / "verdicts"),
                              view_url=report_url(FLEET_REPORT_JOB, ti.run_id))
    store.publish(FLEET_REPORT_JOB, ti.run_id, fleet_check, standalone,
                  {"dag_id": ti.dag_id, "run_id": ti.run_id, "savepoint": "", "source": "fleet_scan"})
    worst = [{**w, "report_url": report_url(report_name(w["job"]), ti.run_id)} for w in worst_jobs(table)]
    return {"gate": summary.get("gate"), "jobs": len(rows), "verdicts": summary.get("verdicts"),
            "blocked": blocked, "bytes_at_risk": summary.get("bytes_at_risk"), "unchecked": summary.get("errors"),
            "repairable": summary.get("repairable_jobs", 0), "worst": worst,
            "roles": dict(summary.get("jobs_by_role_at_risk") or {})}


def alert(context: Any, published: dict[str, Any], notifiers: list[Any]) -> list[str]:
    """Send the scan's one digest alert when it blocked any job, once per run; returns the jobs it names."""
    ti = context["ti"]
    if not published["blocked"]:
        return []
    store = ReportStore()
    entry = store.get(FLEET_REPORT_JOB, safe_name(ti.run_id))
    if entry is not None and entry.meta.get("alert_sent"):
        return []
    digest = FleetDigest(run_id=ti.run_id, dag_id=ti.dag_id, jobs=int(published["jobs"]),
                         blocked=len(published["blocked"]), verdicts=dict(published.get("verdicts") or {}),
                         bytes_at_risk=int(published.get("bytes_at_risk") or 0),
                         worst=tuple(published.get("worst") or ()),
                         report_url=report_url(FLEET_REPORT_JOB, ti.run_id),
                         repairable=int(published.get("repairable") or 0),
                         unchecked=int(published.get("unchecked") or 0), roles=dict(published.get("roles") or {}))
    failures = []
    for n in notifiers:
        try:
            n({**context, "gate_alert": digest.to_payload()})
        except Exception as exc:  # one channel down must not silence the others
            failures.append(f"{type(n).__name__}: {exc}")
    if entry is not None:
        store.update_meta(entry.job, entry.run, alert_sent=not failures, alert_failures=failures)
    return list(published["blocked"])

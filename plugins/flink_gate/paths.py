"""Where a run's files are: the work directory, one folder per job and run, and the report's address.

Its own module because the task bodies (`steps.py`), the rollout (`rolling.py`), the fleet scan and the upgrade
records' local fallback (`upgrade_records.py`) all need it, and none of them should import another for it.
"""

from __future__ import annotations

import os
from pathlib import Path

from flink_gate.reports import report_name, safe_name

REPO = Path(__file__).resolve().parents[2]


def work_root() -> Path:
    env = os.environ.get("UPGRADE_GATE_WORK_DIR")
    if env:
        return Path(env)
    return Path(os.environ.get("AIRFLOW_HOME") or Path.home() / "airflow") / "gate-work"


def run_dir(job: str, run_id: str) -> Path:
    return work_root() / report_name(job) / safe_name(run_id)


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



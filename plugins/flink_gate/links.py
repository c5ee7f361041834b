"""The "Upgrade report" button on the gate tasks (an operator extra link, Airflow 3 style).

In Airflow 3 a link is resolved once, in the worker, when the task ends (Task SDK `finalize`):
`get_link` returns the URL and Airflow stores it in XCom (`_link_UpgradeReportLink`); the UI reads it
from there. The gate tasks push the report's URL (`outcome.REPORT_URL_XCOM_KEY`) before they end,
success or skipped, so the link works for SAFE and blocked runs alike; a task that crashed before
publishing a report has no link (an empty string: the UI shows the button disabled).
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseOperatorLink

from flink_gate.outcome import REPORT_URL_XCOM_KEY


class UpgradeReportLink(BaseOperatorLink):
    """Opens the upgrade-gate view's report for this task's run (`/upgrade-gate/report/<job>/<run>`)."""

    name = "Upgrade report"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        pull = getattr(ti_key, "xcom_pull", None)  # the worker's RuntimeTaskInstance
        if pull is None:
            return ""
        return str(pull(task_ids=ti_key.task_id, key=REPORT_URL_XCOM_KEY) or "")

"""The fleet scan's last task: the run's answer in one log line, one XCom, one note and one link.

A scan that blocked jobs must not look like a scan that found nothing: the task pushes the note
"BLOCKED 3 of 4 jobs (…), 12.3 KiB at risk — summary: <link>" (`flink_gate.outcome`), which the
plugin's listener writes into the task and run notes, and the fleet summary's URL behind its
"Upgrade report" link.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator

from flink_gate.links import UpgradeReportLink
from flink_gate.outcome import NOTE_XCOM_KEY, REPORT_URL_XCOM_KEY, fleet_note
from upgrade_gate.report.sizes import human_bytes


class FleetSummaryOperator(BaseOperator):
    """Say what the scan decided: gate PASS/BLOCK, counts, the blocked jobs, who was alerted.

    :param published: `flink_gate.fleet.publish`'s output (usually an XComArg).
    :param alerted: the jobs `flink_gate.fleet.alert` alerted in this run.
    """

    template_fields: Sequence[str] = ("published", "alerted")
    ui_color = "#f0c987"
    operator_extra_links = (UpgradeReportLink(),)

    def __init__(self, *, published: Any, alerted: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.published = published
        self.alerted = alerted

    def execute(self, context: Any) -> dict[str, Any]:
        from flink_gate.fleet import FLEET_REPORT_JOB
        from flink_gate.paths import report_url

        ti = context["ti"]
        p = self.published
        url = report_url(FLEET_REPORT_JOB, ti.run_id)
        note = fleet_note(p, url)
        ti.xcom_push(key=REPORT_URL_XCOM_KEY, value=url)
        ti.xcom_push(key=NOTE_XCOM_KEY, value=note)
        self.log.info("fleet gate %s: %s jobs, verdicts %s, %s at risk, %d blocked, %d named in the digest alert",
                      p["gate"], p["jobs"], p["verdicts"], human_bytes(int(p.get("bytes_at_risk") or 0)),
                      len(p["blocked"]), len(self.alerted or []))
        self.log.info("%s", note)
        return {**p, "alerted": list(self.alerted or []), "note": note}

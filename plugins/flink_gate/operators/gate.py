"""The gate: lets an upgrade through only on zero state loss.

Thin by design: the verdict was computed by the core (`upgrade_gate.gate.check`) in the `check` task;
this operator only acts on it. SAFE succeeds. So does a blocked upgrade the run was asked to repair
(`repair_savepoint`, upgrade mode) when the check's repair offer makes it SAFE: its note says REPAIRABLE and
the approval that follows says what the repair does (`flink_gate.repair_step` does it after the stop).
Any other blocking verdict (STATE_LOSS, STATE_MISROUTED,
RESTORE_FAILS) pushes the alert to XCom (key `gate_alert`), calls every notifier with it, and then
*fails* the task without a retry (`AirflowFailException`): a blocked upgrade is not a done one, so the run
ends failed and reads red in the DAG list, the runs list, the overview and the grid, where people count
what went through (issue 32). What tells it from a crash is the note: either way the task pushes the
one-line note ("BLOCKED: STATE_MISROUTED, 4.8 KiB at risk — report: …", `flink_gate.outcome`) that the
plugin's listener writes into the task and run notes, while a crashed run's note says "FAILED, no verdict:
<task> failed" (`flink_gate.listeners`); the failed task is the gate, not an earlier step. The report URL
goes behind the gate's "Upgrade report" link. The gate has no retries, so a blocked run alerts once. A
notifier that cannot deliver is logged and the upgrade stays blocked: a broken webhook must not turn a
blocked upgrade into an allowed one.

The note also names the gate's task instance (`map_index_template`, `flink_gate.outcome.verdict_label`): Airflow
renders it after `execute`, before the task's end is reported, and the run page's task instance table, which
polls until the run ends, shows it without a reload; the run note is shown only as it was when the page opened
(docs/design.md, "The verdict on the run page").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseNotifier, BaseOperator

from flink_gate.alerts import build_alert
from flink_gate.gate import proceeds_by_repair
from flink_gate.links import UpgradeReportLink
from flink_gate.notifications.base import ALERT_XCOM_KEY
from flink_gate.outcome import (
    LABEL_CONTEXT_KEY,
    NOTE_XCOM_KEY,
    REPORT_URL_XCOM_KEY,
    VERDICT_LABEL_TEMPLATE,
    check_caveat,
    clip,
    gate_note,
    repair_note,
    upgrade_plan,
    verdict_label,
)
from flink_gate.reports import ReportStore


class FlinkUpgradeGateOperator(BaseOperator):
    """Let the upgrade through only when the simulated restore is SAFE; otherwise alert and skip.

    :param check: the `check` task's output: `{"job", "verdict", "check", "savepoint",
        "report_url", "report_dir"}` (usually an XComArg).
    :param notifiers: `BaseNotifier`s called with the alert in `context["gate_alert"]`.
    """

    template_fields: Sequence[str] = ("check",)
    ui_color = "#f0c987"
    operator_extra_links = (UpgradeReportLink(),)

    def __init__(self, *, check: Any, notifiers: Sequence[BaseNotifier] | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("retries", 0)
        kwargs.setdefault("map_index_template", VERDICT_LABEL_TEMPLATE)
        super().__init__(**kwargs)
        self.check = check
        self.notifiers = list(notifiers or [])

    @staticmethod
    def _say(context: Any, note: str) -> None:
        """The note for the listener (XCom) and, rendered by `map_index_template` after `execute`, the task
        instance's name on the run page."""
        context["ti"].xcom_push(key=NOTE_XCOM_KEY, value=note)
        context[LABEL_CONTEXT_KEY] = verdict_label(note)

    def execute(self, context: Any) -> dict[str, Any]:
        from airflow.sdk.exceptions import AirflowFailException

        summary = self.check
        ti = context["ti"]
        ti.xcom_push(key=REPORT_URL_XCOM_KEY, value=summary["report_url"])
        params = dict(context.get("params") or {})
        caveat = check_caveat(summary["check"])  # a jar export that guessed a setting, state types not compared
        alert = build_alert(summary["check"], job=summary["job"], run_id=ti.run_id, dag_id=ti.dag_id,
                            savepoint=summary["savepoint"], report_url=summary["report_url"])
        if alert is None:
            decided = summary["check"].get("gate") or {}
            waived = summary["verdict"] != "SAFE" and decided.get("passes")  # waivers or the threshold let it pass
            note = (clip(f"PASSED ({summary['verdict']}): {decided['decision']} — report: {summary['report_url']}")
                    if waived else gate_note(summary["verdict"], 0, summary["report_url"], blocked=False,
                                             caveat=caveat))
            self._say(context, note)
            self.log.info("%s: verdict %s, the upgrade may proceed (%s). Report: %s", summary["job"],
                          summary["verdict"], decided.get("decision") or "SAFE", summary["report_url"])
            found = (f"The gate let the upgrade through: {decided['decision']}." if waived
                     else "The gate found the upgrade SAFE (no state is lost).")
            return {"job": summary["job"], "verdict": summary["verdict"], "passed": True,
                    "approval": f"{found} {upgrade_plan(params)}"}
        if proceeds_by_repair(summary["check"], params):
            # asked to repair, and a repaired savepoint makes the upgrade SAFE: on to the approval, no alert
            offer = summary["check"]["repair"]
            note = repair_note(alert.verdict, offer, summary["report_url"])
            self._say(context, note)
            self.log.warning("%s", note)
            options = " ".join(offer.get("options") or [])
            what = f"{offer.get('moves', 0)} operator(s) moved" + (f", {options}" if options else "")
            return {"job": summary["job"], "verdict": summary["verdict"], "passed": False, "repair": offer,
                    "approval": f"The gate BLOCKED the upgrade as it is ({alert.verdict}), and a repaired savepoint "
                                f"makes it SAFE: on approval the job is stopped with a savepoint, a repaired copy is "
                                f"written beside it ({what}; the savepoint itself is not modified), checked again, "
                                f"and the new job starts from the copy. {upgrade_plan(params)}"}

        payload = alert.to_payload()
        ti.xcom_push(key=ALERT_XCOM_KEY, value=payload)
        note = gate_note(alert.verdict, alert.bytes_at_risk, summary["report_url"], blocked=True, caveat=caveat)
        self._say(context, note)
        self.log.warning("%s", alert.to_text())
        failures = []
        for notifier in self.notifiers:
            try:
                notifier({**context, "gate_alert": payload})
            except Exception as exc:  # deliver to the others; the gate fails regardless
                failures.append(f"{type(notifier).__name__}: {exc}")
                self.log.error("Notifier %s could not deliver the alert: %s", type(notifier).__name__, exc)
        if summary.get("report_dir"):
            try:
                ReportStore().update_meta(summary.get("report_job") or summary["job"], summary["report_run"],
                                          alert_sent=not failures, alert_failures=failures)
            except OSError as exc:
                self.log.warning("could not record the alert in the report: %s", exc)
        # failed, never retried: a blocked upgrade is not a done one, so the run is red in every list and chart a
        # person filters by; the note "BLOCKED: …" on the run tells it from a crash (flink_gate.outcome)
        raise AirflowFailException(f"{note} ({summary['job']}: {len(alert.operators)} operator(s) at risk; "
                                   "nothing after the gate runs)")

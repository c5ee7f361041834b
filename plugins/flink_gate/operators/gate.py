"""The gate: lets an upgrade through only on zero state loss.

Thin by design: the verdict was computed by the core (`upgrade_gate.gate.check`) in the simulate task;
this operator only acts on it. SAFE passes quietly. STATE_LOSS and RESTORE_FAILS push the alert
to XCom (key `gate_alert`), call every notifier with it, and fail the task with
`AirflowFailException`: no retry, so no second alert, and every downstream step (approval,
upgrade, verify) stays `upstream_failed`. A notifier that cannot deliver is logged and the gate
still fails: a broken webhook must not turn a blocked upgrade into an allowed one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseNotifier, BaseOperator

from flink_gate.alerts import build_alert
from flink_gate.notifications.base import ALERT_XCOM_KEY
from flink_gate.reports import ReportStore


class FlinkUpgradeGateOperator(BaseOperator):
    """Fail the run unless the simulated restore is SAFE, alerting every notifier first.

    :param check: the simulate task's output: `{"job", "verdict", "check", "savepoint",
        "report_url", "report_dir"}` (usually an XComArg).
    :param notifiers: `BaseNotifier`s called with the alert in `context["gate_alert"]`.
    """

    template_fields: Sequence[str] = ("check",)
    ui_color = "#f0c987"

    def __init__(self, *, check: Any, notifiers: Sequence[BaseNotifier] | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("retries", 0)
        super().__init__(**kwargs)
        self.check = check
        self.notifiers = list(notifiers or [])

    def execute(self, context: Any) -> dict[str, Any]:
        from airflow.sdk.exceptions import AirflowFailException

        summary = self.check
        ti = context["ti"]
        alert = build_alert(summary["check"], job=summary["job"], run_id=ti.run_id, dag_id=ti.dag_id,
                            savepoint=summary["savepoint"], report_url=summary["report_url"])
        if alert is None:
            self.log.info("%s: verdict %s, the upgrade may proceed. Report: %s", summary["job"],
                          summary["verdict"], summary["report_url"])
            return {"job": summary["job"], "verdict": summary["verdict"], "passed": True}

        payload = alert.to_payload()
        ti.xcom_push(key=ALERT_XCOM_KEY, value=payload)
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
                ReportStore().update_meta(summary["job"], summary["report_run"], alert_sent=not failures,
                                          alert_failures=failures)
            except OSError as exc:
                self.log.warning("could not record the alert in the report: %s", exc)
        raise AirflowFailException(f"{summary['job']}: {alert.verdict}: the upgrade is blocked "
                                   f"({alert.bytes_at_risk} bytes of state at risk in {len(alert.operators)} "
                                   f"operator(s)). Report: {summary['report_url']}")

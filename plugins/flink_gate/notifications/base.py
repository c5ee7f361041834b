"""What the gate's notifiers share: finding the alert for the run that is being notified about.

The gate operator calls its notifiers with the alert in the context (`context["gate_alert"]`).
Used as an ordinary `on_failure_callback` instead, a notifier pulls the alert the gate pushed to
XCom (key `gate_alert`). Without an alert (a SAFE run, a failure unrelated to the verdict) a
notifier sends nothing: an upgrade that passes does not alert.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from airflow.sdk import BaseNotifier

from flink_gate.alerts import FleetDigest, GateAlert, alert_from_payload

ALERT_XCOM_KEY = "gate_alert"


class GateNotifier(BaseNotifier, ABC):
    """Base of the verdict notifiers: `notify` finds the alert, `send` delivers it."""

    def __init__(self, *, gate_task_id: str = "gate") -> None:
        super().__init__()
        self.gate_task_id = gate_task_id

    def alert_for(self, context: Any) -> GateAlert | FleetDigest | None:
        payload = context.get("gate_alert") if hasattr(context, "get") else None
        if payload is None and context.get("ti") is not None:
            payload = context["ti"].xcom_pull(task_ids=self.gate_task_id, key=ALERT_XCOM_KEY)
        if not payload:
            return None
        return payload if isinstance(payload, GateAlert | FleetDigest) else alert_from_payload(payload)

    def enabled(self) -> bool:
        """A channel whose connection id (or recipient) renders empty is switched off."""
        return True

    def notify(self, context: Any) -> None:
        if not self.enabled():
            self.log.info("%s: no connection configured, skipped", type(self).__name__)
            return
        alert = self.alert_for(context)
        if alert is None:
            self.log.info("No blocked upgrade in this run: nothing to notify")
            return
        self.send(alert)

    @abstractmethod
    def send(self, alert: GateAlert | FleetDigest) -> None:
        """Deliver the alert (one job's, or a fleet scan's digest) over this notifier's channel."""

"""E-mail through the smtp provider's connection (host, port, TLS and login live there)."""

from __future__ import annotations

from collections.abc import Sequence

from flink_gate.alerts import FleetDigest, GateAlert
from flink_gate.notifications.base import GateNotifier


class GateEmailNotifier(GateNotifier):
    """Send the alert as an HTML e-mail."""

    template_fields = ("smtp_conn_id", "to", "from_email")

    def __init__(self, *, to: str | Sequence[str], smtp_conn_id: str = "smtp_default",
                 from_email: str | None = None, gate_task_id: str = "gate") -> None:
        super().__init__(gate_task_id=gate_task_id)
        self.to = to
        self.smtp_conn_id = smtp_conn_id
        self.from_email = from_email

    def enabled(self) -> bool:
        return bool(self.to and str(self.to).strip())

    def send(self, alert: GateAlert | FleetDigest) -> None:
        from airflow.providers.smtp.hooks.smtp import SmtpHook

        with SmtpHook(smtp_conn_id=self.smtp_conn_id) as hook:
            hook.send_email_smtp(to=self.to, subject=alert.title, html_content=alert.to_html(),
                                 from_email=self.from_email or "upgrade-gate@localhost")
        self.log.info("Alert for %s (%s) e-mailed to %s", alert.job, alert.verdict, self.to)


send_gate_email_notification = GateEmailNotifier

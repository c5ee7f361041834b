"""Generic HTTP webhook: POSTs the alert's JSON payload to the endpoint of an HTTP connection."""

from __future__ import annotations

from flink_gate.alerts import FleetDigest, GateAlert
from flink_gate.notifications.base import GateNotifier


class GateWebhookNotifier(GateNotifier):
    """POST `GateAlert.to_payload()` as JSON.

    :param http_conn_id: an HTTP connection (host, port, schema; login/password or extra headers
        for authentication stay in the connection).
    :param endpoint: path appended to the connection's base URL.
    """

    template_fields = ("http_conn_id", "endpoint")

    def __init__(self, *, http_conn_id: str = "upgrade_gate_webhook", endpoint: str = "",
                 gate_task_id: str = "gate") -> None:
        super().__init__(gate_task_id=gate_task_id)
        self.http_conn_id = http_conn_id
        self.endpoint = endpoint

    def enabled(self) -> bool:
        return bool(self.http_conn_id and str(self.http_conn_id).strip())

    def send(self, alert: GateAlert | FleetDigest) -> None:
        from airflow.providers.http.hooks.http import HttpHook

        hook = HttpHook(method="POST", http_conn_id=self.http_conn_id)
        hook.run(self.endpoint, json=alert.to_payload(), headers={"Content-Type": "application/json"},
                 extra_options={"timeout": 15, "check_response": True})
        self.log.info("Alert for %s (%s) posted to webhook connection %s", alert.job, alert.verdict,
                      self.http_conn_id)


send_gate_webhook_notification = GateWebhookNotifier

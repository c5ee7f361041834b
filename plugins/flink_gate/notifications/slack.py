"""Slack incoming webhook (the slack provider's `slackwebhook` connection holds the URL/token)."""

from __future__ import annotations

from flink_gate.alerts import GateAlert
from flink_gate.notifications.base import GateNotifier


class GateSlackWebhookNotifier(GateNotifier):
    """Post the alert text (with a header block) to a Slack incoming webhook."""

    template_fields = ("slack_webhook_conn_id",)

    def __init__(self, *, slack_webhook_conn_id: str = "slack_default", gate_task_id: str = "gate") -> None:
        super().__init__(gate_task_id=gate_task_id)
        self.slack_webhook_conn_id = slack_webhook_conn_id

    def enabled(self) -> bool:
        return bool(self.slack_webhook_conn_id and str(self.slack_webhook_conn_id).strip())

    def send(self, alert: GateAlert) -> None:
        from airflow.providers.slack.hooks.slack_webhook import SlackWebhookHook

        text = alert.to_text()
        blocks = [
            {"type": "header", "text": {"type": "plain_text", "text": f"{alert.job}: {alert.verdict}"[:150]}},
            {"type": "section", "text": {"type": "mrkdwn", "text": text[:2900]}},
        ]
        SlackWebhookHook(slack_webhook_conn_id=self.slack_webhook_conn_id).send(text=text, blocks=blocks)
        self.log.info("Alert for %s (%s) sent to Slack connection %s", alert.job, alert.verdict,
                      self.slack_webhook_conn_id)


send_gate_slack_notification = GateSlackWebhookNotifier

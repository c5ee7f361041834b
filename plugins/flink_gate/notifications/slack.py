"""Slack incoming webhook (the slack provider's `slackwebhook` connection holds the URL/token).

Names in the alert are the job author's; both the mrkdwn section and the plain_text header are
escaped the way Slack documents (`&amp;`, `&lt;`, `&gt;`), so `<!channel>` in a job name is text,
not a channel-wide ping, and `<http://evil|click>` is not a link.
"""

from __future__ import annotations

from flink_gate.alerts import FleetDigest, GateAlert, slack_escape
from flink_gate.notifications.base import GateNotifier


class GateSlackWebhookNotifier(GateNotifier):
    """Post the alert text (with a header block) to a Slack incoming webhook."""

    template_fields = ("slack_webhook_conn_id",)

    def __init__(self, *, slack_webhook_conn_id: str = "slack_default", gate_task_id: str = "gate") -> None:
        super().__init__(gate_task_id=gate_task_id)
        self.slack_webhook_conn_id = slack_webhook_conn_id

    def enabled(self) -> bool:
        return bool(self.slack_webhook_conn_id and str(self.slack_webhook_conn_id).strip())

    def send(self, alert: GateAlert | FleetDigest) -> None:
        from airflow.providers.slack.hooks.slack_webhook import SlackWebhookHook

        text = alert.to_slack_text()
        blocks = [
            {"type": "header", "text": {"type": "plain_text",
                                        "text": _cut(slack_escape(f"{alert.job}: {alert.verdict}"), 150)}},
            {"type": "section", "text": {"type": "mrkdwn", "text": _cut(text, 2900)}},
        ]
        SlackWebhookHook(slack_webhook_conn_id=self.slack_webhook_conn_id).send(text=text, blocks=blocks)
        self.log.info("Alert for %s (%s) sent to Slack connection %s", alert.job, alert.verdict,
                      self.slack_webhook_conn_id)


def _cut(text: str, limit: int) -> str:
    """At most `limit` characters (Slack's block limits), never ending inside an `&lt;`-style escape."""
    if len(text) <= limit:
        return text
    cut = text[:limit]
    amp = cut.rfind("&", max(0, limit - 5))
    return cut[:amp] if amp != -1 and ";" not in cut[amp:] else cut


send_gate_slack_notification = GateSlackWebhookNotifier

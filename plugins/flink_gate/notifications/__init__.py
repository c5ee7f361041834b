"""Verdict notifiers: nothing is sent for SAFE; STATE_LOSS / RESTORE_FAILS send the gate alert."""

from flink_gate.notifications.slack import GateSlackWebhookNotifier
from flink_gate.notifications.smtp import GateEmailNotifier
from flink_gate.notifications.webhook import GateWebhookNotifier

__all__ = ["GateEmailNotifier", "GateSlackWebhookNotifier", "GateWebhookNotifier"]

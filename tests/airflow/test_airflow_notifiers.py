"""The Slack and e-mail notifiers deliver the gate alert to real local endpoints (the webhook one is
covered by the DAG runs), and no notifier sends anything without a blocked verdict. Names that
look like Slack control sequences or HTML reach every channel as text, never as markup.

Each check runs in a child interpreter with the stack's Airflow environment plus its own
`AIRFLOW_CONN_*` variables, the way a task resolves connections.
"""

from __future__ import annotations

import email
import json
import subprocess
import threading
import warnings
from email.header import decode_header, make_header

with warnings.catch_warnings():  # Python 3.11's own SMTP server; deprecated, still the simplest real one
    warnings.simplefilter("ignore", DeprecationWarning)
    import asyncore
    import smtpd

from demo.stack import AIRFLOW_VENV, REPO, AlertReceiver

ALERT = {"event": "flink_upgrade_blocked", "job": "fraud-scoring", "verdict": "STATE_MISROUTED", "dag_id": "d",
         "run_id": "manual__1", "savepoint": "s3://flink-savepoints/fraud-scoring/sp-1/_metadata",
         "flink_error": None, "bytes_at_risk": 4866,
         "operators": [{"operator_id": "3a434c34ffe2fe820735436a4ca97107", "name": "inserted", "lost_bytes": 4866,
                        "state_names": ["keyed"], "reason": "keyed state restored into 'inserted'"}],
         "remedies": ['keyed: setUidHash("3a434c34ffe2fe820735436a4ca97107")'],
         "report_url": "http://127.0.0.1:8080/upgrade-gate/report/fraud-scoring/manual__1"}

SCRIPT = """
import json, sys
sys.path[:0] = [{repo!r}, {plugins!r}]
from flink_gate.notifications import GateEmailNotifier, GateSlackWebhookNotifier, GateWebhookNotifier
alert = json.loads(sys.argv[1])
ctx = {{"gate_alert": alert}} if alert else {{}}
GateSlackWebhookNotifier(slack_webhook_conn_id="slack_gate")(dict(ctx))
GateEmailNotifier(to="oncall@example.org", smtp_conn_id="smtp_gate")(dict(ctx))
GateWebhookNotifier(http_conn_id="")(dict(ctx))  # switched off: must not fail or send
print("done")
"""


class _Mailbox(smtpd.SMTPServer):
    """A real SMTP server on its own socket map, served by one thread until `close`. asyncore's default map is
    global: a loop thread left over from an earlier test (still holding a client's channel) would serve this
    server's channels too, two threads on one channel (an IndexError inside asynchat, a disconnected client).
    `shutdown` ends it."""

    def __init__(self) -> None:
        self.map: dict[int, object] = {}
        super().__init__(("127.0.0.1", 0), None, decode_data=True, map=self.map)
        self.messages: list[tuple[str, list[str], str]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @property
    def port(self) -> int:
        return self.socket.getsockname()[1]

    def _serve(self) -> None:
        while not self._stop.is_set() and self.map:
            asyncore.loop(timeout=0.05, map=self.map, count=1)

    def process_message(self, peer, mailfrom, rcpttos, data, **kwargs):  # type: ignore[no-untyped-def]
        self.messages.append((mailfrom, rcpttos, data))

    def shutdown(self) -> None:
        """Stop the serving thread, then close the server and every channel it opened."""
        self._stop.set()
        self._thread.join(timeout=5)
        asyncore.close_all(map=self.map)


def _run(stack, alert, http_port, smtp_port, script=None):
    env = dict(stack.env)
    env["AIRFLOW_CONN_HOOK_GATE"] = json.dumps({"conn_type": "http", "host": "127.0.0.1", "port": http_port,
                                                "schema": "http"})
    env["AIRFLOW_CONN_SLACK_GATE"] = json.dumps(
        {"conn_type": "slackwebhook", "password": f"http://127.0.0.1:{http_port}/services/T0/B0/secret-token"})
    env["AIRFLOW_CONN_SMTP_GATE"] = json.dumps(
        {"conn_type": "smtp", "host": "127.0.0.1", "port": smtp_port,
         "extra": {"disable_tls": True, "disable_ssl": True, "from_email": "gate@example.org"}})
    script = (script or SCRIPT).format(repo=str(REPO), plugins=str(REPO / "plugins"))
    proc = subprocess.run([str(AIRFLOW_VENV / "bin" / "python"), "-c", script, json.dumps(alert)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "done" in proc.stdout, proc.stderr[-3000:]
    assert "secret-token" not in proc.stdout + proc.stderr


def test_slack_and_email_deliver_the_alert_and_nothing_without_one(stack):
    receiver = AlertReceiver()
    mailbox = _Mailbox()
    try:
        smtp_port = mailbox.port
        _run(stack, None, receiver.port, smtp_port)  # no blocked verdict: nothing sent anywhere
        assert receiver.received == [] and mailbox.messages == []

        _run(stack, ALERT, receiver.port, smtp_port)
        assert len(receiver.received) == 1
        slack = receiver.received[0]
        assert slack["path"] == "/services/T0/B0/secret-token"
        text = slack["body"]["text"]
        for needle in ("fraud-scoring", "STATE_MISROUTED", "inserted", "3a434c34ffe2fe820735436a4ca97107",
                       "keyed", "4866 B", "setUidHash", ALERT["report_url"]):
            assert needle in text, needle
        assert slack["body"]["blocks"][0]["text"]["text"] == "fraud-scoring: STATE_MISROUTED"

        assert len(mailbox.messages) == 1
        _sender, rcpts, data = mailbox.messages[0]
        assert rcpts == ["oncall@example.org"]
        msg = email.message_from_string(data)
        assert "fraud-scoring: STATE_MISROUTED" in str(make_header(decode_header(msg["Subject"])))
        html = "".join(p.get_payload(decode=True).decode() for p in msg.walk() if p.get_content_type() == "text/html")
        for needle in ("inserted", "4866", "setUidHash", ALERT["report_url"]):
            assert needle in html, needle
    finally:
        receiver.stop()
        mailbox.shutdown()


HOSTILE_SCRIPT = SCRIPT.replace('GateWebhookNotifier(http_conn_id="")',
                                'GateWebhookNotifier(http_conn_id="hook_gate", endpoint="/hook")')
HOSTILE = {**ALERT, "job": "pay<!channel>&<!here>", "operators": [
    {"operator_id": "3a434c34ffe2fe820735436a4ca97107", "name": "<http://evil.example/x|click me>",
     "lost_bytes": 4866, "state_names": ["<@U123>", "a&b", "<script>alert(1)</script>"],
     "reason": "restored into <!subteam^S1>", "consequence": "source '<!here>' starts at its startup position"}],
           "remedies": ["rename to <b>x</b> & <!everyone>"]}
NAMES = ("pay<!channel>&<!here>", "<http://evil.example/x|click me>", "<@U123>", "a&b",
         "<script>alert(1)</script>", "<!subteam^S1>", "<b>x</b> & <!everyone>",
         "source '<!here>' starts at its startup position")


def test_names_reach_slack_and_mail_as_text_and_the_webhook_exactly(stack):
    receiver = AlertReceiver()
    mailbox = _Mailbox()
    try:
        _run(stack, HOSTILE, receiver.port, mailbox.port, HOSTILE_SCRIPT)
        by_path = {r["path"]: r["body"] for r in receiver.received}
        assert sorted(by_path) == ["/hook", "/services/T0/B0/secret-token"]

        # Slack: the JSON Slack would parse holds no control sequence at all, only Slack's escapes
        slack = by_path["/services/T0/B0/secret-token"]
        texts = [slack["text"], slack["blocks"][0]["text"]["text"], slack["blocks"][1]["text"]["text"]]
        for text in texts:
            assert "<" not in text and ">" not in text, text
            assert "&amp;lt;" not in text  # escaped once, not twice
        assert slack["blocks"][0]["text"]["text"] == "pay&lt;!channel&gt;&amp;&lt;!here&gt;: STATE_MISROUTED"
        for needle in ("pay&lt;!channel&gt;&amp;&lt;!here&gt;", "&lt;http://evil.example/x|click me&gt;",
                       "&lt;@U123&gt;", "a&amp;b", "&lt;!subteam^S1&gt;",
                       "&lt;b&gt;x&lt;/b&gt; &amp; &lt;!everyone&gt;", "4866 B", ALERT["report_url"]):
            assert needle in slack["text"], needle
        # reversing Slack's three escapes gives back exactly what the job's author wrote
        unescaped = slack["text"].replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
        for name in NAMES:
            assert name in unescaped, name

        # the webhook gets data: the exact names, in the fields and in its text
        hook = by_path["/hook"]
        assert hook["job"] == HOSTILE["job"] and hook["operators"] == HOSTILE["operators"]
        assert hook["remedies"] == HOSTILE["remedies"]
        for name in NAMES:
            assert name in hook["text"], name

        # the e-mail is HTML-escaped: no tag or link from a name
        assert len(mailbox.messages) == 1
        msg = email.message_from_string(mailbox.messages[0][2])
        html = "".join(p.get_payload(decode=True).decode() for p in msg.walk() if p.get_content_type() == "text/html")
        for raw in ("<script>", "<!channel>", "<http://evil", "<b>x</b>", "<@U123>"):
            assert raw not in html, raw
        for escaped in ("&lt;script&gt;alert(1)&lt;/script&gt;", "pay&lt;!channel&gt;&amp;&lt;!here&gt;",
                        "&lt;http://evil.example/x|click me&gt;", "&lt;b&gt;x&lt;/b&gt; &amp; &lt;!everyone&gt;"):
            assert escaped in html, escaped
    finally:
        receiver.stop()
        mailbox.shutdown()


DIGEST_SCRIPT = HOSTILE_SCRIPT


def test_a_fleet_scan_digest_is_one_message_per_channel_with_the_worst_jobs(stack):
    """Issue 32: a fleet scan sends one digest, however many jobs it blocked; each channel renders it, job names
    escaped as in a single job's alert."""
    from flink_gate.alerts import FleetDigest, worst_jobs

    rows = [{"job": f"job-{i:03d}", "verdict": v, "bytes_at_risk": i * 100}
            for i, v in enumerate(["SAFE", "STATE_LOSS", "RESTORE_FAILS", "STATE_MISROUTED"] * 75)]
    rows.append({"job": "pay<!channel>", "verdict": "RESTORE_FAILS", "bytes_at_risk": 10**9})
    rows.append({"job": "unreadable", "verdict": "ERROR", "bytes_at_risk": 0})
    worst = [{**w, "report_url": f"http://ui/upgrade-gate/report/{w['job']}/r1"} for w in worst_jobs(rows)]
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
    digest = FleetDigest(run_id="scheduled__1", dag_id="flink_fleet_scan", jobs=len(rows), blocked=226,
                         verdicts=counts, bytes_at_risk=123456, worst=tuple(worst),
                         report_url="http://ui/upgrade-gate/report/fleet-scan/scheduled__1", unchecked=1)
    # worst first: every RESTORE_FAILS before any misrouting, most bytes first; never SAFE, never ERROR
    assert [w["job"] for w in worst[:2]] == ["pay<!channel>", "job-298"] and len(worst) == 10
    assert all(w["verdict"] == "RESTORE_FAILS" for w in worst)

    receiver = AlertReceiver()
    mailbox = _Mailbox()
    try:
        _run(stack, digest.to_payload(), receiver.port, mailbox.port, DIGEST_SCRIPT)
        by_path = {r["path"]: r["body"] for r in receiver.received}
        assert sorted(by_path) == ["/hook", "/services/T0/B0/secret-token"], sorted(by_path)  # one message each
        hook = by_path["/hook"]
        assert hook["event"] == "flink_fleet_scan_blocked" and hook["blocked"] == 226 and hook["jobs"] == 302
        assert [w["job"] for w in hook["worst"]] == [w["job"] for w in worst]
        slack = by_path["/services/T0/B0/secret-token"]["text"]
        assert "226 of 302 jobs BLOCKED" in slack and digest.report_url in slack
        assert "pay&lt;!channel&gt;" in slack and "<!channel>" not in slack
        assert len(mailbox.messages) == 1
        msg = email.message_from_string(mailbox.messages[0][2])
        html = "".join(p.get_payload(decode=True).decode() for p in msg.walk() if p.get_content_type() == "text/html")
        assert "job-298" in html and "pay&lt;!channel&gt;" in html and digest.report_url in html
    finally:
        receiver.stop()
        mailbox.shutdown()

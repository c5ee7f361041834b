"""Secrets in connections never leave them: a real `flink_upgrade_gate` run with secret-bearing
connections, then every place a secret could land is searched for each one.

The run is scheduled the production way: `airflow standalone` (scheduler, LocalExecutor, API
server with its execution API, DAG processor) on the test stack's home, triggered through the
REST API, so each task runs in its own supervised process and writes its log file under
`$AIRFLOW_HOME/logs` (`airflow dags test` would only print to its console).

The run checks fraud-scoring's upgrade (STATE_MISROUTED, so the gate blocks and every alert channel
fires) with:
* the S3 connection's access key and secret key (SeaweedFS enforces them: the run reads through them);
* a webhook connection with a basic-auth password and a token in its extra (sent as a header);
* a Slack webhook connection whose URL (its password) carries the hook token in its path;
* an SMTP connection, stored in the metadata DB by `airflow connections add`, with a login and
  password the SMTP sink below requires (AUTH PLAIN/LOGIN).

Each receiver records that it got the secret where it belongs (the Authorization header, the
URL path, the SMTP AUTH exchange), which proves the secrets were used; then none of them may
appear in the log files (every task's, the scheduler's, the DAG processor's), the server's
console, any XCom value, the rendered
template fields, the published reports, or the alert bodies the receivers got.
"""

from __future__ import annotations

import base64
import json
import secrets
import socketserver
import sqlite3
import subprocess
import threading
import time
import urllib.request
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from demo import stack as st

JOB = "fraud-scoring"


class Receiver:
    """A real HTTP endpoint on 127.0.0.1 keeping every request: path, headers and raw body."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        received = self.requests

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                received.append({"path": self.path, "headers": dict(self.headers), "body": body})
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class SmtpSink:
    """The smallest SMTP server smtplib talks to with a login: EHLO advertising AUTH PLAIN and LOGIN,
    MAIL, RCPT, DATA, QUIT. Keeps the credentials it was given and every message."""

    def __init__(self) -> None:
        self.logins: list[tuple[str, str]] = []
        self.messages: list[bytes] = []
        sink = self

        class Handler(socketserver.StreamRequestHandler):
            def reply(self, line: str) -> None:
                self.wfile.write(line.encode() + b"\r\n")

            def line(self) -> str:
                return self.rfile.readline(65536).decode("utf-8", "replace").rstrip("\r\n")

            def handle(self) -> None:
                self.reply("220 sink ESMTP")
                while True:
                    cmd = self.line()
                    verb = cmd.split(" ", 1)[0].upper()
                    if not cmd or verb == "QUIT":
                        self.reply("221 bye")
                        return
                    if verb == "EHLO":
                        self.reply("250-sink")
                        self.reply("250 AUTH PLAIN LOGIN")
                    elif verb == "AUTH":
                        parts = cmd.split()
                        if parts[1].upper() == "PLAIN":
                            if len(parts) > 2:
                                blob = parts[2]
                            else:
                                self.reply("334 ")
                                blob = self.line()
                            _, user, password = base64.b64decode(blob).decode().split("\0")
                        else:
                            self.reply("334 VXNlcm5hbWU6")
                            user = base64.b64decode(self.line()).decode()
                            self.reply("334 UGFzc3dvcmQ6")
                            password = base64.b64decode(self.line()).decode()
                        sink.logins.append((user, password))
                        self.reply("235 authenticated")
                    elif verb == "DATA":
                        self.reply("354 go ahead")
                        data = []
                        while (raw := self.rfile.readline(1 << 20)) not in (b".\r\n", b".\n", b""):
                            data.append(raw)
                        sink.messages.append(b"".join(data))
                        self.reply("250 queued")
                    else:  # HELO, MAIL, RCPT, RSET, NOOP
                        self.reply("250 ok")

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _api(server: Any, path: str, method: str = "GET", payload: Any = None) -> Any:
    """The Airflow REST API as the generated admin (a fresh token each call: tokens are short-lived)."""
    body = json.dumps({"username": server.user, "password": server.password}).encode()
    req = urllib.request.Request(f"{server.url}/auth/token", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=20) as resp:
        token = json.loads(resp.read())["access_token"]
    req = urllib.request.Request(f"{server.url}{path}", method=method,
                                 data=json.dumps(payload).encode() if payload is not None else None,
                                 headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=20) as resp:
        return json.loads(resp.read())


def _until(what: str, probe: Any, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            found = probe()
            if found:
                return found
        except (OSError, ValueError, KeyError) as exc:  # not parsed yet, server busy: ask again
            last = exc
        time.sleep(2)
    raise AssertionError(f"{what} not within {timeout:.0f}s ({last})")


@pytest.fixture(scope="module")
def secret_run(stack):
    """One blocked gate run with secret-bearing connections; yields what the test inspects."""
    s3 = st._s3_server_module()  # the keys SeaweedFS was started with (and enforces)
    tag = secrets.token_hex(6)
    secret = {
        "s3 access key": s3.ACCESS_KEY,
        "s3 secret key": s3.SECRET_KEY,
        "webhook password": f"hook-pw-{tag}-{secrets.token_hex(8)}",
        "webhook token": f"hook-tok-{tag}-{secrets.token_hex(8)}",
        "slack token": f"slack-tok-{tag}-{secrets.token_hex(8)}",
        "smtp password": f"smtp-pw-{tag}-{secrets.token_hex(8)}",
    }
    http, smtp = Receiver(), SmtpSink()
    slack_url = f"http://127.0.0.1:{http.port}/services/T0/B0/{secret['slack token']}"
    env = dict(stack.env)
    env.update({
        "AIRFLOW_CONN_UPGRADE_GATE_WEBHOOK": json.dumps({
            "conn_type": "http", "host": "127.0.0.1", "port": http.port, "schema": "http",
            "login": "gate-hook", "password": secret["webhook password"],
            "extra": {"X-Gate-Token": secret["webhook token"]}}),
        "AIRFLOW_CONN_SLACK_SECRET": json.dumps({"conn_type": "slackwebhook", "password": slack_url}),
        "AIRFLOW_VAR_UPGRADE_GATE_SLACK_CONN_ID": "slack_secret",
        "AIRFLOW_VAR_UPGRADE_GATE_SMTP_CONN_ID": "smtp_secret",
        "AIRFLOW_VAR_UPGRADE_GATE_ALERT_EMAIL": "oncall@example.org",
    })
    try:
        added = subprocess.run(
            [st.airflow_bin(), "connections", "add", "smtp_secret", "--conn-json", json.dumps({
                "conn_type": "smtp", "host": "127.0.0.1", "port": smtp.port, "login": "gate-mailer",
                "password": secret["smtp password"],
                "extra": {"disable_tls": True, "disable_ssl": True, "from_email": "gate@example.org"}})],
            env=env, cwd=stack.home, capture_output=True, text=True, timeout=300)
        assert added.returncode == 0, added.stderr[-3000:]
        # a copy of the stack: the server gets these connections, later tests keep the stack's own
        t0 = time.monotonic()
        server = st.start_standalone(replace(stack, env=env, procs=[]))
        try:
            dags = "/api/v2/dags/flink_upgrade_gate"
            t1 = time.monotonic()
            _until("the DAG parsed", lambda: _api(server, dags).get("dag_id"), 180)
            t2 = time.monotonic()
            _api(server, dags, "PATCH", {"is_paused": False})
            run_id = _api(server, f"{dags}/dagRuns", "POST",
                          {"logical_date": None, "conf": st.gate_conf(stack, JOB)})["dag_run_id"]
            run = _until("the run finished", lambda: (r := _api(server, f"{dags}/dagRuns/{run_id}"))["state"]
                         in ("success", "failed") and r, 400)
            print(f"standalone up {t1 - t0:.0f} s, DAG parsed {t2 - t1:.0f} s, run {time.monotonic() - t2:.0f} s")
        finally:
            st.stop_process_group(server.proc, timeout=20)
        yield {"secret": secret, "slack_url": slack_url, "run_id": run_id, "run": run,
               "db": stack.home / "airflow.db", "http": http.requests, "smtp_logins": smtp.logins,
               "mails": smtp.messages, "output": added.stdout + added.stderr + server.log.read_text(errors="replace")}
    finally:
        http.stop()
        smtp.stop()


def _leaks(secret: dict[str, str], where: str, text: str) -> list[str]:
    return [f"{what} in {where}" for what, value in secret.items() if value in text]


def test_the_blocked_run_used_every_secret_and_alerted_every_channel(stack, secret_run):
    secret = secret_run["secret"]
    assert secret_run["run"]["state"] == "failed"  # blocked: the gate is the failed task, after reading S3
    with sqlite3.connect(secret_run["db"]) as conn:
        tasks = dict(conn.execute("select task_id, state from task_instance where dag_id=? and run_id=?",
                                  ("flink_upgrade_gate", secret_run["run_id"])).fetchall())
    assert tasks["check"] == "success" and tasks["gate"] == "failed", tasks  # read S3 with the keys
    by_path = {r["path"]: r for r in secret_run["http"]}
    assert sorted(by_path) == ["/", f"/services/T0/B0/{secret['slack token']}"], sorted(by_path)
    hook = by_path["/"]
    basic = base64.b64encode(f"gate-hook:{secret['webhook password']}".encode()).decode()
    assert hook["headers"]["Authorization"] == f"Basic {basic}" and hook["headers"]["X-Gate-Token"] == secret[
        "webhook token"]
    assert json.loads(hook["body"])["verdict"] == "STATE_MISROUTED"
    assert secret_run["smtp_logins"] == [("gate-mailer", secret["smtp password"])]
    assert len(secret_run["mails"]) == 1


def test_no_secret_in_task_logs_or_the_server_output(stack, secret_run):
    secret = secret_run["secret"] | {"slack url": secret_run["slack_url"]}
    logs = [p for p in (stack.home / "logs").rglob("*") if p.is_file()]
    ours = {p.parent.name for p in logs if f"run_id={secret_run['run_id']}" in str(p)}
    # every task that ran wrote its log file, the failing gate's (with the alert text) included
    assert {f"task_id={t}" for t in ("check", "gate")} <= ours, sorted(ours)
    gate_log = next(p for p in logs if f"run_id={secret_run['run_id']}" in str(p) and "task_id=gate" in str(p))
    assert "STATE_MISROUTED" in gate_log.read_text()
    leaks = [leak for p in logs for leak in _leaks(secret, str(p), p.read_text(errors="replace"))]
    leaks += _leaks(secret, "the `airflow connections add` / `airflow standalone` output", secret_run["output"])
    assert leaks == []


def test_no_secret_in_xcom_or_rendered_template_fields(stack, secret_run):
    secret = secret_run["secret"] | {"slack url": secret_run["slack_url"]}
    with sqlite3.connect(secret_run["db"]) as conn:
        xcoms = conn.execute("select dag_id, run_id, task_id, key, value from xcom").fetchall()
        rendered = conn.execute("select dag_id, run_id, task_id, rendered_fields, k8s_pod_yaml "
                                "from rendered_task_instance_fields").fetchall()
    ours = {(r[2], r[3]) for r in xcoms if r[1] == secret_run["run_id"]}
    assert {("check", "return_value"), ("gate", "gate_alert")} <= ours, ours
    assert {r[2] for r in rendered if r[1] == secret_run["run_id"]} >= {"check", "gate"}
    leaks = [leak for r in xcoms for leak in _leaks(secret, f"XCom {r[:4]}", str(r[4]))]
    leaks += [leak for r in rendered for leak in _leaks(secret, f"rendered fields of {r[:3]}", f"{r[3]} {r[4]}")]
    assert leaks == []


def test_no_secret_in_reports_or_alerts(stack, secret_run):
    secret = secret_run["secret"]
    reports = [p for p in stack.reports_dir.rglob("*") if p.is_file()]
    assert any(JOB in str(p) and p.name == "report.html" for p in reports)
    leaks = [leak for p in reports for leak in _leaks(secret, str(p), p.read_text(errors="replace"))]
    for r in secret_run["http"]:
        leaks += _leaks(secret, f"the body posted to {r['path'].split('/')[1] or 'the webhook'}",
                        r["body"].decode(errors="replace"))
    for mail in secret_run["mails"]:
        leaks += _leaks(secret, "the e-mail", mail.decode(errors="replace"))
    assert leaks == []

"""The report view sends its security headers on every response, errors included, through the real
Airflow API server app.

A child interpreter with the stack's Airflow environment builds Airflow's own FastAPI app
(`airflow.api_fastapi.app.create_app`, which mounts our plugin at /upgrade-gate exactly as
`airflow api-server` does), logs in through the Simple auth manager's `/auth/token`, and asks the
view for pages that exist, pages that do not, and pages without a login. The browser-level proof
that the report still renders under this policy is tests/airflow/test_airflow_ui.py.
"""

from __future__ import annotations

import json
import re
import secrets
import subprocess

from demo.stack import AIRFLOW_VENV, REPO

SCRIPT = """
import json, sys
sys.path[:0] = [{repo!r}, {plugins!r}]
from flink_gate.reports import ReportStore
store = ReportStore()
job, run = "fraud-scoring", "manual__2026-11-23T08_00_00_00_00"
store.publish(job, run, {{"verdict": "STATE_MISROUTED", "operators": [{{"operator_id": "3a43", "name": "<b>x</b>",
              "state_bytes": 10, "lost_bytes": 10, "state_names": ["keyed"]}}], "losses": [], "remedies": []}},
              "<html><head><style>body{{color:red}}</style></head><body>core report</body></html>", {{"dag_id": "d"}})

fleet_jobs = [{{"job": j, "verdict": v, "bytes_at_risk": b, "state_bytes": 2 * b + 10}} for j, v, b in
              [("orders", "SAFE", 0), ("<i>evil</i>", "STATE_LOSS", 3 << 20),
               ("fraud-scoring", "STATE_MISROUTED", 4866), ("payments", "RESTORE_FAILS", 100)]]
store.publish("fleet-scan", run, {{"verdict": "BLOCK", "summary": {{"gate": "BLOCK", "verdicts": {{}}}},
                                  "jobs": fleet_jobs}}, "<p>fleet</p>", {{"dag_id": "flink_fleet_scan"}})

broken = store.publish("broken-job", "run1", {{"verdict": "SAFE"}}, "<p/>", {{}})
(broken / "check.json").write_text("{{ half a file")  # a damaged disk
odd = store.publish("odd-job", "run1", {{"verdict": "SAFE"}}, "<p/>", {{}})
(odd / "check.json").write_text(json.dumps({{"verdict": "SAFE", "operators": "<script>x</script>"}}))  # edited by hand

from fastapi.testclient import TestClient
from airflow.api_fastapi.app import create_app

client = TestClient(create_app(), raise_server_exceptions=False)
token = client.post("/auth/token", json={{"username": "gate-admin", "password": sys.argv[1]}}).json()["access_token"]
auth = {{"Authorization": f"Bearer {{token}}"}}
version = store.get(job, run).version
out = {{}}
for name, path, headers in [
        ("index", "/upgrade-gate/", auth),
        ("report", f"/upgrade-gate/report/{{job}}/{{run}}", auth),
        ("report_html", f"/upgrade-gate/report/{{job}}/{{run}}/report.html?version={{version}}", auth),
        ("api", "/upgrade-gate/api/reports", auth),
        ("fleet", f"/upgrade-gate/report/fleet-scan/{{run}}?sort=job&order=asc", auth),
        ("fleet_filtered", f"/upgrade-gate/report/fleet-scan/{{run}}?verdict=STATE_LOSS", auth),
        ("fleet_bad_params", f"/upgrade-gate/report/fleet-scan/{{run}}?sort=__class__&order=x&q=%3Cscript%3E", auth),
        ("missing_report", "/upgrade-gate/report/nope/nope", auth),
        ("missing_route", "/upgrade-gate/no/such/page", auth),
        ("truncated_report", "/upgrade-gate/report/broken-job/run1", auth),
        ("truncated_report_api", "/upgrade-gate/api/report/broken-job/run1", auth),
        ("tampered_report", "/upgrade-gate/report/odd-job/run1", auth),
        ("unauthenticated", "/upgrade-gate/", {{}}),
        ("bad_token", "/upgrade-gate/", {{"Authorization": "Bearer not-a-jwt"}}),
]:
    resp = client.get(path, headers=headers)
    out[name] = {{"status": resp.status_code, "headers": dict(resp.headers), "body": resp.text}}
out["version"] = version
print("RESULT " + json.dumps(out))
"""


def _responses(stack, tmp_path):
    password = secrets.token_urlsafe(16)
    pw_file = tmp_path / "passwords.json"
    pw_file.write_text(json.dumps({"gate-admin": password}))
    env = dict(stack.env, UPGRADE_GATE_REPORTS_DIR=str(tmp_path / "reports"),
               AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS="gate-admin:admin",
               AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE=str(pw_file))
    script = SCRIPT.format(repo=str(REPO), plugins=str(REPO / "plugins"))
    proc = subprocess.run([str(AIRFLOW_VENV / "bin" / "python"), "-c", script, password], env=env,
                          capture_output=True, text=True, timeout=300, cwd=stack.home)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(lines[-1].removeprefix("RESULT "))


def test_every_view_response_carries_the_security_headers(stack, tmp_path):
    out = _responses(stack, tmp_path)
    version = out.pop("version")
    assert {k: v["status"] for k, v in out.items()} == {
        "index": 200, "report": 200, "report_html": 200, "api": 200, "fleet": 200, "fleet_filtered": 200,
        "fleet_bad_params": 200, "missing_report": 404, "missing_route": 404,
        "truncated_report": 422, "truncated_report_api": 422, "tampered_report": 422, "unauthenticated": 401,
        "bad_token": 403}
    for name, resp in out.items():
        headers = {k.lower(): v for k, v in resp["headers"].items()}
        assert headers.get("x-frame-options") == "SAMEORIGIN", name
        assert headers.get("x-content-type-options") == "nosniff", name
        csp = {d.split()[0]: d.split()[1:] for d in headers.get("content-security-policy", "").split("; ") if d}
        assert csp.get("default-src") == ["'none'"], (name, csp)
        assert csp.get("frame-ancestors") == ["'self'"], (name, csp)
        assert "script-src" not in csp and "'unsafe-eval'" not in str(csp), (name, csp)  # no script, ever
        assert csp.get("img-src") == ["'self'", "data:"] and csp.get("frame-src") == ["'self'"], (name, csp)

    # the pages this policy must still let render: inline style, inline SVG, links to the standalone report
    report = out["report"]["body"]
    assert "<style>" in report and 'class="bars' in report and 'class="graphs' in report
    assert "&lt;b&gt;x&lt;/b&gt;" in report and "<b>x</b>" not in report
    assert "10 B, 10 B at risk" in report and "@media (prefers-color-scheme: dark)" in report
    assert f"/report.html?version={version}\"" in report
    # the fleet summary: a table of every job, sorted and filtered by the query parameters, names escaped
    rows = lambda page: re.findall(r'<tr class="fleet-row[^"]*" data-job="([^"]*)"', page)  # noqa: E731
    assert rows(out["fleet"]["body"]) == ["&lt;i&gt;evil&lt;/i&gt;", "fraud-scoring", "orders", "payments"]
    assert rows(out["fleet_filtered"]["body"]) == ["&lt;i&gt;evil&lt;/i&gt;"] and "3.0 MiB" in out["fleet"]["body"]
    assert '<a href="/upgrade-gate/report/fraud-scoring/' in out["fleet"]["body"]  # its own report, same run
    assert len(rows(out["fleet_bad_params"]["body"])) == 0 and "<script>" not in out["fleet_bad_params"]["body"]
    assert "core report" in out["report_html"]["body"]
    assert "Traceback" not in out["missing_report"]["body"]
    # a stored report that cannot be shown: an explicit page naming it and what is wrong, never a bare 500
    for name in ("truncated_report", "truncated_report_api", "tampered_report"):
        body = out[name]["body"]
        assert "Report cannot be shown" in body and "run1" in body and "Traceback" not in body, (name, body)
        assert "<script>" not in body, body
    assert "broken-job" in out["truncated_report"]["body"] and "not readable JSON" in out["truncated_report"]["body"]
    tampered = out["tampered_report"]["body"]
    assert "odd-job" in tampered and "operators&#39; is not a list of records" in tampered

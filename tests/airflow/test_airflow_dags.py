"""The DAGs import cleanly and `flink_upgrade_gate` gates real upgrades end to end.

Real everything: SeaweedFS holds savepoints real Flink wrote and the job graphs real Flink built
(tests/fixtures/restores/2.3.0/<scenario>), Spark local computes the operator IDs, the core
simulates the restore, and the alert goes over HTTP to a real local receiver.
"""

from __future__ import annotations

import json

from flink_gate.reports import ReportStore

GATE_DAG = "flink_upgrade_gate"
CHECK_ONLY_SKIPPED = ("approve", "no_approval_needed", "upgrade", "verify")
BLOCKED_DOWNSTREAM = ("decide", "approve", "no_approval_needed", "upgrade", "verify")


def _json_out(stdout: str):
    """The CLI's JSON document (Airflow may log warnings on stdout before it)."""
    for line in reversed(stdout.strip().splitlines()):
        if line.startswith(("[", "{")):
            return json.loads(line)
    raise AssertionError(f"no JSON in: {stdout[-2000:]}")


DAGBAG_SCRIPT = """
import json
from airflow.dag_processing.dagbag import DagBag
bag = DagBag()
print(json.dumps({"errors": {k: str(v) for k, v in bag.import_errors.items()}, "dags": sorted(bag.dag_ids),
                  "tasks": {d: sorted(t.task_id for t in bag.dags[d].tasks) for d in bag.dag_ids}}))
"""


def test_dagbag_has_no_import_errors(stack):
    import subprocess

    from demo.stack import AIRFLOW_VENV

    proc = subprocess.run([str(AIRFLOW_VENV / "bin" / "python"), "-c", DAGBAG_SCRIPT], env=stack.env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    bag = _json_out(proc.stdout)
    assert bag["errors"] == {}
    assert bag["dags"] == ["flink_fleet_scan", "flink_rolling_upgrade", GATE_DAG]
    assert bag["tasks"][GATE_DAG] == sorted(["fetch_savepoint", "fetch_graph", "compute_operator_ids",
                                             "simulate_restore", "gate", "decide", "approve", "no_approval_needed",
                                             "upgrade", "verify"])


def _report(stack, job):
    entries = [e for e in ReportStore(stack.reports_dir).entries() if e.job == job]
    assert entries, f"no report published for {job}"
    return entries[0], json.loads((entries[0].path / "check.json").read_text())


def test_safe_upgrade_passes_without_alert(stack, gate_runs):
    from demo.stack import expected_verdict

    assert expected_verdict("orders-enrichment") == "SAFE"
    run = gate_runs["orders-enrichment"]
    assert run["state"] == "success", run["output"][-3000:]
    for task in ("fetch_savepoint", "fetch_graph", "compute_operator_ids", "simulate_restore", "gate", "decide"):
        assert run["tasks"][task] == "success", (task, run["tasks"])
    for task in CHECK_ONLY_SKIPPED:
        assert run["tasks"][task] == "skipped", (task, run["tasks"])
    assert run["alerts"] == []
    entry, check = _report(stack, "orders-enrichment")
    assert check["verdict"] == "SAFE" and entry.meta["verdict"] == "SAFE"
    assert (entry.path / "report.html").stat().st_size > 0
    # the savepoint was "latest" under the job prefix: the report names the exact _metadata read
    assert entry.meta["savepoint"].startswith("s3://flink-savepoints/orders-enrichment/savepoint-")
    assert entry.meta["savepoint"].endswith("/_metadata")
    # the IDs were computed in-process by the core; the report records the V2/V3 table of every node
    assert entry.meta["operator_ids"]["nodes"] == len(check["migration"])


def _assert_blocked(run, job, verdict, stack):
    assert run["state"] == "failed", run["output"][-3000:]
    for task in ("fetch_savepoint", "fetch_graph", "compute_operator_ids", "simulate_restore"):
        assert run["tasks"][task] == "success", (task, run["tasks"])
    assert run["tasks"]["gate"] == "failed"
    for task in BLOCKED_DOWNSTREAM:
        assert run["tasks"][task] == "upstream_failed", (task, run["tasks"])
    assert len(run["alerts"]) == 1, run["alerts"]
    body = run["alerts"][0]["body"]
    entry, check = _report(stack, job)
    assert check["verdict"] == verdict
    assert body["event"] == "flink_upgrade_blocked"
    assert body["job"] == job and body["verdict"] == verdict
    assert body["savepoint"] == entry.meta["savepoint"]
    assert body["report_url"].endswith(f"/upgrade-gate/report/{entry.job}/{entry.run}")
    lost = {x["operator_id"] for x in check["losses"]}
    assert lost and {o["operator_id"] for o in body["operators"]} == lost
    assert body["bytes_at_risk"] == sum(o["lost_bytes"] for o in body["operators"]) > 0
    for op in body["operators"]:
        assert op["state_names"], op
        assert op["name"] in body["text"] and op["operator_id"] in body["text"]
        for name in op["state_names"]:
            assert name in body["text"]
    assert len(body["remedies"]) == len(check["remedies"]) > 0
    assert entry.meta.get("alert_sent") is True
    return body, check


def test_state_loss_blocks_and_alerts_even_with_allow_non_restored_state(stack, gate_runs):
    from demo.stack import expected_verdict

    assert expected_verdict("ledger-rollup", allow_non_restored_state=True) == "STATE_LOSS"
    body, check = _assert_blocked(gate_runs["ledger-rollup"], "ledger-rollup", "STATE_LOSS", stack)
    # Flink would start this job and silently drop the keyed state of the operator whose uid went away
    assert check["restore_succeeds"] is True and body["flink_error"] is None
    assert "keyed" in body["operators"][0]["state_names"]
    assert "setUidHash" in " ".join(body["remedies"])


def test_misrouted_state_blocks_and_alerts(stack, gate_runs):
    from demo.stack import expected_verdict

    assert expected_verdict("fraud-scoring") == "STATE_MISROUTED"
    body, check = _assert_blocked(gate_runs["fraud-scoring"], "fraud-scoring", "STATE_MISROUTED", stack)
    # Flink itself starts this job (the restore succeeds) and hands the keyed state to the new map
    assert check["restore_succeeds"] is True and body["flink_error"] is None
    assert "keyed" in body["operators"][0]["state_names"]
    assert "setUidHash" in " ".join(body["remedies"])


def test_restore_failure_blocks_and_alerts_with_flinks_error(stack, gate_runs):
    from demo.stack import expected_verdict

    assert expected_verdict("payments-dedup") == "RESTORE_FAILS"
    body, check = _assert_blocked(gate_runs["payments-dedup"], "payments-dedup", "RESTORE_FAILS", stack)
    assert check["restore_succeeds"] is False
    assert body["flink_error"] == check["flink_error"]
    assert "Cannot map checkpoint/savepoint state for operator" in body["flink_error"]
    assert body["flink_error"] in body["text"]


def test_fleet_scan_publishes_reports_and_alerts_incompatible_jobs(stack):
    before = len(stack.receiver.received)
    state, tasks, output = stack.dags_test("flink_fleet_scan", {})
    assert state == "success", output[-4000:]
    assert all(v == "success" for v in tasks.values()), tasks
    alerts = stack.receiver.received[before:]
    from demo.stack import SCENARIOS, expected_verdict

    expected = {job: expected_verdict(job) for job in SCENARIOS}
    assert sorted(a["body"]["job"] for a in alerts) == sorted(j for j, v in expected.items() if v != "SAFE")
    assert {a["body"]["job"]: a["body"]["verdict"] for a in alerts} == {
        j: v for j, v in expected.items() if v != "SAFE"}
    for a in alerts:
        assert a["body"]["dag_id"] == "flink_fleet_scan" and a["body"]["bytes_at_risk"] > 0
    runs = {e.job: e for e in ReportStore(stack.reports_dir).entries() if e.meta.get("dag_id") == "flink_fleet_scan"}
    assert {j: e.verdict for j, e in runs.items()} == {**expected, "fleet-scan": "BLOCK"}
    summary = json.loads((runs["fleet-scan"].path / "check.json").read_text())["summary"]
    assert summary["gate"] == "BLOCK" and summary["jobs"] == len(SCENARIOS)


def test_rolling_upgrade_stops_at_the_first_blocked_gate(stack):
    jobs = [{"job_name": j, "graph": stack.inputs[j]["graph"]}
            for j in ("orders-enrichment", "fraud-scoring", "payments-dedup")]
    before = len(stack.receiver.received)
    state, tasks, output = stack.dags_test("flink_rolling_upgrade", {"jobs": jobs, "canary": 1, "batch_size": 1,
                                                                     "mode": "check"})
    assert state == "failed"
    assert tasks == {"plan_waves": "success", "roll_out": "success", "outcome": "failed"}, tasks
    assert "skipped: ['fraud-scoring']; left: ['payments-dedup']" in output, output[-3000:]
    alerts = stack.receiver.received[before:]
    assert [a["body"]["job"] for a in alerts] == ["fraud-scoring"]

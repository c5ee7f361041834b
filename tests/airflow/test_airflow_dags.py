"""The DAGs import cleanly and `flink_upgrade_gate` gates real upgrades end to end.

Real everything: SeaweedFS holds savepoints real Flink wrote and the job graphs real Flink built
(tests/fixtures/restores/2.3.0/<scenario>), the core computes the operator IDs and simulates the
restore, and the alert goes over HTTP to a real local receiver.

A blocked upgrade is not a done one: the gate task fails (once), nothing after it runs, the run is
failed, and the gate task and the run carry the note "BLOCKED: <verdict>, <bytes> at risk — report:
<link>" (what a person reads in the grid and the runs list). A crash is failed too, noted "FAILED, no
verdict: <task> failed". A bad input fails its task once.
"""

from __future__ import annotations

import json
import re
import sqlite3

from flink_gate.reports import ReportStore

GATE_DAG = "flink_upgrade_gate"
CHECK_ONLY_SKIPPED = ("approve", "no_approval_needed", "upgrade", "verify")
BLOCKED_DOWNSTREAM = ("decide", "approve", "no_approval_needed", "upgrade", "verify")
NOTE = re.compile(r"^BLOCKED: (?P<verdict>[A-Z_]+), (?P<bytes>[\d.]+ (?:B|KiB|MiB|GiB)) at risk — report: "
                  r"(?P<url>http\S+/upgrade-gate/report/\S+)$")


def notes(stack, dag_id: str, run_id: str) -> tuple[str | None, dict[str, str]]:
    """The run's note and its task instances' notes, as the grid shows them (Airflow's own tables)."""
    with sqlite3.connect(stack.home / "airflow.db") as db:
        run = db.execute("select n.content from dag_run_note n join dag_run r on r.id = n.dag_run_id "
                         "where r.dag_id=? and r.run_id=?", (dag_id, run_id)).fetchone()
        tis = db.execute("select t.task_id, n.content from task_instance_note n join task_instance t "
                         "on t.id = n.ti_id where t.dag_id=? and t.run_id=?", (dag_id, run_id)).fetchall()
    return (run[0] if run else None), dict(tis)


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
                  "tasks": {d: sorted(t.task_id for t in bag.dags[d].tasks) for d in bag.dag_ids},
                  "descriptions": {d: bag.dags[d].description for d in bag.dag_ids},
                  "max_active_tasks": {d: bag.dags[d].max_active_tasks for d in bag.dag_ids},
                  "weights": {d: sorted({(t.priority_weight, str(getattr(t.weight_rule, "value", t.weight_rule)))
                                    for t in bag.dags[d].tasks}) for d in bag.dag_ids},
                  "sections": {d: {k: p.schema.get("section") for k, p in bag.dags[d].params.items()}
                               for d in bag.dag_ids},
                  "links": {d: {t.task_id: [x.name for x in t.operator_extra_links] for t in bag.dags[d].tasks
                                if t.operator_extra_links} for d in bag.dag_ids}}))
"""


def test_dagbag_has_no_import_errors(stack):
    import subprocess

    from demo.stack import AIRFLOW_VENV

    proc = subprocess.run([str(AIRFLOW_VENV / "bin" / "python"), "-c", DAGBAG_SCRIPT], env=stack.env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    bag = _json_out(proc.stdout)
    assert bag["errors"] == {}
    assert bag["dags"] == ["flink_fleet_scan", "flink_gate_on_landing", "flink_rolling_upgrade", GATE_DAG]
    assert all(bag["descriptions"][d] for d in bag["dags"]), bag["descriptions"]
    # the trigger form: check settings apart from upgrade settings
    sections = bag["sections"][GATE_DAG]
    assert sections["graph"] == sections["job_name"] == sections["parallelism"] != sections["mode"]
    # FLIP-411's knobs below the fold: a section of their own, after the check and the upgrade
    assert sections["hasher"] == sections["matching"] not in (sections["graph"], sections["mode"])
    assert list(dict.fromkeys(sections.values()))[-1] == sections["hasher"], sections
    assert sections["mode"] == sections["require_approval"] == sections["rollback_jar"]
    # a manual gate's tasks go before the fleet scan's whenever slots are short
    # (absolute 100 against the scan's downstream sums: 1 per task, a handful of tasks)
    assert {tuple(w) for w in bag["weights"][GATE_DAG]} == {(100, "absolute")}, bag["weights"]
    assert all(w[0] == 1 and w[1] == "downstream" for w in bag["weights"]["flink_fleet_scan"]), bag["weights"]
    # and a running Spark task is never pre-empted: the scan holds fewer slots than either embedded stack has
    from demo.stack import STANDALONE_PARALLELISM

    slots = min(int(stack.env["AIRFLOW__CORE__PARALLELISM"]), STANDALONE_PARALLELISM)
    assert bag["max_active_tasks"]["flink_fleet_scan"] < slots, (bag["max_active_tasks"], slots)
    assert bag["links"][GATE_DAG]["gate"] == ["Upgrade report"]
    assert bag["links"]["flink_fleet_scan"]["summary"] == ["Upgrade report"]
    # the whole check is one task: one task start-up before the verdict, not five
    assert bag["tasks"][GATE_DAG] == sorted(["check", "gate", "decide", "approve", "no_approval_needed",
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
    for task in ("check", "gate", "decide"):
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
    run_note, ti_notes = notes(stack, GATE_DAG, entry.meta["run_id"])
    assert run_note == ti_notes["gate"] and run_note.startswith("SAFE: the upgrade may proceed")
    assert run_note.endswith(f"/upgrade-gate/report/{entry.job}/{entry.run}")


def _assert_blocked(run, job, verdict, stack):
    # blocked is not done: the run is failed (red wherever runs are counted), the gate is the failed task,
    # nothing after it ran; the note below tells it from a crash
    assert run["state"] == "failed", run["output"][-3000:]
    assert run["tasks"]["check"] == "success", run["tasks"]
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
    # what the grid says: the gate task's note and the run's note, with the bytes humanised
    run_note, ti_notes = notes(stack, GATE_DAG, entry.meta["run_id"])
    assert run_note == ti_notes["gate"], (run_note, ti_notes)
    said = NOTE.match(run_note or "")
    assert said and said["verdict"] == verdict and said["url"] == body["report_url"], run_note
    from upgrade_gate.report.sizes import human_bytes

    assert said["bytes"] == human_bytes(body["bytes_at_risk"])
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
    # one alert per scan, a digest: counts by verdict, the blocked jobs worst first, the summary's link
    assert len(alerts) == 1, [a["body"].get("title") for a in alerts]
    digest = alerts[0]["body"]
    blocked_jobs = {j: v for j, v in expected.items() if v != "SAFE"}
    assert digest["event"] == "flink_fleet_scan_blocked" and digest["dag_id"] == "flink_fleet_scan"
    assert digest["jobs"] == len(SCENARIOS) and digest["blocked"] == len(blocked_jobs)
    wanted = {str(v): list(blocked_jobs.values()).count(v) for v in set(blocked_jobs.values())}
    assert {v: n for v, n in digest["verdicts"].items() if v != "SAFE" and n} == wanted, (digest["verdicts"], wanted)
    assert {w["job"]: w["verdict"] for w in digest["worst"]} == blocked_jobs
    from upgrade_gate.vocabulary import Verdict

    ranks = [(Verdict(w["verdict"]).severity, w["bytes_at_risk"]) for w in digest["worst"]]
    assert ranks == sorted(ranks, key=lambda r: (-r[0], -r[1])), ranks  # worst first
    assert digest["bytes_at_risk"] > 0 and digest["report_url"].endswith("/upgrade-gate/report/fleet-scan/"
                                                                            + digest["report_url"].rsplit("/", 1)[1])
    assert all(w["job"] in digest["text"] for w in digest["worst"]) and digest["report_url"] in digest["text"]
    runs = {e.job: e for e in ReportStore(stack.reports_dir).entries() if e.meta.get("dag_id") == "flink_fleet_scan"}
    assert {j: e.verdict for j, e in runs.items()} == {**expected, "fleet-scan": "BLOCK"}
    summary = json.loads((runs["fleet-scan"].path / "check.json").read_text())["summary"]
    assert summary["gate"] == "BLOCK" and summary["jobs"] == len(SCENARIOS)
    # the state_serializers task: every job's states were read, and the Kryo count is the core rule's
    from demo.stack import RESTORES
    from upgrade_gate.flink.state_meta import read_state_schemas
    from upgrade_gate.gate.state_schema_rules import kryo_misreads
    from upgrade_gate.storage.savepoints import load_savepoint

    def savepoint_of(release: str, scenario: str) -> str:  # the fixture load_bucket uploaded
        outcome = json.loads((RESTORES / release / scenario / "outcome.json").read_text())
        return str((RESTORES / release / scenario / outcome["savepoint"]["fixture"]).resolve())

    kryo_jobs = sum(1 for case in SCENARIOS.values() if kryo_misreads(read_state_schemas(load_savepoint(
        savepoint_of(*case)))))
    kryo = summary["kryo_state"]
    assert (kryo["jobs"], kryo["jobs_not_read"], kryo["jobs_with_kryo"]) == (len(SCENARIOS), 0, kryo_jobs)
    page = " ".join((runs["fleet-scan"].path / "report.html").read_text().split())
    assert f"<b>Kryo state:</b> {kryo_jobs} of {len(SCENARIOS)} jobs hold Kryo-serialized state" in page
    # the green run is not silent: its note says how many jobs it blocked, and links the summary
    blocked = sorted(j for j, v in expected.items() if v != "SAFE")
    run_note, ti_notes = notes(stack, "flink_fleet_scan", runs["fleet-scan"].meta["run_id"])
    assert run_note == ti_notes["summary"], (run_note, ti_notes)
    assert run_note.startswith(f"BLOCKED {len(blocked)} of {len(SCENARIOS)} jobs (")
    assert all(j in run_note for j in blocked) and " at risk — summary: http" in run_note
    assert run_note.endswith(f"/upgrade-gate/report/fleet-scan/{runs['fleet-scan'].run}")


def test_rolling_upgrade_stops_at_the_first_blocked_gate(stack):
    jobs = [{"job_name": j, "graph": stack.inputs[j]["graph"]}
            for j in ("orders-enrichment", "fraud-scoring", "payments-dedup")]
    before = len(stack.receiver.received)
    state, tasks, output = stack.dags_test("flink_rolling_upgrade", {"jobs": jobs, "canary": 1, "batch_size": 1,
                                                                     "mode": "check"})
    # a rollout a gate stopped is not done: the run is failed, `outcome` is the failed task, with the note
    assert state == "failed", output[-3000:]
    assert tasks == {"plan_waves": "success", "roll_out": "success", "outcome": "failed"}, tasks
    assert "skipped: ['fraud-scoring']; left: ['payments-dedup']" in output, output[-3000:]
    alerts = stack.receiver.received[before:]
    assert [a["body"]["job"] for a in alerts] == ["fraud-scoring"]
    runs = [e for e in ReportStore(stack.reports_dir).entries()
            if e.meta.get("dag_id") == "flink_rolling_upgrade" and e.job == "fraud-scoring"]
    entry = max(runs, key=lambda e: e.run)
    # the job's report lists every state, read through the connection's S3 client like the single-job gate's
    assert json.loads((entry.path / "check.json").read_text())["states"]
    assert '<h2 id="states">' in (entry.path / "report.html").read_text()
    run_note, ti_notes = notes(stack, "flink_rolling_upgrade", entry.meta["run_id"])
    assert run_note == ti_notes["outcome"] and run_note.startswith("BLOCKED at fraud-scoring (gate: "), run_note
    assert "upgraded 0, checked SAFE 1; not upgraded: payments-dedup — report: http" in run_note, run_note


def test_bad_input_fails_once_and_stays_red(stack):
    """A graph that does not exist is a crash, not a verdict: red, at once, no retry, no alert."""
    from demo.stack import gate_conf

    before = len(stack.receiver.received)
    missing = "s3://flink-graphs/no-such-job/graph.json"
    state, tasks, output = stack.dags_test(GATE_DAG, gate_conf(stack, "orders-enrichment", graph=missing))
    assert state == "failed", output[-3000:]
    assert tasks["check"] == "failed" and tasks["gate"] == "upstream_failed", tasks
    assert f"{missing}: no such object" in output
    with sqlite3.connect(stack.home / "airflow.db") as db:
        tries = db.execute("select try_number from task_instance where dag_id=? and task_id='check' "
                           "order by rowid desc limit 1", (GATE_DAG,)).fetchone()[0]
    assert tries == 1  # failed once: the same input would fail the same way on every retry
    assert stack.receiver.received[before:] == []
    # red like a blocked run, but never read as one: the note says there is no verdict
    with sqlite3.connect(stack.home / "airflow.db") as db:
        run_id = db.execute("select run_id from dag_run where dag_id=? order by id desc limit 1",
                            (GATE_DAG,)).fetchone()[0]
    run_note, _ = notes(stack, GATE_DAG, run_id)
    assert run_note and run_note.startswith("FAILED, no verdict: check failed"), run_note


def test_the_form_refuses_a_run_without_a_graph(stack):
    """An empty graph is refused by the params schema before any run exists."""
    import pytest

    from demo.stack import gate_conf

    with pytest.raises(RuntimeError, match="made no run") as refused:
        stack.dags_test(GATE_DAG, gate_conf(stack, "orders-enrichment", graph=""))
    assert "graph" in str(refused.value)


def test_a_waivers_file_lets_an_intended_loss_through_the_gate(stack):
    """The `waivers` param names the repository's `.upgrade-gate.yaml` on S3: the real STATE_LOSS of ledger-rollup
    (Flink 2.3 drops the state of the operator whose uid `keyed` went away) is waived there, so the gate passes,
    no alert goes out, and the note and the report say which waiver let it through; the verdict stays STATE_LOSS."""
    from demo import stack as st

    assert st.expected_verdict("ledger-rollup", allow_non_restored_state=True) == "STATE_LOSS"
    stack.s3.client().put_object(Bucket=st.GRAPH_BUCKET, Key="repo/.upgrade-gate.yaml", Body=(
        b"waivers:\n  - operator: keyed\n    reason: the keyed enrichment was removed on purpose\n"
        b"    who: data-platform\n    expires: 2999-12-31\n"))
    before = len(stack.receiver.received)
    state, tasks, output = stack.dags_test(GATE_DAG, st.gate_conf(
        stack, "ledger-rollup", allow_non_restored_state=True, waivers=f"s3://{st.GRAPH_BUCKET}/repo/.upgrade-gate.yaml"))
    assert state == "success", output[-3000:]
    assert tasks["gate"] == "success" and all(tasks[t] == "skipped" for t in CHECK_ONLY_SKIPPED), tasks
    assert stack.receiver.received[before:] == []
    entry = ReportStore(stack.reports_dir).entries()[0]  # the newest report: this run's
    check = json.loads((entry.path / "check.json").read_text())
    assert entry.job == "ledger-rollup" and check["verdict"] == "STATE_LOSS"
    assert check["gate"]["passes"] and check["gate"]["verdict"] == "SAFE"
    assert [(w["operator"], w["who"]) for w in check["gate"]["waived"]] == [("keyed", "data-platform")]
    run_note, ti_notes = notes(stack, GATE_DAG, entry.meta["run_id"])
    assert run_note == ti_notes["gate"] and run_note.startswith(
        "PASSED (STATE_LOSS): passes: STATE_LOSS waived for keyed (s3://flink-graphs/repo/.upgrade-gate.yaml #1, by "
        "data-platform, until 2999-12-31)"), run_note


def test_a_rollout_goes_past_a_loss_its_waivers_file_waives_for_that_job(stack):
    """The rolling upgrade reads the same file: the waiver names ledger-rollup, whose real STATE_LOSS it lets
    through; the rollout checks every job and alerts nobody."""
    from demo import stack as st

    stack.s3.client().put_object(Bucket=st.GRAPH_BUCKET, Key="repo/rollout.yaml", Body=(
        b"waivers:\n  - operator: keyed\n    job: ledger-rollup\n    reason: the keyed enrichment was removed\n"
        b"    who: data-platform\n    expires: 2999-12-31\n"))
    jobs = [{"job_name": "orders-enrichment", "graph": stack.inputs["orders-enrichment"]["graph"]},
            {"job_name": "ledger-rollup", "graph": stack.inputs["ledger-rollup"]["graph"],
             "allow_non_restored_state": True}]
    before = len(stack.receiver.received)
    state, tasks, output = stack.dags_test("flink_rolling_upgrade", {
        "jobs": jobs, "canary": 1, "batch_size": 1, "mode": "check",
        "waivers": f"s3://{st.GRAPH_BUCKET}/repo/rollout.yaml"})
    assert state == "success", output[-3000:]
    assert set(tasks.values()) == {"success"}, tasks
    assert stack.receiver.received[before:] == []
    entry = max((e for e in ReportStore(stack.reports_dir).entries()
                 if e.meta.get("dag_id") == "flink_rolling_upgrade" and e.job == "ledger-rollup"), key=lambda e: e.run)
    assert json.loads((entry.path / "check.json").read_text())["verdict"] == "STATE_LOSS"
    assert "STATE_LOSS accepted explicitly for keyed" in output, output[-3000:]

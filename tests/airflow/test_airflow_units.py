"""The plain-Python parts of the plugins: waves, the report store's paths, the alert's content.

Fast (no stack): what an operator would notice if it broke — a canary wave that is not first,
a run id that writes outside the report store, an alert for an upgrade that passed.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

from demo.stack import RESTORES, SCENARIOS


def test_waves_are_one_canary_then_batches():
    from flink_gate.rolling import plan_waves

    jobs = [f"j{i}" for i in range(8)]
    assert plan_waves(jobs, 1, 3) == [["j0"], ["j1", "j2", "j3"], ["j4", "j5", "j6"], ["j7"]]
    assert plan_waves(jobs[:2], 5, 3) == [["j0", "j1"]]
    assert plan_waves(jobs[:3], 0, 2) == [["j0", "j1"], ["j2"]]
    with pytest.raises(ValueError, match="twice"):
        plan_waves(["a", "a"], 1, 1)


def test_report_store_keeps_every_run_inside_its_root(tmp_path: Path):
    from flink_gate.reports import ReportStore, safe_name

    store = ReportStore(tmp_path)
    run = "manual__2026-11-22T08:30:04.039658+00:00"
    path = store.publish("../../etc", run, {"verdict": "SAFE"}, "<html/>", {"dag_id": "d"})
    assert path.resolve().is_relative_to(tmp_path.resolve())
    assert safe_name("..") == "_" and "/" not in safe_name("a/../b")
    entry = store.entries()[0]
    assert entry.verdict == "SAFE" and store.get(entry.job, entry.run) is not None
    assert store.get("..", "..") is None
    # a retry replaces the report in one step
    store.publish("../../etc", run, {"verdict": "STATE_LOSS"}, "<html/>", {"dag_id": "d"})
    assert [e.verdict for e in store.entries()] == ["STATE_LOSS"]


def _check(job: str, **options) -> dict:
    from upgrade_gate.storage.check_inputs import check_upgrade

    release, scenario = SCENARIOS[job]
    case = RESTORES / release / scenario
    outcome = json.loads((case / "outcome.json").read_text())
    return check_upgrade(str((case / outcome["savepoint"]["fixture"]).resolve()), case / "graph-b.json",
                         flink_version="2.3", **options).to_json()


def test_no_alert_for_a_safe_upgrade_and_a_complete_one_otherwise():
    from flink_gate.alerts import build_alert

    kw = {"run_id": "r", "dag_id": "d", "savepoint": "s3://b/sp/_metadata", "report_url": "http://ui/r"}
    assert build_alert(_check("orders-enrichment"), job="orders-enrichment", **kw) is None

    check = _check("payments-dedup")
    alert = build_alert(check, job="payments-dedup", **kw)
    assert alert is not None and alert.verdict == "RESTORE_FAILS"
    text = alert.to_text()
    assert check["flink_error"] in text and "http://ui/r" in text
    assert {o.operator_id for o in alert.operators} == {x["operator_id"] for x in check["losses"]}
    for loss in check["losses"]:
        assert loss["operator_id"] in text and str(loss["bytes"]) in text
        # what the data goes through, in every channel (upgrade_gate/gate/state_roles.py)
        assert loss["consequence"] in text and "what the data goes through: " in text
        assert loss["consequence"] in alert.to_payload()["text"] and html.escape(loss["consequence"]) in alert.to_html()

    # allowNonRestoredState turns the failed restore into silent loss: still blocked, still alerted
    relaxed = build_alert(_check("payments-dedup", allow_non_restored_state=True), job="payments-dedup", **kw)
    assert relaxed is not None and relaxed.verdict != "SAFE" and relaxed.bytes_at_risk > 0


def test_the_note_a_person_reads_for_a_blocked_and_a_safe_gate():
    from flink_gate.outcome import export_caveat, fleet_note, gate_note, rollout_note

    url = "http://ui/upgrade-gate/report/fraud-scoring/r1"
    assert gate_note("STATE_MISROUTED", 4866, url, blocked=True) == (
        f"BLOCKED: STATE_MISROUTED, 4.8 KiB at risk — report: {url}")
    assert gate_note("SAFE", 0, url, blocked=False).startswith("SAFE: the upgrade may proceed")
    published = {"jobs": 4, "blocked": ["a", "b", "c"], "bytes_at_risk": 3 << 20, "unchecked": 0}
    assert fleet_note(published, "http://s") == "BLOCKED 3 of 4 jobs (a, b, c), 3.0 MiB at risk — summary: http://s"
    assert fleet_note({"jobs": 2, "blocked": []}, "http://s") == "PASS: all 2 jobs SAFE — summary: http://s"
    assert len(gate_note("RESTORE_FAILS", 1, "http://x/" + "y" * 2000, blocked=True)) == 1000
    # a long note is cut in the middle: the report link at its end stays whole (a cut URL leads nowhere)
    left = [f"job-{i:04d}" for i in range(300)]
    note = rollout_note({"stopped_at": {"job": "job-0000", "reason": "gate: RESTORE_FAILS"}, "left": left}, url)
    assert len(note) == 1000 and note.endswith(f"… — report: {url}"), note[-200:]
    # a verdict on a graph the jar export had to guess at never reads as a plain SAFE
    warned = {"warnings": ["warning: the IDs of 2 operator(s) without a uid (a, b) depend on parallelism.default"]}
    safe = gate_note("SAFE", 0, url, blocked=False, caveat=export_caveat(warned))
    assert "CAUTION: the jar export guessed 1 setting(s)" in safe and safe.endswith(f" — report: {url}")
    assert export_caveat({"warnings": []}) is None and export_caveat(None) is None



def test_the_gate_names_its_task_instance_with_the_verdict():
    """The run page shows the gate's rendered map index live (docs/design.md, "The verdict on the run page"): the
    template renders nothing before the gate decided (a missing name is no label under Airflow's StrictUndefined),
    the note after; at most the column's 250 characters, the report link whole."""
    import jinja2
    from flink_gate.operators.gate import FlinkUpgradeGateOperator
    from flink_gate.outcome import LABEL_CONTEXT_KEY, MAX_LABEL_CHARS, export_caveat, gate_note, verdict_label

    gate = FlinkUpgradeGateOperator(task_id="gate", check={})
    template = jinja2.Environment(undefined=jinja2.StrictUndefined).from_string(gate.map_index_template)
    assert template.render({}) == ""
    url = "http://127.0.0.1:8080/upgrade-gate/report/fraud-scoring/manual__2026-11-28T02:00:00.123456+00:00"
    note = gate_note("STATE_MISROUTED", 4866, url, blocked=True)
    assert template.render({LABEL_CONTEXT_KEY: verdict_label(note)}) == note
    warned = {"warnings": ["warning: the IDs of 2 operator(s) without a uid depend on parallelism.default"]}
    long = verdict_label(gate_note("SAFE", 0, url, blocked=False, caveat=export_caveat(warned) + " x" * 100))
    assert len(long) == MAX_LABEL_CHARS and long.startswith("SAFE: the upgrade may proceed")
    assert long.endswith(f"… — report: {url}"), long

def test_bad_input_is_not_retried_and_the_weather_is():
    from airflow.sdk.exceptions import AirflowFailException
    from flink_gate.failures import BadInput, fail_once_on_bad_input, is_deterministic

    from hashing.errors import InputError
    from upgrade_gate.storage.s3 import StorageError

    assert is_deterministic(StorageError("s3://b/g.json: no such object"))
    assert is_deterministic(StorageError("s3://b/sp/: no complete savepoint (savepoint-…) here"))
    assert is_deterministic(InputError("graph.json: line 3: expected an object"))
    assert is_deterministic(BadInput("give the new job graph"))
    assert not is_deterministic(StorageError("s3://b/sp/_metadata: timed out after 3.0 s (the server did not answer)"))
    assert not is_deterministic(StorageError("s3://b/k: S3 error InternalError: We encountered an internal error"))
    assert not is_deterministic(OSError("connection reset"))
    with pytest.raises(AirflowFailException, match=r"bad input, not retried: s3://b/g\.json: no such object"), \
            fail_once_on_bad_input():
        raise StorageError("s3://b/g.json: no such object")
    with pytest.raises(StorageError, match="timed out"), fail_once_on_bad_input():
        raise StorageError("s3://b/k: timed out after 60.0 s")


def test_the_graph_param_defaults_to_the_catalogue_and_is_never_empty():
    from airflow.sdk import Param
    from airflow.sdk.exceptions import ParamValidationError
    from flink_gate.failures import BadInput
    from flink_gate.gate import graph_location

    assert graph_location("catalogue", "orders", None, lambda: "s3://g/next/") == "s3://g/next/orders.json"
    assert graph_location("s3://g/x.json", "orders", "a.jar", lambda: "") == "s3://g/x.json"
    assert graph_location("jar", "orders", "a.jar", lambda: "") is None
    with pytest.raises(BadInput, match="upgrade_gate_catalogue is not set"):
        graph_location("catalogue", "orders", None, lambda: "")
    with pytest.raises(BadInput, match="no jar is given"):
        graph_location("jar", "orders", None, lambda: "s3://g/")
    import importlib.util

    from demo.stack import REPO

    spec = importlib.util.spec_from_file_location("gate_dag", REPO / "dags" / "flink_upgrade_gate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    graph: Param = module.PARAMS["graph"]
    assert graph.resolve() == "catalogue"
    with pytest.raises(ParamValidationError):
        Param(graph.value, schema=graph.schema).resolve("")


def test_a_blocked_upgrade_says_it_is_repairable_and_goes_ahead_only_when_asked():
    """The check's repair offer (upgrade_gate/repair/offer.py) reaches the alert, and a run asked to repair
    (`repair_savepoint`, upgrade mode) passes the gate only when the offer makes the upgrade SAFE."""
    from flink_gate.alerts import build_alert
    from flink_gate.gate import proceeds_by_repair, repair_offer, run_check
    from flink_gate.outcome import repair_note

    from upgrade_gate.flink.state_meta.streams import local_opener
    from upgrade_gate.storage.savepoints import load_savepoint

    release, scenario = SCENARIOS["ledger-rollup"]  # a uid removed: RESTORE_FAILS, repairable
    d = RESTORES / release / scenario
    outcome = json.loads((d / "outcome.json").read_text())
    metadata = load_savepoint(str((d / outcome["savepoint"]["fixture"]).resolve()))
    result = run_check(metadata, str(d / "graph-b.json"), hasher="v2", matching="fixed",
                       allow_non_restored_state=False, flink_version="2.3")
    offer = repair_offer(result, metadata, str(d / "graph-b.json"), hasher="v2", matching="fixed",
                         flink_version="2.3", opener=local_opener, savepoint="s3://b/sp")
    check = {**result.to_json(), "repair": offer}
    assert check["verdict"] == "RESTORE_FAILS" and check["repair"]["repairable"]
    assert check["repair"]["command"].startswith("upgrade-gate repair --savepoint s3://b/sp --graph ")
    alert = build_alert(check, job="ledger-rollup", run_id="r", dag_id="d", savepoint="s3://b/sp",
                        report_url="http://ui/r")
    assert alert is not None and "Repairable without changing the job" in alert.to_text()
    assert alert.to_payload()["repair"]["repairable"] is True
    assert proceeds_by_repair(check, {"mode": "upgrade", "repair_savepoint": True})
    assert not proceeds_by_repair(check, {"mode": "upgrade"})  # not asked: blocked as before
    assert not proceeds_by_repair(check, {"mode": "check", "repair_savepoint": True})
    assert not proceeds_by_repair({**check, "repair": {**check["repair"], "repairable": False}},
                                  {"mode": "upgrade", "repair_savepoint": True})
    assert repair_note("RESTORE_FAILS", check["repair"], "http://ui/r").startswith(
        "REPAIRABLE: RESTORE_FAILS as it is; the upgrade goes ahead from a repaired savepoint after approval")


def test_a_huge_check_reaches_xcom_bounded_with_everything_the_gate_reads():
    """A 5,000-operator job (3.7 MB of check before): XCom gets at most 256 KiB, and the alert, the policy
    and the approval see the same operators at risk as from the whole check, which stays in the report."""
    from flink_gate.alerts import build_alert
    from flink_gate.gate import XCOM_CHECK_LIMIT, for_xcom

    from upgrade_gate.gate import policy

    subtasks = [{"index": i, "key_groups": [i, i], "keyed_from": [{"old_subtask": i, "key_groups": [i, i],
                                                                   "bytes": 100}], "operator_state": {}, "bytes": 100}
                for i in range(8)]
    operators = [{"operator_id": f"{i:032x}", "name": f"map-{i}", "uid": f"u{i}", "state_bytes": 800,
                  "lost_bytes": 800 if i % 1000 == 7 else 0, "state_names": ["count"],
                  "rescale": {"old_parallelism": 8, "new_parallelism": 8, "subtasks": subtasks}} for i in range(5000)]
    losses = [{"operator_id": o["operator_id"], "name": o["name"], "bytes": 800, "state_names": ["count"],
               "reason": "no operator with this id in the new graph"} for o in operators if o["lost_bytes"]]
    check = {"verdict": "STATE_LOSS", "operators": operators, "losses": losses, "remedies": [], "misrouted": [],
             "migration": [{"node_id": i, "v2_id": f"{i:032x}"} for i in range(5000)]}
    assert len(json.dumps(check)) > 3_000_000

    lean = for_xcom(check, "/reports/huge/run/v-1/check.json")

    assert len(json.dumps(lean)) <= XCOM_CHECK_LIMIT
    assert lean["trimmed"]["operators"] == 5000 and lean["trimmed"]["full"].endswith("check.json")
    assert lean["losses"] == losses and lean["verdict"] == "STATE_LOSS"
    accepted = [o["uid"] for o in operators if o["lost_bytes"]]
    for accept in (None, accepted):
        assert policy.decide(lean, accept) == policy.decide(check, accept)
    whole, bounded = (build_alert(c, job="huge", run_id="r", dag_id="d", savepoint="s3://sp", report_url="u")
                      for c in (check, lean))
    assert whole is not None and bounded is not None and bounded.operators == whole.operators
    small = {"verdict": "SAFE", "operators": operators[:3], "losses": []}
    assert for_xcom(small, "x") is small  # a check that fits goes as it is


def test_a_fleet_job_that_could_not_be_checked_is_counted_not_alerted(tmp_path: Path, monkeypatch):
    """A scan row without a verdict (the job's savepoint could not be read: verdict ERROR) used to reach
    `policy.blocks("ERROR")`, which raises: publishing crashed for the whole fleet. It is published, counted as
    unchecked, never named as blocked, and the digest lists only real verdicts, worst first."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from flink_gate import fleet

    monkeypatch.setenv("UPGRADE_GATE_WORK_DIR", str(tmp_path / "work"))
    monkeypatch.setenv("UPGRADE_GATE_REPORTS_DIR", str(tmp_path / "reports"))
    check_dir = tmp_path / "check"
    (check_dir / "verdicts").mkdir(parents=True)
    rows = [{"job": "orders", "verdict": "SAFE", "lost_bytes": 0, "error": None},
            {"job": "broken", "verdict": None, "lost_bytes": 0, "error": "s3://x/_metadata: not a savepoint"},
            {"job": "payments", "verdict": "RESTORE_FAILS", "lost_bytes": 100, "error": None},
            {"job": "fraud", "verdict": "STATE_MISROUTED", "lost_bytes": 4866, "error": None}]
    pq.write_table(pa.Table.from_pylist(rows), str(check_dir / "verdicts" / "part-0.parquet"))

    class Ti:
        run_id, dag_id = "scheduled__1", "flink_fleet_scan"

    published = fleet.publish({"ti": Ti()}, {"gate": "BLOCK", "verdicts": {"SAFE": 1, "RESTORE_FAILS": 1,
                                                                            "STATE_MISROUTED": 1}, "errors": 1},
                              str(check_dir))
    assert sorted(published["blocked"]) == ["fraud", "payments"] and published["unchecked"] == 1
    assert [w["job"] for w in published["worst"]] == ["payments", "fraud"]  # RESTORE_FAILS before misrouting
    sent = []
    assert sorted(fleet.alert({"ti": Ti()}, published, [lambda ctx: sent.append(ctx["gate_alert"])])) == [
        "fraud", "payments"]
    assert len(sent) == 1 and sent[0]["blocked"] == 2 and sent[0]["unchecked"] == 1
    assert fleet.alert({"ti": Ti()}, published, [lambda ctx: sent.append(ctx["gate_alert"])]) == []  # once a run
    assert len(sent) == 1


def test_a_safe_that_compared_no_state_types_says_so_in_the_note():
    """The note on a SAFE gate run carries what the SAFE did not verify (docs/guide.md, State schemas)."""
    from flink_gate.outcome import check_caveat, gate_note

    url = "http://ui/upgrade-gate/report/orders/r1"
    check = _check("orders-enrichment")
    assert check["verdict"] == "SAFE" and check["state_types_compared"] is False
    note = gate_note("SAFE", 0, url, blocked=False, caveat=check_caveat(check))
    assert note == ("SAFE: the upgrade may proceed, no state at risk; state types not compared (no savepoint of the "
                    f"new job version) — report: {url}")
    assert check_caveat({**check, "state_types_compared": True}) is None
    assert check_caveat({**check, "verdict": "STATE_LOSS"}) is None  # a blocked note stays "BLOCKED: ..., at risk"


def test_the_published_standalone_fleet_file_points_to_the_verdicts_table_and_the_view(tmp_path: Path, monkeypatch):
    """The fleet summary's report.html (the file published with the run, opened without the view) lists each
    verdict's worst jobs and says where all of them are: the scan's verdicts/ Parquet and the view's link."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from flink_gate import fleet
    from flink_gate.paths import report_url
    from flink_gate.reports import ReportStore

    from upgrade_gate.report.fleet import GROUP_ROWS

    monkeypatch.setenv("UPGRADE_GATE_WORK_DIR", str(tmp_path / "work"))
    monkeypatch.setenv("UPGRADE_GATE_REPORTS_DIR", str(tmp_path / "reports"))
    check_dir = tmp_path / "check"
    (check_dir / "verdicts").mkdir(parents=True)
    rows = [{"job": f"orders-{i:03d}", "verdict": "SAFE", "lost_bytes": 0, "error": None}
            for i in range(GROUP_ROWS + 7)]
    rows.append({"job": "fraud", "verdict": "STATE_MISROUTED", "lost_bytes": 4866, "error": None})
    pq.write_table(pa.Table.from_pylist(rows), str(check_dir / "verdicts" / "part-0.parquet"))

    class Ti:
        run_id, dag_id = "scheduled__2", "flink_fleet_scan"

    fleet.publish({"ti": Ti()}, {"gate": "BLOCK", "verdicts": {"SAFE": GROUP_ROWS + 7, "STATE_MISROUTED": 1}},
                  str(check_dir))
    entry = ReportStore().get(fleet.FLEET_REPORT_JOB, Ti.run_id)
    page = (entry.path / "report.html").read_text()
    assert '<details class="fleet-group v-STATE_MISROUTED" id="group-STATE_MISROUTED"' in page
    assert 'id="more-STATE_MISROUTED"' not in page  # one job: listed, nothing more to point to
    more = html.unescape(re.sub(r"<[^>]+>", "", page.split('id="more-SAFE">', 1)[1].split("</p>")[0]))
    assert more.startswith(f"Listed: {GROUP_ROWS} of {GROUP_ROWS + 7} SAFE jobs; the other 7 are not in this file.")
    assert str(check_dir / "verdicts") in more and report_url(fleet.FLEET_REPORT_JOB, Ti.run_id) in more

"""The asset-driven gate runs by itself when a new graph spec lands in object storage.

Real everything: `airflow standalone` (scheduler, dag-processor, triggerer, API server) on the embedded stack,
SeaweedFS holding the savepoints and graphs real Flink wrote and built (tests/fixtures/restores/2.3.0), and
the watcher of `flink_gate_on_landing` listing the fleet catalogue from the triggerer. Nobody triggers a run:
the test only writes an object. What a user would notice:

* a run of `flink_gate_on_landing` starts by itself after fraud-scoring's new spec is pushed, and its verdict
  (the run note "BLOCKED: <verdict>, …", the published report, the alert) is what the core gives for the same
  savepoint and graph;
* the objects already in the bucket when the watcher started (every job's spec and savepoint) fired nothing:
  no run before the push, and the run gates fraud-scoring only.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import time
from typing import Any

DAG = "flink_gate_on_landing"
JOB = "fraud-scoring"
POLL_S = 2


def _db(stack: Any, sql: str, *args: Any) -> list[tuple]:
    with sqlite3.connect(stack.home / "airflow.db", timeout=30) as db:
        return db.execute(sql, args).fetchall()


def _wait(what: str, probe: Any, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            found = probe()
        except sqlite3.OperationalError:  # the scheduler holds SQLite's write lock for a moment
            found = None
        if found:
            return found
        assert time.monotonic() < deadline, f"{what} not reached in {timeout:.0f}s"
        time.sleep(1)


def _runs(stack: Any) -> list[tuple]:
    return _db(stack, "select run_id, run_type, state from dag_run where dag_id=? order by id", DAG)


def test_a_pushed_graph_spec_starts_the_gate_by_itself(stack):
    from flink_gate.reports import ReportStore

    from demo import stack as st

    client = stack.s3.client()
    release, scenario = st.SCENARIOS[JOB]
    case = st.RESTORES / release / scenario
    key = f"{st.CATALOGUE.removeprefix(f's3://{st.GRAPH_BUCKET}/')}/{JOB}.json"
    # the catalogue holds the graph that runs today; the changed one is pushed once the watcher is up
    client.put_object(Bucket=st.GRAPH_BUCKET, Key=key, Body=(case / "graph-a.json").read_bytes())
    # a parse slower than Airflow's 50 s default (two cores under load) would wait out the 300 s re-parse interval
    airflow = dataclasses.replace(stack, env={**stack.env, "AIRFLOW_VAR_UPGRADE_GATE_WATCH_INTERVAL_S": str(POLL_S),
                                              "AIRFLOW__DAG_PROCESSOR__DAG_FILE_PROCESSOR_TIMEOUT": "300",
                                              "AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT": "300"}, procs=[])
    server = st.start_standalone(airflow)
    try:
        _wait("DAG parsed", lambda: _db(stack, "select 1 from dag where dag_id=?", DAG), 300)
        airflow.airflow("dags", "unpause", DAG, check=True, timeout=120)
        # Airflow registers a DAG's asset watchers when it parses an unpaused DAG: parse now rather than at the
        # dag-processor's next pass (docs/guide.md, "The asset-driven gate")
        airflow.airflow("dags", "reserialize", "-B", "dags-folder", check=True, timeout=300)
        # both watchers have listed their prefix once: what was there is remembered as seen
        _wait("first poll of both watchers", lambda: len(_db(
            stack, "select a.name from asset_state_store s join asset a on a.id = s.asset_id "
            "where a.name in ('flink_graph_specs', 'flink_savepoints')")) == 2, 120)
        time.sleep(3 * POLL_S)  # more polls over the unchanged bucket
        assert _runs(stack) == [], "objects already in the bucket started a gate"

        before = len(stack.receiver.received)
        client.put_object(Bucket=st.GRAPH_BUCKET, Key=key, Body=(case / "graph-b.json").read_bytes())
        pushed = time.monotonic()
        run_id, run_type, _ = _wait("an asset-triggered run", lambda: _runs(stack)[:1], 120)[0]
        started_s = time.monotonic() - pushed
        assert run_type == "asset_triggered"
        state = _wait("the run to finish", lambda: [r[2] for r in _runs(stack)
                                                    if r[0] == run_id and r[2] in ("success", "failed")], 300)[0]
    finally:
        st.stop_process_group(server.proc, timeout=20)
        # later modules start standalone on the same home: no watcher of this test's must fire in them
        airflow.airflow("dags", "pause", DAG, timeout=120)
        client.put_object(Bucket=st.GRAPH_BUCKET, Key=key, Body=(case / "graph-b.json").read_bytes())

    expected = st.expected_verdict(JOB)  # the core on the fixture files real Flink wrote and built
    assert expected != "SAFE"
    assert len(_runs(stack)) == 1, _runs(stack)  # one push, one run; nothing for the objects already there
    landed = json.loads(_db(stack, "select value from xcom where dag_id=? and run_id=? and task_id='landed_jobs' "
                                   "and key='return_value'", DAG, run_id)[0][0])
    assert [(j["job_name"], j["graph"], j["savepoint"]) for j in landed] == [
        (JOB, f"{st.CATALOGUE}/{JOB}.json", "latest")]
    # a blocked upgrade: the run is red, its note says why, as the manual gate's does
    assert state == "failed"
    note = _db(stack, "select n.content from dag_run_note n join dag_run r on r.id = n.dag_run_id "
                      "where r.dag_id=? and r.run_id=?", DAG, run_id)[0][0]
    assert note.startswith(f"BLOCKED: {expected}, "), note
    entries = [e for e in ReportStore(stack.reports_dir).entries() if e.job == JOB and e.meta["dag_id"] == DAG]
    assert entries and entries[0].meta["graph"] == f"{st.CATALOGUE}/{JOB}.json"
    assert json.loads((entries[0].path / "check.json").read_text())["verdict"] == expected
    alerts = [a["body"] for a in stack.receiver.received[before:]]
    assert [(a.get("job"), a.get("verdict")) for a in alerts] == [(JOB, expected)], alerts
    print(f"asset gate: run started {started_s:.1f}s after the push (poll every {POLL_S}s)")

"""The asset-driven gate runs by itself when a new graph spec or a new savepoint lands in object storage.

Real everything: `airflow standalone` (scheduler, dag-processor, triggerer, API server) on the embedded stack,
SeaweedFS holding the savepoints and graphs real Flink wrote and built (tests/fixtures/restores/2.3.0), and
the watcher of `flink_gate_on_landing` listing the fleet catalogue from the triggerer. Nobody triggers a run:
the test only writes an object. What a user would notice:

* a run of `flink_gate_on_landing` starts by itself after fraud-scoring's new spec is pushed, and its verdict
  (the run note "BLOCKED: <verdict>, …", the published report, the alert) is what the core gives for the same
  savepoint and graph;
* the objects already in the bucket when the watcher started (every job's spec and savepoint) fired nothing:
  no run before the push, and the run gates fraud-scoring only;
* a savepoint that lands under the savepoint root (its `_metadata`, the file Flink writes last) starts a run
  that gates exactly that savepoint against the job's spec in the catalogue: for orders-enrichment the core's
  SAFE, a green run with no alert.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import time
from collections.abc import Iterator
from typing import Any

import pytest

DAG = "flink_gate_on_landing"
JOB = "fraud-scoring"
POLL_S = 2
SAVEPOINT_JOB = "orders-enrichment"
LANDED = "savepoint-landed-0001"  # a new savepoint folder under the job's prefix


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


def _finished(stack: Any, run_id: str) -> str:
    return _wait("the run to finish", lambda: [r[2] for r in _runs(stack)
                                               if r[0] == run_id and r[2] in ("success", "failed")], 300)[0]


def _note(stack: Any, run_id: str) -> str:
    return str(_db(stack, "select n.content from dag_run_note n join dag_run r on r.id = n.dag_run_id "
                          "where r.dag_id=? and r.run_id=?", DAG, run_id)[0][0])


def _landed(stack: Any, run_id: str) -> list[tuple[str, str, str]]:
    landed = json.loads(_db(stack, "select value from xcom where dag_id=? and run_id=? and task_id='landed_jobs' "
                                   "and key='return_value'", DAG, run_id)[0][0])
    return [(j["job_name"], j["graph"], j["savepoint"]) for j in landed]


@pytest.fixture(scope="module")
def watching(stack: Any) -> Iterator[Any]:
    """`airflow standalone` with `flink_gate_on_landing` unpaused and both watchers past their first listing; the
    catalogue holds fraud-scoring's graph that runs today. Afterwards the DAG is paused and the bucket is as the
    session's other modules expect it."""
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
        yield {"client": client, "key": key, "case": case}
    finally:
        st.stop_process_group(server.proc, timeout=20)
        # later modules start standalone on the same home: no watcher of this test's must fire in them
        airflow.airflow("dags", "pause", DAG, timeout=120)
        client.put_object(Bucket=st.GRAPH_BUCKET, Key=key, Body=(case / "graph-b.json").read_bytes())
        # the job's "latest" savepoint is the loaded one again for the modules after this one
        client.delete_object(Bucket=st.SAVEPOINT_BUCKET, Key=f"{SAVEPOINT_JOB}/{LANDED}/_metadata")


def test_a_pushed_graph_spec_starts_the_gate_by_itself(stack, watching):
    from flink_gate.reports import ReportStore

    from demo import stack as st

    client, key, case = watching["client"], watching["key"], watching["case"]
    time.sleep(3 * POLL_S)  # more polls over the unchanged bucket
    assert _runs(stack) == [], "objects already in the bucket started a gate"

    before = len(stack.receiver.received)
    client.put_object(Bucket=st.GRAPH_BUCKET, Key=key, Body=(case / "graph-b.json").read_bytes())
    pushed = time.monotonic()
    run_id, run_type, _ = _wait("an asset-triggered run", lambda: _runs(stack)[:1], 120)[0]
    started_s = time.monotonic() - pushed
    assert run_type == "asset_triggered"
    state = _finished(stack, run_id)

    expected = st.expected_verdict(JOB)  # the core on the fixture files real Flink wrote and built
    assert expected != "SAFE"
    assert len(_runs(stack)) == 1, _runs(stack)  # one push, one run; nothing for the objects already there
    assert _landed(stack, run_id) == [(JOB, f"{st.CATALOGUE}/{JOB}.json", "latest")]
    # a blocked upgrade: the run is red, its note says why, as the manual gate's does
    assert state == "failed"
    note = _note(stack, run_id)
    assert note.startswith(f"BLOCKED: {expected}, "), note
    entries = [e for e in ReportStore(stack.reports_dir).entries() if e.job == JOB and e.meta["dag_id"] == DAG]
    assert entries and entries[0].meta["graph"] == f"{st.CATALOGUE}/{JOB}.json"
    assert json.loads((entries[0].path / "check.json").read_text())["verdict"] == expected
    alerts = [a["body"] for a in stack.receiver.received[before:]]
    assert [(a.get("job"), a.get("verdict")) for a in alerts] == [(JOB, expected)], alerts
    print(f"asset gate: run started {started_s:.1f}s after the push (poll every {POLL_S}s)")


def test_a_landed_savepoint_starts_the_gate_on_exactly_that_savepoint(stack, watching):
    from flink_gate.reports import ReportStore

    from demo import stack as st

    release, scenario = st.SCENARIOS[SAVEPOINT_JOB]
    case = st.RESTORES / release / scenario
    # the savepoint real Flink wrote for this scenario: its state is small enough to be inline in `_metadata`,
    # the one file Flink writes last, when the savepoint is complete
    fixture = (case / json.loads((case / "outcome.json").read_text())["savepoint"]["fixture"]).resolve()
    runs_before = {r[0] for r in _runs(stack)}
    before = len(stack.receiver.received)
    landed = f"s3://{st.SAVEPOINT_BUCKET}/{SAVEPOINT_JOB}/{LANDED}"
    watching["client"].put_object(Bucket=st.SAVEPOINT_BUCKET, Key=f"{SAVEPOINT_JOB}/{LANDED}/_metadata",
                      Body=(fixture / "_metadata").read_bytes())
    written = time.monotonic()
    run_id, run_type, _ = _wait("an asset-triggered run", lambda: [r for r in _runs(stack)
                                                                    if r[0] not in runs_before][:1], 120)[0]
    started_s = time.monotonic() - written
    assert run_type == "asset_triggered"
    state = _finished(stack, run_id)

    expected = st.expected_verdict(SAVEPOINT_JOB)  # the core on the fixture files real Flink wrote and built
    assert expected == "SAFE"
    # the landed savepoint itself, against the job's spec in the catalogue; one landing, one run
    assert _landed(stack, run_id) == [(SAVEPOINT_JOB, "catalogue", landed)]
    assert [r for r in _runs(stack) if r[0] not in runs_before] == [(run_id, "asset_triggered", state)]
    assert state == "success"
    assert _note(stack, run_id).startswith("SAFE: the upgrade may proceed")
    entries = [e for e in ReportStore(stack.reports_dir).entries()
               if e.job == SAVEPOINT_JOB and e.meta["dag_id"] == DAG]
    assert entries and entries[0].meta["savepoint"] == f"{landed}/_metadata"  # the exact object read
    assert entries[0].meta["graph"] == f"{st.CATALOGUE}/{SAVEPOINT_JOB}.json"
    assert json.loads((entries[0].path / "check.json").read_text())["verdict"] == expected
    assert stack.receiver.received[before:] == []  # SAFE alerts nobody
    print(f"asset gate: run started {started_s:.1f}s after the savepoint landed (poll every {POLL_S}s)")

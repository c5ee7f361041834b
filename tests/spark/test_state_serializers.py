"""`state_serializers` on a small fleet of real Flink savepoints, in a local Spark session (and one job on S3).

The fleet: the state-schema savepoints written by real Flink 1.20 and 2.3 (one state per serializer family:
POJOs with HashMap/ArrayList fields, a generic HashMap, a custom Kryo serializer, tuples, rows, enums...; heap
and RocksDB, canonical and native, state inline and in files), two jobs without Kryo state, a job whose
savepoint is gone and one whose state file was deleted. Expected states, serializer classes and versions come
from Flink's own reading of each savepoint (flink-state-meta.json); the Kryo flags must be exactly what
real Flink 2.3 restored wrong (restores.json) and what the gate's rule says (`kryo_misreads`).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from spark_jobs import state_serializers
from spark_jobs.parquet_output import read_table, write_table
from spark_jobs.savepoint_scan import savepoint_jobs
from tests.spark_support import SparkEnv, spark, spark_env  # noqa: F401  (fixtures)
from upgrade_gate.flink.state_meta import read_state_schemas
from upgrade_gate.gate.state_schema_rules import kryo_misreads
from upgrade_gate.report.fleet import render_fleet
from upgrade_gate.storage.savepoints import load_savepoint

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SCHEMAS = FIXTURES / "savepoints" / "state-schemas"
KRYO_JOBS = {"orders": "1.20.5/hashmap-canonical-p2", "ledger": "1.20.5/hashmap-canonical-files-p1",
             "fraud": "1.20.5/rocksdb-canonical-p1", "clicks": "2.3.0/rocksdb-native-p1",
             "billing": "2.3.0/hashmap-snappy-p1"}
PLAIN_JOBS = {"plain-120": FIXTURES / "restores" / "1.20.5" / "savepoints" / "uids-p2",
              "plain-23": FIXTURES / "restores" / "2.3.0" / "savepoints" / "uids-p2"}
HOLED = "holed"  # the files savepoint with its keyed state file deleted


def _keyed_file(d: Path) -> Path:
    """The keyed operator's state file in the files fixture (the one its key-groups handle points at)."""
    meta = load_savepoint(str(d))
    for op in meta.operator_states:
        for st in op.subtask_states.values():
            for h in st.managed_keyed_state:
                return Path(h.delegate.path)  # type: ignore[attr-defined]
    raise AssertionError("no keyed handle")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("kryo-fleet") / "savepoints"
    for job, case in KRYO_JOBS.items():
        shutil.copytree(SCHEMAS / case, root / job / "savepoint-1")
    for job, d in PLAIN_JOBS.items():
        shutil.copytree(d, root / job / "savepoint-1")
    holed = shutil.copytree(SCHEMAS / "2.3.0" / "hashmap-canonical-files-p1", root / HOLED / "savepoint-1")
    _keyed_file(holed).unlink()
    (root / "ghost").mkdir()  # a job folder without any savepoint
    return root


@pytest.fixture(scope="module")
def table(spark, fleet, tmp_path_factory) -> list[dict[str, Any]]:  # noqa: F811
    out = tmp_path_factory.mktemp("out") / "serializers"
    write_table(state_serializers.scan_rows(savepoint_jobs(spark, str(fleet), 3)), str(out))
    return read_table(str(out)).to_pylist()


def _flink_states(d: Path) -> dict[tuple[str, str], dict[str, Any]]:
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for op in json.loads((d / "flink-state-meta.json").read_text())["operators"]:
        for s in op["subtasks"]:
            for st in [x for k in s["keyed"] for x in k["states"]] + [
                    x for o in s["operator"] for x in (*o["operator_states"], *o["broadcast_states"])]:
                out.setdefault((op["operator_id"], st["name"]), st)
    return out


def test_one_row_per_state_as_flink_reads_it(table) -> None:
    by_job: dict[str, list[dict[str, Any]]] = {}
    for r in table:
        by_job.setdefault(r["job"], []).append(r)
    assert set(by_job) == {*KRYO_JOBS, *PLAIN_JOBS, HOLED, "ghost"}
    for job, case in KRYO_JOBS.items():
        rows = by_job[job]
        assert all(r["error"] is None for r in rows), job
        flink = _flink_states(SCHEMAS / case)
        assert {(r["operator_id"], r["state"]) for r in rows} == set(flink), job
        for r in rows:
            value = flink[(r["operator_id"], r["state"])]["serializers"]["VALUE_SERIALIZER"]
            assert (r["serializer_class"], r["serializer_version"]) == (value["class"], value["version"])
            assert r["distribution_mode"] == flink[(r["operator_id"], r["state"])]["options"].get(
                "OPERATOR_STATE_DISTRIBUTION_MODE")
            assert r["written_by_1x"] is case.startswith("1.")
        states = {r["state"]: r for r in rows}
        assert states["pojo-collections"]["kind"] == "value" and states["pojo-collections"]["key_serializer"] == "Long"
        assert states["pojo-collections"]["kryo_types"] == ["java.util.ArrayList", "java.util.HashMap"]
        assert states["union-longs"]["kind"] == "union" and states["ttl-value"]["ttl"] is True
        assert states["_timer_state/event_user-timers"]["kind"] == "timers"
    for job in PLAIN_JOBS:
        assert by_job[job] and not any(r["kryo"] or r["error"] for r in by_job[job])
        assert {"count", "rules", "union-list"} <= {r["state"] for r in by_job[job]}
    [ghost] = by_job["ghost"]
    assert ghost["state"] is None and "no complete savepoint" in ghost["error"]
    holed = [r for r in by_job[HOLED] if r["error"]]
    assert len(holed) == 1 and holed[0]["state"] is None and "state serializers not read" in holed[0]["error"]
    assert holed[0]["operator_id"] == "f4268aa2b91cfb64b42fde656d3e73a0"
    assert {r["state"] for r in by_job[HOLED] if not r["error"]} >= {"pojo-list", "rules-pojo"}


def test_kryo_flags_are_the_rules_and_what_real_flink_restored_wrong(table) -> None:
    for job, case in KRYO_JOBS.items():
        rule = kryo_misreads(read_state_schemas(load_savepoint(str(SCHEMAS / case))))
        blocking = {(m.operator.operator_id, m.state.name) for m in rule if m.blocking}
        kryo = {(m.operator.operator_id, m.state.name) for m in rule}
        rows = [r for r in table if r["job"] == job]
        assert {(r["operator_id"], r["state"]) for r in rows if r["kryo_collection_or_custom"]} == blocking
        assert {(r["operator_id"], r["state"]) for r in rows if r["kryo"]} == kryo
        assert all(r["kryo_reason"] for r in rows if r["kryo_collection_or_custom"])
    recorded = next(r for r in json.loads((SCHEMAS / "restores.json").read_text())
                    if r["savepoint"] == "1.20.5/rocksdb-canonical-p1" and r["restored_on"] == "2.3.0"
                    and r["states"])
    bad = {n for n, outcome in recorded["states"].items() if outcome != "OK"}
    keyed = [r for r in table if r["job"] == "fraud" and r["key_serializer"]]
    assert bad and {r["state"] for r in keyed if r["kryo_collection_or_custom"]} == bad


def test_the_guide_query_and_the_fleet_summary(spark, table) -> None:  # noqa: F811
    """docs/guide.md's query: which jobs hold Kryo state, and which a 2.x wave restores corrupted."""
    frame = spark.createDataFrame(table, state_serializers.SCHEMA_DDL)
    frame.createOrReplaceTempView("state_serializers")
    answer = [r.asDict() for r in spark.sql(state_serializers.KRYO_JOBS_SQL).collect()]
    assert [(r["job"], r["corrupted_on_2x"]) for r in answer] == [
        ("fraud", True), ("ledger", True), ("orders", True), ("billing", False), ("clicks", False), (HOLED, False)]
    misread = ["generic-hashmap", "kryo-custom-serializer", "pojo-collections", "pojo-list", "rules-pojo"]
    for r in answer[:5]:  # every job with the full serializer-family set: 6 Kryo states, 5 of them misread
        assert (r["kryo_states"], r["misread_states"], r["misread"]) == (6, 5, misread), r["job"]
    assert (answer[5]["misread_states"], answer[5]["misread"]) == (2, ["pojo-list", "rules-pojo"])  # holed
    summary = state_serializers.kryo_summary(frame)
    assert summary["jobs"] == 9 and summary["jobs_with_kryo"] == 6 and summary["jobs_not_read"] == 2
    assert summary["jobs_with_kryo_collection_or_custom"] == 6 and summary["jobs_corrupted_on_2x"] == 3
    assert [c["job"] for c in summary["corrupted_jobs"]] == ["fraud", "ledger", "orders"]
    page = render_fleet({"gate": "BLOCK", "verdicts": {}, "kryo_state": summary}, [])
    text = " ".join(page.split('id="kryo-state">', 1)[1].split("</p>", 1)[0].replace("<b>", "").replace(
        "</b>", "").split())
    assert text.startswith("Kryo state: 6 of 9 jobs hold Kryo-serialized state; 6 with Kryo collections or custom "
                           "Kryo serializers,")
    assert "written by Flink 1.x: upgraded to Flink 2.x they restore corrupted (fraud (5 states)" in text


def test_state_files_on_s3_are_read_in_the_executors(spark_env: SparkEnv, spark, fleet, table) -> None:  # noqa: F811
    """The files savepoint on SeaweedFS: the executors read the state files' first bytes by ranged GETs."""
    client = spark_env.s3.client()
    client.create_bucket(Bucket="kryo-fleet")
    local = fleet / "ledger" / "savepoint-1"
    for p in sorted(local.iterdir()):
        client.put_object(Bucket="kryo-fleet", Key=f"savepoints/ledger/savepoint-1/{p.name}", Body=p.read_bytes())
    jobs = spark.createDataFrame([("ledger", "s3://kryo-fleet/savepoints/ledger")], "job string, savepoint string")
    rows = [r.asDict() for r in state_serializers.state_serializers(jobs).collect()]
    assert rows and all(r["error"] is None and r["metadata"].startswith("s3://kryo-fleet/") for r in rows)
    strip = ("savepoint", "metadata", "kryo_types")
    local_rows = [r for r in table if r["job"] == "ledger"]

    def key(r: dict[str, Any]) -> tuple[str, str]:
        return r["operator_id"], r["state"]

    assert [{k: v for k, v in r.items() if k not in strip} for r in sorted(rows, key=key)] == \
        [{k: v for k, v in r.items() if k not in strip} for r in sorted(local_rows, key=key)]


def test_the_job_has_a_cli() -> None:
    import subprocess
    import sys

    script = Path(state_serializers.__file__)
    out = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "--savepoints" in out.stdout and "--output" in out.stdout
    bad = subprocess.run([sys.executable, str(script), "--savepoints", str(FIXTURES / "nowhere"), "--output",
                          "/tmp/never-written-by-state-serializers"], capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and not Path("/tmp/never-written-by-state-serializers").exists()
    assert "nowhere" in bad.stderr.strip().splitlines()[-1]


def test_the_cli_writes_the_kryo_summary_the_fleet_report_shows(spark, fleet, table, tmp_path) -> None:  # noqa: F811
    """What the flink_fleet_scan DAG runs: the job's `--summary` JSON (read back from the written table, batch by
    batch) equals the summary of the same rows in a Spark session."""
    import subprocess
    import sys

    out, summary = tmp_path / "serializers", tmp_path / "kryo_summary.json"
    run = subprocess.run([sys.executable, str(Path(state_serializers.__file__)), "--savepoints", str(fleet),
                          "--output", str(out), "--summary", str(summary), "--master", "local[2]"],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    expected = state_serializers.kryo_summary(spark.createDataFrame(table, state_serializers.SCHEMA_DDL))
    assert json.loads(summary.read_text()) == expected
    assert expected["jobs_corrupted_on_2x"] == 3

"""Fleet-scale Spark jobs on a local session: every row equals what the single-process core gives.

A generated fleet of 300 jobs (3 to 200 operators, graph shapes from the real-Flink conformance
catalogue, savepoints in Flink's v4/v6 format, one upgrade per job with a known verdict) goes
through `fleet_ids`, `savepoint_scan` (local and on the SeaweedFS S3 server) and `fleet_check`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest

from bench.fleet import generate_fleet, upload_fleet
from hashing.migration import v2_to_v3
from hashing.operator_ids import compute_operator_ids
from hashing.readers import load_graph
from spark_jobs import common, fleet_check, fleet_gate, fleet_ids, savepoint_scan
from spark_jobs.parquet_output import TaggedRows, read_table, write_tables
from tests.fault_proxy import FaultProxy
from tests.spark_support import SparkEnv, spark, spark_env  # noqa: F401  (fixtures)
from upgrade_gate.flink.metadata import to_json
from upgrade_gate.repair.plan import plan_repair
from upgrade_gate.storage.check_inputs import check_upgrade, read_side
from upgrade_gate.storage.savepoints import load_savepoint
from upgrade_gate.vocabulary import Verdict

REPO = Path(__file__).resolve().parents[2]
JOBS = 300
BROKEN = "zz-broken"


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    root = tmp_path_factory.mktemp("fleet")
    jobs = [j.__dict__ for j in generate_fleet(root, JOBS, seed=2024)]
    # a spec with a cycle: its row must carry the reader's message, and fleet_check must not gate it through
    (root / "upgrades" / f"{BROKEN}.json").write_text(json.dumps(
        {"nodes": [{"id": 1}, {"id": 2}], "edges": [{"source": 1, "target": 2}, {"source": 2, "target": 1}]}))
    return root, jobs


@pytest.fixture(scope="module")
def ids_table(spark, fleet, tmp_path_factory) -> Path:  # noqa: F811
    root, _ = fleet
    out = tmp_path_factory.mktemp("out") / "ids"
    common.write_parquet(fleet_ids.fleet_ids(fleet_ids.catalogue(spark, str(root / "upgrades"), 4)), str(out))
    return out


@pytest.fixture(scope="module")
def scan_table(spark, fleet, tmp_path_factory) -> Path:  # noqa: F811
    root, _ = fleet
    out = tmp_path_factory.mktemp("out") / "scan"
    jobs = savepoint_scan.savepoint_jobs(spark, str(root / "savepoints"), 4)
    common.write_parquet(savepoint_scan.savepoint_scan(jobs), str(out))
    return out


@pytest.fixture(scope="module")
def old_ids_table(spark, fleet, tmp_path_factory) -> Path:  # noqa: F811
    root, _ = fleet
    out = tmp_path_factory.mktemp("out") / "old-ids"
    common.write_parquet(fleet_ids.fleet_ids(fleet_ids.catalogue(spark, str(root / "specs"), 4)), str(out))
    return out


def _agrees(expected: str, result: dict[str, Any]) -> bool:
    """The simulator's verdict equals the generator's; the one known difference: state the generator knows
    was misrouted (it kept node ids) but the simulator, matching writer and receiver by name, can only flag
    with a "check by hand" warning."""
    if result["verdict"] == expected:
        return True
    return (expected, result["verdict"]) == ("STATE_MISROUTED", "STATE_LOSS") and any(
        "check by hand" in w for w in result["warnings"])


def _rows(spark, path: Path) -> list[dict[str, Any]]:  # noqa: F811
    return [r.asDict(recursive=True) for r in spark.read.parquet(str(path)).collect()]


def test_generated_fleet_is_realistic_and_its_expected_verdicts_hold(fleet) -> None:
    """The generator's verdicts are not guesses: the single-process simulator agrees on every job."""
    root, jobs = fleet
    sizes = [j["operators"] for j in jobs]
    assert min(sizes) <= 10 and max(sizes) > 120
    assert {j["metadata_version"] for j in jobs} == {4, 6}
    assert {"SAFE", "STATE_LOSS", "RESTORE_FAILS"} <= {j["expected_verdict"] for j in jobs}
    for j in jobs:
        savepoint = load_savepoint(str(root / j["savepoint"]), job_folder=True)  # one job's folder, after upgrades
        result = check_upgrade(savepoint, str(root / j["upgrade"]), hasher=j["hasher"],
                               allow_non_restored_state=j["allow_non_restored_state"],
                               flink_version=j["flink_version"], old_graph=str(root / j["spec"]))
        assert _agrees(j["expected_verdict"], result.to_json()), (j["job"], j["scenario"], result.flink_error)


def test_fleet_ids_rows_equal_the_core(spark, fleet, ids_table) -> None:  # noqa: F811
    root, jobs = fleet
    rows = _rows(spark, ids_table)
    by_job: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_job.setdefault(r["job"], []).append(r)
    assert set(by_job) == {j["job"] for j in jobs} | {BROKEN}
    [broken] = by_job.pop(BROKEN)
    assert broken["node_id"] is None and "cycle" in broken["error"]
    compared = 0
    for job, got in by_job.items():
        graph = load_graph(root / "upgrades" / f"{job}.json").graph
        v2, v3 = compute_operator_ids(graph, "v2"), compute_operator_ids(graph, "v3")
        mig = {m.node_id: m for m in v2_to_v3(graph)}
        vx2 = {n: v.id.hex() for v in v2.job_vertices for n in v.node_ids_head_first}
        vx3 = {n: v.id.hex() for v in v3.job_vertices for n in v.node_ids_head_first}
        assert sorted(r["node_id"] for r in got) == sorted(v2.pairs)
        for r in got:
            nid = r["node_id"]
            assert r["error"] is None
            assert r["v2_id"] == v2.pairs[nid].generated.hex()
            assert r["v3_id"] == v3.pairs[nid].generated.hex()
            assert r["v2_alternatives"] == [a.hex() for a in v2.pairs[nid].alternatives]
            assert r["v3_alternatives"] == [a.hex() for a in v3.pairs[nid].alternatives]
            assert (r["v2_job_vertex"], r["v3_job_vertex"]) == (vx2[nid], vx3[nid])
            assert (r["id_changes"], r["restores_by"]) == (mig[nid].changed, mig[nid].restores_by)
            assert (r["name"], r["uid"]) == (v2.pairs[nid].name, v2.pairs[nid].uid)
            compared += 1
    assert compared == sum(len(load_graph(root / "upgrades" / f"{j}.json").graph.nodes) for j in by_job)


def _expected_scan(savepoint: str) -> list[dict[str, Any]]:
    view = to_json(load_savepoint(savepoint, job_folder=True))  # as savepoint_scan reads a job's folder
    return [{"operator_id": o["operator_id"], "parallelism": o["parallelism"], "max_parallelism": o["max_parallelism"],
             "state_bytes": o["state_bytes"], "checkpoint_id": view["checkpoint_id"], "version": view["version"],
             "names": sorted({n for st in o["subtasks"] for h in st["managed_operator"] + st["raw_operator"]
                              for n in h["states"]})} for o in view["operators"]]


def _got_scan(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"operator_id": r["operator_id"], "parallelism": r["parallelism"], "max_parallelism": r["max_parallelism"],
             "state_bytes": r["state_bytes"], "checkpoint_id": r["checkpoint_id"], "version": r["metadata_version"],
             "names": r["state_names"]} for r in rows]


def test_savepoint_scan_rows_equal_the_core(spark, fleet, scan_table) -> None:  # noqa: F811
    root, jobs = fleet
    rows = _rows(spark, scan_table)
    by_job: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_job.setdefault(r["job"], []).append(r)
    assert set(by_job) == {j["job"] for j in jobs}
    for j in jobs:
        got = by_job[j["job"]]
        assert all(r["error"] is None for r in got)
        assert _got_scan(got) == _expected_scan(str(root / j["savepoint"]))
        kinds = {k for r in got for k in r["state_kinds"]}
        assert sum(r["state_bytes"] for r in got) == j["state_bytes"]
        assert kinds <= {"managed_keyed", "managed_operator", "coordinator"}


def test_savepoint_scan_and_fleet_ids_on_s3(spark_env: SparkEnv, spark, fleet, scan_table,  # noqa: F811
                                            ids_table, monkeypatch) -> None:
    """Objects are read with boto3 inside the executors; the answer equals the local scan's."""
    root, jobs = fleet
    subset = jobs[:40]
    client = spark_env.s3.client()
    client.create_bucket(Bucket="fleet")
    sub = root.parent / "s3-subset"
    for j in subset:
        shutil.copytree(root / j["savepoint"], sub / "savepoints" / j["job"], dirs_exist_ok=True)
        (sub / "upgrades").mkdir(parents=True, exist_ok=True)
        shutil.copy(root / j["upgrade"], sub / "upgrades" / f"{j['job']}.json")
    upload_fleet(client, "fleet", sub, "prod", ("savepoints", "upgrades"))
    for k, v in spark_env.aws_env.items():  # the driver lists prefixes; executors already have these
        monkeypatch.setenv(k, v)

    scanned = savepoint_scan.savepoint_scan(savepoint_scan.savepoint_jobs(spark, "s3://fleet/prod/savepoints", 3))
    s3_rows = [r.asDict(recursive=True) for r in scanned.collect()]
    local = [r for r in _rows(spark, scan_table) if r["job"] in {j["job"] for j in subset}]
    assert all(r["error"] is None for r in s3_rows)
    assert all(r["metadata"].startswith("s3://fleet/prod/savepoints/") for r in s3_rows)

    def key(r: dict[str, Any]) -> tuple:
        return r["job"], r["operator_id"]

    strip = ("savepoint", "metadata")
    assert ([{k: v for k, v in r.items() if k not in strip} for r in sorted(s3_rows, key=key)]
            == [{k: v for k, v in r.items() if k not in strip} for r in sorted(local, key=key)])

    ids_s3 = fleet_ids.fleet_ids(fleet_ids.catalogue(spark, "s3://fleet/prod/upgrades", 3)).collect()
    local_ids = [r for r in _rows(spark, ids_table) if r["job"] in {j["job"] for j in subset}]
    assert sorted((r["job"], r["node_id"], r["v2_id"], r["v3_id"]) for r in ids_s3) == sorted(
        (r["job"], r["node_id"], r["v2_id"], r["v3_id"]) for r in local_ids)

    missing = savepoint_scan.savepoint_scan(spark.createDataFrame(
        [("ghost", "s3://fleet/prod/savepoints/ghost")], "job string, savepoint string")).collect()
    assert missing[0]["error"] and "no complete savepoint" in missing[0]["error"]


def test_fleet_check_verdicts_equal_expected_and_the_core(spark, fleet, ids_table, scan_table,  # noqa: F811
                                                          old_ids_table, tmp_path) -> None:
    root, jobs = fleet
    out = tmp_path / "check"
    summary = fleet_check.run_check(spark, str(ids_table), str(scan_table), str(out), plan=str(root / "plan.csv"),
                                    old_ids_table=str(old_ids_table))
    rows = {r["job"]: r for r in _rows(spark, out / "verdicts")}
    assert set(rows) == {j["job"] for j in jobs} | {BROKEN}
    assert rows[BROKEN]["verdict"] is None and "no savepoint" in rows[BROKEN]["error"]
    lost_total = 0
    for j in jobs:
        r = rows[j["job"]]
        assert r["error"] is None, r["error"]
        # the generated state handles carry real Flink's serialization proxies: the state-schema rule reads them all
        assert not any("state serializers not read" in w for w in r["warnings"]), (j["job"], r["warnings"])
        savepoint = load_savepoint(str(root / j["savepoint"]), job_folder=True)
        single = check_upgrade(savepoint, str(root / j["upgrade"]), hasher=j["hasher"],
                               allow_non_restored_state=j["allow_non_restored_state"],
                               flink_version=j["flink_version"], old_graph=str(root / j["spec"])).to_json()
        assert r["verdict"] == single["verdict"] and _agrees(j["expected_verdict"], single), (j["job"], j["scenario"])
        assert r["flink_error"] == single["flink_error"]
        assert json.loads(r["losses"]) == single["losses"]
        assert r["lost_bytes"] == sum(op["lost_bytes"] for op in single["operators"])
        assert (r["hasher"], r["allow_non_restored_state"]) == (j["hasher"], j["allow_non_restored_state"])
        lost_total += r["lost_bytes"]
        if r["verdict"] != "SAFE":  # what `upgrade-gate repair` would do, planned in the executor, nothing written
            plan = plan_repair(savepoint, read_side(str(root / j["upgrade"])), hasher=j["hasher"],
                               flink_version=j["flink_version"], old=read_side(str(root / j["spec"])))
            if plan.needed or plan.unresolved:
                assert {k: v for k, v in json.loads(r["repair"]).items() if k != "command"} == plan.offer(), j["job"]
            else:
                assert r["repair"] is None, j["job"]
        else:
            assert r["repair"] is None
    repairable = sum(1 for r in rows.values() if r["repair"] and json.loads(r["repair"])["repairable"])
    assert summary["repairable_jobs"] == repairable > 0
    counts = {v: sum(1 for r in rows.values() if r["verdict"] == v) for v in Verdict.mildest_first()}
    assert summary["verdicts"] == counts and summary["errors"] == 1 and summary["jobs"] == JOBS + 1
    assert summary["gate"] == "BLOCK" and summary["bytes_at_risk"] == lost_total
    assert summary["worst_jobs"][0]["verdict"] == "RESTORE_FAILS"
    assert summary["unchecked_jobs"] == [{"job": BROKEN, "error": "no savepoint for this job in the scan table"}]
    assert json.loads((out / "summary.json").read_text()) == summary


def _keyed(rows: list[dict[str, Any]], *key: str) -> dict[tuple, dict[str, Any]]:
    return {tuple(r[k] for k in key): r for r in rows}


def test_fleet_gate_one_pass_writes_the_three_jobs_tables(spark, fleet, ids_table, scan_table,  # noqa: F811
                                                          old_ids_table, tmp_path) -> None:
    """fleet_gate reads each spec and savepoint once; its ids, scan and verdict tables and its gate summary are the
    three jobs' own, row for row (plan, old catalogue and a broken spec included)."""
    root, _ = fleet
    three = fleet_check.run_check(spark, str(ids_table), str(scan_table), str(tmp_path / "check"),
                                  plan=str(root / "plan.csv"), old_ids_table=str(old_ids_table))
    out = tmp_path / "gate"
    one = fleet_gate.run_gate(spark, str(root / "upgrades"), str(root / "savepoints"), str(out),
                              old_catalogue=str(root / "specs"), plan=str(root / "plan.csv"), partitions=3)
    assert sorted(p.name for p in out.iterdir()) == ["ids", "scan", "summary.json", "verdicts"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging or temp folder left
    ids, scan = _rows(spark, out / "ids"), _rows(spark, out / "scan")
    assert _keyed(ids, "job", "node_id") == _keyed(_rows(spark, ids_table), "job", "node_id")
    assert _keyed(scan, "job", "operator_id") == _keyed(_rows(spark, scan_table), "job", "operator_id")
    assert one["rows"] == {"ids": len(ids), "scan": len(scan), "verdicts": JOBS + 1}
    verdicts = _keyed(_rows(spark, out / "verdicts"), "job")
    expected = _keyed(_rows(spark, tmp_path / "check" / "verdicts"), "job")
    # the one job without a savepoint: the same verdict (none), its reason worded for the listing it came from
    assert verdicts.pop((BROKEN,))["error"] == "no savepoint for this job under the savepoint root"
    assert expected.pop((BROKEN,))["error"] == "no savepoint for this job in the scan table"
    assert verdicts == expected
    assert one["unchecked_jobs"] == [{"job": BROKEN, "error": "no savepoint for this job under the savepoint root"}]
    same = ("gate", "jobs", "verdicts", "errors", "bytes_at_risk", "state_bytes", "state_bytes_in_failing_restores",
            "worst_jobs", "hasher_implementation")
    assert {k: one[k] for k in same} == {k: three[k] for k in same}
    assert set(one["timings"]) == {"list_and_pair_s", "one_pass_s", "summary_s", "fleet_gate_s"}
    assert json.loads((out / "summary.json").read_text()) == one


def test_fleet_gate_on_s3_equals_the_local_pass(spark_env: SparkEnv, spark, fleet, tmp_path,  # noqa: F811
                                                monkeypatch) -> None:
    """Specs, savepoints and the three tables in S3 (boto3 and pyarrow in the executors, no s3a): the rows
    equal a local pass over the same jobs."""
    root, jobs = fleet
    subset = jobs[:30]
    sub = tmp_path / "subset"
    for j in subset:
        shutil.copytree(root / j["savepoint"], sub / "savepoints" / j["job"], dirs_exist_ok=True)
        (sub / "upgrades").mkdir(parents=True, exist_ok=True)
        shutil.copy(root / j["upgrade"], sub / "upgrades" / f"{j['job']}.json")
    client = spark_env.s3.client()
    client.create_bucket(Bucket="gate")
    upload_fleet(client, "gate", sub, "prod", ("savepoints", "upgrades"))
    for k, v in spark_env.aws_env.items():
        monkeypatch.setenv(k, v)
    local = fleet_gate.run_gate(spark, str(sub / "upgrades"), str(sub / "savepoints"), str(tmp_path / "local"))
    remote = fleet_gate.run_gate(spark, "s3://gate/prod/upgrades", "s3://gate/prod/savepoints", "s3://gate/out")
    assert remote["verdicts"] == local["verdicts"] and remote["errors"] == local["errors"] == 0
    paths = ("spec", "savepoint", "metadata", "flink_error", "warnings", "operator_rows", "repair")
    for table, key in (("ids", ("job", "node_id")), ("scan", ("job", "operator_id")), ("verdicts", ("job",))):
        got = read_table(f"s3://gate/out/{table}").to_pylist()
        want = read_table(str(tmp_path / "local" / table)).to_pylist()
        assert all(r.get("error") is None for r in got)
        if table == "verdicts":  # the repair offer is the same plan; only its command names the other locations
            def offers(rows: list[dict[str, Any]]) -> dict[str, Any]:
                return {r["job"]: {k: v for k, v in json.loads(r["repair"]).items() if k != "command"}
                        for r in rows if r["repair"]}
            assert offers(got) == offers(want) and offers(got)
        def without_paths(rows: list[dict[str, Any]]) -> dict[tuple, dict[str, Any]]:
            return _keyed([{k: v for k, v in r.items() if k not in paths} for r in rows], *key)  # noqa: B023

        assert len(got) == len(want) and without_paths(got) == without_paths(want), table
    keys = sorted(o["Key"] for o in client.list_objects_v2(Bucket="gate", Prefix="out/")["Contents"])
    assert "out/summary.json" in keys and all(k.count("/run-") == 1 or k.endswith(("_manifest.json", "_SUCCESS",
                                                                                   "summary.json")) for k in keys)
    assert not [k for k in keys if ".inputs-" in k]  # the staged inputs are gone
    doc = json.loads(client.get_object(Bucket="gate", Key="out/summary.json")["Body"].read())
    assert doc["verdicts"] == local["verdicts"]


def _upload_subset(client: Any, bucket: str, prefix: str, root: Path, jobs: list[dict[str, Any]], tmp: Path) -> None:
    for j in jobs:
        shutil.copytree(root / j["savepoint"], tmp / "savepoints" / j["job"], dirs_exist_ok=True)
        (tmp / "upgrades").mkdir(parents=True, exist_ok=True)
        shutil.copy(root / j["upgrade"], tmp / "upgrades" / f"{j['job']}.json")
    upload_fleet(client, bucket, tmp, prefix, ("savepoints", "upgrades"))


def test_fleet_gate_stopped_between_s3_commits_leaves_no_stale_summary(spark_env: SparkEnv, spark, fleet,  # noqa: F811
                                                                       tmp_path, monkeypatch) -> None:
    """On s3:// the three tables commit one after another, then summary.json. A rerun that stops after its
    first commit (here S3 refuses the second table's manifest PUT, on the wire) must not leave the previous
    run's gate document beside tables it did not describe: the summary is gone (a DAG gating on it fails
    closed), the committed ids table is the new run's, the other two still the previous run's, each whole."""
    root, jobs = fleet
    client = spark_env.s3.client()
    client.create_bucket(Bucket="stale")
    _upload_subset(client, "stale", "before", root, jobs[:12], tmp_path / "before")
    _upload_subset(client, "stale", "after", root, jobs[:7], tmp_path / "after")
    for k, v in spark_env.aws_env.items():
        monkeypatch.setenv(k, v)
    first = fleet_gate.run_gate(spark, "s3://stale/before/upgrades", "s3://stale/before/savepoints", "s3://stale/out")
    assert sum(first["verdicts"].values()) == 12
    port = urlparse(spark_env.s3.endpoint).port
    assert port
    with FaultProxy("127.0.0.1", port) as proxy:
        proxy.add_rule(r"^/stale/out/scan/_manifest\.json$", "status", method="PUT", status=403, times=-1)
        monkeypatch.setenv("AWS_ENDPOINT_URL_S3", proxy.url)
        with pytest.raises(Exception, match=r"AccessDenied|403|Forbidden"):
            fleet_gate.run_gate(spark, "s3://stale/after/upgrades", "s3://stale/after/savepoints", "s3://stale/out",
                                overwrite=True)
        assert ("PUT", "/stale/out/scan/_manifest.json", "status") in proxy.log
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", spark_env.s3.endpoint)
    keys = [o["Key"] for o in client.list_objects_v2(Bucket="stale", Prefix="out/")["Contents"]]
    assert "out/summary.json" not in keys
    assert {r["job"] for r in read_table("s3://stale/out/ids").to_pylist()} == {j["job"] for j in jobs[:7]}
    for table in ("scan", "verdicts"):
        assert {r["job"] for r in read_table(f"s3://stale/out/{table}").to_pylist()} == {j["job"] for j in jobs[:12]}
    assert not [k for k in client.list_objects_v2(Bucket="stale")["Contents"] if ".inputs-" in k["Key"]]


@pytest.mark.parametrize("where", ["local", "s3"])
def test_write_tables_failed_task_leaves_no_table(spark_env: SparkEnv, spark, tmp_path, monkeypatch,  # noqa: F811
                                                  where: str) -> None:
    """Two tables from one pass, one task failing while the others are still writing theirs: neither table
    appears, no part is left (not even one a cancelled task closes after the failure), and tables from an
    earlier run stay readable."""
    import pyarrow as pa

    for k, v in spark_env.aws_env.items():
        monkeypatch.setenv(k, v)

    def rows(fail: bool) -> TaggedRows:
        def fn(batches):  # type: ignore[no-untyped-def]
            for b in batches:
                first = b.column(0)[0].as_py()
                if fail and first >= 1500:
                    raise RuntimeError("executor died")
                yield "a", b
                if fail:  # the siblings are still writing when Spark cancels them: their parts land late
                    time.sleep(1.0)
                yield "b", pa.RecordBatch.from_pydict({"x": [first]})
        return TaggedRows(spark.range(0, 2000, numPartitions=4), fn, {"a": "id long", "b": "x long"})

    if where == "s3":
        client = spark_env.s3.client()
        client.create_bucket(Bucket="tagged")
        targets = {"a": "s3://tagged/t/a", "b": "s3://tagged/t/b"}
    else:
        targets = {"a": str(tmp_path / "a"), "b": str(tmp_path / "b")}
    with pytest.raises(Exception, match="executor died"):
        write_tables(rows(True), targets)
    if where == "s3":
        assert client.list_objects_v2(Bucket="tagged").get("KeyCount", 0) == 0
    else:
        assert list(tmp_path.iterdir()) == []
    assert write_tables(rows(False), targets) == {"a": 2000, "b": 4}
    with pytest.raises(Exception, match="executor died"):
        write_tables(rows(True), targets, overwrite=True)
    assert sorted(read_table(targets["a"]).column("id").to_pylist()) == list(range(2000))
    assert read_table(targets["b"]).num_rows == 4
    if where == "local":
        assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b"]


def test_failed_write_leaves_no_table_behind(spark, tmp_path) -> None:  # noqa: F811
    """A job that fails half-way leaves neither a partial table nor temp dirs; an old table survives."""
    def boom(batches):  # type: ignore[no-untyped-def]
        for b in batches:  # the last of 4 tasks fails; the others have written their files by then
            if b.column(0)[0].as_py() >= 150_000:
                raise RuntimeError("executor died")
            yield b

    df = spark.range(0, 200_000, numPartitions=4).mapInArrow(boom, "id long")
    target = tmp_path / "table"
    with pytest.raises(Exception, match="executor died"):
        common.write_parquet(df, str(target))
    assert list(tmp_path.iterdir()) == []

    common.write_parquet(spark.range(3), str(target))
    with pytest.raises(Exception, match="executor died"):
        common.write_parquet(df, str(target), overwrite=True)
    assert sorted(r.id for r in spark.read.parquet(str(target)).collect()) == [0, 1, 2]
    assert [p.name for p in tmp_path.iterdir()] == ["table"]
    with pytest.raises(common.JobError, match="already exists"):
        common.write_parquet(spark.range(3), str(target))


@pytest.mark.parametrize("job", ["fleet_ids", "savepoint_scan", "fleet_check", "fleet_gate", "key_alignment"])
def test_every_job_has_a_cli(job: str) -> None:
    out = subprocess.run([sys.executable, str(REPO / "spark_jobs" / f"{job}.py"), "--help"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0 and "--output" in out.stdout and "--master" in out.stdout


def test_spark_submit_runs_a_job_file(tmp_path: Path) -> None:
    """`spark-submit spark_jobs/<job>.py ...`: the file form works (repository importable from the file)."""
    import pyarrow.parquet as pq

    catalogue = tmp_path / "graphs"
    catalogue.mkdir()
    shutil.copy(REPO / "hashing" / "examples" / "orders-enrichment.json", catalogue / "orders.json")
    submit = Path(sys.executable).with_name("spark-submit")
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable)
    out = subprocess.run([str(submit), "--master", "local[1]", str(REPO / "spark_jobs" / "fleet_ids.py"),
                          "--catalogue", str(catalogue), "--output", str(tmp_path / "ids")],
                         capture_output=True, text=True, timeout=240, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    table = pq.read_table(tmp_path / "ids").to_pylist()
    graph = load_graph(catalogue / "orders.json").graph
    assert sorted(r["v2_id"] for r in table) == sorted(
        p.generated.hex() for p in compute_operator_ids(graph, "v2").pairs.values())
    assert {r["job"] for r in table} == {"orders"}


def test_fleet_gate_applies_a_waiver_to_its_job_only(spark, tmp_path) -> None:  # noqa: F811
    """`--waivers`: two jobs lose the same state (real Flink 2.3 savepoint, the uid `keyed` removed); the file waives
    it for one job, which passes the gate; the other still blocks it. Each job's decision is the core's on the same
    check (`upgrade_gate.gate.policy`), never re-derived."""
    case = REPO / "tests" / "fixtures" / "restores" / "2.3.0" / "uid-removed"
    for job in ("ledger-rollup", "orders-rollup"):
        (tmp_path / "catalogue").mkdir(exist_ok=True)
        shutil.copy(case / "graph-b.json", tmp_path / "catalogue" / f"{job}.json")
        shutil.copytree(case.parent / "savepoints" / "uids-p2", tmp_path / "savepoints" / job / "savepoint-1")
    waivers = tmp_path / ".upgrade-gate.yaml"
    waivers.write_text("waivers:\n  - operator: keyed\n    job: ledger-rollup\n    reason: keyed was removed on "
                       "purpose\n    who: platform team\n    expires: 2999-12-31\n")
    gating = fleet_check.read_gating(str(waivers))
    summary = fleet_gate.run_gate(spark, str(tmp_path / "catalogue"), str(tmp_path / "savepoints"),
                                  str(tmp_path / "out"), allow_non_restored_state=True, flink_version="2.3",
                                  gating=gating)
    rows = {r["job"]: r for r in _rows(spark, tmp_path / "out" / "verdicts")}
    assert {j: (r["verdict"], r["gate_passes"]) for j, r in rows.items()} == {
        "ledger-rollup": ("STATE_LOSS", True), "orders-rollup": ("STATE_LOSS", False)}
    single = check_upgrade(str(tmp_path / "savepoints" / "ledger-rollup" / "savepoint-1"),
                           str(case / "graph-b.json"), allow_non_restored_state=True, flink_version="2.3").to_json()
    for job, r in rows.items():
        assert json.loads(r["gate"]) == gating.decide(single, job=job).to_json()
    assert json.loads(rows["ledger-rollup"]["gate"])["waived"][0]["who"] == "platform team"
    assert summary["gate"] == "BLOCK" and summary["waived_jobs"] == 1
    assert {w["job"]: w["gate"]["passes"] for w in summary["worst_jobs"]} == {"ledger-rollup": True,
                                                                              "orders-rollup": False}

"""Tables written by the Python workers, and a fleet check's inputs paired in the driver.

On a local master the fleet jobs' workers write their own Parquet parts (`parquet_output`) and
`fleet_check` pairs jobs, plans and tables in Python (`fleet_inputs`) instead of Spark SQL. A user
must not be able to tell: the tables read back the same in Spark, a failed or retried task leaves
nothing behind, and the plan means what it meant.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bench.fleet import generate_fleet
from spark_jobs import common, fleet_check, fleet_ids, fleet_inputs, savepoint_scan
from spark_jobs.parquet_output import ArrowRows, direct_write_possible, read_table, write_table
from tests.spark_support import spark, spark_env  # noqa: F401  (fixtures)

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fleet")
    generate_fleet(root, 60, seed=7)
    return root


def _sorted_rows(spark, path: Path) -> list[dict[str, Any]]:  # noqa: F811
    rows = [r.asDict(recursive=True) for r in spark.read.parquet(str(path)).collect()]
    return sorted(rows, key=lambda r: json.dumps(r, sort_keys=True, default=str))


@pytest.mark.parametrize("table", ["ids", "scan"])
def test_worker_written_table_reads_back_like_sparks_own(spark, fleet, tmp_path, table) -> None:  # noqa: F811
    if table == "ids":
        rows = fleet_ids.ids_rows(fleet_ids.catalogue(spark, str(fleet / "upgrades"), 3))
    else:
        rows = savepoint_scan.scan_rows(savepoint_scan.savepoint_jobs(spark, str(fleet / "savepoints"), 3))
    assert direct_write_possible(rows, str(tmp_path / "direct"))
    count = write_table(rows, str(tmp_path / "direct"))
    common.write_parquet(rows.frame(), str(tmp_path / "spark"))  # Spark's own writer, the old way

    direct, by_spark = spark.read.parquet(str(tmp_path / "direct")), spark.read.parquet(str(tmp_path / "spark"))
    assert direct.schema == by_spark.schema
    assert count == direct.count() > 60
    assert _sorted_rows(spark, tmp_path / "direct") == _sorted_rows(spark, tmp_path / "spark")
    files = sorted(p.name for p in (tmp_path / "direct").iterdir())
    assert files[:2] == ["_SUCCESS", "_manifest.json"] and len(files) == 5
    assert all(f.endswith(".snappy.parquet") for f in files[2:])
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temp folder left


def test_empty_table_keeps_its_schema(spark, tmp_path) -> None:  # noqa: F811
    jobs = common.spread(spark, [], 4, "job string, spec string")
    assert write_table(fleet_ids.ids_rows(jobs), str(tmp_path / "ids")) == 0
    read = spark.read.parquet(str(tmp_path / "ids"))
    assert read.count() == 0 and read.schema == common.spark_schema(fleet_ids.SCHEMA_DDL)


def test_failed_task_leaves_no_table_and_keeps_the_old_one(spark, tmp_path) -> None:  # noqa: F811
    def boom(batches):  # type: ignore[no-untyped-def]
        for b in batches:  # one of 4 tasks fails; others have written their parts by then
            if b.column(0)[0].as_py() >= 150:
                raise RuntimeError("executor died")
            yield pa.RecordBatch.from_pydict({"n": b.column(0)}, schema=common.arrow_schema("n long"))

    rows = ArrowRows(spark.range(0, 200, numPartitions=4), boom, "n long")
    target = tmp_path / "table"
    with pytest.raises(Exception, match="executor died"):
        write_table(rows, str(target))
    assert list(tmp_path.iterdir()) == []
    write_table(ArrowRows(spark.range(0, 100, numPartitions=2), boom, "n long"), str(target))
    with pytest.raises(Exception, match="executor died"):
        write_table(rows, str(target), overwrite=True)
    assert sorted(r.n for r in spark.read.parquet(str(target)).collect()) == list(range(100))
    assert [p.name for p in tmp_path.iterdir()] == ["table"]


@pytest.mark.parametrize("where", ["local", "s3"])
def test_a_retried_task_leaves_only_its_successful_part(spark_env, tmp_path, where) -> None:  # noqa: F811
    """A task that dies after writing part of its file and is retried: only the retry's part stays.

    Needs a master that retries tasks (`local[2,2]`), so it runs in its own Spark process."""
    if where == "s3":
        spark_env.s3.client().create_bucket(Bucket="retried")
    target = str(tmp_path / "t") if where == "local" else "s3://retried/t"
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(REPO)!r})
        import pyarrow as pa
        from pyspark import TaskContext
        from spark_jobs import common
        from spark_jobs.parquet_output import ArrowRows, write_table

        def flaky(batches):
            schema = common.arrow_schema("n long")
            for i, b in enumerate(batches):
                yield pa.RecordBatch.from_pydict({{"n": b.column(0)}}, schema=schema)
                ctx = TaskContext.get()
                if ctx.partitionId() == 1 and ctx.attemptNumber() == 0:
                    raise RuntimeError("first attempt dies after its first batch")

        spark = common.build_session("retry", "local[2,2]",
                                     extra_conf={{"spark.sql.execution.arrow.maxRecordsPerBatch": "10"}})
        print("ROWS", write_table(ArrowRows(spark.range(0, 100, numPartitions=2), flaky, "n long"),
                                  {target!r}))
    """)
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable, **spark_env.aws_env)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "first attempt dies" in out.stderr  # the retry really happened
    assert "ROWS 100" in out.stdout
    if where == "local":
        parts = sorted(p.name for p in (tmp_path / "t").glob("part-*"))
    else:  # everything under the table: the manifest's parts, nothing of the failed attempt
        listing = spark_env.s3.client().list_objects_v2(Bucket="retried", Prefix="t/")["Contents"]
        parts = sorted(o["Key"].rsplit("/", 1)[-1] for o in listing if "/part-" in o["Key"])
        assert len(listing) == len(parts) + 2
    assert [p.split("-")[1:3] for p in parts] == [["00000", "0"], ["00001", "1"]]  # partition 1: attempt 1 only
    with pytest.MonkeyPatch.context() as mp:
        for k, v in spark_env.aws_env.items():
            mp.setenv(k, v)
        assert sorted(read_table(target).column("n").to_pylist()) == list(range(100))


# ---- s3:// tables written by the workers, from any master ----------------------------------
@pytest.fixture
def aws(spark_env, monkeypatch) -> Any:  # noqa: F811
    """The driver's S3 environment (the executors got theirs when the session started)."""
    for k, v in spark_env.aws_env.items():
        monkeypatch.setenv(k, v)
    client = spark_env.s3.client()
    if "tables" not in {b["Name"] for b in client.list_buckets()["Buckets"]}:
        client.create_bucket(Bucket="tables")
    return client


def _keys(client: Any, prefix: str) -> list[str]:
    return sorted(o["Key"] for o in client.list_objects_v2(Bucket="tables", Prefix=prefix).get("Contents", ()))


def test_s3_table_written_by_workers_reads_like_the_local_one(spark, fleet, aws, tmp_path) -> None:  # noqa: F811
    rows = savepoint_scan.scan_rows(savepoint_scan.savepoint_jobs(spark, str(fleet / "savepoints"), 3))
    assert direct_write_possible(rows, "s3://tables/scan")
    assert write_table(rows, "s3://tables/scan") == write_table(rows, str(tmp_path / "scan"))
    s3, local = read_table("s3://tables/scan"), read_table(str(tmp_path / "scan"))
    assert s3.schema == local.schema == common.arrow_schema(savepoint_scan.SCHEMA_DDL)
    key = lambda r: json.dumps(r, sort_keys=True, default=str)  # noqa: E731
    assert sorted(s3.to_pylist(), key=key) == sorted(local.to_pylist(), key=key)
    manifest = json.loads(aws.get_object(Bucket="tables", Key="scan/_manifest.json")["Body"].read())
    assert _keys(aws, "scan/") == sorted(["scan/_SUCCESS", "scan/_manifest.json",
                                          *(f"scan/{p}" for p in manifest["parts"])])
    assert manifest["rows"] == s3.num_rows and len(manifest["parts"]) == 3
    with pytest.raises(common.JobError, match="already exists"):
        write_table(rows, "s3://tables/scan")
    with pytest.raises(common.JobError, match="no committed table"):
        read_table("s3://tables/nothing-here")
    # fleet_check reads its input tables from S3 the same way
    assert (fleet_inputs.per_job(spark, "s3://tables/scan", "metadata")
            == fleet_inputs.per_job(spark, str(tmp_path / "scan"), "metadata"))


def test_failed_task_on_s3_leaves_nothing_and_keeps_the_old_table(spark, aws) -> None:  # noqa: F811
    def boom(batches):  # type: ignore[no-untyped-def]
        for b in batches:  # one of 4 tasks fails; others have written their parts by then
            if b.column(0)[0].as_py() >= 150:
                raise RuntimeError("executor died")
            yield pa.RecordBatch.from_pydict({"n": b.column(0)}, schema=common.arrow_schema("n long"))

    rows = ArrowRows(spark.range(0, 200, numPartitions=4), boom, "n long")
    with pytest.raises(Exception, match="executor died"):
        write_table(rows, "s3://tables/failing")
    assert _keys(aws, "failing/") == []
    write_table(ArrowRows(spark.range(0, 100, numPartitions=2), boom, "n long"), "s3://tables/failing")
    before = _keys(aws, "failing/")
    with pytest.raises(Exception, match="executor died"):
        write_table(rows, "s3://tables/failing", overwrite=True)
    assert _keys(aws, "failing/") == before
    assert sorted(read_table("s3://tables/failing").column("n").to_pylist()) == list(range(100))
    # a successful overwrite replaces the table and removes the old run's parts
    write_table(ArrowRows(spark.range(0, 3, numPartitions=1), boom, "n long"), "s3://tables/failing",
                overwrite=True)
    assert sorted(read_table("s3://tables/failing").column("n").to_pylist()) == [0, 1, 2]
    assert len(_keys(aws, "failing/")) == 3 and not set(before) & set(_keys(aws, "failing/")) - {
        "failing/_SUCCESS", "failing/_manifest.json"}


def test_spread_gives_equal_tasks_and_every_row_once(spark) -> None:  # noqa: F811
    rows = [(f"job-{i:05d}", f"/specs/{i}.json") for i in range(10_000)]
    df = common.spread(spark, rows, 8, "job string, spec string")
    sizes = df.rdd.glom().map(len).collect()
    assert sizes == [1250] * 8  # parallelize alone gave 1,024, 1,808 or 2,048 per task
    assert sorted(tuple(r) for r in df.collect()) == rows


# ---- fleet_inputs ----------------------------------------------------------------------
def test_per_job_reads_the_same_from_pyarrow_and_from_spark(spark, fleet, tmp_path) -> None:  # noqa: F811
    write_table(fleet_ids.ids_rows(fleet_ids.catalogue(spark, str(fleet / "upgrades"), 3)), str(tmp_path / "ids"))
    common.write_parquet(savepoint_scan.savepoint_scan(
        savepoint_scan.savepoint_jobs(spark, str(fleet / "savepoints"), 3)), str(tmp_path / "scan"))
    for table, column in (("ids", "spec"), ("scan", "metadata")):
        arrow = fleet_inputs.per_job(spark, str(tmp_path / table), column)
        assert arrow == fleet_inputs._per_job_spark(spark, str(tmp_path / table), column)
        assert len(arrow) == 60 and all(v and e is None for v, e in arrow.values())
    with pytest.raises(common.JobError, match="no such table"):
        fleet_inputs.per_job(spark, str(tmp_path / "nope"), "spec")


def _plan_files(tmp_path: Path) -> dict[str, Path]:
    rows = [{"job": "a", "hasher": "v3", "allow_non_restored_state": "TRUE", "flink_version": "1.20"},
            {"job": "b", "hasher": "", "allow_non_restored_state": "no", "flink_version": ""}]
    csv_path = tmp_path / "plan.csv"
    csv_path.write_text("job,hasher,allow_non_restored_state,flink_version\na,v3,TRUE,1.20\nb,,no,\n")
    json_path = tmp_path / "plan.json"
    json_path.write_text(json.dumps([{"job": "a", "hasher": "v3", "allow_non_restored_state": True,
                                      "flink_version": "1.20"},
                                     {"job": "b", "allow_non_restored_state": False}]))
    parquet_path = tmp_path / "plan.parquet"
    pq.write_table(pa.Table.from_pylist([{**r, "hasher": r["hasher"] or None,
                                          "flink_version": r["flink_version"] or None} for r in rows]), parquet_path)
    return {"csv": csv_path, "json": json_path, "parquet": parquet_path}


@pytest.mark.parametrize("kind", ["csv", "json", "parquet"])
def test_a_plan_means_the_same_in_every_format(spark, tmp_path, kind) -> None:  # noqa: F811
    ids, scan = tmp_path / "ids", tmp_path / "scan"
    pq.write_table(pa.Table.from_pylist([{"job": j, "spec": f"/s/{j}.json", "error": None} for j in "abc"]), ids)
    pq.write_table(pa.Table.from_pylist(
        [{"job": "a", "metadata": "/m/a", "error": None}, {"job": "b", "metadata": None, "error": "truncated"},
         {"job": "d", "metadata": "/m/d", "error": None}]), scan)
    rows = fleet_inputs.check_inputs(spark, str(ids), str(scan), plan=str(_plan_files(tmp_path)[kind]),
                                     hasher="v2", matching="fixed", allow_non_restored_state=True,
                                     flink_version="2.3")
    by_job = {r["job"]: r for r in rows}
    assert [r["job"] for r in rows] == ["a", "b", "c", "d"]
    assert {k: by_job["a"][k] for k in fleet_inputs.OPTIONS} == {
        "hasher": "v3", "matching": "fixed", "allow_non_restored_state": True, "flink_version": "1.20"}
    # b: an empty or missing value falls back to the flag; "no" is false
    assert {k: by_job["b"][k] for k in fleet_inputs.OPTIONS} == {
        "hasher": "v2", "matching": "fixed", "allow_non_restored_state": False, "flink_version": "2.3"}
    assert by_job["a"]["input_error"] is None and by_job["a"]["metadata"] == "/m/a"
    assert by_job["b"]["input_error"] == "savepoint: truncated"
    assert by_job["c"]["input_error"] == "no savepoint for this job in the scan table"
    assert by_job["d"]["input_error"] == "no new graph spec for this job in the ids table"


@pytest.mark.parametrize(("text", "message"), [
    ("hasher\nv3\n", "needs a 'job' column"),
    ("job,hasher\na,v3\na,v2\n", "job 'a' is planned twice"),
])
def test_a_bad_plan_is_a_clear_error(tmp_path, text, message) -> None:
    plan = tmp_path / "plan.csv"
    plan.write_text(text)
    with pytest.raises(common.JobError, match=message) as err:
        fleet_inputs.read_plan(str(plan))
    assert str(plan) in str(err.value)
    ids, scan = tmp_path / "ids.parquet", tmp_path / "scan.parquet"  # the fleet path pairs on disk: same errors
    pq.write_table(pa.Table.from_pylist([{"job": "a", "spec": "/s/a.json", "error": None}]), ids)
    pq.write_table(pa.Table.from_pylist([{"job": "a", "metadata": "/m/a", "error": None}]), scan)
    with pytest.raises(common.JobError, match=message) as err:
        fleet_inputs.check_inputs(None, str(ids), str(scan), plan=str(plan))
    assert str(plan) in str(err.value)
    bad_json = tmp_path / "plan.json"
    bad_json.write_text("[{")
    with pytest.raises(common.JobError, match="not a readable plan"):
        fleet_inputs.read_plan(str(bad_json))


def test_summary_reads_the_same_from_pyarrow_and_from_spark(spark, fleet, tmp_path) -> None:  # noqa: F811
    write_table(fleet_ids.ids_rows(fleet_ids.catalogue(spark, str(fleet / "upgrades"), 3)), str(tmp_path / "ids"))
    write_table(savepoint_scan.scan_rows(savepoint_scan.savepoint_jobs(spark, str(fleet / "savepoints"), 3)),
                str(tmp_path / "scan"))
    summary = fleet_check.run_check(spark, str(tmp_path / "ids"), str(tmp_path / "scan"), str(tmp_path / "check"),
                                    plan=str(fleet / "plan.csv"), worst=5)
    verdicts = str(tmp_path / "check" / "verdicts")
    arrow = fleet_check.read_verdicts(spark, verdicts)
    assert sorted(arrow, key=lambda r: r["job"]) == sorted(fleet_check._read_verdicts_spark(spark, verdicts),
                                                           key=lambda r: r["job"])
    timings = summary.pop("timings")
    assert summary.pop("hasher_implementation") == "compiled"  # what the executors ran, not read from the table
    assert fleet_check.summarize(arrow, 5) == summary and summary["jobs"] == 60
    assert {"fleet_ids_write_s", "savepoint_scan_write_s", "check_s"} <= set(timings)
    # the tasks read their inputs from parts staged beside the output; none are left behind
    assert sorted(p.name for p in tmp_path.iterdir()) == ["check", "ids", "scan"]
    severity = ["RESTORE_FAILS", "STATE_MISROUTED", "STATE_LOSS"]
    ranks = [(severity.index(w["verdict"]), -w["lost_bytes"]) for w in summary["worst_jobs"]]
    assert ranks == sorted(ranks) and len(ranks) == 5

"""The fleet jobs on a real Spark standalone cluster (a master and two worker JVMs) give the local tables.

A generated fleet of 40 jobs (and a key sample with planted misplacements) lives in SeaweedFS S3.
`fleet_ids`, `savepoint_scan` and `fleet_check` run through `spark-submit --master spark://...`,
reading their inputs from S3 and writing their tables to S3 (the workers write Parquet parts with
pyarrow, the driver commits a manifest: no s3a connector). The same jobs on an in-process `local[2]`
session write local tables. Every table must hold the same rows, and the work must really have run
on both workers, with the compiled hasher and `_metadata` subtask loop (shipped beside the code's zip).
`key_alignment` reads its sample from S3 in the executors (pyarrow) and writes `offenders/` and `report.json`
to S3.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from bench.fleet import generate_fleet, upload_fleet
from bench.key_samples import write_sample
from spark_jobs import fleet_check, fleet_gate, fleet_ids, key_alignment, savepoint_scan
from spark_jobs.parquet_output import read_table, write_table
from tests.spark_cluster import SparkCluster, spark_cluster  # noqa: F401  (fixture)
from tests.spark_support import SparkEnv, spark, spark_env  # noqa: F401  (fixtures)

pytestmark = pytest.mark.s3

REPO = Path(__file__).resolve().parents[2]
JOBS = 40
BUCKET = "clusterfleet"


@pytest.fixture(scope="module")
def s3_fleet(spark_env: SparkEnv, tmp_path_factory: pytest.TempPathFactory) -> str:  # noqa: F811
    root = tmp_path_factory.mktemp("cluster-fleet")
    generate_fleet(root, JOBS, seed=11)
    client = spark_env.s3.client()
    client.create_bucket(Bucket=BUCKET)
    upload_fleet(client, BUCKET, root, "fleet", ("savepoints", "upgrades"))
    client.put_object(Bucket=BUCKET, Key="fleet/plan.csv", Body=(root / "plan.csv").read_bytes())
    return f"s3://{BUCKET}/fleet"


def _sorted(table: str) -> list[dict[str, Any]]:
    return sorted(read_table(table).to_pylist(), key=lambda r: json.dumps(r, sort_keys=True, default=str))


@pytest.mark.timeout(1800)  # three spark-submits and a local run; about 2 minutes on a quiet machine
def test_fleet_jobs_on_a_two_worker_cluster_equal_local_mode(spark_cluster: SparkCluster, spark_env,  # noqa: F811
                                                            spark, s3_fleet, tmp_path, monkeypatch) -> None:  # noqa: F811
    for k, v in spark_env.aws_env.items():  # the in-process driver lists and reads S3 too
        monkeypatch.setenv(k, v)
    out = f"s3://{BUCKET}/cluster"
    runs = {
        "ids": ("fleet_ids.py", "--catalogue", f"{s3_fleet}/upgrades", "--output", f"{out}/ids"),
        "scan": ("savepoint_scan.py", "--savepoints", f"{s3_fleet}/savepoints", "--output", f"{out}/scan"),
        "check": ("fleet_check.py", "--ids", f"{out}/ids", "--scan", f"{out}/scan", "--plan", f"{s3_fleet}/plan.csv",
                  "--output", f"{out}/check"),
    }
    def submit(name: str, cores: int) -> subprocess.Popen[str]:
        app, *args = runs[name]
        return subprocess.Popen(
            [*spark_cluster.submit_command({"spark.cores.max": str(cores)}), str(REPO / "spark_jobs" / app), *args,
             "--partitions", "4", "--progress-interval", "1"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=spark_cluster.env, cwd=tmp_path)

    logs = {}
    # ids and scan at once, one executor each (as the DAG runs them); then the check on both workers
    for batch in ((("ids", 1), ("scan", 1)), (("check", 2),)):
        procs = {name: submit(name, cores) for name, cores in batch}
        for name, proc in procs.items():
            logs[name] = proc.communicate(timeout=600)[0]  # a loaded 2-core machine: minutes
            # fleet_check exits 1 when the gate is BLOCK (a verdict, not a failure)
            assert proc.returncode in ((0, 1) if name == "check" else (0,)), logs[name][-4000:]
            assert "Traceback" not in logs[name], logs[name][-4000:]
    assert f"wrote {out}/ids:" in logs["ids"] and f"wrote {out}/scan:" in logs["scan"]
    # the executors got our code as a zip, which cannot hold a compiled extension: the built hasher and the
    # `_metadata` subtask loop came as shipped files (SparkFiles), and every task of the jobs that hash or read
    # `_metadata` ran them, not the Python fallbacks
    assert "fleet_ids: hasher: compiled (" in logs["ids"], logs["ids"][-4000:]
    assert "fleet_check: hasher: compiled (" in logs["check"], logs["check"][-4000:]
    assert "savepoint_scan: _metadata subtask loop: compiled (" in logs["scan"], logs["scan"][-4000:]
    # progress: jobs done / total with rate and ETA in every driver log, ending at the total
    for name, job in (("ids", "fleet_ids"), ("scan", "savepoint_scan"), ("check", "fleet_check")):
        lines = re.findall(rf"{job}: ([\d,]+)/{JOBS} jobs \(([\d.]+) %\), ([\d.]+) jobs/s, ([^,]+),", logs[name])
        # a line every second while the tasks run, the last one the count the tasks reported: all of them
        assert len(lines) >= 2 and lines[-1][:2] == (str(JOBS), "100.0") and lines[-1][3] == "done", (name, lines)

    # the same jobs in local mode, local tables
    local = tmp_path / "local"
    write_table(fleet_ids.ids_rows(fleet_ids.catalogue(spark, f"{s3_fleet}/upgrades", 4)), str(local / "ids"))
    write_table(savepoint_scan.scan_rows(savepoint_scan.savepoint_jobs(spark, f"{s3_fleet}/savepoints", 4)),
                str(local / "scan"))
    summary = fleet_check.run_check(spark, str(local / "ids"), str(local / "scan"), str(local / "check"),
                                    plan=f"{s3_fleet}/plan.csv")

    ids = _sorted(f"{out}/ids")
    assert len({r["job"] for r in ids}) == JOBS and all(r["error"] is None for r in ids)
    assert ids == _sorted(str(local / "ids"))
    assert _sorted(f"{out}/scan") == _sorted(str(local / "scan"))
    verdicts = _sorted(f"{out}/check/verdicts")
    assert len(verdicts) == JOBS and any(r["verdict"] for r in verdicts)
    assert verdicts == _sorted(str(local / "check" / "verdicts"))
    body = spark_env.s3.client().get_object(Bucket=BUCKET, Key="cluster/check/summary.json")["Body"].read()
    cluster_summary = json.loads(body)
    assert {k: v for k, v in cluster_summary.items() if k != "timings"} == {
        k: v for k, v in summary.items() if k != "timings"}
    assert summary["jobs"] == JOBS and cluster_summary["hasher_implementation"] == "compiled"
    # how long each phase took, the input tables' writes included (read from their manifests)
    assert set(cluster_summary["timings"]) == {"fleet_ids_write_s", "savepoint_scan_write_s", "pair_inputs_s",
                                               "check_s", "summary_s", "fleet_check_s"}
    assert all(v >= 0 for v in cluster_summary["timings"].values())

    # the tasks ran in executors on both workers, each in its own work directory: every worker ran one of
    # ids/scan, and both ran the check (the newest application)
    apps = {w: sorted(p.name for p in (spark_cluster.logs / w).glob("app-*")) for w in ("worker-0", "worker-1")}
    newest = max(a for names in apps.values() for a in names)
    assert all(len(names) == 2 and names[-1] == newest for names in apps.values()), apps
    # a committed S3 table is its manifest, _SUCCESS and the manifest's parts: nothing else
    listing = spark_env.s3.client().list_objects_v2(Bucket=BUCKET, Prefix="cluster/ids/")["Contents"]
    manifest = json.loads(spark_env.s3.client().get_object(Bucket=BUCKET, Key="cluster/ids/_manifest.json")["Body"]
                          .read())
    assert sorted(o["Key"] for o in listing) == sorted(
        ["cluster/ids/_SUCCESS", "cluster/ids/_manifest.json", *(f"cluster/ids/{p}" for p in manifest["parts"])])
    assert manifest["rows"] == len(ids) and len(manifest["parts"]) == 4


def test_key_alignment_on_a_two_worker_cluster_equals_local_mode(spark_cluster: SparkCluster, spark_env,  # noqa: F811
                                                                spark, tmp_path, monkeypatch) -> None:  # noqa: F811
    """The planted keys are found on the cluster, from an S3 sample, exactly as in local mode."""
    for k, v in spark_env.aws_env.items():  # the test reads the cluster's S3 tables
        monkeypatch.setenv(k, v)
    sample = write_sample(tmp_path / "keys", 30_000, "long", 4, 128, misplaced=7, multi_split=5, chunk=10_000)
    client = spark_env.s3.client()
    client.create_bucket(Bucket="clusterkeys")
    for part in sorted(sample.path.glob("*.parquet")):
        client.put_object(Bucket="clusterkeys", Key=f"sample/{part.name}", Body=part.read_bytes())
    args = ["--key-type", "long", "--parallelism", "4", "--max-parallelism", "128"]
    proc = subprocess.run(
        [*spark_cluster.submit_command({"spark.cores.max": "2"}), str(REPO / "spark_jobs" / "key_alignment.py"),
         "--sample", "s3://clusterkeys/sample", "--output", "s3://clusterkeys/ka", *args],
        capture_output=True, text=True, env=spark_cluster.env, cwd=tmp_path, timeout=600)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 1 and "Traceback" not in log, log[-4000:]  # 1: keys are not aligned
    cluster = json.loads(client.get_object(Bucket="clusterkeys", Key="ka/report.json")["Body"].read())
    local = key_alignment.run_alignment(spark, str(sample.path), str(tmp_path / "ka"), key_type="long",
                                        parallelism=4, max_parallelism=128)
    assert cluster["verdict"] == "NOT_ALIGNED" and cluster["sample"] == "s3://clusterkeys/sample"
    assert {k: v for k, v in cluster.items() if k != "sample"} == {
        k: v for k, v in json.loads(json.dumps(local)).items() if k != "sample"}
    assert cluster["misplaced"]["keys"] == 7 and cluster["keys_in_several_splits"]["keys"] == 5
    offenders = _sorted("s3://clusterkeys/ka/offenders")
    assert offenders == _sorted(str(tmp_path / "ka" / "offenders"))
    assert {r["key"] for r in offenders if r["misplaced_rows"]} == set(sample.misplaced)
    assert {r["key"] for r in offenders if r["in_several_splits"]} == set(sample.multi_split)
    # both workers ran executors of this application
    newest = {w: max(p.name for p in (spark_cluster.logs / w).glob("app-*")) for w in ("worker-0", "worker-1")}
    assert len(set(newest.values())) == 1, newest


@pytest.mark.timeout(1800)  # two spark-submits and a local run; about a minute on a quiet machine
def test_fleet_gate_on_a_two_worker_cluster_equals_local_mode(spark_cluster: SparkCluster, spark_env,  # noqa: F811
                                                              spark, s3_fleet, tmp_path, monkeypatch) -> None:  # noqa: F811
    """The one-pass job (`fleet_gate`) through `spark-submit --master spark://...`: S3 in, three S3 tables out,
    the same rows as the same job in local mode; a local output folder is refused (exit 2, one line)."""
    for k, v in spark_env.aws_env.items():
        monkeypatch.setenv(k, v)
    out = f"s3://{BUCKET}/gate"
    args = ("--catalogue", f"{s3_fleet}/upgrades", "--savepoints", f"{s3_fleet}/savepoints",
            "--plan", f"{s3_fleet}/plan.csv", "--partitions", "4", "--progress-interval", "1")

    def submit(output: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*spark_cluster.submit_command({"spark.cores.max": "2"}),
                               str(REPO / "spark_jobs" / "fleet_gate.py"), *args, "--output", output],
                              capture_output=True, text=True, env=spark_cluster.env, cwd=tmp_path, timeout=600)

    done = submit(out)
    log = done.stdout + done.stderr
    assert done.returncode in (0, 1) and "Traceback" not in log, log[-4000:]  # 1: the gate blocks
    assert "fleet_gate: hasher: compiled" in log, log[-4000:]
    lines = re.findall(rf"fleet_gate: ([\d,]+)/{JOBS} jobs \(([\d.]+) %\), ([\d.]+) jobs/s, ([^,]+),", log)
    assert lines and lines[-1][:2] == (str(JOBS), "100.0") and lines[-1][3] == "done", lines

    local = tmp_path / "local"
    summary = fleet_gate.run_gate(spark, f"{s3_fleet}/upgrades", f"{s3_fleet}/savepoints", str(local),
                                  plan=f"{s3_fleet}/plan.csv")
    for table in ("ids", "scan", "verdicts"):
        assert _sorted(f"{out}/{table}") == _sorted(str(local / table)), table
    body = spark_env.s3.client().get_object(Bucket=BUCKET, Key="gate/summary.json")["Body"].read()
    cluster_summary = json.loads(body)
    assert {k: v for k, v in cluster_summary.items() if k != "timings"} == {
        k: v for k, v in summary.items() if k != "timings"}
    assert cluster_summary["jobs"] == JOBS and cluster_summary["hasher_implementation"] == "compiled"
    assert not [o for o in spark_env.s3.client().list_objects_v2(Bucket=BUCKET).get("Contents", [])
                if ".inputs-" in o["Key"]]  # the staged inputs are gone

    refused = submit(str(tmp_path / "gate-local"))
    log = refused.stdout + refused.stderr  # spark-submit relays the Python driver's stderr on its stdout
    assert refused.returncode == 2, log[-4000:]
    assert "cannot write to a local folder of the driver; give an s3:// output" in log, log[-4000:]
    assert "Traceback" not in log and not list(tmp_path.glob("*gate-local*"))

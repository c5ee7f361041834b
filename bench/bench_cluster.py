"""Benchmark: the fleet pipeline through `spark-submit` on local[2] and on a two-worker standalone cluster.

The fleet (`bench.fleet`, default 2,000 jobs x 50 operators) is uploaded to a SeaweedFS S3 server
on 127.0.0.1; every configuration reads it from there, so only the master and where the tables
go differ:

* `local[2]`, local tables: the pre-cluster path (workers write parts into a local folder), the baseline;
* `local[2]`, `s3://` tables: workers write parts with pyarrow's S3 filesystem, the driver commits a manifest;
* `spark://` (a master and two one-core workers, separate JVMs, `tests/spark_cluster.py`), `s3://` tables.

`fleet_ids` and `savepoint_scan` run at once (as the `flink_fleet_scan` DAG runs them), then
`fleet_check`. Wall times include each spark-submit's JVM start, as a DAG run sees them; the
progress lines each driver logged are counted. Not a test: numbers go to docs/performance.md.

Usage: python -m bench.bench_cluster [--jobs 2000] [--ops 50]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
BUCKET = "benchfleet"


def run_pipeline(submit: list[str], env: dict[str, str], fleet: str, out: str, cwd: Path,
                 pair_conf: list[str]) -> dict[str, Any]:
    """ids + scan at once, then check; wall seconds of each phase and the check's summary timings."""
    def start(app: str, *args: str, conf: list[str]) -> subprocess.Popen[str]:
        return subprocess.Popen([*submit, *conf, str(REPO / "spark_jobs" / app), *args, "--overwrite"],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=cwd)

    t = time.perf_counter()
    procs = {"ids": start("fleet_ids.py", "--catalogue", f"{fleet}/upgrades", "--output", f"{out}/ids",
                          conf=pair_conf),
             "scan": start("savepoint_scan.py", "--savepoints", f"{fleet}/savepoints", "--output", f"{out}/scan",
                           conf=pair_conf)}
    logs = {name: p.communicate()[0] for name, p in procs.items()}
    for name, p in procs.items():
        if p.returncode != 0:
            raise SystemExit(f"{name} failed:\n{logs[name][-3000:]}")
    ids_scan = time.perf_counter() - t
    t = time.perf_counter()
    check = start("fleet_check.py", "--ids", f"{out}/ids", "--scan", f"{out}/scan", "--plan", f"{fleet}/plan.csv",
                  "--output", f"{out}/check", conf=[])
    logs["check"] = check.communicate()[0]
    if check.returncode not in (0, 1):
        raise SystemExit(f"fleet_check failed:\n{logs['check'][-3000:]}")
    check_s = time.perf_counter() - t
    summary = json.loads(logs["check"].strip().splitlines()[-1])
    progress = {name: len(re.findall(r" jobs \([\d.]+ %\), [\d.]+ jobs/s", text)) for name, text in logs.items()}
    return {"ids_scan_s": round(ids_scan, 1), "check_s": round(check_s, 1), "total_s": round(ids_scan + check_s, 1),
            "verdicts": summary["verdicts"], "progress_lines": progress}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=2000)
    ap.add_argument("--ops", type=int, default=50)
    args = ap.parse_args(argv)

    sys.path.insert(0, str(REPO))
    from bench.bench_spark import fleet_input
    from bench.fleet import upload_fleet
    from spark_jobs.common import PYTHON_BOUND_JVM_OPTIONS
    from tests import s3_server
    from tests.spark_cluster import pyspark_bin, start_cluster

    root = fleet_input(args.jobs, args.ops)
    work = Path(tempfile.mkdtemp(prefix="bench-cluster-"))
    (work / "weed").mkdir()
    server = s3_server.start(work / "weed")
    cluster = None
    try:
        client = server.client()
        client.create_bucket(Bucket=BUCKET)
        t = time.perf_counter()
        upload_fleet(client, BUCKET, root, "fleet", ("savepoints", "upgrades"))
        client.put_object(Bucket=BUCKET, Key="fleet/plan.csv", Body=(root / "plan.csv").read_bytes())
        print(f"uploaded {args.jobs} jobs in {time.perf_counter() - t:.0f} s", file=sys.stderr)
        aws = {"AWS_ENDPOINT_URL_S3": server.endpoint, "AWS_ACCESS_KEY_ID": s3_server.ACCESS_KEY,
               "AWS_SECRET_ACCESS_KEY": s3_server.SECRET_KEY, "AWS_REGION": "us-east-1"}
        fleet = f"s3://{BUCKET}/fleet"
        cluster = start_cluster(work / "cluster", aws)
        submit_local = [str(pyspark_bin() / "spark-submit"), "--master", "local[2]", "--conf",
                        f"spark.driver.extraJavaOptions={PYTHON_BOUND_JVM_OPTIONS}", "--conf", "spark.driver.memory=1g"]
        results = {
            "local[2], local tables (baseline)": run_pipeline(submit_local, cluster.env, fleet, str(work / "local"),
                                                              work, []),
            "local[2], s3:// tables": run_pipeline(submit_local, cluster.env, fleet, f"s3://{BUCKET}/local", work, []),
            "spark:// 2 workers x 1 core, s3:// tables": run_pipeline(
                cluster.submit_command(), cluster.env, fleet, f"s3://{BUCKET}/cluster", work,
                ["--conf", "spark.cores.max=1"]),
        }
    finally:
        if cluster is not None:
            cluster.stop()
        server.stop()
    verdicts = {json.dumps(r.pop("verdicts"), sort_keys=True) for r in results.values()}
    print(f"fleet {args.jobs} jobs x {args.ops} ops; verdicts identical in every run: {len(verdicts) == 1}")
    for name, r in results.items():
        print(f"{name}: {json.dumps(r)}")
    return 0 if len(verdicts) == 1 else 1


if __name__ == "__main__":
    sys.exit(main())

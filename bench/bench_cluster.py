"""Benchmark: the fleet pipeline through `spark-submit` on local[2] and on a two-worker standalone cluster.

The fleet (`bench.fleet`, default 2,000 jobs x 50 operators) is uploaded to a SeaweedFS S3 server
on 127.0.0.1; every configuration reads it from there, so only the master and where the tables
go differ:

* `local[2]`, local tables: the pre-cluster path (workers write parts into a local folder), the baseline;
* `local[2]`, `s3://` tables: workers write parts with pyarrow's S3 filesystem, the driver commits a manifest;
* `spark://` (a master and two one-core workers, separate JVMs, `tests/spark_cluster.py`), `s3://` tables.

`fleet_ids` and `savepoint_scan` run at once (as the `flink_fleet_scan` DAG runs them), then
`fleet_check`; `local-gate` and `cluster-gate` run the same fleet through `fleet_gate` instead (one
spark-submit, one pass, the same tables). Wall times include each spark-submit's JVM start, as a DAG run sees them; the
progress lines each driver logged are counted, and each driver's peak memory is sampled from /proc
(`bench.peak_memory`: VmHWM of the driver's JVM and Python process; on local[2] also the Python
workers). Every job must get a verdict (no error row). Not a test: numbers go to docs/performance.md.

`--local-fleet` reads the fleet from the local disk instead of S3 (the workers run on this machine):
uploading a 100,000-job fleet (about 1.2 M objects) to the embedded S3 server takes longer than the
scan itself. Tables still go to `s3://` (for `local` also to a local folder).

Usage: python -m bench.bench_cluster [--jobs 2000] [--ops 50] [--local-fleet [--linked]]
       [--configs local,local-s3,cluster,local-gate,cluster-gate]
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
    from bench.peak_memory import PeakMemory

    memory: dict[str, PeakMemory] = {}

    def start(name: str, app: str, *args: str, conf: list[str]) -> subprocess.Popen[str]:
        proc = subprocess.Popen([*submit, *conf, str(REPO / "spark_jobs" / app), *args, "--overwrite"],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=cwd)
        memory[name] = PeakMemory(proc.pid)
        return proc

    t = time.perf_counter()
    procs = {"ids": start("ids", "fleet_ids.py", "--catalogue", f"{fleet}/upgrades", "--output", f"{out}/ids",
                          conf=pair_conf),
             "scan": start("scan", "savepoint_scan.py", "--savepoints", f"{fleet}/savepoints", "--output",
                           f"{out}/scan", conf=pair_conf)}
    logs = {name: p.communicate()[0] for name, p in procs.items()}
    for name, p in procs.items():
        if p.returncode != 0:
            raise SystemExit(f"{name} failed:\n{logs[name][-3000:]}")
    ids_scan = time.perf_counter() - t
    t = time.perf_counter()
    check = start("check", "fleet_check.py", "--ids", f"{out}/ids", "--scan", f"{out}/scan", "--plan",
                  f"{fleet}/plan.csv", "--output", f"{out}/check", conf=[])
    logs["check"] = check.communicate()[0]
    if check.returncode not in (0, 1):
        raise SystemExit(f"fleet_check failed:\n{logs['check'][-3000:]}")
    check_s = time.perf_counter() - t
    summary = json.loads(logs["check"].strip().splitlines()[-1])
    if summary["errors"]:
        raise SystemExit(f"{summary['errors']} jobs were not checked:\n{logs['check'][-3000:]}")
    progress = {name: len(re.findall(r" jobs \([\d.]+ %\), [\d.]+ jobs/s", text)) for name, text in logs.items()}
    return {"ids_scan_s": round(ids_scan, 1), "check_s": round(check_s, 1), "total_s": round(ids_scan + check_s, 1),
            "verdicts": summary["verdicts"], "progress_lines": progress,
            "peak_mb": {name: m.stop() for name, m in memory.items()},
            "cpu_s": {name: m.cpu_seconds() for name, m in memory.items()}}


def run_one_pass(submit: list[str], env: dict[str, str], fleet: str, out: str, cwd: Path) -> dict[str, Any]:
    """The same fleet through `fleet_gate` (one spark-submit, each spec and savepoint read once)."""
    from bench.peak_memory import PeakMemory

    t = time.perf_counter()
    proc = subprocess.Popen([*submit, str(REPO / "spark_jobs" / "fleet_gate.py"), "--catalogue", f"{fleet}/upgrades",
                             "--savepoints", f"{fleet}/savepoints", "--plan", f"{fleet}/plan.csv", "--output", out,
                             "--overwrite"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            cwd=cwd)
    memory = PeakMemory(proc.pid)
    log = proc.communicate()[0]
    if proc.returncode not in (0, 1):
        raise SystemExit(f"fleet_gate failed:\n{log[-3000:]}")
    total = time.perf_counter() - t
    summary = json.loads(log.strip().splitlines()[-1])
    if summary["errors"]:
        raise SystemExit(f"{summary['errors']} jobs were not checked:\n{log[-3000:]}")
    return {"total_s": round(total, 1), "verdicts": summary["verdicts"],
            "progress_lines": len(re.findall(r" jobs \([\d.]+ %\), [\d.]+ jobs/s", log)),
            "peak_mb": memory.stop(), "cpu_s": memory.cpu_seconds()}


def _on_cluster(cluster: Any, run: Any) -> dict[str, Any]:
    """`run()` plus the executors' CPU-seconds and peak memory (the trees below the worker daemons)."""
    from bench.peak_memory import PeakMemory

    workers = [p.pid for p in cluster.procs[1:]]
    sampler = PeakMemory(workers[0], more=tuple(workers[1:]))
    result = run()
    sampler.stop()
    return {**result, "executors_cpu_s": sampler.cpu_seconds(), "executors_peak_mb": sampler.peaks_mb()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=2000)
    ap.add_argument("--ops", type=int, default=50)
    ap.add_argument("--local-fleet", action="store_true", help="read the fleet from the local disk, not S3")
    ap.add_argument("--linked", action="store_true",
                    help="more than 10,000 jobs: the 10,000-job fleet's files hard-linked under replica names "
                         "(bench.fleet.link_fleet), with --local-fleet")
    ap.add_argument("--configs", default="local,local-s3,cluster,local-gate,cluster-gate",
                    help="which of local (local[2], local tables), local-s3, cluster, and the same fleet through "
                         "fleet_gate's one pass: local-gate, cluster-gate")
    args = ap.parse_args(argv)
    configs = set(args.configs.split(","))

    sys.path.insert(0, str(REPO))
    from bench.bench_spark import BENCH_DIR, GENERATED_AT_MOST, fleet_input
    from bench.fleet import link_fleet, upload_fleet
    from spark_jobs.common import PYTHON_BOUND_JVM_OPTIONS
    from tests import s3_server
    from tests.spark_cluster import pyspark_bin, start_cluster

    if args.linked and args.jobs > GENERATED_AT_MOST:
        t = time.perf_counter()
        root = link_fleet(fleet_input(GENERATED_AT_MOST, args.ops), BENCH_DIR / f"fleet-{args.jobs}x{args.ops}-linked",
                          -(-args.jobs // GENERATED_AT_MOST))
        print(f"linked {args.jobs} jobs in {time.perf_counter() - t:.0f} s", file=sys.stderr, flush=True)
    else:
        root = fleet_input(args.jobs, args.ops)
    work = Path(tempfile.mkdtemp(prefix="bench-cluster-"))
    (work / "weed").mkdir()
    server = s3_server.start(work / "weed")
    cluster = None
    try:
        client = server.client()
        client.create_bucket(Bucket=BUCKET)
        if args.local_fleet:
            fleet = str(root)
        else:
            t = time.perf_counter()
            upload_fleet(client, BUCKET, root, "fleet", ("savepoints", "upgrades"))
            client.put_object(Bucket=BUCKET, Key="fleet/plan.csv", Body=(root / "plan.csv").read_bytes())
            print(f"uploaded {args.jobs} jobs in {time.perf_counter() - t:.0f} s", file=sys.stderr)
            fleet = f"s3://{BUCKET}/fleet"
        aws = {"AWS_ENDPOINT_URL_S3": server.endpoint, "AWS_ACCESS_KEY_ID": s3_server.ACCESS_KEY,
               "AWS_SECRET_ACCESS_KEY": s3_server.SECRET_KEY, "AWS_REGION": "us-east-1"}
        cluster = start_cluster(work / "cluster", aws)
        submit_local = [str(pyspark_bin() / "spark-submit"), "--master", "local[2]", "--conf",
                        f"spark.driver.extraJavaOptions={PYTHON_BOUND_JVM_OPTIONS}", "--conf", "spark.driver.memory=1g"]
        runs = {
            "local": ("local[2], local tables (baseline)",
                      lambda: run_pipeline(submit_local, cluster.env, fleet, str(work / "local"), work, [])),
            "local-s3": ("local[2], s3:// tables",
                         lambda: run_pipeline(submit_local, cluster.env, fleet, f"s3://{BUCKET}/local", work, [])),
            "cluster": ("spark:// 2 workers x 1 core, s3:// tables",
                        lambda: _on_cluster(cluster, lambda: run_pipeline(
                            cluster.submit_command(), cluster.env, fleet, f"s3://{BUCKET}/cluster", work,
                            ["--conf", "spark.cores.max=1"]))),
            "local-gate": ("local[2], local tables, fleet_gate (one pass)",
                           lambda: run_one_pass(submit_local, cluster.env, fleet, str(work / "gate"), work)),
            "cluster-gate": ("spark:// 2 workers x 1 core, s3:// tables, fleet_gate (one pass)",
                             lambda: _on_cluster(cluster, lambda: run_one_pass(
                                 cluster.submit_command(), cluster.env, fleet, f"s3://{BUCKET}/gate", work))),
        }
        results = {}
        for key, (name, run) in runs.items():
            if key in configs:
                results[name] = run()
                print(f"{name}: {json.dumps(results[name])}", file=sys.stderr, flush=True)
    finally:
        if cluster is not None:
            cluster.stop()
        server.stop()
    verdicts = {json.dumps(r.pop("verdicts"), sort_keys=True) for r in results.values()}
    print(f"fleet {args.jobs} jobs x {args.ops} ops ({'local disk' if args.local_fleet else 'S3'}); verdicts identical "
          f"in every run: {len(verdicts) == 1}: {verdicts}")
    for name, r in results.items():
        print(f"{name}: {json.dumps(r)}")
    return 0 if len(verdicts) == 1 else 1


if __name__ == "__main__":
    sys.exit(main())

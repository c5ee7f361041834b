"""Benchmark: the Spark jobs against the single-process core, on 1 and 2 local cores.

* fleet, end to end: `fleet_ids` (new graphs) and `savepoint_scan` at once, as the
  `flink_fleet_scan` DAG runs them, then `fleet_check`, over a generated fleet (`bench.fleet`,
  default 10,000 jobs x 50 operators, v4/v6 savepoints, one upgrade each). Goal (docs/performance.md):
  < 60 s on `local[2]`. The fleet's files are read once before each run: this VM's kernel
  reclaims page cache eagerly, and a cold cache would otherwise decide who wins.
* key_alignment: 100 M int keys and 10 M string keys (Parquet, `bench.key_samples`, with planted
  misplacements), checked with the same vectorised core in one process (pyarrow + NumPy, one
  thread) and by the Spark job.

Each Spark configuration runs in its own process (a fresh JVM per master); times exclude the
session start-up, which is reported separately. Inputs are generated once under
`.work/bench/spark/`. Prints a table with the ratio to the single-process core and the 1 -> 2
core scaling.

Usage: python -m bench.bench_spark [--jobs 10000] [--ops 50] [--int-keys 100000000]
                                   [--string-keys 10000000] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
BENCH_DIR = REPO / ".work" / "bench" / "spark"
DRIVER_MEMORY = "6g"


# ---- inputs -----------------------------------------------------------------------------
def fleet_input(jobs: int, ops: int) -> Path:
    from bench.fleet import generate_fleet

    root = BENCH_DIR / f"fleet-{jobs}x{ops}"
    if not (root / "fleet.json").is_file():
        t = time.perf_counter()
        generate_fleet(root, jobs, ops=ops, seed=99)
        print(f"generated {root} in {time.perf_counter() - t:.0f} s", file=sys.stderr)
    return root


def keys_input(key_type: str, n: int) -> Path:
    from bench.key_samples import write_sample

    root = BENCH_DIR / f"keys-{key_type}-{n}"
    if not (root / "_done").is_file():
        t = time.perf_counter()
        write_sample(root, n, key_type, 8, 128, misplaced=1000, multi_split=1000,
                     chunk=5_000_000 if key_type != "string" else 1_000_000)
        (root / "_done").write_text("")
        print(f"generated {root} in {time.perf_counter() - t:.0f} s", file=sys.stderr)
    return root


def warm(root: Path) -> None:
    """Read every file of the fleet once, so every run starts from the same (warm) page cache."""
    for path in root.rglob("*"):
        if path.is_file():
            path.read_bytes()


# ---- the single-process core ------------------------------------------------------------
def core_fleet(root: Path) -> dict[str, Any]:
    """What the three jobs compute, job after job in this process, with the same core calls."""
    from spark_jobs.fleet_check import check_job
    from spark_jobs.fleet_ids import load_spec, node_rows
    from spark_jobs.savepoint_scan import operator_rows

    fleet = json.loads((root / "fleet.json").read_text())
    t = time.perf_counter()
    nodes = ops = 0
    verdicts: dict[str, int] = {}
    for j in fleet:
        spec = str(root / j["upgrade"])
        nodes += len(node_rows(j["job"], spec, load_spec(spec), None))
        rows = operator_rows(j["job"], str(root / j["savepoint"]), None)
        ops += len(rows)
        v = check_job(spec, rows[0]["metadata"], hasher=j["hasher"], matching="fixed",
                      allow_non_restored_state=j["allow_non_restored_state"], flink_version=j["flink_version"])
        verdicts[v["verdict"]] = verdicts.get(v["verdict"], 0) + 1
    return {"seconds": time.perf_counter() - t, "nodes": nodes, "operators": ops, "verdicts": verdicts}


CORE_BUCKETS = 64  # core_keys groups the keys one bucket of key groups at a time


def core_keys(root: Path, key_type: str, parallelism: int = 8, max_parallelism: int = 128) -> dict[str, Any]:
    """key_alignment's answer in one process: vectorised key groups per file, then one-thread group-bys.

    Only the key and split columns are read, and the rows are kept as (key, split, misplaced),
    sorted per file into `CORE_BUCKETS` buckets by key group (all rows of a key share its key
    group). Each bucket is then grouped on its own, so the peak memory is the kept rows (~9 bytes
    per int row, ~0.9 GB at 100 M) plus one bucket's hash table, instead of one hash table over
    every key (~120 bytes per key: ~12 GB at 100 M int keys)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from hashing import vectorized
    from spark_jobs.key_alignment import hash_codes

    t = time.perf_counter()
    buckets: list[list[pa.Table]] = [[] for _ in range(CORE_BUCKETS)]
    rows = misplaced_rows = 0
    for f in sorted(root.glob("*.parquet")):
        table = pq.read_table(f, columns=["key", "split"], use_threads=False)
        key = table.column("key").combine_chunks()
        split = table.column("split").to_numpy()
        groups = vectorized.key_groups(hash_codes(key, key_type), max_parallelism)
        bad = vectorized.operator_indexes(groups, max_parallelism, parallelism) != (split.astype(np.int64)
                                                                                     % parallelism)
        rows += len(split)
        misplaced_rows += int(bad.sum())
        bucket = (groups % CORE_BUCKETS).astype(np.int16)
        order = np.argsort(bucket, kind="stable")
        bounds = np.searchsorted(bucket[order], np.arange(CORE_BUCKETS + 1))
        part = pa.table({"key": key, "split": split, "bad": bad}).take(pa.array(order))
        for b in range(CORE_BUCKETS):
            if bounds[b + 1] > bounds[b]:
                buckets[b].append(part.slice(bounds[b], bounds[b + 1] - bounds[b]))
    keys = multi = bad_keys = 0
    for b in range(CORE_BUCKETS):
        pieces, buckets[b] = buckets[b], []
        if not pieces:
            continue
        grouped = pa.concat_tables(pieces).group_by("key", use_threads=False).aggregate(
            [("split", "min"), ("split", "max"), ("bad", "any")])
        keys += grouped.num_rows
        multi += int(pc.sum(pc.not_equal(grouped["split_min"], grouped["split_max"])).as_py() or 0)
        bad_keys += int(pc.sum(grouped["bad_any"].cast(pa.int64())).as_py() or 0)
    return {"seconds": time.perf_counter() - t, "rows": rows, "keys": keys, "multi_split_keys": multi,
            "misplaced_keys": bad_keys, "misplaced_rows": misplaced_rows}


# ---- Spark workers (one process per configuration) --------------------------------------
def spark_worker(kind: str, cores: int, arg: str, key_type: str | None) -> dict[str, Any]:
    import shutil

    from spark_jobs import common, fleet_check, fleet_ids, key_alignment, parquet_output, savepoint_scan

    t0 = time.perf_counter()
    conf = {"spark.driver.memory": DRIVER_MEMORY, "spark.sql.execution.arrow.maxRecordsPerBatch": "200000",
            **json.loads(os.environ.get("BENCH_SPARK_CONF") or "{}")}  # e.g. to try a setting
    spark = common.build_session(f"bench-{kind}", f"local[{cores}]", extra_conf=conf,
                                 python_bound=kind == "fleet")  # as the fleet jobs' CLIs start theirs
    spark.range(1).count()
    startup = time.perf_counter() - t0
    out = BENCH_DIR / "out" / f"{kind}-{key_type or ''}-{cores}"
    shutil.rmtree(out, ignore_errors=True)
    t = time.perf_counter()
    if kind == "fleet":
        root = Path(arg)
        partitions = 4 * cores

        def ids() -> float:
            parquet_output.write_table(fleet_ids.ids_rows(fleet_ids.catalogue(spark, str(root / "upgrades"),
                                                                                  partitions)), str(out / "ids"))
            return time.perf_counter() - t

        def scan() -> float:
            jobs = savepoint_scan.savepoint_jobs(spark, str(root / "savepoints"), partitions)
            parquet_output.write_table(savepoint_scan.scan_rows(jobs), str(out / "scan"))
            return time.perf_counter() - t

        # as flink_fleet_scan runs them: fleet_ids and savepoint_scan at once, then fleet_check
        with ThreadPoolExecutor(2) as pool:
            ids_done, scan_done = pool.submit(ids), pool.submit(scan)
            t_ids, t_scan = ids_done.result(), scan_done.result()
        t_check = time.perf_counter()
        summary = fleet_check.run_check(spark, str(out / "ids"), str(out / "scan"), str(out / "check"),
                                        plan=str(root / "plan.csv"), partitions=partitions)
        total = time.perf_counter() - t
        result = {"seconds": total, "ids_seconds": t_ids, "scan_seconds": t_scan,
                  "check_seconds": time.perf_counter() - t_check, "verdicts": summary["verdicts"]}
    else:
        doc = key_alignment.run_alignment(spark, arg, str(out), key_type=key_type or "int", parallelism=8,
                                          max_parallelism=128)
        result = {"seconds": time.perf_counter() - t, "rows": doc["rows"], "keys": doc["keys"],
                  "multi_split_keys": doc["keys_in_several_splits"]["keys"], "misplaced_keys": doc["misplaced"]["keys"],
                  "misplaced_rows": doc["misplaced"]["rows"]}
    spark.stop()
    shutil.rmtree(out, ignore_errors=True)
    return {**result, "startup_seconds": startup}


def run_spark(kind: str, cores: int, arg: str, key_type: str | None = None) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "bench.bench_spark", "--worker", kind, "--cores", str(cores), "--arg", arg]
    if key_type:
        cmd += ["--key-type", key_type]
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable)
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env=env, timeout=3600)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ---- the table --------------------------------------------------------------------------
def _row(name: str, size: str, core: dict[str, Any], one: dict[str, Any], two: dict[str, Any]) -> str:
    return (f"| {name} | {size} | {core['seconds']:.1f} | {one['seconds']:.1f} | {two['seconds']:.1f} | "
            f"{core['seconds'] / two['seconds']:.2f}x | {one['seconds'] / two['seconds']:.2f}x | "
            f"{two['startup_seconds']:.0f} |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--ops", type=int, default=50)
    ap.add_argument("--int-keys", type=int, default=100_000_000)
    ap.add_argument("--string-keys", type=int, default=10_000_000)
    ap.add_argument("--quick", action="store_true", help="1,000 jobs, 10 M int keys, 1 M string keys")
    ap.add_argument("--only", choices=("fleet", "keys"), default=None)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--cores", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--arg", help=argparse.SUPPRESS)
    ap.add_argument("--key-type", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        print(json.dumps(spark_worker(args.worker, args.cores, args.arg, args.key_type)))
        return 0
    if args.quick:
        args.jobs, args.int_keys, args.string_keys = 1000, 10_000_000, 1_000_000

    header = ("| workload | size | single-process core (s) | Spark local[1] (s) | Spark local[2] (s) | "
              "core / local[2] | local[1] / local[2] | session start (s) |\n|---|---|---|---|---|---|---|---|")
    lines = []
    if args.only in (None, "fleet"):
        root = fleet_input(args.jobs, args.ops)
        warm(root)
        core = core_fleet(root)
        warm(root)
        one = run_spark("fleet", 1, str(root))
        warm(root)
        two = run_spark("fleet", 2, str(root))
        assert one["verdicts"] == two["verdicts"] == {k: core["verdicts"].get(k, 0) for k in two["verdicts"]}, (
            one["verdicts"], two["verdicts"], core["verdicts"])
        lines.append(_row("fleet end to end (ids + scan + check)", f"{args.jobs} jobs x {args.ops} ops", core, one,
                          two))
        print(lines[-1], file=sys.stderr, flush=True)
        print(f"fleet local[2] phases: ids done at {two['ids_seconds']:.1f} s and scan at {two['scan_seconds']:.1f} s "
              f"(at once), then "
              f"check {two['check_seconds']:.1f} s; verdicts {two['verdicts']}", file=sys.stderr)
    if args.only in (None, "keys"):
        for key_type, n in (("int", args.int_keys), ("string", args.string_keys)):
            root = keys_input(key_type, n)
            core = core_keys(root, key_type)
            one, two = run_spark("keys", 1, str(root), key_type), run_spark("keys", 2, str(root), key_type)
            for k in ("rows", "keys", "multi_split_keys", "misplaced_keys", "misplaced_rows"):
                assert core[k] == one[k] == two[k], (k, core[k], one[k], two[k])
            lines.append(_row(f"key_alignment, {key_type} keys", f"{n / 1e6:g} M keys", core, one, two))
            print(lines[-1], file=sys.stderr, flush=True)
    print(header)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())

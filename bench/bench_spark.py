"""Benchmark: the Spark jobs against the single-process core, on 1 and 2 local cores.

* fleet, end to end: `fleet_ids` (new graphs) and `savepoint_scan` at once, as the
  `flink_fleet_scan` DAG runs them, then `fleet_check`, over a generated fleet (`bench.fleet`,
  default 10,000 jobs x 50 operators, v4/v6 savepoints, one upgrade each). Goal (docs/performance.md):
  < 60 s on `local[2]`. The fleet's files are read once before each run: this VM's kernel
  reclaims page cache eagerly, and a cold cache would otherwise decide who wins.
* fleet in one pass (`gate`): the same fleet through `fleet_gate` on `local[2]`, which reads each spec and
  savepoint once and writes the same three tables; printed with its ratio to the three jobs' run of the same
  session. Above 10,000 jobs it runs on the 10,000-job fleet hard-linked under replica names
  (`bench.fleet.link_fleet`), since it lists folders.
* key_alignment: 100 M int keys and 10 M string keys (Parquet, `bench.key_samples`, with planted
  misplacements), checked with the same vectorised core in one process (pyarrow + NumPy, one
  thread) and by the Spark job.

Each Spark configuration runs in its own process (a fresh JVM per master); times exclude the
session start-up, which is reported separately. Inputs are generated once under
`.work/bench/spark/`. Prints a table with the ratio to the single-process core and the 1 -> 2
core scaling.

Every fleet run must give every job a verdict (no `error` row, and no state whose serialization
proxy could not be read): the generated savepoints carry real Flink's proxies (`bench.fleet`).
Each Spark run also reports the driver's peak memory (`bench.peak_memory`: VmHWM of the driver's
Python process and of its JVM, sampled from /proc) and the cost per job.

Usage: python -m bench.bench_spark [--jobs 10000] [--ops 50] [--int-keys 100000000]
                                   [--string-keys 10000000] [--quick]
       python -m bench.bench_spark --only fleet --jobs 100000 --configs 2,gate   (the scale run: local[2] only)
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
GENERATED_AT_MOST = 10_000  # larger fleets are this one replicated (bench.fleet.replicate_fleet)


def fleet_input(jobs: int, ops: int) -> Path:
    from bench.fleet import FLEET_FORMAT, generate_fleet, replicate_fleet

    replicated = jobs > GENERATED_AT_MOST and jobs % GENERATED_AT_MOST == 0
    root = BENCH_DIR / f"fleet-{jobs}x{ops}-f{FLEET_FORMAT}{'-replicated' if replicated else ''}"
    if not (root / "fleet.json").is_file():
        t = time.perf_counter()
        if replicated:
            replicate_fleet(fleet_input(GENERATED_AT_MOST, ops), root, jobs // GENERATED_AT_MOST)
        else:
            generate_fleet(root, jobs, ops=ops, seed=99)
        print(f"generated {root} in {time.perf_counter() - t:.0f} s", file=sys.stderr)
    return root


def fleet_rows(root: Path, part: str) -> list[tuple[str, str]] | None:
    """(job, path) rows of a replicated fleet (its files are its originals'); None: list the folder."""
    if not root.name.endswith("-replicated"):
        return None
    return [(j["job"], str((root / j[part]).resolve())) for j in json.loads((root / "fleet.json").read_text())]


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
    if root.name.endswith("-replicated"):  # its files are its originals'
        root = (root / json.loads((root / "fleet.json").read_text())[0]["spec"]).resolve().parent.parent
    for path in root.rglob("*"):
        if path.is_file():
            path.read_bytes()


# ---- the single-process core ------------------------------------------------------------
def core_fleet(root: Path) -> dict[str, Any]:
    """What the three jobs compute, job after job in this process, with the same core calls."""
    from spark_jobs.columns import count
    from spark_jobs.fleet_check import check_job
    from spark_jobs.fleet_ids import graph_columns
    from spark_jobs.savepoint_scan import operator_columns
    from upgrade_gate.storage.objects import read_graph

    fleet = json.loads((root / "fleet.json").read_text())
    t = time.perf_counter()
    nodes = ops = 0
    verdicts: dict[str, int] = {}
    for j in fleet:
        spec = str(root / j["upgrade"])
        nodes += count(graph_columns(j["job"], spec, read_graph(spec).graph, None))
        cols = operator_columns(j["job"], str(root / j["savepoint"]), None)
        ops += count(cols)
        v = check_job(spec, cols["metadata"][0], hasher=j["hasher"], matching="fixed",
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
                                 python_bound=kind in ("fleet", "gate"))  # as the fleet jobs' CLIs start theirs
    spark.range(1).count()
    startup = time.perf_counter() - t0
    out = BENCH_DIR / "out" / f"{kind}-{key_type or ''}-{cores}"
    shutil.rmtree(out, ignore_errors=True)
    t = time.perf_counter()
    if kind == "gate":  # the same fleet through fleet_gate: one pass, each spec and savepoint read once
        from bench.peak_memory import PeakMemory
        from spark_jobs import fleet_gate

        root = Path(arg)
        cpu = PeakMemory(os.getpid())
        cpu.sample()
        start_cpu = cpu.cpu_seconds()
        summary = fleet_gate.run_gate(spark, str(root / "upgrades"), str(root / "savepoints"), str(out / "gate"),
                                      plan=str(root / "plan.csv"), partitions=4 * cores, progress_interval=30)
        total = time.perf_counter() - t
        cpu.sample()
        used = {k: round(v - start_cpu.get(k, 0.0), 1) for k, v in cpu.cpu_seconds().items()}
        cpu.stop()
        result = {"seconds": total, "verdicts": summary["verdicts"], "errors": summary["errors"],
                  "unchecked": summary["unchecked_jobs"][:3], "rows": summary["rows"],
                  "unread_state": unread_state(str(out / "gate" / "verdicts")), "timings": summary["timings"],
                  "phase_cpu_s": {"one_pass": used}}
    elif kind == "fleet":
        root = Path(arg)
        partitions = 4 * cores

        from spark_jobs.progress import Progress

        log = common.get_logger("bench")

        def ids() -> float:
            rows = fleet_rows(root, "upgrade") or fleet_ids.catalogue_rows(str(root / "upgrades"))
            with Progress.for_session(spark, log, "fleet_ids", len(rows), 30) as progress:
                parquet_output.write_table(fleet_ids.ids_rows(fleet_ids.catalogue(spark, str(root / "upgrades"),
                                                                                      partitions, rows),
                                                              progress=progress.address), str(out / "ids"))
            return time.perf_counter() - t

        def scan() -> float:
            rows = fleet_rows(root, "savepoint") or savepoint_scan.savepoint_job_rows(spark, str(root / "savepoints"))
            jobs = savepoint_scan.savepoint_jobs(spark, str(root / "savepoints"), partitions, rows)
            with Progress.for_session(spark, log, "savepoint_scan", len(rows), 30) as progress:
                parquet_output.write_table(savepoint_scan.scan_rows(jobs, progress.address), str(out / "scan"))
            return time.perf_counter() - t

        # CPU-seconds of this process tree (driver, its JVM, the Python workers) at each phase's end: ids and
        # scan share the cores, so they are one phase; the check is the other
        from bench.peak_memory import PeakMemory

        cpu = PeakMemory(os.getpid())

        def cpu_now() -> dict[str, float]:
            cpu.sample()
            return cpu.cpu_seconds()

        start_cpu = cpu_now()
        # as flink_fleet_scan runs them: fleet_ids and savepoint_scan at once, then fleet_check
        with ThreadPoolExecutor(2) as pool:
            ids_done, scan_done = pool.submit(ids), pool.submit(scan)
            t_ids, t_scan = ids_done.result(), scan_done.result()
        inputs_cpu = cpu_now()
        t_check = time.perf_counter()
        summary = fleet_check.run_check(spark, str(out / "ids"), str(out / "scan"), str(out / "check"),
                                        plan=str(root / "plan.csv"), partitions=partitions, progress_interval=30)
        total = time.perf_counter() - t
        check_cpu = cpu_now()
        cpu.stop()
        phase_cpu = {"ids_and_scan": {k: round(v - start_cpu.get(k, 0.0), 1) for k, v in inputs_cpu.items()},
                     "check": {k: round(v - inputs_cpu.get(k, 0.0), 1) for k, v in check_cpu.items()}}
        result = {"seconds": total, "ids_seconds": t_ids, "scan_seconds": t_scan,
                  "check_seconds": time.perf_counter() - t_check, "verdicts": summary["verdicts"],
                  "errors": summary["errors"], "unchecked": summary["unchecked_jobs"][:3],
                  "unread_state": unread_state(str(out / "check" / "verdicts")), "timings": summary["timings"],
                  "phase_cpu_s": phase_cpu}
    else:
        doc = key_alignment.run_alignment(spark, arg, str(out), key_type=key_type or "int", parallelism=8,
                                          max_parallelism=128)
        result = {"seconds": time.perf_counter() - t, "rows": doc["rows"], "keys": doc["keys"],
                  "multi_split_keys": doc["keys_in_several_splits"]["keys"], "misplaced_keys": doc["misplaced"]["keys"],
                  "misplaced_rows": doc["misplaced"]["rows"]}
    spark.stop()
    shutil.rmtree(out, ignore_errors=True)
    return {**result, "startup_seconds": startup}


UNREAD_STATE = "state serializers not read"


def unread_state(verdicts: str) -> int:
    """Jobs whose check could not read some state's serialization proxy (a warning on the verdict row)."""
    from spark_jobs.parquet_output import read_table

    rows = read_table(verdicts, columns=["warnings"]).column("warnings").to_pylist()
    return sum(1 for w in rows if any(UNREAD_STATE in x for x in (w or ())))


def run_spark(kind: str, cores: int, arg: str, key_type: str | None = None) -> dict[str, Any]:
    """One configuration in its own process; adds the driver's peak memory (Python and JVM, MiB)."""
    from bench.peak_memory import PeakMemory

    cmd = [sys.executable, "-m", "bench.bench_spark", "--worker", kind, "--cores", str(cores), "--arg", arg]
    if key_type:
        cmd += ["--key-type", key_type]
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable)
    # the worker's log (progress lines every 30 s) goes straight to this process' stderr
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=None, text=True, cwd=REPO, env=env)
    memory = PeakMemory(proc.pid)
    import threading

    done = threading.Event()

    def report() -> None:  # long runs: the peaks so far, once a minute
        while not done.wait(60):
            print(f"bench: {kind} local[{cores}] driver peak MiB so far {memory.peaks_mb()}, CPU-s so far "
                  f"{memory.cpu_seconds()}", file=sys.stderr, flush=True)

    threading.Thread(target=report, daemon=True).start()
    out, _ = proc.communicate(timeout=4 * 3600)
    done.set()
    peaks = memory.stop()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed (its log is above)")
    return {**json.loads(out.strip().splitlines()[-1]), "peak_mb": peaks, "cpu_s": memory.cpu_seconds()}


def check_fleet_result(result: dict[str, Any], jobs: int) -> None:
    """Every job got a verdict: no error row, no state left unread."""
    assert sum(result["verdicts"].values()) == jobs, result["verdicts"]
    assert result["errors"] == 0, (result["errors"], result.get("unchecked"))
    assert result["unread_state"] == 0, result["unread_state"]


# ---- the driver's memory at fleet sizes no run here reaches ---------------------------------
def driver_tables(base: Path, jobs: int) -> Path:
    """ids, scan and verdict tables of `jobs` jobs: a small fleet's rows (the core, job by job, with the
    Spark jobs' own row functions and schemas) repeated under new job names, as Parquet parts."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from spark_jobs import common, fleet_check, fleet_ids, savepoint_scan
    from spark_jobs.columns import to_rows
    from spark_jobs.fleet_check import check_job
    from spark_jobs.fleet_ids import graph_columns
    from spark_jobs.savepoint_scan import operator_columns
    from upgrade_gate.storage.objects import read_graph

    root = BENCH_DIR / f"driver-{jobs}"
    if (root / "_done").is_file():
        return root
    fleet = json.loads((base / "fleet.json").read_text())
    ids, scan, verdicts = [], [], []
    for j in fleet:
        spec = str(base / j["upgrade"])
        ids += to_rows(graph_columns(j["job"], spec, read_graph(spec).graph, None))
        rows = to_rows(operator_columns(j["job"], str(base / j["savepoint"]), None))
        scan += rows
        options = {"hasher": j["hasher"], "matching": "fixed",
                   "allow_non_restored_state": j["allow_non_restored_state"], "flink_version": j["flink_version"]}
        verdicts.append({"job": j["job"], "spec": spec, "metadata": rows[0]["metadata"], **options,
                         **check_job(spec, rows[0]["metadata"], **options), "error": None})
    tables = {"ids": pa.Table.from_pylist(ids, schema=common.arrow_schema(fleet_ids.SCHEMA_DDL)),
              "scan": pa.Table.from_pylist(scan, schema=common.arrow_schema(savepoint_scan.SCHEMA_DDL)),
              "verdicts": pa.Table.from_pylist(verdicts, schema=common.arrow_schema(fleet_check.SCHEMA_DDL))}
    times = -(-jobs // len(fleet))
    per_part = max(1, 200_000 // max(1, tables["ids"].num_rows))
    for name, table in tables.items():
        (root / name).mkdir(parents=True, exist_ok=True)
        job = table.column("job")
        for part, start in enumerate(range(0, times, per_part)):
            pieces = [table.set_column(0, "job", pa.compute.binary_join_element_wise(job, f"-r{k}", ""))
                      for k in range(start, min(times, start + per_part))]
            pq.write_table(pa.concat_tables(pieces), root / name / f"part-{part:05d}.parquet")
    (root / "_done").write_text(str(times * len(fleet)))
    return root


def driver_phase(root: Path, old: bool) -> dict[str, Any]:
    """fleet_check's driver work on the tables under `root`: pair the inputs, then summarise the verdicts.
    `old`: as before this session (whole tables read at once, the summary from a list of every row)."""
    from bench.peak_memory import own_peak_mb
    from spark_jobs import fleet_check, fleet_inputs, parquet_output

    t = time.perf_counter()
    if old:
        def per_job(table: str, column: str) -> dict[str, Any]:
            data = parquet_output.read_table(table, columns=["job", column, "error"])
            grouped = data.group_by("job", use_threads=False).aggregate([(column, "first"), ("error", "max")])
            values = zip(grouped.column(f"{column}_first").to_pylist(), grouped.column("error_max").to_pylist(),
                         strict=True)
            return dict(zip(grouped.column("job").to_pylist(), values, strict=True))
        pairs = {"graphs": len(per_job(str(root / "ids"), "spec")), "savepoints": len(per_job(str(root / "scan"),
                                                                                           "metadata"))}
        summary = fleet_check.summarize(fleet_check.read_verdicts(None, str(root / "verdicts")))  # type: ignore[arg-type]
    else:
        staged = str(root / f"staged-{os.getpid()}")  # what run_check does: pair on disk, stage the tasks' parts
        try:
            with_savepoint = 0

            def counted(rows: Any) -> Any:
                nonlocal with_savepoint
                for r in rows:
                    with_savepoint += r["metadata"] is not None
                    yield r
            total, _ = fleet_inputs.stage_inputs(counted(fleet_inputs.iter_inputs(
                None, str(root / "ids"), str(root / "scan"))), staged, 4)
        finally:
            fleet_inputs.remove_staged(staged)
        pairs = {"graphs": total, "savepoints": with_savepoint}
        summary = fleet_check.summarize_table(str(root / "verdicts"))
    return {"seconds": round(time.perf_counter() - t, 1), "peak_mb": own_peak_mb(), "pairs": pairs,
            "jobs": summary["jobs"], "verdicts": summary["verdicts"]}


def driver_memory(sizes: list[int], base_jobs: int = 300) -> None:
    base = fleet_input(base_jobs, 50)
    for jobs in sizes:
        root = driver_tables(base, jobs)
        for old in (True, False):
            proc = subprocess.run([sys.executable, "-m", "bench.bench_spark", "--worker", "driver", "--arg", str(root),
                                   "--cores", str(int(old))], capture_output=True, text=True, cwd=REPO, timeout=7200)
            if proc.returncode != 0:
                raise RuntimeError(proc.stderr[-3000:])
            r = json.loads(proc.stdout.strip().splitlines()[-1])
            print(f"driver, {jobs:,} jobs, {'before' if old else 'now'}: {json.dumps(r)}", file=sys.stderr, flush=True)


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
    ap.add_argument("--configs", default="core,1,2,gate",
                    help="fleet runs to make: core (single process), 1 and/or 2 (the three jobs on local[n]), gate "
                         "(fleet_gate's one pass on local[2]); e.g. 2,gate for the scale run")
    ap.add_argument("--driver-memory", default=None, metavar="N,N",
                    help="only fleet_check's driver work (pairing, summary) on tables of N jobs, before and now")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--cores", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--arg", help=argparse.SUPPRESS)
    ap.add_argument("--key-type", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker == "driver":
        print(json.dumps(driver_phase(Path(args.arg), bool(args.cores))))
        return 0
    if args.worker:
        print(json.dumps(spark_worker(args.worker, args.cores, args.arg, args.key_type)))
        return 0
    if args.driver_memory:
        driver_memory([int(n) for n in args.driver_memory.split(",")])
        return 0
    if args.quick:
        args.jobs, args.int_keys, args.string_keys = 1000, 10_000_000, 1_000_000

    header = ("| workload | size | single-process core (s) | Spark local[1] (s) | Spark local[2] (s) | "
              "core / local[2] | local[1] / local[2] | session start (s) |\n|---|---|---|---|---|---|---|---|")
    lines = []
    if args.only in (None, "fleet"):
        configs = set(args.configs.split(","))
        root = fleet_input(args.jobs, args.ops) if configs & {"core", "1", "2"} else None
        runs: dict[str, dict[str, Any]] = {}
        if "core" in configs:
            warm(root)
            runs["core"] = core_fleet(root)
            assert "ERROR" not in runs["core"]["verdicts"], runs["core"]["verdicts"]
        if "gate" in configs:  # fleet_gate (one pass) on local[2]; lists folders, so a larger fleet is linked
            if args.jobs > GENERATED_AT_MOST:
                from bench.fleet import link_fleet

                gate_root = link_fleet(fleet_input(GENERATED_AT_MOST, args.ops),
                                       BENCH_DIR / f"fleet-{args.jobs}x{args.ops}-linked",
                                       args.jobs // GENERATED_AT_MOST)
            else:
                gate_root = fleet_input(args.jobs, args.ops)
            warm(gate_root)
            r = runs["gate local[2]"] = run_spark("gate", 2, str(gate_root))
            check_fleet_result(r, args.jobs)
            print(f"fleet {args.jobs} jobs through fleet_gate (one pass) on local[2]: {r['seconds']:.1f} s "
                  f"({1000 * r['seconds'] / args.jobs:.2f} ms/job; session start {r['startup_seconds']:.0f} s); "
                  f"timings {r['timings']}; driver peak MiB {r['peak_mb']}; CPU-s {r['cpu_s']}; rows {r['rows']}; "
                  f"verdicts {r['verdicts']}", file=sys.stderr, flush=True)
            used = r["phase_cpu_s"]["one_pass"]
            print(f"  one pass: CPU-s {used}; Python workers {1000 * used.get('python_workers', 0) / args.jobs:.2f} "
                  f"ms/job, all processes {1000 * sum(used.values()) / args.jobs:.2f} ms/job", file=sys.stderr,
                  flush=True)
        for cores in (1, 2):
            if str(cores) in configs:
                warm(root)
                runs[f"local[{cores}]"] = run_spark("fleet", cores, str(root))
                check_fleet_result(runs[f"local[{cores}]"], args.jobs)
                r = runs[f"local[{cores}]"]
                print(f"fleet {args.jobs} jobs on local[{cores}]: {r['seconds']:.1f} s "
                      f"({1000 * r['seconds'] / args.jobs:.2f} ms/job; session start {r['startup_seconds']:.0f} s); "
                      f"ids done at {r['ids_seconds']:.1f} s, scan at {r['scan_seconds']:.1f} s, then check "
                      f"{r['check_seconds']:.1f} s; driver peak MiB {r['peak_mb']}; CPU-s {r['cpu_s']}; "
                      f"verdicts {r['verdicts']}",
                      file=sys.stderr, flush=True)
                for phase, used in r["phase_cpu_s"].items():
                    workers = 1000 * used.get("python_workers", 0) / args.jobs
                    print(f"  {phase}: CPU-s {used}; Python workers {workers:.2f} ms/job, all processes "
                          f"{1000 * sum(used.values()) / args.jobs:.2f} ms/job", file=sys.stderr, flush=True)
        if {"gate local[2]", "local[2]"} <= runs.keys():
            one, three = runs["gate local[2]"], runs["local[2]"]
            print(f"one pass / three jobs on local[2], same session: wall {one['seconds']:.1f} / "
                  f"{three['seconds']:.1f} s = {one['seconds'] / three['seconds']:.2f}; CPU-s "
                  f"{sum(one['cpu_s'].values()):.1f} / {sum(three['cpu_s'].values()):.1f} = "
                  f"{sum(one['cpu_s'].values()) / sum(three['cpu_s'].values()):.2f}", file=sys.stderr, flush=True)
        names = {k for r in runs.values() for k in r["verdicts"]}
        verdicts = [{k: r["verdicts"].get(k, 0) for k in names} for r in runs.values()]
        assert all(v == verdicts[0] for v in verdicts), {k: r["verdicts"] for k, r in runs.items()}
        if {"core", "local[1]", "local[2]"} <= runs.keys():
            lines.append(_row("fleet end to end (ids + scan + check)", f"{args.jobs} jobs x {args.ops} ops",
                              runs["core"], runs["local[1]"], runs["local[2]"]))
            print(lines[-1], file=sys.stderr, flush=True)
        print(json.dumps({"jobs": args.jobs, "ops": args.ops, "runs": runs}), file=sys.stderr, flush=True)
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

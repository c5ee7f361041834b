"""fleet_gate: `fleet_ids`, `savepoint_scan` and `fleet_check` in one pass, each job's files read once.

The three jobs each read what they need: `fleet_ids` every spec, `savepoint_scan` every `_metadata`, and
`fleet_check` both again, because it takes the other two's tables, which hold rows, not the parse. On a
fleet that repetition is about a third of the executors' CPU (docs/performance.md, "One pass"). Here each
task reads a job's spec and newest savepoint once and makes, from the same parsed objects, the job's node
rows, its operator rows and its verdict (the operator IDs are cached on the graph, so the check's hasher
reuses the rows' ids). The core calls are the three jobs' own (`fleet_ids.graph_columns`,
`savepoint_scan.metadata_columns`, `fleet_check.check_parsed`), so the tables hold the same rows the three jobs
write, and the summary is `fleet_check`'s.

Inputs: the catalogue of new specs and the savepoint root, listed in the driver as `fleet_ids` and
`savepoint_scan` list them, paired by job name on disk (`fleet_inputs.iter_listed`); optional `--old-catalogue`
(the graphs running today, for STATE_MISROUTED) and `--plan` (per-job options), as `fleet_check` takes them.

Output, one folder: `ids/`, `scan/` and `verdicts/` (the three jobs' tables, same schemas), `summary.json`
(`fleet_check`'s gate document; `timings` says how long listing, pairing, the pass and the summary took).
Written atomically on a local master; to `s3://` from any master (each table commits by its manifest,
`parquet_output.write_tables`). A cluster cannot write a local folder of the driver: give `s3://` there.

    spark-submit spark_jobs/fleet_gate.py --catalogue s3://b/specs --savepoints s3://b/savepoints --output s3://b/gate
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if __package__ in (None, ""):  # run as a file by spark-submit: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from spark_jobs import common, fleet_check, fleet_ids, fleet_inputs, savepoint_scan
from spark_jobs.columns import ColumnBuffer, Columns, from_rows
from spark_jobs.parquet_output import TaggedRows, require_workers_can_write, write_tables
from spark_jobs.progress import Progress
from upgrade_gate.gate import policy
from upgrade_gate.vocabulary import DEFAULT_HASHER, DEFAULT_MATCHING

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession

JOB = "fleet_gate"
TABLES = {"ids": fleet_ids.SCHEMA_DDL, "scan": savepoint_scan.SCHEMA_DDL, "verdicts": fleet_check.SCHEMA_DDL}
# rows a task holds per table before handing them on as one Arrow batch: node and operator rows are small; a
# verdict row of a blocked job carries its losses and operator rows as JSON (kilobytes), so fewer of those
_ROWS_PER_BATCH = {"ids": 20_000, "scan": 20_000, "verdicts": 2_048}
_OPTIONS = ("hasher", "matching", "allow_non_restored_state", "flink_version")


def _error_text(exc: Exception, input_error: type[Exception] | tuple[type[Exception], ...]) -> str:
    """As the three jobs word a failure: the product's own message, or the exception named (a bug, an outage)."""
    return str(exc) if isinstance(exc, input_error) else f"{type(exc).__name__}: {exc}"


def gate_job(row: dict[str, Any], ids_version: str | None, client: Any | None,
             gating: policy.GatePolicy = policy.DEFAULT_POLICY) -> tuple[Columns, Columns, dict[str, Any]]:
    """One job: (node rows, operator rows, verdict row), the spec and the savepoint each read and parsed once.

    Errors land where the three jobs put them: an unreadable spec is the ids table's error row and the
    verdict's "graph: ..."; an unreadable savepoint the scan table's error row and "savepoint: ..."."""
    from hashing.errors import InputError
    from upgrade_gate.storage.objects import read_graph
    from upgrade_gate.storage.savepoints import load_newest_complete

    job, spec, savepoint = row["job"], row["spec"], row["savepoint"]
    verdict: dict[str, Any] = {"job": job, "spec": spec, "metadata": None, **{k: row[k] for k in _OPTIONS}}
    nodes: Columns = {}
    ops: Columns = {}
    graph = meta = None
    graph_error = savepoint_error = None
    if spec is not None:
        try:
            graph = read_graph(spec, client=client)
            nodes = fleet_ids.graph_columns(job, spec, graph.graph, ids_version)
        except Exception as exc:
            graph, graph_error = None, _error_text(exc, InputError)
            nodes = from_rows([fleet_ids.error_row(job, spec, graph_error)])
    if savepoint is not None:
        try:
            loaded = load_newest_complete(savepoint, client=client, job_folder=True)  # skips a half-written one
            meta = loaded.metadata
            ops = savepoint_scan.metadata_columns(job, savepoint, loaded.source, meta)
            verdict["metadata"] = loaded.source
        except Exception as exc:
            meta, savepoint_error = None, _error_text(exc, InputError)
            ops = from_rows([{"job": job, "savepoint": savepoint, "error": savepoint_error}])
    if spec is None:
        verdict["error"] = "no new graph spec for this job in the catalogue"
    elif savepoint is None:
        verdict["error"] = "no savepoint for this job under the savepoint root"
    elif graph_error is not None:
        verdict["error"] = f"graph: {graph_error}"
    elif savepoint_error is not None:
        verdict["error"] = f"savepoint: {savepoint_error}"
    else:
        try:
            old = read_graph(row["old_spec"], client=client) if row["old_spec"] else None
            verdict.update(fleet_check.check_parsed(
                meta, graph, hasher=row["hasher"], matching=row["matching"],
                allow_non_restored_state=bool(row["allow_non_restored_state"]),
                flink_version=row["flink_version"], old=old, client=client, job=job, gating=gating))
        except Exception as exc:
            verdict["error"] = _error_text(exc, (InputError, common.JobError))
    return nodes, ops, verdict


def gate_partition(batches: Iterator[pa.RecordBatch], ids_version: str | None,
                   progress: tuple[str, int] | None = None, hasher: Any | None = None,
                   gating: policy.GatePolicy = policy.DEFAULT_POLICY) -> Iterator[tuple[str, pa.RecordBatch]]:
    """Executor side: every job of the task through `gate_job`; yields (table, Arrow batch)."""
    from spark_jobs.progress import Ticker

    ticker = Ticker(progress)
    common.tune_worker_gc()
    common.note_hasher(hasher)
    pending = {tag: ColumnBuffer(common.arrow_schema(ddl)) for tag, ddl in TABLES.items()}
    client = None
    for batch in batches:
        for row in batch.to_pylist():
            paths = [p for p in (row["spec"], row["savepoint"], row["old_spec"]) if p]
            if client is None and any(p.startswith(("s3://", "s3a://")) for p in paths):
                client = common.s3_client()
            nodes, ops, verdict = gate_job(row, ids_version, client, gating)
            pending["ids"].add(nodes)
            pending["scan"].add(ops)
            pending["verdicts"].add_row(verdict)
            ticker.tick()
            for tag, rows in pending.items():
                if len(rows) >= _ROWS_PER_BATCH[tag]:
                    yield tag, rows.take()
    ticker.close()
    for tag, rows in pending.items():
        if len(rows):
            yield tag, rows.take()


def run_gate(spark: SparkSession, catalogue: str, savepoints: str, output: str, *, old_catalogue: str | None = None,
             plan: str | None = None, hasher: str = DEFAULT_HASHER, matching: str = DEFAULT_MATCHING,
             allow_non_restored_state: bool = False, flink_version: str | None = None,
             partitions: int | None = None, worst: int = fleet_check.DEFAULT_WORST, overwrite: bool = False,
             progress_interval: float = 5.0, gating: policy.GatePolicy = policy.DEFAULT_POLICY) -> dict[str, Any]:
    """The whole job: the three tables and `summary.json` under `output`; returns the summary."""
    log = common.get_logger(JOB)
    started = time.perf_counter()
    require_workers_can_write(spark, output)
    specs = fleet_ids.catalogue_rows(catalogue)
    listed = savepoint_scan.savepoint_job_rows(spark, savepoints)
    old_specs = fleet_ids.catalogue_rows(old_catalogue) if old_catalogue else None
    log.info("%s: %d specs; %s: %d savepoint prefixes", catalogue, len(specs), savepoints, len(listed))
    staged = fleet_check.staging_folder(output)
    try:
        tasks = common.default_partitions(spark, partitions, 1 << 30)
        inputs = fleet_inputs.iter_listed(
            specs, listed, old_specs=old_specs, plan=plan, hasher=hasher, matching=matching,
            allow_non_restored_state=allow_non_restored_state, flink_version=flink_version)
        del specs, listed, old_specs  # the pairing holds them on disk from here
        total, parts = fleet_inputs.stage_inputs(inputs, staged, tasks, fleet_inputs.LISTED_DDL)
        paired = time.perf_counter()
        log.info("%d jobs paired in %.1f s, in %d tasks", total, paired - started, len(parts))
        frame = spark.sparkContext.parallelize([(p,) for p in parts], max(1, len(parts))).toDF("part string")
        with common.atomic_output(output, overwrite=overwrite) as tmp:
            target = common.parse_location(tmp)
            used = common.hasher_use(spark)
            with Progress.for_session(spark, log, JOB, total, progress_interval) as progress:
                address = progress.address
                rows = TaggedRows(frame, lambda it: gate_partition(fleet_inputs.staged_batches(it, staged),
                                                                   flink_version, address, used, gating), TABLES)
                # on s3:// the tables commit one by one: the old summary goes first (write_tables' before_commit)
                counts = write_tables(rows, {tag: target.child(tag).uri for tag in TABLES}, overwrite=overwrite,
                                      before_commit=lambda: common.remove_object(target.child("summary.json").uri))
            passed = time.perf_counter()
            summary = fleet_check.summarize_table(target.child("verdicts").uri, worst)
            summary["hasher_implementation"] = common.hasher_used(used)
            summary["rows"] = counts
            summary["timings"] = {"list_and_pair_s": round(paired - started, 3),
                                  "one_pass_s": round(passed - paired, 3),
                                  "summary_s": round(time.perf_counter() - passed, 3),
                                  "fleet_gate_s": round(time.perf_counter() - started, 3)}
            common.write_json(summary, target.child("summary.json").uri, overwrite=True)
    finally:
        fleet_inputs.remove_staged(staged)
    log.info("hasher: %s; rows: %s", summary["hasher_implementation"], counts)
    return summary


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="spark-submit spark_jobs/fleet_gate.py",
        description="fleet_ids, savepoint_scan and fleet_check in one pass over the fleet (each spec and savepoint "
                    "read once): ids/, scan/, verdicts/ and summary.json (gate PASS/BLOCK) under --output.")
    p.add_argument("--catalogue", required=True, help="folder or s3:// prefix of the NEW graph specs, one per job")
    p.add_argument("--savepoints", required=True,
                   help="root whose children are the jobs' savepoint prefixes (folder or s3://bucket/prefix), "
                        "or a .csv/.json/.parquet list with columns job, savepoint")
    p.add_argument("--old-catalogue", default=None,
                   help="the specs running today (optional): lets the simulator tell misrouted state "
                        "(STATE_MISROUTED) from lost state")
    fleet_check.add_check_options(p)
    common.add_spark_arguments(p, "folder for ids/, scan/, verdicts/ and summary.json (atomic)")
    return p


def _run(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    options = fleet_check.check_options(args)  # the waivers file first: a bad one fails before Spark starts
    log, spark = common.start(JOB, args.master, python_bound=True)
    t = time.perf_counter()
    summary = run_gate(spark, args.catalogue, args.savepoints, args.output, old_catalogue=args.old_catalogue,
                       **options)
    return fleet_check.report(log, summary, t)


def main(argv: list[str] | None = None) -> int:
    return common.run_main(JOB, _run, argv)


if __name__ == "__main__":
    sys.exit(main())

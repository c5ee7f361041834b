"""savepoint_scan: what the newest savepoint of every job holds, one row per operator state.

Input: a root (folder or `s3://bucket/prefix`) whose immediate children are the jobs' savepoint
prefixes (`<root>/<job>/savepoint-.../_metadata`, Flink's `state.savepoints.dir` per job), or a
CSV/JSON/Parquet list of `job, savepoint` (any path or URI the product accepts). For each job the
newest *complete* savepoint is chosen exactly as `upgrade-gate inspect` chooses it
(`upgrade_gate.storage.savepoints`: the newest `_metadata` under the prefix), read and parsed by the product's
reader (`upgrade_gate.flink.metadata`, verified against real Flink), inside the executors. S3 objects are
fetched with boto3 from the executors (no s3a jars exist here, docs/design.md, Real components; credentials come from
the standard AWS environment of the executors, never from arguments). Savepoints are only read.

Output: a Parquet table (`SCHEMA_DDL`): job, the `_metadata` it came from, format version,
checkpoint id, savepoint format, then per operator its id, name/uid (v5+ files), parallelism,
max parallelism, finished flags, state kinds and names, and bytes per kind. A job whose savepoint
cannot be found or read gets one row with `error` set.

    spark-submit spark_jobs/savepoint_scan.py --savepoints s3://bucket/savepoints --output /data/scan
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterator
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any

if __package__ in (None, ""):  # run as a file by spark-submit: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from spark_jobs import common
from spark_jobs.columns import ColumnBuffer, Columns
from spark_jobs.parquet_output import ArrowRows, table_batches, write_table
from spark_jobs.progress import Progress

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from upgrade_gate.flink.metadata.model import CheckpointMetadata, OperatorState

JOB = "savepoint_scan"
SCHEMA_DDL = (
    "job string, savepoint string, metadata string, metadata_version int, checkpoint_id long, "
    "snapshot_type string, snapshot_format string, operator_id string, name string, uid string, "
    "parallelism int, max_parallelism int, fully_finished boolean, finished_subtasks int, subtasks int, "
    "state_kinds array<string>, state_names array<string>, state_modes array<string>, "
    "coordinator_state_bytes long, managed_keyed_bytes long, raw_keyed_bytes long, managed_operator_bytes long, "
    "raw_operator_bytes long, channel_state_bytes long, state_bytes long, error string"
)
_KINDS = ("managed_keyed", "raw_keyed", "managed_operator", "raw_operator")
_NO_SIZES = (0,) * len(_KINDS)
_NO_NAMES: dict[str, Any] = {}
_FINISHED = attrgetter("finished")


def savepoint_jobs(spark: SparkSession, source: str, partitions: int | None = None,
                   rows: list[tuple[str, str]] | None = None) -> DataFrame:
    """(job, savepoint) for every job (`savepoint_job_rows`, or the given `rows`), spread over tasks."""
    rows = savepoint_job_rows(spark, source) if rows is None else rows
    n = common.default_partitions(spark, partitions, len(rows))
    return common.spread(spark, rows, n, "job string, savepoint string")


def savepoint_job_rows(spark: SparkSession, source: str) -> list[tuple[str, str]]:
    """(job, savepoint) for every job: the children of a root, or a CSV/JSON/Parquet list."""
    lower = source.lower().rstrip("/")
    if lower.endswith((".csv", ".json", ".parquet")):
        reader = spark.read.option("header", "true") if lower.endswith(".csv") else spark.read
        fmt = lower.rsplit(".", 1)[-1]
        listed = reader.format(fmt).load(source)
        missing = {"job", "savepoint"} - set(listed.columns)
        if missing:
            raise common.JobError(f"{source}: needs columns job and savepoint (missing: {', '.join(sorted(missing))})")
        rows = [(r["job"], r["savepoint"]) for r in listed.select("job", "savepoint").collect()]
    else:
        root = common.parse_location(source)
        rows = [(name, root.child(name).uri) for name in common.list_children(root)]
    if not rows:
        raise common.JobError(f"{source}: no jobs found")
    return rows


_ROWS_PER_BATCH = 20_000  # operator rows a worker holds before handing them on as one Arrow batch


def operator_columns(job: str, savepoint: str, client: Any | None) -> Columns:
    """Find, read and parse one job's newest savepoint; one row per operator state (the inspect view).

    Reads the parsed model directly rather than the `inspect` JSON: a fleet scan does this for
    every operator of thousands of jobs, and the dict-of-lists view cost more than the parse."""
    from upgrade_gate.storage.savepoints import load_newest_complete

    # each row names one job's savepoints; a newer one still being written is passed over, as the CLI does
    loaded = load_newest_complete(savepoint, client=client, job_folder=True)
    return metadata_columns(job, savepoint, loaded.source, loaded.metadata)


def metadata_columns(job: str, savepoint: str, source: str, meta: CheckpointMetadata) -> Columns:
    """`operator_columns` of a `_metadata` already parsed (`source`: where it was read; `fleet_gate` parses it
    once for these rows and the check). A savepoint without operators is one row without an operator."""
    from upgrade_gate.flink.metadata.json_view import properties_json

    props = properties_json(meta.properties) or {}
    ops = meta.operator_states
    n = max(1, len(ops))
    cols: Columns = {"job": [job] * n, "savepoint": [savepoint] * n, "metadata": [source] * n,
                     "metadata_version": [meta.version] * n, "checkpoint_id": [meta.checkpoint_id] * n,
                     "snapshot_type": [props.get("type")] * n, "snapshot_format": [props.get("format")] * n}
    if not ops:
        return cols
    per_op = [_operator_facts(op) for op in ops]
    for k, name in enumerate(_OPERATOR_COLUMNS):
        cols[name] = [facts[k] for facts in per_op]
    return cols


_OPERATOR_COLUMNS = (
    "operator_id", "name", "uid", "parallelism", "max_parallelism", "fully_finished", "finished_subtasks",
    "subtasks", "state_kinds", "state_names", "state_modes", "coordinator_state_bytes",
    *(f"{k}_bytes" for k in _KINDS), "channel_state_bytes", "state_bytes")


def _operator_facts(op: OperatorState) -> tuple[Any, ...]:
    """One operator's values, in `_OPERATOR_COLUMNS` order. Most operators of a job hold no state at all: their
    row is made without the per-kind tallies (a fleet scan makes 50 rows a job)."""
    subtasks = op.subtask_states.values()
    finished = sum(map(_FINISHED, subtasks))
    coordinator = op.coordinator_state
    if not op.has_state:  # no subtask state and no coordinator state
        return (op.operator_id_hex, op.name, op.uid, op.parallelism, op.max_parallelism, op.fully_finished, finished,
                len(op.subtask_states), [], [], [], 0, *_NO_SIZES, 0, op.state_size)
    names: dict[str, str] = {}
    sizes = [0, 0, 0, 0]  # in _KINDS order
    held = [False, False, False, False]
    channel = 0
    for st in subtasks:
        if not st.has_state:
            continue
        channel += st.channel_state_size
        for k, handles in enumerate((st.managed_keyed_state, st.raw_keyed_state, st.managed_operator_state,
                                     st.raw_operator_state)):
            if not handles:
                continue
            held[k] = True
            for handle in handles:
                sizes[k] += handle.state_size
                for state, info in getattr(handle, "state_name_to_partition_offsets", _NO_NAMES).items():
                    names[state] = info.mode.name
    kinds = [kind for kind, h in zip(_KINDS, held, strict=True) if h]
    if coordinator is not None:
        kinds.append("coordinator")
    if channel:
        kinds.append("channel")
    ordered = sorted(names)
    return (op.operator_id_hex, op.name, op.uid, op.parallelism, op.max_parallelism, op.fully_finished, finished,
            len(op.subtask_states), sorted(kinds), ordered, [names[n] for n in ordered],
            coordinator.state_size if coordinator is not None else 0, *sizes, channel, op.state_size)


def scan_partition(batches: Iterator[pa.RecordBatch], progress: tuple[str, int] | None = None,
                   columns_of: Callable[[str, str, Any], Columns] | None = None,
                   schema_ddl: str | None = None, loop: Any | None = None) -> Iterator[pa.RecordBatch]:
    """Executor side: one boto3 client per task, every job of the task -> its rows (`columns_of(job, savepoint,
    client)`: this job's `operator_columns`, or another per-savepoint table's, e.g. `state_serializers`). A job
    that cannot be read becomes one error row; rows are written every `_ROWS_PER_BATCH` so a task's memory
    stays flat. `loop`: a `common.hasher_use` accumulator, told which `_metadata` subtask loop this worker ran."""
    from hashing.errors import InputError
    from spark_jobs.progress import Ticker

    columns_of = columns_of or operator_columns
    ticker = Ticker(progress)

    common.tune_worker_gc()
    common.note_subtask_loop(loop)
    pending = ColumnBuffer(common.arrow_schema(schema_ddl or SCHEMA_DDL))
    client = None
    for batch in batches:
        for job, savepoint in zip(batch.column("job").to_pylist(), batch.column("savepoint").to_pylist(),
                                  strict=True):
            try:
                if client is None and savepoint.startswith(("s3://", "s3a://")):
                    client = common.s3_client()
                pending.add(columns_of(job, savepoint, client))
            except InputError as exc:  # missing savepoint, bad _metadata, S3 errors (StorageError)
                pending.add_row({"job": job, "savepoint": savepoint, "error": str(exc)})
            except Exception as exc:
                pending.add_row({"job": job, "savepoint": savepoint, "error": f"{type(exc).__name__}: {exc}"})
            ticker.tick()
            if len(pending) >= _ROWS_PER_BATCH:  # an input batch can hold a whole task's jobs: 50 rows each
                yield pending.take()
        if len(pending):
            yield pending.take()
    ticker.close()


def scan_rows(jobs: DataFrame, progress: tuple[str, int] | None = None, loop: Any | None = None) -> ArrowRows:
    """(job, savepoint) rows -> one row per operator state of each job's newest savepoint.

    `progress`: the driver's `progress.Progress.address`, which each task tells how many jobs it did;
    `loop`: a `common.hasher_use` accumulator, which each task tells which `_metadata` subtask loop it ran."""
    return ArrowRows(jobs.select("job", "savepoint"), lambda it: scan_partition(it, progress, loop=loop), SCHEMA_DDL)


def savepoint_scan(jobs: DataFrame) -> DataFrame:
    """The operator rows as a DataFrame (`write_table(scan_rows(...))` is the faster way to store them)."""
    return scan_rows(jobs).frame()


def savepoints_parser(prog: str, description: str) -> argparse.ArgumentParser:
    """The arguments of every per-savepoint fleet table (this one, `state_serializers`)."""
    p = argparse.ArgumentParser(prog=prog, description=description)
    p.add_argument("--savepoints", required=True,
                   help="root whose children are the jobs' savepoint prefixes (folder or s3://bucket/prefix), "
                        "or a .csv/.json/.parquet list with columns job, savepoint")
    common.add_spark_arguments(p, "Parquet table to write (replaced atomically with --overwrite)")
    return p


def build_parser() -> argparse.ArgumentParser:
    return savepoints_parser(
        "spark-submit spark_jobs/savepoint_scan.py",
        "For every job, the newest complete savepoint under its prefix -> one Parquet row per operator state "
        "(id, name/uid, parallelism, max parallelism, state kinds and names, bytes).")


def scan_fleet(args: argparse.Namespace, job: str,
               rows: Callable[[DataFrame, tuple[str, int] | None, Any], ArrowRows]) -> tuple[Any, Any, float]:
    """Driver side of a per-savepoint table: list the jobs, scan them in tasks with progress, write the table,
    log which `_metadata` subtask loop the executors ran (a cluster's get our code as a zip: the compiled one
    only if it was shipped beside it). Returns (log, spark session, start time) for the job's closing line."""
    log, spark = common.start(job, args.master, python_bound=True)
    t = time.perf_counter()
    job_rows = savepoint_job_rows(spark, args.savepoints)
    jobs = savepoint_jobs(spark, args.savepoints, args.partitions, job_rows)
    log.info("%s: %d jobs in %d tasks", args.savepoints, len(job_rows), jobs.rdd.getNumPartitions())
    loop = common.hasher_use(spark)
    with Progress.for_session(spark, log, job, len(job_rows), args.progress_interval) as progress:
        write_table(rows(jobs, progress.address, loop), args.output, overwrite=args.overwrite)
    log.info("_metadata subtask loop: %s (what the executors ran: upgrade_gate/flink/metadata/_fastsubtasks, "
             "or the Python loop)", common.hasher_used(loop))
    return log, spark, t


def _run(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    log, _, t = scan_fleet(args, JOB, scan_rows)
    import pyarrow.compute as pc

    states = state_bytes = 0
    failed: set[str] = set()
    for batch in table_batches(args.output, ["job", "operator_id", "state_bytes", "error"]):  # one batch at a time
        states += batch.num_rows - batch.column("operator_id").null_count
        state_bytes += pc.sum(batch.column("state_bytes")).as_py() or 0
        failed.update(batch.filter(batch.column("error").is_valid()).column("job").to_pylist())
    log.info("wrote %s: %d operator states, %d bytes of state, %d jobs with errors, in %.1f s", args.output,
             states, state_bytes, len(failed), time.perf_counter() - t)
    return 0


def main(argv: list[str] | None = None) -> int:
    return common.run_main(JOB, _run, argv)


if __name__ == "__main__":
    sys.exit(main())

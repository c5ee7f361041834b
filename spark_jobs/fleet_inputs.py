"""Which spec, savepoint and options each job of a fleet check gets, decided in the driver.

Each input table is reduced to one entry per job and paired by job name in the driver. It used
to be a Spark SQL plan (two aggregations, a
full outer join, a broadcast join with the plan): on the fresh JVM of a `fleet_check` run that
plan took 7-8 s before the first job was checked, most of it compiling and loading the query's
code, and about as long with 10,000 input rows as with 1 M. Here:

* each table is reduced batch by batch with pyarrow in the driver: a local table, or an `s3://`
  table through its manifest (`parquet_output.table_batches`), so no s3a connector is needed;
* the plan (CSV, JSON or Parquet, local or `s3://`) is read in Python: every value as the file
  gives it, an empty CSV cell as missing;
* the per-job entries of both tables and the plan go into one SQLite table in a temporary file
  (`JobIndex`), not Python dictionaries: the driver's memory stays flat in the fleet size (a
  dictionary entry and a shipped tuple cost about 3 KB a job, 3.5 GB at 1,000,000 jobs:
  docs/performance.md), and one ordered query is the full outer join of the two tables;
* the result is one row per job, with `input_error` saying why a job cannot be checked, which
  `stage_inputs` deals out to Parquet parts that the check's tasks read themselves.
"""

from __future__ import annotations

import csv
import io
import json
import os
import sqlite3
import tempfile
import uuid
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from spark_jobs import common

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession

OPTIONS = ("hasher", "matching", "allow_non_restored_state", "flink_version")
INPUT_DDL = ("job string, spec string, metadata string, old_spec string, hasher string, matching string, "
             "allow_non_restored_state boolean, flink_version string, input_error string")
_TRUE = ("true", "1", "yes")


def _reduced(table: str, column: str) -> Iterator[tuple[str, str | None, str | None]]:
    """(job, first non-null `column`, largest `error`) of each batch of a fleet_ids / savepoint_scan table;
    a job whose rows span two batches comes twice (the callers merge). The driver holds one batch
    (`table_batches`), never the table: 100,000 jobs x 50 operators are 5 M rows."""
    import pyarrow as pa

    from spark_jobs.parquet_output import table_batches

    for batch in table_batches(table, ["job", column, "error"]):  # JobError naming the table
        grouped = pa.Table.from_batches([batch]).group_by("job", use_threads=False).aggregate(
            [(column, "first"), ("error", "max")])
        for job, value, error in zip(grouped.column("job").to_pylist(), grouped.column(f"{column}_first").to_pylist(),
                                     grouped.column("error_max").to_pylist(), strict=True):
            if job is not None:
                yield job, value, error


def per_job(spark: SparkSession | None, table: str, column: str) -> dict[str, tuple[str | None, str | None]]:
    """job -> (its first non-null `column`, its largest `error`), in memory (tests, small tables);
    `JobIndex` keeps the same reduction on disk for a fleet."""
    out: dict[str, tuple[str | None, str | None]] = {}
    for job, value, error in _reduced(table, column):
        seen = out.get(job)
        if seen is not None:  # a job whose rows span two batches
            value = seen[0] if seen[0] is not None else value
            error = max((e for e in (seen[1], error) if e is not None), default=None)
        out[job] = (value, error)
    return out


def _per_job_spark(spark: SparkSession, table: str, column: str) -> dict[str, tuple[str | None, str | None]]:
    """The same reduction in Spark SQL (what `per_job` replaced; tests hold the two equal on local tables)."""
    from pyspark.sql import functions as F

    rows = (spark.read.parquet(table).groupBy("job")
            .agg(F.first(column, ignorenulls=True).alias("value"), F.max("error").alias("error")).collect())
    return {r["job"]: (r["value"], r["error"]) for r in rows if r["job"] is not None}


def plan_rows(path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """(job, its planned options) per plan row: the columns of `OPTIONS` the plan has, missing values left
    out; rows without a job name skipped. Duplicates are the caller's to refuse (`read_plan`, `JobIndex`)."""
    lower = path.lower().rstrip("/")
    try:
        if lower.endswith(".csv"):
            rows: Iterable[Any] = csv.DictReader(io.StringIO(common.read_bytes(path).decode("utf-8-sig")))
        elif lower.endswith(".json"):
            doc = json.loads(common.read_bytes(path))
            rows = doc if isinstance(doc, list) else [doc]
        else:
            import pyarrow.parquet as pq

            source = common.parse_location(path)
            rows = pq.read_table(io.BytesIO(common.read_bytes(path)) if source.scheme == "s3" else source.path
                                 ).to_pylist()
        for i, row in enumerate(rows):
            if not isinstance(row, dict) or "job" not in row:
                raise common.JobError(f"{path}: the plan needs a 'job' column (row {i + 1} has none)")
            job = row["job"]
            if job not in (None, ""):
                yield str(job), {k: row[k] for k in OPTIONS if row.get(k) not in (None, "")}
    except (UnicodeDecodeError, ValueError, OSError, csv.Error) as exc:
        raise common.JobError(f"{path}: not a readable plan ({type(exc).__name__}: {exc})") from None


def read_plan(path: str | None) -> dict[str, dict[str, Any]]:
    """job -> its planned options, in memory (`plan_rows` as a dictionary; a job planned twice is an error)."""
    plan: dict[str, dict[str, Any]] = {}
    for job, options in plan_rows(path) if path else ():
        if job in plan:
            raise common.JobError(f"{path}: job {job!r} is planned twice")
        plan[job] = options
    return plan


def _option(name: str, planned: Any, default: Any) -> Any:
    if planned is None:
        return default
    if name == "allow_non_restored_state":
        return str(planned).strip().lower() in _TRUE
    return str(planned)


_SIDES = {"spec": ("spec", "spec_error"), "metadata": ("metadata", "metadata_error"),
          "old_spec": ("old_spec", "old_spec_error")}


class JobIndex:
    """The pairing's per-job entries on disk: one SQLite row per job (spec, metadata, old spec, their errors,
    the planned options as JSON) in a temporary file that is deleted on close.

    SQLite keeps a bounded page cache (a few MiB) whatever the fleet size, so the driver pairs 1,000,000 jobs
    in the memory it needs for 1,000; the merge rules are `per_job`'s (first non-null value, largest error)."""

    def __init__(self) -> None:
        self.folder = tempfile.mkdtemp(prefix="ugate-pairing-")
        self.db = sqlite3.connect(os.path.join(self.folder, "jobs.sqlite"), isolation_level=None)
        self.db.execute("PRAGMA journal_mode = OFF")
        self.db.execute("PRAGMA synchronous = OFF")
        self.db.execute("PRAGMA cache_size = -8192")  # KiB: the bound on what the pairing holds in memory
        self.db.execute("CREATE TABLE jobs (job TEXT PRIMARY KEY, spec TEXT, spec_error TEXT, metadata TEXT, "
                        "metadata_error TEXT, old_spec TEXT, old_spec_error TEXT, planned TEXT) WITHOUT ROWID")

    def __enter__(self) -> JobIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.db.close()
        for name in os.listdir(self.folder):
            os.unlink(os.path.join(self.folder, name))
        os.rmdir(self.folder)

    def add_table(self, table: str, column: str, side: str) -> None:
        """Merge a fleet_ids / savepoint_scan table's per-job reduction into the `side` columns."""
        value, error = _SIDES[side]
        sql = (f"INSERT INTO jobs (job, {value}, {error}) VALUES (?, ?, ?) ON CONFLICT (job) DO UPDATE SET "
               f"{value} = COALESCE({value}, excluded.{value}), "
               f"{error} = CASE WHEN {error} IS NULL THEN excluded.{error} "
               f"WHEN excluded.{error} IS NULL THEN {error} ELSE MAX({error}, excluded.{error}) END")
        self._batched(sql, _reduced(table, column))

    def add_listing(self, rows: Iterable[tuple[str, str]], side: str) -> None:
        """Merge (job, path) rows listed in the driver (`fleet_gate`'s catalogue and savepoint root) into `side`;
        a job listed twice keeps its first path."""
        value, _ = _SIDES[side]
        self._batched(f"INSERT INTO jobs (job, {value}) VALUES (?, ?) ON CONFLICT (job) DO UPDATE SET "
                      f"{value} = COALESCE({value}, excluded.{value})", rows)

    def add_plan(self, path: str) -> None:
        """The plan's options per job; only for jobs of the input tables (as a dictionary lookup would)."""
        self.db.execute("CREATE TABLE plan (job TEXT PRIMARY KEY, planned TEXT) WITHOUT ROWID")
        try:
            self._batched("INSERT INTO plan (job, planned) VALUES (?, ?)",
                          ((job, json.dumps(options)) for job, options in plan_rows(path)))
        except sqlite3.IntegrityError:
            dup = self._first_duplicate(path)
            raise common.JobError(f"{path}: job {dup!r} is planned twice") from None
        self.db.execute("UPDATE jobs SET planned = (SELECT planned FROM plan WHERE plan.job = jobs.job)")

    def _first_duplicate(self, path: str) -> str:
        seen: set[str] = set()  # only on the error path: the message names the job
        for job, _ in plan_rows(path):
            if job in seen:
                return job
            seen.add(job)
        return "?"

    def _batched(self, sql: str, rows: Iterable[tuple[Any, ...]], size: int = 10_000) -> None:
        self.db.execute("BEGIN")
        try:
            chunk: list[tuple[Any, ...]] = []
            for row in rows:
                chunk.append(row)
                if len(chunk) >= size:
                    self.db.executemany(sql, chunk)
                    chunk.clear()
            if chunk:
                self.db.executemany(sql, chunk)
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise

    def jobs(self) -> Iterator[tuple[Any, ...]]:
        """(job, spec, spec_error, metadata, metadata_error, old_spec, planned JSON) in job-name order."""
        yield from self.db.execute("SELECT job, spec, spec_error, metadata, metadata_error, old_spec, planned "
                                   "FROM jobs ORDER BY job")


def check_inputs(spark: SparkSession | None, ids_table: str, scan_table: str, **options: Any) -> list[dict[str, Any]]:
    """One row per job (`INPUT_DDL`): its new spec, its savepoint `_metadata`, its options, or why it
    cannot be checked. Jobs are in name order. (`iter_inputs` hands them out one at a time.)"""
    return list(iter_inputs(spark, ids_table, scan_table, **options))


def iter_inputs(spark: SparkSession | None, ids_table: str, scan_table: str, *, plan: str | None = None,
                old_ids_table: str | None = None, hasher: str = "v2", matching: str = "fixed",
                allow_non_restored_state: bool = False, flink_version: str | None = None
                ) -> Iterator[dict[str, Any]]:
    """`check_inputs`' rows as a generator, paired on disk (`JobIndex`): the driver holds one row at a time."""
    defaults = {"hasher": hasher, "matching": matching, "allow_non_restored_state": allow_non_restored_state,
                "flink_version": flink_version}
    with JobIndex() as index:
        index.add_table(ids_table, "spec", "spec")
        index.add_table(scan_table, "metadata", "metadata")
        if old_ids_table:
            index.add_table(old_ids_table, "spec", "old_spec")
        if plan:
            index.add_plan(plan)
        for job, spec, graph_error, metadata, savepoint_error, old_spec, planned in index.jobs():
            if spec is None:
                error = "no new graph spec for this job in the ids table"
            elif metadata is None and savepoint_error is None:
                error = "no savepoint for this job in the scan table"
            elif graph_error is not None:
                error = f"graph: {graph_error}"
            elif savepoint_error is not None:
                error = f"savepoint: {savepoint_error}"
            else:
                error = None
            options = json.loads(planned) if planned else {}
            yield {"job": job, "spec": spec, "metadata": metadata, "old_spec": old_spec,
                   **{k: _option(k, options.get(k), v) for k, v in defaults.items()}, "input_error": error}


LISTED_DDL = ("job string, spec string, savepoint string, old_spec string, hasher string, matching string, "
              "allow_non_restored_state boolean, flink_version string")


def iter_listed(specs: Iterable[tuple[str, str]], savepoints: Iterable[tuple[str, str]], *,
                old_specs: Iterable[tuple[str, str]] | None = None, plan: str | None = None, hasher: str = "v2",
                matching: str = "fixed", allow_non_restored_state: bool = False, flink_version: str | None = None
                ) -> Iterator[dict[str, Any]]:
    """`fleet_gate`'s inputs (`LISTED_DDL`): every job listed anywhere (its spec or savepoint prefix may be None:
    the job then still gets its ids or scan rows, and a verdict row saying what is missing), paired on disk
    (`JobIndex`), in job-name order, with the plan's options applied as `iter_inputs` applies them."""
    defaults = {"hasher": hasher, "matching": matching, "allow_non_restored_state": allow_non_restored_state,
                "flink_version": flink_version}
    with JobIndex() as index:
        index.add_listing(specs, "spec")
        index.add_listing(savepoints, "metadata")
        if old_specs is not None:
            index.add_listing(old_specs, "old_spec")
        if plan:
            index.add_plan(plan)
        for job, spec, _, savepoint, _, old_spec, planned in index.jobs():
            options = json.loads(planned) if planned else {}
            yield {"job": job, "spec": spec, "savepoint": savepoint, "old_spec": old_spec,
                   **{k: _option(k, options.get(k), v) for k, v in defaults.items()}}


# ---- the check's tasks read their inputs themselves ----------------------------------------
STAGE_BATCH = 2_048


def stage_inputs(rows: Iterable[dict[str, Any]], folder: str, tasks: int, ddl: str = INPUT_DDL
                 ) -> tuple[int, list[str]]:
    """Deal the paired rows out to `tasks` Parquet parts under `folder` (local, or `s3://` through
    pyarrow's S3 filesystem) and return (rows, part names): every `tasks`-th row in the same part, as
    `common.spread` dealt them, so rows next to each other by name (one team's jobs, alike in cost) are
    spread over the tasks. The driver holds one batch per part; `parallelize` would hold every row in
    the driver's Python and again in its JVM."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from spark_jobs import parquet_output

    loc = common.parse_location(folder)
    fs = parquet_output.s3_filesystem() if loc.scheme == "s3" else None
    base = f"{loc.bucket}/{loc.path.rstrip('/')}" if loc.scheme == "s3" else loc.path
    if fs is None:
        os.makedirs(base, exist_ok=True)
    schema = common.arrow_schema(ddl)
    run = uuid.uuid4().hex[:8]
    names = [f"inputs-{k:05d}-{run}.parquet" for k in range(max(1, tasks))]
    writers: list[Any] = [None] * len(names)
    buffers: list[list[dict[str, Any]]] = [[] for _ in names]
    total = 0

    def flush(k: int) -> None:
        if writers[k] is None:
            writers[k] = pq.ParquetWriter(f"{base}/{names[k]}", schema, compression="snappy", filesystem=fs)
        writers[k].write_batch(pa.RecordBatch.from_pylist(buffers[k], schema=schema))
        buffers[k].clear()

    try:
        for row in rows:
            k = total % len(names)
            buffers[k].append(row)
            total += 1
            if len(buffers[k]) >= STAGE_BATCH:
                flush(k)
        for k in range(len(names)):
            if buffers[k]:
                flush(k)
    finally:
        for w in writers:
            if w is not None:
                w.close()
    return total, [n for n, w in zip(names, writers, strict=True) if w is not None]


def staged_batches(parts: Iterator[pa.RecordBatch], folder: str) -> Iterator[pa.RecordBatch]:
    """Executor side: the input rows of the parts named in this task's rows (`stage_inputs`)."""
    import pyarrow.parquet as pq

    from spark_jobs import parquet_output

    loc = common.parse_location(folder)
    fs = parquet_output.s3_filesystem() if loc.scheme == "s3" else None
    base = f"{loc.bucket}/{loc.path.rstrip('/')}" if loc.scheme == "s3" else loc.path
    for batch in parts:
        for name in batch.column("part").to_pylist():
            with pq.ParquetFile(f"{base}/{name}" if fs is None else fs.open_input_file(f"{base}/{name}")) as f:
                yield from f.iter_batches(batch_size=STAGE_BATCH)


def remove_staged(folder: str) -> None:
    """Delete the staged parts (the check's inputs are not part of its output)."""
    import shutil

    loc = common.parse_location(folder)
    if loc.scheme != "s3":
        shutil.rmtree(loc.path, ignore_errors=True)
        return
    from spark_jobs import parquet_output

    client = common.s3_client()
    prefix = loc.path.rstrip("/") + "/"
    parquet_output.delete_keys(client, loc.bucket, parquet_output.list_keys(client, loc.bucket, prefix))

"""Which spec, savepoint and options each job of a fleet check gets, decided in the driver.

A fleet has thousands of jobs, not millions, so after each input table is reduced to one entry
per job the pairing is a few dictionaries. It used to be a Spark SQL plan (two aggregations, a
full outer join, a broadcast join with the plan): on the fresh JVM of a `fleet_check` run that
plan took 7-8 s before the first job was checked, most of it compiling and loading the query's
code, and about as long with 10,000 input rows as with 1 M. Here:

* each table is reduced to {job: (value, error)} with pyarrow in the driver: a local table, or an
  `s3://` table through its manifest (`parquet_output.read_table`), so no s3a connector is needed;
* the plan (CSV, JSON or Parquet, local or `s3://`) is read in Python: every value as the file
  gives it, an empty CSV cell as missing;
* the result is one row per job, with `input_error` saying why a job cannot be checked.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from spark_jobs import common

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

OPTIONS = ("hasher", "matching", "allow_non_restored_state", "flink_version")
INPUT_DDL = ("job string, spec string, metadata string, old_spec string, hasher string, matching string, "
             "allow_non_restored_state boolean, flink_version string, input_error string")
_TRUE = ("true", "1", "yes")


def per_job(spark: SparkSession, table: str, column: str) -> dict[str, tuple[str | None, str | None]]:
    """job -> (its first non-null `column`, its largest `error`) in a fleet_ids / savepoint_scan table.

    Reduced batch by batch (`table_batches`), so the driver holds one entry per job and one batch,
    never the table: 100,000 jobs x 50 operators are 5 M rows, about 0.6 GB as Arrow columns."""
    import pyarrow as pa

    from spark_jobs.parquet_output import table_batches

    out: dict[str, tuple[str | None, str | None]] = {}
    for batch in table_batches(table, ["job", column, "error"]):  # JobError naming the table
        grouped = pa.Table.from_batches([batch]).group_by("job", use_threads=False).aggregate(
            [(column, "first"), ("error", "max")])
        for job, value, error in zip(grouped.column("job").to_pylist(), grouped.column(f"{column}_first").to_pylist(),
                                     grouped.column("error_max").to_pylist(), strict=True):
            if job is None:
                continue
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


def read_plan(path: str | None) -> dict[str, dict[str, Any]]:
    """job -> its planned options (the columns of `OPTIONS` the plan has; missing values left out)."""
    if not path:
        return {}
    lower = path.lower().rstrip("/")
    try:
        if lower.endswith(".csv"):
            rows = list(csv.DictReader(io.StringIO(common.read_bytes(path).decode("utf-8-sig"))))
        elif lower.endswith(".json"):
            doc = json.loads(common.read_bytes(path))
            rows = doc if isinstance(doc, list) else [doc]
        else:
            import pyarrow.parquet as pq

            source = common.parse_location(path)
            rows = pq.read_table(io.BytesIO(common.read_bytes(path)) if source.scheme == "s3" else source.path
                                 ).to_pylist()
    except (UnicodeDecodeError, ValueError, OSError, csv.Error) as exc:
        raise common.JobError(f"{path}: not a readable plan ({type(exc).__name__}: {exc})") from None
    plan: dict[str, dict[str, Any]] = {}
    for i, row in enumerate(rows):
        if not isinstance(row, dict) or "job" not in row:
            raise common.JobError(f"{path}: the plan needs a 'job' column (row {i + 1} has none)")
        job = row["job"]
        if job in (None, ""):
            continue
        job = str(job)
        if job in plan:
            raise common.JobError(f"{path}: job {job!r} is planned twice")
        plan[job] = {k: row[k] for k in OPTIONS if row.get(k) not in (None, "")}
    return plan


def _option(name: str, planned: Any, default: Any) -> Any:
    if planned is None:
        return default
    if name == "allow_non_restored_state":
        return str(planned).strip().lower() in _TRUE
    return str(planned)


def check_inputs(spark: SparkSession, ids_table: str, scan_table: str, **options: Any) -> list[dict[str, Any]]:
    """One row per job (`INPUT_DDL`): its new spec, its savepoint `_metadata`, its options, or why it
    cannot be checked. Jobs are in name order. (`iter_inputs` hands them out one at a time.)"""
    return list(iter_inputs(spark, ids_table, scan_table, **options))


def iter_inputs(spark: SparkSession, ids_table: str, scan_table: str, *, plan: str | None = None,
                old_ids_table: str | None = None, hasher: str = "v2", matching: str = "fixed",
                allow_non_restored_state: bool = False, flink_version: str | None = None
                ) -> Iterator[dict[str, Any]]:
    """`check_inputs`' rows as a generator: the driver turns each into the tuple it ships and keeps no
    list of per-job dicts (about 0.6 KB a job) beside the two per-job maps it must hold."""
    graphs = per_job(spark, ids_table, "spec")
    savepoints = per_job(spark, scan_table, "metadata")
    old = per_job(spark, old_ids_table, "spec") if old_ids_table else {}
    planned = read_plan(plan)
    defaults = {"hasher": hasher, "matching": matching, "allow_non_restored_state": allow_non_restored_state,
                "flink_version": flink_version}
    for job in sorted(graphs.keys() | savepoints.keys()):
        spec, graph_error = graphs.get(job, (None, None))
        metadata, savepoint_error = savepoints.get(job, (None, None))
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
        options = planned.get(job, {})
        yield {"job": job, "spec": spec, "metadata": metadata, "old_spec": old.get(job, (None, None))[0],
               **{k: _option(k, options.get(k), v) for k, v in defaults.items()}, "input_error": error}

"""Parquet tables written by the Python workers themselves: on local masters, and to `s3://` from any master.

The fleet jobs compute their rows in Python and already hold them as Arrow batches. Handing
those batches to Spark's writer makes the JVM turn every value into a row and re-encode it:
for the 1 M node and operator rows of a 10,000-job fleet that cost the JVM about 16 CPU-seconds,
on the same two cores the Python workers need. pyarrow writes the same batches in well under
one CPU-second. And Spark's writer cannot reach `s3://` here at all: that needs the s3a
connector's jars, which this platform does not ship (docs/design.md, Real components).

So each task writes its own part file with pyarrow and returns only a manifest row (part name,
row count); the driver keeps exactly the parts in the manifest, so a failed or repeated task
attempt leaves nothing a reader sees:

* **local target, local master** (the executors share the driver's file system): parts go into a
  temporary folder beside the target; the driver deletes parts not in the manifest, adds
  `_SUCCESS` and renames the folder into place (`common.atomic_output`).
* **`s3://` target, any master** (pyarrow's `S3FileSystem` from the standard AWS environment,
  endpoint override included): parts go under `<table>/run-<id>/`. The driver commits by one PUT
  of `<table>/_manifest.json` naming the run's parts, then `_SUCCESS`, then deletes everything
  else under the table (older runs, parts of failed attempts). Until that PUT the previous
  table (its manifest) is what readers see; a failed run deletes its own parts and leaves the
  previous manifest alone. `read_table` reads such a table through its manifest only.
* a local target on a cluster master: Spark's own writer, as before.

Either way the table has the same schema and rows.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spark_jobs import common

if TYPE_CHECKING:
    import pyarrow as pa
    from pyarrow.fs import S3FileSystem
    from pyspark.sql import DataFrame

MANIFEST_DDL = "tag string, part string, rows long"
MANIFEST = "_manifest.json"
MANIFEST_FORMAT = "upgrade-gate-parquet-manifest/1"
MAX_MANIFEST_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class ArrowRows:
    """Rows a Python function makes from input rows (`inputs.mapInArrow(fn)`), kept apart so the
    workers can write them themselves (`write_table`)."""

    inputs: DataFrame
    fn: Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]
    ddl: str  # the schema of the batches `fn` yields (common.spark_schema's DDL subset)

    def frame(self) -> DataFrame:
        return self.inputs.mapInArrow(self.fn, common.spark_schema(self.ddl))

    def tagged(self) -> TaggedRows:
        fn = self.fn
        return TaggedRows(self.inputs, lambda it: (("", b) for b in fn(it)), {"": self.ddl})


@dataclass(frozen=True)
class TaggedRows:
    """Rows for several tables from one pass over the inputs: `fn` yields (tag, batch), each tag one table
    (`ddls[tag]` its schema). `fleet_gate` makes its node, operator and verdict rows from one read of each
    job's spec and savepoint, so the tasks write three tables at once (`write_tables`)."""

    inputs: DataFrame
    fn: Callable[[Iterator[pa.RecordBatch]], Iterator[tuple[str, pa.RecordBatch]]]
    ddls: dict[str, str]


def direct_write_possible(rows: ArrowRows | TaggedRows, target: str) -> bool:
    """Workers write the parts to `s3://` from any master, and to local files on a local master."""
    return workers_can_write(rows.inputs.sparkSession, target)


def workers_can_write(spark: Any, target: str) -> bool:
    return common.parse_location(target).scheme == "s3" or spark.sparkContext.master.startswith("local")


def require_workers_can_write(spark: Any, target: str) -> None:
    """A job that only writes through its workers (`write_tables`) checks this before any work."""
    if not workers_can_write(spark, target):
        raise common.JobError(f"{target}: a cluster's workers cannot write to a local folder of the driver; "
                              "give an s3:// output (or run on a local master)")


def write_table(rows: ArrowRows | DataFrame, target: str, *, overwrite: bool = False,
                before_commit: Callable[[], None] | None = None) -> int | None:
    """Write a Parquet table at `target` atomically; returns the row count when the workers wrote it.
    `before_commit`: as for `write_tables`."""
    if isinstance(rows, ArrowRows) and direct_write_possible(rows, target):
        return write_tables(rows.tagged(), {"": target}, overwrite=overwrite, before_commit=before_commit)[""]
    if common.parse_location(target).scheme == "s3":
        raise common.JobError(f"{target}: only tables the workers write can go to s3:// (no s3a connector)")
    frame = rows.frame() if isinstance(rows, ArrowRows) else rows
    if before_commit is not None:
        before_commit()
    common.write_parquet(frame, target, overwrite=overwrite)
    return None


def write_tables(rows: TaggedRows, targets: dict[str, str], *, overwrite: bool = False,
                 before_commit: Callable[[], None] | None = None) -> dict[str, int]:
    """Write one Parquet table per tag at `targets[tag]`, each atomically, from one pass of the tasks; returns
    the row count per tag. Every target must be one the workers can write (`direct_write_possible`).

    `before_commit` runs once, after every task succeeded and before the first table commits: on `s3://`
    the tables commit one after another, so a caller whose document describes the tables (a fleet job's
    `summary.json`) removes the previous run's there; a run that stops between two commits then leaves no
    document beside tables it did not describe (fail closed), and a run that fails earlier changes nothing."""
    schemes = {common.parse_location(t).scheme for t in targets.values()}
    if set(targets) != set(rows.ddls) or len(schemes) != 1:
        raise ValueError(f"write_tables: one target per tag, all local or all s3:// (got {targets})")
    for target in targets.values():
        require_workers_can_write(rows.inputs.sparkSession, target)
    if schemes == {"s3"}:
        return _write_s3(rows, {tag: common.parse_location(t) for tag, t in targets.items()}, overwrite,
                         before_commit)
    return _write_direct(rows, targets, overwrite, before_commit)


def _write_direct(rows: TaggedRows, targets: dict[str, str], overwrite: bool,
                  before_commit: Callable[[], None] | None) -> dict[str, int]:
    import pyarrow.parquet as pq

    fn = rows.fn
    started = time.perf_counter()
    with ExitStack() as stack:
        folders = {tag: Path(stack.enter_context(common.atomic_output(t, overwrite=overwrite)))
                   for tag, t in targets.items()}
        for folder in folders.values():
            folder.mkdir()
        where = {tag: str(f) for tag, f in folders.items()}
        manifest = rows.inputs.mapInArrow(lambda batches: write_parts(fn(batches), where),
                                          common.spark_schema(MANIFEST_DDL)).collect()
        if before_commit is not None:
            before_commit()
        totals = {}
        for tag, folder in folders.items():
            mine = [r for r in manifest if r["tag"] == tag]
            kept = {r["part"] for r in mine if r["part"]}
            for path in folder.iterdir():  # parts of failed or repeated attempts: not in the manifest
                if path.name not in kept:
                    path.unlink()
            if not kept:  # an empty table still carries its schema, as Spark's writer leaves it
                kept = {"part-00000-empty.snappy.parquet"}
                pq.write_table(common.arrow_schema(rows.ddls[tag]).empty_table(),
                               folder / "part-00000-empty.snappy.parquet")
            totals[tag] = sum(r["rows"] for r in mine)
            (folder / MANIFEST).write_text(
                json.dumps(_manifest(rows.ddls[tag], totals[tag], sorted(kept), started), indent=1))
            (folder / "_SUCCESS").write_bytes(b"")
    return totals


def _manifest(ddl: str, total: int, parts: list[str], started: float) -> dict[str, Any]:
    """What a reader needs (the parts) and what a fleet report shows (how long the write took)."""
    return {"format": MANIFEST_FORMAT, "schema": ddl, "rows": total, "parts": parts,
            "seconds": round(time.perf_counter() - started, 3)}


def table_seconds(table: str) -> float | None:
    """How long the job that wrote `table` spent writing it (from its manifest), None if unknown."""
    loc = common.parse_location(table)
    try:
        if loc.scheme == "file":
            doc = json.loads((Path(loc.path) / MANIFEST).read_text())
        else:
            doc = json.loads(common.read_bytes(f"s3://{loc.bucket}/{loc.path.rstrip('/')}/{MANIFEST}",
                                               max_bytes=MAX_MANIFEST_BYTES))
        return float(doc["seconds"])
    except Exception:  # a table Spark's writer made, or an older one: no timing to report
        return None


# ---- s3:// -------------------------------------------------------------------------------
def s3_filesystem() -> S3FileSystem:
    """pyarrow's S3 client from the same standard AWS environment our boto3 clients use
    (`upgrade_gate.storage.s3.s3_client`): AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL, AWS_REGION,
    keys; path-style addressing when an endpoint is given, and the same time budget."""
    from pyarrow.fs import S3FileSystem

    from upgrade_gate.storage.s3 import timeout_budget

    kwargs: dict[str, Any] = {
        "region": os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1",
        "connect_timeout": min(10.0, timeout_budget()), "request_timeout": timeout_budget()}
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    if endpoint:
        kwargs["endpoint_override"] = endpoint
        kwargs["force_virtual_addressing"] = False
    if os.environ.get("AWS_ACCESS_KEY_ID") and os.environ.get("AWS_SECRET_ACCESS_KEY"):
        kwargs.update(access_key=os.environ["AWS_ACCESS_KEY_ID"], secret_key=os.environ["AWS_SECRET_ACCESS_KEY"],
                      session_token=os.environ.get("AWS_SESSION_TOKEN"))
    return S3FileSystem(**kwargs)


def list_keys(client: Any, bucket: str, prefix: str) -> list[str]:
    keys: list[str] = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        keys.extend(o["Key"] for o in page.get("Contents", ()))
    return keys


def delete_keys(client: Any, bucket: str, keys: list[str]) -> None:
    for i in range(0, len(keys), 1000):
        client.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k} for k in keys[i:i + 1000]],
                                                     "Quiet": True})


def _delete_after_tasks_stop(spark: Any, client: Any, prefixes: list[tuple[str, str]]) -> None:
    """Delete a failed run's parts, including those of tasks Spark is still cancelling.

    When one task fails, Spark cancels its siblings, but a cancelled task's Python worker runs on for up to
    `spark.python.task.killTimeout` (2 s by default) and may close, and so publish, its part after a first
    delete: so wait for the stages to go idle, then keep deleting until the prefixes stay empty for longer
    than that timeout (bounded: a worker Spark has killed publishes nothing)."""
    deadline = time.monotonic() + 30.0
    tracker = spark.sparkContext.statusTracker()
    while tracker.getActiveStageIds() and time.monotonic() < deadline:
        time.sleep(0.2)
    # Spark's own parser of its time settings ("2s", "500ms", "1min")
    kill_ms = spark.sparkContext._jsc.sc().conf().getTimeAsMs("spark.python.task.killTimeout", "2s")
    quiet_for = kill_ms / 1000 + 1.0
    quiet_since = time.monotonic()
    while True:
        found = False
        for bucket, prefix in prefixes:
            keys = list_keys(client, bucket, prefix)
            if keys:
                delete_keys(client, bucket, keys)
                found = True
        now = time.monotonic()
        if found:
            quiet_since = now
        if now - quiet_since >= quiet_for or now >= deadline:
            return
        time.sleep(0.25)


def _write_s3(rows: TaggedRows, locs: dict[str, common.Location], overwrite: bool,
              before_commit: Callable[[], None] | None) -> dict[str, int]:
    """Each table commits by one PUT of its manifest; until then readers see its previous manifest. A failed
    run deletes its own parts of every table (tables already committed by it stay, each whole)."""
    import pyarrow.parquet as pq

    client = common.s3_client()
    tables = {tag: loc.path.rstrip("/") for tag, loc in locs.items()}
    for tag, table in tables.items():
        if not table:
            raise common.JobError(f"{locs[tag].uri}: a table needs a prefix below the bucket")
        if not overwrite and list_keys(client, locs[tag].bucket, table + "/"):
            raise common.JobError(f"{locs[tag].uri}: already exists (pass --overwrite to replace it)")
    started = time.perf_counter()
    run = f"run-{uuid.uuid4().hex[:16]}"
    folders = {tag: f"{locs[tag].bucket}/{table}/{run}" for tag, table in tables.items()}
    fn = rows.fn
    committed: dict[str, list[str]] = {}
    totals: dict[str, int] = {}
    try:
        manifest = rows.inputs.mapInArrow(lambda batches: write_parts(fn(batches), folders, s3=True),
                                          common.spark_schema(MANIFEST_DDL)).collect()
        if before_commit is not None:
            before_commit()
        for tag, table in tables.items():
            mine = [r for r in manifest if r["tag"] == tag]
            parts = sorted(f"{run}/{r['part']}" for r in mine if r["part"])
            if not parts:  # an empty table still carries its schema
                with s3_filesystem().open_output_stream(f"{folders[tag]}/part-00000-empty.snappy.parquet") as out:
                    pq.write_table(common.arrow_schema(rows.ddls[tag]).empty_table(), out)
                parts = [f"{run}/part-00000-empty.snappy.parquet"]
            totals[tag] = sum(r["rows"] for r in mine)
            doc = _manifest(rows.ddls[tag], totals[tag], parts, started)
            # the commit point: one PUT replaces the manifest readers follow
            client.put_object(Bucket=locs[tag].bucket, Key=f"{table}/{MANIFEST}",
                              Body=json.dumps(doc, indent=1).encode(), ContentType="application/json")
            committed[tag] = parts
    except BaseException:
        leftovers = [(locs[tag].bucket, f"{table}/{run}/") for tag, table in tables.items() if tag not in committed]
        _delete_after_tasks_stop(rows.inputs.sparkSession, client, leftovers)
        raise
    for tag, table in tables.items():
        bucket = locs[tag].bucket
        client.put_object(Bucket=bucket, Key=f"{table}/_SUCCESS", Body=b"")
        keep = {f"{table}/{p}" for p in committed[tag]} | {f"{table}/{MANIFEST}", f"{table}/_SUCCESS"}
        # older runs, failed or repeated attempts, anything else: nothing a reader of the manifest needs
        delete_keys(client, bucket, [k for k in list_keys(client, bucket, table + "/") if k not in keep])
    return totals


def write_parts(batches: Iterator[tuple[str, pa.RecordBatch]], folders: dict[str, str], *, s3: bool = False
                ) -> Iterator[pa.RecordBatch]:
    """Executor side: this task's batches into one part file per tag, named by partition and attempt; yields
    the manifest rows (tag, part, rows).

    `folders[tag]` is a local path, or `bucket/prefix` with `s3=True` (pyarrow's S3 filesystem)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark import TaskContext

    ctx: Any = TaskContext.get()
    name = f"part-{ctx.partitionId():05d}-{ctx.attemptNumber()}-{uuid.uuid4().hex[:8]}.snappy.parquet"
    fs = s3_filesystem() if s3 else None
    writers: dict[str, Any] = {}
    paths: list[str] = []
    counts = dict.fromkeys(folders, 0)
    try:
        for tag, batch in batches:
            writer = writers.get(tag)
            if writer is None:
                where = f"{folders[tag]}/{name}" if s3 else str(Path(folders[tag]) / name)
                paths.append(where)
                writer = writers[tag] = pq.ParquetWriter(where, batch.schema, compression="snappy", filesystem=fs)
            writer.write_batch(batch)
            counts[tag] += batch.num_rows
    except BaseException:
        # a failed or cancelled task (Spark closes its pipe: the next write raises) must not publish its
        # parts: closing an S3 writer completes its upload, so close, then take the parts back
        for writer in writers.values():
            with suppress(Exception):
                writer.close()
        for where in paths:
            with suppress(Exception):
                fs.delete_file(where) if fs is not None else Path(where).unlink()
        raise
    for writer in writers.values():
        writer.close()
    tags = list(folders)
    yield pa.RecordBatch.from_pydict({"tag": tags, "part": [name if t in writers else None for t in tags],
                                      "rows": [counts[t] for t in tags]}, schema=common.arrow_schema(MANIFEST_DDL))


# ---- reading ------------------------------------------------------------------------------
def table_batches(table: str, columns: list[str]) -> Iterator[pa.RecordBatch]:
    """`read_table`'s rows, batch by batch: a driver that reduces a fleet-sized table (5 M node rows at
    100,000 jobs) holds one batch at a time, not the table."""
    import pyarrow as pa
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    loc = common.parse_location(table)
    if loc.scheme == "s3":
        data = _s3_dataset(table, loc)
    else:
        if not Path(loc.path).exists():
            raise common.JobError(f"{table}: no such table")
        try:  # skips _SUCCESS, _manifest.json and .crc files, as Spark does
            data = ds.dataset(loc.path, format="parquet", partitioning="hive")
        except Exception as exc:
            raise common.JobError(f"{table}: not a readable Parquet table ({type(exc).__name__}: {exc})") from None
    pool = pa.default_memory_pool()
    try:
        # File by file, not `data.to_batches`: the dataset scanner's peak grew with the number of parts
        # (195 -> 406 MiB from 3 to 26 parts of 195,000 rows); one open file at a time stays flat (172 MiB),
        # with the allocator's freed pages handed back between batches (docs/performance.md, "Driver memory").
        for path in data.files:
            with pq.ParquetFile(data.filesystem.open_input_file(path)) as part:
                for batch in part.iter_batches(batch_size=65_536, columns=columns, use_threads=False):
                    yield batch
                    del batch
                    pool.release_unused()
    except Exception as exc:
        raise common.JobError(f"{table}: not a readable Parquet table ({type(exc).__name__}: {exc})") from None


def _s3_dataset(table: str, loc: common.Location) -> Any:
    """An `s3://` table as a pyarrow dataset of its manifest's parts (JobError if there is no committed one)."""
    import pyarrow.dataset as ds

    base = loc.path.rstrip("/")
    try:
        doc = json.loads(common.read_bytes(f"s3://{loc.bucket}/{base}/{MANIFEST}", max_bytes=MAX_MANIFEST_BYTES))
    except Exception as exc:
        raise common.JobError(f"{table}: no committed table ({MANIFEST} unreadable: {exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != MANIFEST_FORMAT or not isinstance(doc.get("parts"), list):
        raise common.JobError(f"{table}: {MANIFEST} is not a table manifest")
    files = [f"{loc.bucket}/{base}/{p}" for p in doc["parts"]]
    try:
        return ds.dataset(files, filesystem=s3_filesystem(), format="parquet",
                          schema=common.arrow_schema(doc["schema"]) if doc.get("schema") else None)
    except Exception as exc:
        raise common.JobError(f"{table}: not a readable Parquet table ({type(exc).__name__}: {exc})") from None


def read_table(table: str, columns: list[str] | None = None) -> pa.Table:
    """A table we wrote, in the driver: a local folder (ours or Spark's), or an `s3://` table through
    its `_manifest.json` (only the committed run's parts; a table without one is not there yet)."""
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    loc = common.parse_location(table)
    try:
        if loc.scheme == "file":
            if not Path(loc.path).exists():
                raise common.JobError(f"{table}: no such table")
            return pq.read_table(loc.path, columns=columns)  # skips _SUCCESS and .crc files, as Spark does
        base = loc.path.rstrip("/")
        try:
            doc = json.loads(common.read_bytes(f"s3://{loc.bucket}/{base}/{MANIFEST}", max_bytes=MAX_MANIFEST_BYTES))
        except Exception as exc:
            raise common.JobError(f"{table}: no committed table ({MANIFEST} unreadable: {exc})") from None
        if not isinstance(doc, dict) or doc.get("format") != MANIFEST_FORMAT or not isinstance(doc.get("parts"), list):
            raise common.JobError(f"{table}: {MANIFEST} is not a table manifest")
        files = [f"{loc.bucket}/{base}/{p}" for p in doc["parts"]]
        data = ds.dataset(files, filesystem=s3_filesystem(), format="parquet",
                          schema=common.arrow_schema(doc["schema"]) if doc.get("schema") else None)
        return data.to_table(columns=columns)
    except common.JobError:
        raise
    except Exception as exc:
        raise common.JobError(f"{table}: not a readable Parquet table ({type(exc).__name__}: {exc})") from None

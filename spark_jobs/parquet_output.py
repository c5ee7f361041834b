"""Parquet tables written by the Python workers themselves when the master is local.

The fleet jobs compute their rows in Python and already hold them as Arrow batches. Handing
those batches to Spark's writer makes the JVM turn every value into a row and re-encode it:
for the 1 M node and operator rows of a 10,000-job fleet that cost the JVM about 16 CPU-seconds,
on the same two cores the Python workers need. pyarrow writes the same batches in well under
one CPU-second. So, when the executors share the driver's file system (a `local[...]` master and
a local target), each task writes its own part file with pyarrow and returns only a manifest
row; the driver keeps exactly the parts in the manifest (a failed or repeated attempt leaves
nothing behind), adds `_SUCCESS`, and renames the folder into place. Anywhere else (a cluster
master, a non-local target) Spark's own writer runs, as before. Either way the table has the
same schema and rows, and readers (Spark, pyarrow) cannot tell which wrote it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spark_jobs import common

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

MANIFEST_DDL = "part string, rows long"


@dataclass(frozen=True)
class ArrowRows:
    """Rows a Python function makes from input rows (`inputs.mapInArrow(fn)`), kept apart so a
    local run can write them straight from the workers (`write_table`)."""

    inputs: DataFrame
    fn: Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]
    ddl: str  # the schema of the batches `fn` yields (common.spark_schema's DDL subset)

    def frame(self) -> DataFrame:
        return self.inputs.mapInArrow(self.fn, common.spark_schema(self.ddl))


def direct_write_possible(rows: ArrowRows, target: str) -> bool:
    """Workers can write the parts only where they see the driver's files: a local master, a local target."""
    return (rows.inputs.sparkSession.sparkContext.master.startswith("local")
            and common.parse_location(target).scheme == "file")


def write_table(rows: ArrowRows | DataFrame, target: str, *, overwrite: bool = False) -> int | None:
    """Write a Parquet table at `target` atomically; returns the row count when the workers wrote it."""
    if isinstance(rows, ArrowRows) and direct_write_possible(rows, target):
        return _write_direct(rows, target, overwrite)
    frame = rows.frame() if isinstance(rows, ArrowRows) else rows
    common.write_parquet(frame, target, overwrite=overwrite)
    return None


def _write_direct(rows: ArrowRows, target: str, overwrite: bool) -> int:
    import pyarrow.parquet as pq

    schema = common.arrow_schema(rows.ddl)
    fn = rows.fn
    with common.atomic_output(target, overwrite=overwrite) as tmp:
        folder = Path(tmp)
        folder.mkdir()
        manifest = rows.inputs.mapInArrow(lambda batches: write_part(fn(batches), str(folder)),
                                          common.spark_schema(MANIFEST_DDL)).collect()
        kept = {r["part"] for r in manifest if r["part"]}
        for path in folder.iterdir():  # parts of failed or repeated attempts: not in the manifest
            if path.name not in kept:
                path.unlink()
        if not kept:  # an empty table still carries its schema, as Spark's writer leaves it
            pq.write_table(schema.empty_table(), folder / "part-00000-empty.snappy.parquet")
        (folder / "_SUCCESS").write_bytes(b"")
    return sum(r["rows"] for r in manifest)


def write_part(batches: Iterator[pa.RecordBatch], folder: str) -> Iterator[pa.RecordBatch]:
    """Executor side: this task's batches into one part file named by partition and attempt."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark import TaskContext

    ctx: Any = TaskContext.get()
    name = f"part-{ctx.partitionId():05d}-{ctx.attemptNumber()}-{uuid.uuid4().hex[:8]}.snappy.parquet"
    writer = None
    count = 0
    try:
        for batch in batches:
            if writer is None:
                writer = pq.ParquetWriter(str(Path(folder) / name), batch.schema, compression="snappy")
            writer.write_batch(batch)
            count += batch.num_rows
    finally:
        if writer is not None:
            writer.close()
    yield pa.RecordBatch.from_pydict({"part": [name if writer is not None else None], "rows": [count]},
                                     schema=common.arrow_schema(MANIFEST_DDL))

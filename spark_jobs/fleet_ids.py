"""fleet_ids: V2 and V3 operator ids of every node of every job in a catalogue of graph specs.

Input: a folder or `s3://` prefix holding job graph specs (docs/graph-spec.md; JSON or YAML, any depth;
Flink execution plans are accepted too). A job is named by its file's path below the root,
without the extension. Output: a Parquet table with one row per stream node (`SCHEMA`): the V2
id Flink assigns today, the V3 id FLIP-411 would assign, both lists of alternative ids, the job
vertex (chain) it runs in under each hasher, and whether its id changes and what lets V2 state
restore into it. A spec that cannot be read gives one row with `error` set (the other jobs still
get their rows), so one bad file does not hide a fleet's answer.

All the Flink rules are the core's (`hashing.operator_ids.compute_operator_ids`,
`hashing.migration.v2_to_v3`); this job only spreads files over executors and flattens results.
Specs are read inside the executors (boto3 for `s3://`), many per task, and results leave each
task as Arrow batches, because per-row Python UDFs would cost more than the hashing itself.

    spark-submit spark_jobs/fleet_ids.py --catalogue s3://bucket/graphs --output /data/fleet-ids
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

from hashing.versions import DEFAULT as DEFAULT_FLINK_VERSION
from spark_jobs import common
from spark_jobs.columns import ColumnBuffer, Columns
from spark_jobs.parquet_output import ArrowRows, table_batches, write_table
from spark_jobs.progress import Progress

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from hashing.graph import StreamGraph

JOB = "fleet_ids"
SPEC_SUFFIXES = (".json", ".yaml", ".yml")
SCHEMA_DDL = (
    "job string, spec string, graph_name string, node_id long, name string, uid string, uid_hash string, "
    "parallelism int, max_parallelism int, v2_id string, v3_id string, v2_alternatives array<string>, "
    "v3_alternatives array<string>, v2_job_vertex string, v3_job_vertex string, chain_position int, "
    "chain_length int, id_changes boolean, restores_by string, error string"
)
_ROWS_PER_BATCH = 20_000


def catalogue_rows(source: str) -> list[tuple[str, str]]:
    """(job, spec) for every spec file below `source`, listed in the driver."""
    root = common.parse_location(source)
    files = common.list_files(root, SPEC_SUFFIXES)
    if not files:
        raise common.JobError(f"{source}: no graph specs ({', '.join(SPEC_SUFFIXES)}) found")
    return [(common.job_name_of(f, root), f) for f in files]


def catalogue(spark: SparkSession, source: str, partitions: int | None = None,
              rows: list[tuple[str, str]] | None = None) -> DataFrame:
    """(job, spec) for every spec file below `source` (or the given `rows`), spread over `partitions` tasks."""
    rows = catalogue_rows(source) if rows is None else rows
    n = common.default_partitions(spark, partitions, len(rows))
    return common.spread(spark, rows, n, "job string, spec string")


def graph_columns(job: str, spec_path: str, graph: StreamGraph, flink_version: str | None) -> Columns:
    """The table rows of one job, column by column: the core's V2 and V3 `OperatorIDPair`s and chains. The graph
    is read by the caller (`upgrade_gate.storage.objects.read_graph`; `fleet_gate` reads it once for the rows
    and the check, and the ids are cached on the graph, so the check's hasher reuses them)."""
    from hashing.migration import v2_to_v3
    from hashing.operator_ids import compute_operator_ids

    v2 = compute_operator_ids(graph, "v2", flink_version)
    v3 = compute_operator_ids(graph, "v3", flink_version)
    migration = {row.node_id: row for row in v2_to_v3(graph, flink_version)}
    vertex_of: dict[int, tuple[str, str, int, int]] = {}
    for vertex2, vertex3 in zip(v2.job_vertices, v3.job_vertices, strict=True):
        head_first = vertex2.node_ids_head_first
        ids2, ids3, length = vertex2.id.hex(), vertex3.id.hex(), len(head_first)
        for pos, nid in enumerate(head_first):
            vertex_of[nid] = (ids2, ids3, pos, length)
    nodes = graph.nodes
    n = len(nodes)
    p2 = [v2.pairs[node.id] for node in nodes]
    p3 = [v3.pairs[node.id] for node in nodes]
    moved = [migration[node.id] for node in nodes]
    vertices = [vertex_of[node.id] for node in nodes]
    return {
        "job": [job] * n, "spec": [spec_path] * n, "graph_name": [graph.name] * n,
        "node_id": [node.id for node in nodes], "name": [node.name for node in nodes],
        "uid": [node.uid for node in nodes], "uid_hash": [node.uid_hash for node in nodes],
        "parallelism": [node.parallelism for node in nodes],
        "max_parallelism": [graph.effective_max_parallelism(node) for node in nodes],
        "v2_id": [p.generated.hex() for p in p2], "v3_id": [p.generated.hex() for p in p3],
        "v2_alternatives": [[a.hex() for a in p.alternatives] for p in p2],
        "v3_alternatives": [[a.hex() for a in p.alternatives] for p in p3],
        "v2_job_vertex": [v[0] for v in vertices], "v3_job_vertex": [v[1] for v in vertices],
        "chain_position": [v[2] for v in vertices], "chain_length": [v[3] for v in vertices],
        "id_changes": [m.changed for m in moved], "restores_by": [m.restores_by for m in moved],
    }


def error_row(job: str, spec_path: str, message: str) -> dict[str, Any]:
    return {"job": job, "spec": spec_path, "error": message}


def _arrow_schema() -> pa.Schema:
    return common.arrow_schema(SCHEMA_DDL)


def ids_partition(batches: Iterator[pa.RecordBatch], flink_version: str | None,
                  progress: tuple[str, int] | None = None, hasher: Any | None = None) -> Iterator[pa.RecordBatch]:
    """Executor side: every (job, spec) of the task -> node rows, as Arrow batches.

    `hasher`: `common.hasher_use`'s accumulator, told which hasher implementation this worker ran."""
    from hashing.errors import InputError
    from spark_jobs.progress import Ticker
    from upgrade_gate.storage.objects import read_graph

    ticker = Ticker(progress)

    common.tune_worker_gc()
    common.note_hasher(hasher)
    pending = ColumnBuffer(_arrow_schema())
    client = None
    for batch in batches:
        for job, path in zip(batch.column("job").to_pylist(), batch.column("spec").to_pylist(), strict=True):
            try:
                if client is None and path.startswith(("s3://", "s3a://")):
                    client = common.s3_client()
                pending.add(graph_columns(job, path, read_graph(path, client=client).graph, flink_version))
            except InputError as exc:
                pending.add_row(error_row(job, path, str(exc)))
            except Exception as exc:  # an S3 failure or a bug must name the job, not kill the fleet run
                pending.add_row(error_row(job, path, f"{type(exc).__name__}: {exc}"))
            ticker.tick()
            if len(pending) >= _ROWS_PER_BATCH:
                yield pending.take()
    ticker.close()
    if len(pending):
        yield pending.take()


def ids_rows(jobs: DataFrame, flink_version: str | None = None,
             progress: tuple[str, int] | None = None, hasher: Any | None = None) -> ArrowRows:
    """(job, spec) rows -> one row per stream node (`SCHEMA_DDL`), computed by the core in executors.

    `progress`: the driver's `progress.Progress.address`, which each task tells how many jobs it did;
    `hasher`: a `common.hasher_use` accumulator, which each task tells which hasher it ran."""
    return ArrowRows(jobs.select("job", "spec"), lambda it: ids_partition(it, flink_version, progress, hasher),
                     SCHEMA_DDL)


def fleet_ids(jobs: DataFrame, flink_version: str | None = None) -> DataFrame:
    """The node rows as a DataFrame (`write_table(ids_rows(...))` is the faster way to store them)."""
    return ids_rows(jobs, flink_version).frame()


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="spark-submit spark_jobs/fleet_ids.py",
        description="V2 and V3 operator ids (and the V2->V3 mapping) of every job graph spec in a catalogue, "
                    "as one Parquet row per stream node.")
    p.add_argument("--catalogue", required=True, help="folder or s3://bucket/prefix of graph specs (JSON/YAML)")
    p.add_argument("--flink-version", default=None,
                   help=f"Flink version that runs the jobs (default: newest, {DEFAULT_FLINK_VERSION})")
    common.add_spark_arguments(p, "Parquet table to write (replaced atomically with --overwrite)")
    return p


def _run(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    log, spark = common.start(JOB, args.master, python_bound=True)
    t = time.perf_counter()
    rows = catalogue_rows(args.catalogue)
    jobs = catalogue(spark, args.catalogue, args.partitions, rows)
    log.info("catalogue %s: %d specs in %d tasks", args.catalogue, len(rows), jobs.rdd.getNumPartitions())
    hasher = common.hasher_use(spark)
    with Progress.for_session(spark, log, JOB, len(rows), args.progress_interval) as progress:
        write_table(ids_rows(jobs, args.flink_version, progress.address, hasher), args.output,
                    overwrite=args.overwrite)
    log.info("hasher: %s (what the executors ran: hashing/_fastids, or the Python rules)", common.hasher_used(hasher))
    nodes, failed = 0, set()
    for batch in table_batches(args.output, ["job", "error"]):  # local or s3:// (manifest), one batch at a time
        bad = batch.filter(batch.column("error").is_valid())
        nodes += batch.num_rows - bad.num_rows
        failed.update(bad.column("job").to_pylist())
    log.info("wrote %s: %d nodes, %d jobs with errors, in %.1f s", args.output, nodes, len(failed),
             time.perf_counter() - t)
    return 0


def main(argv: list[str] | None = None) -> int:
    return common.run_main(JOB, _run, argv)


if __name__ == "__main__":
    sys.exit(main())

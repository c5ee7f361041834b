"""state_serializers: every state of every job's newest savepoint, with its serializer, one row each.

The question it answers before a Flink 2.x upgrade wave: "which of our jobs hold Kryo state, and which of
those would restore corrupted?" Flink 2.0 moved its bundled Kryo from 2 to 5; what Kryo 2 wrote for a Java
collection or with a registered custom serializer, Kryo 5 misreads (docs/guide.md, "Fleet: which jobs hold
Kryo state"). Each state handle starts with its serialization proxy, which names every state and its
serializer snapshots, so the savepoints already hold the answer.

Input: the same as `savepoint_scan` (a root whose children are the jobs' savepoint prefixes, or a
CSV/JSON/Parquet `job, savepoint` list); each job's newest complete savepoint is chosen as
`upgrade-gate inspect` chooses it. The `_metadata` and the first bytes of every managed state handle are read
in the executors by the product's readers (`upgrade_gate.flink.metadata`, `upgrade_gate.flink.state_meta`;
S3 by ranged GETs with boto3). The Kryo columns come from the gate's own rule
(`upgrade_gate.gate.state_schema_rules.kryo_misreads`): never re-derived here.

Output: a Parquet table (`SCHEMA_DDL`), one row per (job, operator, state): kind (value, list, map, reducing,
aggregating, timers; list, union, broadcast), distribution mode, TTL, the compact serializer type, the
state's serializer snapshot class and version, the key serializer, and
  * `kryo`: a Kryo serializer anywhere in the state's serializers (a POJO field, a list element, ...);
  * `kryo_collection_or_custom`: one of them is a Java collection or has a custom Kryo serializer: what
    Flink 2.x reads back wrong from a savepoint Flink 1.x wrote (`kryo_reason` says why);
  * `written_by_1x`: the savepoint is Flink 1.x's (`_metadata` v4 or older): upgrading it to 2.x crosses
    the Kryo 2 -> 5 line.
A job whose savepoint cannot be read gets one row with `error`; an operator whose state files cannot be
read, one row with `state` null and `error` naming the file.

    spark-submit spark_jobs/state_serializers.py --savepoints s3://bucket/savepoints --output /data/serializers
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if __package__ in (None, ""):  # run as a file by spark-submit: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from spark_jobs import columns, common, savepoint_scan
from spark_jobs.columns import Columns
from spark_jobs.parquet_output import ArrowRows

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["KRYO_JOBS_SQL", "SCHEMA_DDL", "kryo_summary", "serializer_rows", "state_serializers", "summarize_rows",
           "summarize_table"]

JOB = "state_serializers"
SCHEMA_DDL = (
    "job string, savepoint string, metadata string, metadata_version int, written_by_1x boolean, "
    "operator_id string, name string, uid string, state string, kind string, backend_type string, "
    "distribution_mode string, ttl boolean, serializer string, serializer_class string, serializer_version int, "
    "key_serializer string, kryo boolean, kryo_types array<string>, kryo_collection_or_custom boolean, "
    "kryo_reason string, error string"
)

# The fleet question as one query over the table (registered as the view `state_serializers`): every job
# holding Kryo state, how many states, which of them Flink 2.x misreads, and whether a 1.x -> 2.x upgrade
# restores them corrupted (the savepoint was written by Flink 1.x).
KRYO_JOBS_SQL = """
SELECT job,
       max(written_by_1x AND kryo_collection_or_custom) AS corrupted_on_2x,
       count(*) AS kryo_states,
       count_if(kryo_collection_or_custom) AS misread_states,
       sort_array(collect_set(CASE WHEN kryo_collection_or_custom THEN state END)) AS misread
FROM state_serializers
WHERE kryo
GROUP BY job
ORDER BY corrupted_on_2x DESC, job
"""


def serializer_rows(job: str, savepoint: str, client: Any | None) -> list[dict[str, Any]]:
    """Find and read one job's newest savepoint and its state handles' proxies; one row per state."""
    from upgrade_gate.flink.state_meta import read_state_schemas
    from upgrade_gate.gate.state_schema_rules import crosses_kryo_upgrade, kryo_misreads
    from upgrade_gate.storage.savepoints import load_newest_complete
    from upgrade_gate.storage.state_files import state_stream_opener

    loaded = load_newest_complete(savepoint, client=client, job_folder=True)  # skips a half-written one
    meta = loaded.metadata
    # tolerant: one unreadable or unparsable state file is that operator's error row, not the job's
    schemas = read_state_schemas(meta, state_stream_opener(client), tolerant=True)
    judged: dict[tuple[str, str], list[Any]] = {}
    for m in kryo_misreads(schemas):
        judged.setdefault((m.operator.operator_id, m.state.name), []).append(m)
    head = {"job": job, "savepoint": savepoint, "metadata": loaded.source, "metadata_version": meta.version,
            "written_by_1x": crosses_kryo_upgrade(meta, 2), "error": None}
    rows: list[dict[str, Any]] = []
    for op in schemas:
        where = {**head, "operator_id": op.operator_id, "name": op.name, "uid": op.uid}
        key = op.key_serializer.describe() if op.key_serializer is not None else None
        for s in op.states:
            value = s.serializer("VALUE_SERIALIZER")
            found = judged.get((op.operator_id, s.name), [])
            misread = [m for m in found if m.blocking]
            reason = "; ".join(f"{m.path + ': ' if m.path else ''}{m.why}" for m in misread) or None
            rows.append({**where, "state": s.name, "kind": s.kind, "backend_type": s.backend_type,
                         "distribution_mode": s.option("OPERATOR_STATE_DISTRIBUTION_MODE"), "ttl": s.ttl,
                         "serializer": value.describe() if value else None,
                         "serializer_class": value.class_name if value else None,
                         "serializer_version": value.version if value else None,
                         "key_serializer": key if s.backend_type in ("KEY_VALUE", "KEY_VALUE_V2", "PRIORITY_QUEUE")
                         else None,
                         "kryo": bool(found), "kryo_types": sorted({m.snapshot.type_name or "?" for m in found}),
                         "kryo_collection_or_custom": bool(misread),
                         "kryo_reason": reason})
        for note in op.incomplete:
            rows.append({**where, "error": f"state serializers not read: {note}"})
    return rows or [head]


def _serializer_columns(job: str, savepoint: str, client: Any | None) -> Columns:
    return columns.from_rows(serializer_rows(job, savepoint, client))


def scan_rows(jobs: DataFrame, progress: tuple[str, int] | None = None, loop: Any | None = None) -> ArrowRows:
    """(job, savepoint) rows -> one row per state of each job's newest savepoint (`loop`: as savepoint_scan's)."""
    return ArrowRows(jobs.select("job", "savepoint"),
                     lambda it: savepoint_scan.scan_partition(it, progress, _serializer_columns, SCHEMA_DDL, loop),
                     SCHEMA_DDL)


def state_serializers(jobs: DataFrame) -> DataFrame:
    """The state rows as a DataFrame (`write_table(scan_rows(...))` is the faster way to store them)."""
    return scan_rows(jobs).frame()


_SUMMARY_COLUMNS = ["job", "kryo", "kryo_collection_or_custom", "written_by_1x", "error"]


class _JobFlags:
    """One job's Kryo flags, folded row by row (the summary's per-job state: a few ints, never the rows)."""

    __slots__ = ("errors", "kryo", "misread", "misread_states", "written_by_1x")

    def __init__(self) -> None:
        self.kryo = self.misread = self.written_by_1x = self.errors = False
        self.misread_states = 0

    def add(self, row: dict[str, Any]) -> None:
        self.kryo |= bool(row["kryo"])
        self.misread |= bool(row["kryo_collection_or_custom"])
        self.written_by_1x |= bool(row["written_by_1x"])
        self.misread_states += 1 if row["kryo_collection_or_custom"] else 0
        self.errors |= row["error"] is not None


def _summary(per_job: dict[str, _JobFlags]) -> dict[str, Any]:
    corrupted = sorted(((job, f.misread_states) for job, f in per_job.items() if f.misread and f.written_by_1x),
                       key=lambda x: (-x[1], x[0]))
    return {"jobs": len(per_job), "jobs_with_kryo": sum(1 for f in per_job.values() if f.kryo),
            "jobs_with_kryo_collection_or_custom": sum(1 for f in per_job.values() if f.misread),
            "jobs_corrupted_on_2x": len(corrupted),
            "corrupted_jobs": [{"job": j, "states": n} for j, n in corrupted[:50]],
            "jobs_not_read": sum(1 for f in per_job.values() if f.errors)}


def summarize_rows(rows: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The counts the fleet summary shows (`kryo_state` in fleet.html.j2): jobs scanned, jobs holding Kryo
    state, jobs with Kryo collections or custom Kryo serializers, and how many of those a 1.x -> 2.x upgrade
    restores corrupted (named, worst first, at most 50)."""
    per_job: dict[str, _JobFlags] = {}
    for r in rows:
        per_job.setdefault(r["job"], _JobFlags()).add(r)
    return _summary(per_job)


def summarize_table(table: str) -> dict[str, Any]:
    """`summarize_rows` over the written table, batch by batch in the driver (local or s3:// with its
    manifest): the fleet DAG's summary without a second Spark job over the rows."""
    from spark_jobs.parquet_output import table_batches

    return summarize_rows(r for batch in table_batches(table, _SUMMARY_COLUMNS) for r in batch.to_pylist())


def kryo_summary(table: DataFrame) -> dict[str, Any]:
    """`summarize_rows` of a Spark table of these rows (an interactive session's DataFrame)."""
    return summarize_rows(r.asDict() for r in table.select(*_SUMMARY_COLUMNS).toLocalIterator())


def build_parser() -> argparse.ArgumentParser:
    p = savepoint_scan.savepoints_parser(
        "spark-submit spark_jobs/state_serializers.py",
        "For every job, the newest complete savepoint under its prefix -> one Parquet row per state (kind, "
        "serializer class and version, Kryo flags from the gate's Kryo 2 -> 5 rule).")
    p.add_argument("--summary", default=None, metavar="FILE",
                   help="also write the fleet's Kryo counts as JSON here (local or s3://): what the fleet report "
                        "shows as `kryo_state`")
    return p


def _run(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    log, _spark, t = savepoint_scan.scan_fleet(args, JOB, scan_rows)
    summary = summarize_table(args.output)  # local or s3:// (manifest), one batch at a time
    if args.summary:
        common.write_json(summary, args.summary, overwrite=True)
    log.info("wrote %s: states of %d jobs in %.1f s; %d jobs hold Kryo state, %d with Kryo collections or "
             "custom Kryo serializers, %d of them restore corrupted on Flink 2.x", args.output,
             summary["jobs"], time.perf_counter() - t, summary["jobs_with_kryo"],
             summary["jobs_with_kryo_collection_or_custom"], summary["jobs_corrupted_on_2x"])
    return 0


def main(argv: list[str] | None = None) -> int:
    return common.run_main(JOB, _run, argv)


if __name__ == "__main__":
    sys.exit(main())

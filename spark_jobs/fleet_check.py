"""fleet_check: the gate's verdict for every job of a fleet, and one summary a DAG can gate on.

Pairs, by job, the `fleet_ids` table of the *new* graphs (which spec each job will run) with the
`savepoint_scan` table (which `_metadata` each job would restore from) in the driver
(`fleet_inputs`), then runs the product's
restore simulator (`upgrade_gate.gate.check.check`, the same call `upgrade-gate check` makes) once
per job inside the executors. Per-job options (hasher, matching, allowNonRestoredState, Flink
version) come from an optional plan (CSV/JSON/Parquet with a `job` column), else from the flags.

Outputs, in one folder written atomically: `verdicts/` (Parquet, one row per job: verdict, whether
the restore succeeds, Flink's own error text, state and lost bytes, the losses and remedies as
JSON, and for a blocked job whether `upgrade-gate repair` would make it SAFE: `repair`, planned in memory,
nothing written) and `summary.json`: counts per verdict, bytes at risk, how many blocked jobs are repairable,
the worst jobs, jobs that could not be checked, and `gate` = PASS only when every job passes the gate policy
(`upgrade_gate.gate.policy`: SAFE, or with `--waivers` every loss waived for that job). A job missing
from one side, or whose spec or savepoint is unreadable, is reported with `error` (verdict null) and blocks
the gate.

    spark-submit spark_jobs/fleet_check.py --ids /data/fleet-ids --scan /data/scan --output /data/check
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if __package__ in (None, ""):  # run as a file by spark-submit: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hashing.versions import FlinkVersion
from spark_jobs import common, fleet_inputs
from spark_jobs.parquet_output import ArrowRows, table_seconds, write_table
from spark_jobs.progress import Progress
from upgrade_gate.gate import policy
from upgrade_gate.gate.check import check
from upgrade_gate.gate.inputs import CheckInputs, CheckOptions, GraphSide, side_of
from upgrade_gate.gate.state_roles import Role
from upgrade_gate.storage.state_files import state_stream_opener
from upgrade_gate.vocabulary import (
    DEFAULT_FLINK_VERSION,
    DEFAULT_HASHER,
    DEFAULT_MATCHING,
    HASHERS,
    MATCHING_MODES,
    Verdict,
)

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from hashing.readers import LoadedGraph
    from upgrade_gate.flink.metadata.model import CheckpointMetadata
    from upgrade_gate.flink.state_meta.streams import Opener

JOB = "fleet_check"
SCHEMA_DDL = (
    "job string, spec string, metadata string, hasher string, matching string, allow_non_restored_state boolean, "
    "flink_version string, verdict string, restore_succeeds boolean, flink_error string, operators int, "
    "state_bytes long, lost_bytes long, lost_operators int, verdict_with_remedies string, losses string, "
    "remedies string, warnings array<string>, error string, operator_rows string, repair string, "
    "gate_passes boolean, gate string"
)
# per-operator rows for the fleet reports of blocked jobs (the ones a person opens); SAFE jobs keep the
# table small and the fleet fast
_ROW_FIELDS = ("operator_id", "name", "uid", "matched_by", "new_node_name", "state_bytes", "lost_bytes", "state_names")
DEFAULT_WORST = 20


def check_job(spec: str, metadata: str, *, hasher: str, matching: str, allow_non_restored_state: bool,
              flink_version: str | None, client: Any | None = None, old_spec: str | None = None,
              job: str | None = None, gating: policy.GatePolicy = policy.DEFAULT_POLICY) -> dict[str, Any]:
    """One job through the simulator: read the savepoint and the spec, `gate.check.check`, summarise."""
    from upgrade_gate.storage.objects import read_graph
    from upgrade_gate.storage.savepoints import load_savepoint

    savepoint = load_savepoint(metadata, client=client)
    # the whole LoadedGraph, descriptive node fields included: the misrouting check pairs operators by them,
    # exactly as the CLI and the Airflow gate do
    graph = read_graph(spec, client=client)
    old = read_graph(old_spec, client=client) if old_spec else None
    return check_parsed(savepoint, graph, hasher=hasher, matching=matching,
                        allow_non_restored_state=allow_non_restored_state, flink_version=flink_version, old=old,
                        client=client, job=job, gating=gating)


def check_parsed(savepoint: CheckpointMetadata, graph: LoadedGraph, *, hasher: str, matching: str,
                 allow_non_restored_state: bool, flink_version: str | None,
                 old: LoadedGraph | None = None, client: Any | None = None, job: str | None = None,
                 gating: policy.GatePolicy = policy.DEFAULT_POLICY) -> dict[str, Any]:
    """`check_job` of a savepoint and graph already read (`fleet_gate` reads each once for its three tables).
    `gating`: the waivers file's policy, applied to this `job` by `upgrade_gate.gate.policy` (`gate_passes`, and
    for a non-SAFE job the decision as JSON in `gate`)."""
    options = CheckOptions(hasher, matching, FlinkVersion.parse(flink_version), allow_non_restored_state,
                           rescale_detail=False, with_migration=False)
    # one side per graph and one opener for the check and its repair offer: the plan finds the check's restore
    # pass by these (`gate.check.restore_pass`) instead of simulating it again
    new_side, old_side = side_of(graph), side_of(old) if old is not None else None
    opener = state_stream_opener(client)
    checked = check(CheckInputs(savepoint, new_side, options, old_side, open_state=opener))
    result = checked.to_json()
    state_ops = [op for op in result["operators"] if op.get("note") is None]
    decision = gating.decide(result, job=job)
    return {
        "gate_passes": decision.passes,
        "gate": json.dumps(decision.to_json()) if policy.blocks(result["verdict"]) else None,
        "verdict": result["verdict"], "restore_succeeds": result["restore_succeeds"],
        "flink_error": result["flink_error"], "flink_version": result["flink_version"],
        "operators": len(state_ops), "state_bytes": sum(op["state_bytes"] for op in state_ops),
        "lost_bytes": sum(op["lost_bytes"] for op in state_ops),
        "lost_operators": len({x["operator_id"] for x in result["losses"]}),
        "verdict_with_remedies": result["verdict_with_remedies"],
        "losses": json.dumps(result["losses"]), "remedies": json.dumps(result["remedies"]),
        "warnings": list(result["warnings"]),
        "operator_rows": json.dumps([{k: op.get(k) for k in _ROW_FIELDS} for op in result["operators"]])
        if policy.blocks(result["verdict"]) else None,
        "repair": _repair_offer(checked, savepoint, (new_side, graph), (old_side, old), hasher, matching,
                                flink_version, opener)
        if policy.blocks(result["verdict"]) else None,
    }


def _repair_offer(checked: Any, savepoint: CheckpointMetadata, new: tuple[GraphSide, LoadedGraph],
                  old: tuple[GraphSide | None, LoadedGraph | None], hasher: str, matching: str,
                  flink_version: str | None, opener: Opener) -> str | None:
    """Would `upgrade-gate repair` make this blocked job SAFE (docs/guide.md, "When the gate says no")?
    `upgrade_gate.repair.offer`, planned in memory in the executor: nothing is written. JSON, or None.
    `new` / `old`: the sides the check judged, with the graphs they were read from (their locations name them)."""
    from upgrade_gate.repair.offer import repair_offer
    offer = repair_offer(checked, savepoint, new[0], old=old[0], hasher=hasher, matching=matching,
                         flink_version=flink_version, opener=opener, savepoint=savepoint.source,
                         graph=new[1].origin, old_graph=old[1].origin if old[1] is not None else None)
    return json.dumps(offer) if offer is not None else None


def check_partition(batches: Iterator[pa.RecordBatch], progress: tuple[str, int] | None = None,
                    hasher: Any | None = None, gating: policy.GatePolicy = policy.DEFAULT_POLICY
                    ) -> Iterator[pa.RecordBatch]:
    """Executor side: every job of the task through `check_job`; failures become an `error` row.

    `hasher`: `common.hasher_use`'s accumulator, told which hasher implementation this worker ran."""
    import pyarrow as pa

    from hashing.errors import InputError
    from spark_jobs.progress import Ticker

    ticker = Ticker(progress)

    common.tune_worker_gc()
    common.note_hasher(hasher)
    schema = common.arrow_schema(SCHEMA_DDL)
    client = None
    for batch in batches:
        rows = []
        for row in batch.to_pylist():
            out = {k: row.get(k) for k in ("job", "spec", "metadata", "hasher", "matching",
                                           "allow_non_restored_state", "flink_version")}
            ticker.tick()
            if row["input_error"] is not None:
                rows.append({**out, "error": row["input_error"]})
                continue
            try:
                if client is None and (row["metadata"].startswith("s3") or row["spec"].startswith("s3")):
                    client = common.s3_client()
                out.update(check_job(row["spec"], row["metadata"], hasher=row["hasher"], matching=row["matching"],
                                     allow_non_restored_state=bool(row["allow_non_restored_state"]),
                                     flink_version=row["flink_version"], client=client,
                                     old_spec=row.get("old_spec"), job=row["job"], gating=gating))
            except (InputError, common.JobError) as exc:
                out["error"] = str(exc)
            except Exception as exc:  # a bug or an S3 outage must name the job, not end the fleet run
                out["error"] = f"{type(exc).__name__}: {exc}"
            rows.append(out)
        yield pa.RecordBatch.from_pylist(rows, schema=schema)
    ticker.close()


def check_rows(inputs: DataFrame, partitions: int | None = None, progress: tuple[str, int] | None = None
               ) -> ArrowRows:
    """`fleet_inputs.INPUT_DDL` rows -> one verdict row per job (`SCHEMA_DDL`), simulated in the executors.

    `progress`: the driver's `progress.Progress.address`, which each task tells how many jobs it did."""
    if partitions:
        inputs = inputs.repartition(partitions)
    return ArrowRows(inputs, lambda it: check_partition(it, progress), SCHEMA_DDL)


def fleet_check(inputs: DataFrame, partitions: int | None = None) -> DataFrame:
    """The verdict rows as a DataFrame (`write_table(check_rows(...))` is the faster way to store them)."""
    return check_rows(inputs, partitions).frame()


SUMMARY_COLUMNS = ("job", "verdict", "state_bytes", "lost_bytes", "lost_operators", "flink_error",
                   "verdict_with_remedies", "losses", "error", "repair", "gate_passes", "gate")


def read_verdicts(spark: SparkSession, table: str) -> list[dict[str, Any]]:
    """The verdict table's `SUMMARY_COLUMNS`, one dict per job (a fleet's jobs fit in the driver).

    Read with pyarrow (a local table, or an `s3://` one through its manifest): the same few queries
    in Spark SQL cost a fresh JVM 3-4 s, and could not read `s3://` without the s3a connector."""
    from spark_jobs.parquet_output import read_table

    return read_table(table, columns=list(SUMMARY_COLUMNS)).to_pylist()


def _read_verdicts_spark(spark: SparkSession, table: str) -> list[dict[str, Any]]:
    return [r.asDict() for r in spark.read.parquet(table).select(*SUMMARY_COLUMNS).collect()]


class _Summary:
    """The gate document, accumulated row by row: counts and sums, plus only the `worst` worst jobs and
    the `worst` first unchecked jobs (by name), so a fleet's summary needs no list of all its rows."""

    def __init__(self, worst: int) -> None:
        self.worst = worst
        self.counts: dict[str, int] = {}
        self.jobs = self.state = self.lost = self.blocked = self.repairable = self.passed = self.waived = 0
        self.worst_rows: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
        self.errors: list[tuple[str, dict[str, Any]]] = []
        self.roles: dict[str, int] = {}  # role -> blocked jobs with state of that role at risk (gate.state_roles)

    def add(self, r: dict[str, Any]) -> None:
        verdict = r["verdict"] or "ERROR"
        self.counts[verdict] = self.counts.get(verdict, 0) + 1
        self.jobs += 1
        self.state += r["state_bytes"] or 0
        self.lost += r["lost_bytes"] or 0
        if r["verdict"] == Verdict.RESTORE_FAILS:
            self.blocked += r["state_bytes"] or 0
        if r.get("repair") and json.loads(r["repair"]).get("repairable"):
            self.repairable += 1
        if r.get("gate_passes"):  # SAFE, or its losses waived / below the waivers file's fail_on
            self.passed += 1
            self.waived += r["verdict"] != Verdict.SAFE
        if r["verdict"] and policy.blocks(r["verdict"]):
            for role in {x.get("role") for x in json.loads(r["losses"] or "[]")} - {None}:
                self.roles[role] = self.roles.get(role, 0) + 1
            key = (-Verdict(r["verdict"]).severity, -(r["lost_bytes"] or 0), -(r["state_bytes"] or 0), r["job"])
            self.worst_rows.append((key, r))
            if len(self.worst_rows) > 4 * self.worst + 64:
                self.worst_rows = sorted(self.worst_rows, key=lambda kr: kr[0])[:self.worst]
        if r["error"] is not None:
            self.errors.append((r["job"], r))
            if len(self.errors) > 4 * self.worst + 64:
                self.errors = sorted(self.errors, key=lambda kr: kr[0])[:self.worst]

    def doc(self) -> dict[str, Any]:
        worst_rows = [r for _, r in sorted(self.worst_rows, key=lambda kr: kr[0])[:self.worst]]
        errors = [r for _, r in sorted(self.errors, key=lambda kr: kr[0])[:self.worst]]
        by_verdict = {v.value: self.counts.get(v, 0) for v in Verdict.mildest_first()}
        return {
            # every job checked and let through by `upgrade_gate.gate.policy` (SAFE, or every loss waived)
            "gate": "PASS" if self.jobs and self.passed == self.jobs else "BLOCK",
            "waived_jobs": self.waived,
            "jobs": self.jobs,
            "verdicts": by_verdict,
            "errors": self.counts.get("ERROR", 0),
            "bytes_at_risk": self.lost,
            "state_bytes": self.state,
            "state_bytes_in_failing_restores": self.blocked,
            # blocked jobs `upgrade-gate repair` would make SAFE (planned in memory, nothing written)
            "repairable_jobs": self.repairable,
            # what the blocked jobs would do to the data: jobs per role of the state at risk, most consequential first
            "jobs_by_role_at_risk": {str(role): self.roles[role] for role in Role if role in self.roles},
            "worst_jobs": [{"job": r["job"], "verdict": r["verdict"], "lost_bytes": r["lost_bytes"],
                            "state_bytes": r["state_bytes"], "lost_operators": r["lost_operators"],
                            "flink_error": r["flink_error"], "verdict_with_remedies": r["verdict_with_remedies"],
                            "losses": json.loads(r["losses"] or "[]")[:5],
                            "repair": json.loads(r["repair"]) if r.get("repair") else None,
                            "gate": json.loads(r["gate"]) if r.get("gate") else None} for r in worst_rows],
            "unchecked_jobs": [{"job": r["job"], "error": r["error"]} for r in errors],
        }


def summarize(verdicts: Iterable[dict[str, Any]], worst: int = DEFAULT_WORST) -> dict[str, Any]:
    """The gate document: PASS only if every job was checked and is SAFE."""
    acc = _Summary(worst)
    for r in verdicts:
        acc.add(r)
    return acc.doc()


def summarize_table(table: str, worst: int = DEFAULT_WORST) -> dict[str, Any]:
    """`summarize` over a verdict table read batch by batch: the driver never holds every job's row
    (each blocked job's losses are JSON of a few KB; 100,000 of them would be hundreds of MB)."""
    from spark_jobs.parquet_output import table_batches

    return summarize((r for batch in table_batches(table, list(SUMMARY_COLUMNS)) for r in batch.to_pylist()), worst)


def run_check(spark: SparkSession, ids_table: str, scan_table: str, output: str, *, plan: str | None = None,
              old_ids_table: str | None = None,
              hasher: str = "v2", matching: str = "fixed", allow_non_restored_state: bool = False,
              flink_version: str | None = None, partitions: int | None = None, worst: int = DEFAULT_WORST,
              overwrite: bool = False, progress_interval: float = 5.0,
              gating: policy.GatePolicy = policy.DEFAULT_POLICY) -> dict[str, Any]:
    """The whole job: `verdicts/` and `summary.json` under `output`, written atomically; returns the summary.
    `gating`: the waivers file's policy (`read_gating`), decided per job in the executors.

    The summary's `timings` says how long each phase took: the input tables' own writes (from their
    manifests, when they have one), pairing the inputs, the checks, and the summary itself."""
    log = common.get_logger(JOB)
    started = time.perf_counter()
    staged = staging_folder(output)
    try:
        tasks = common.default_partitions(spark, partitions, 1 << 30)
        total, parts = fleet_inputs.stage_inputs(fleet_inputs.iter_inputs(
            spark, ids_table, scan_table, plan=plan, old_ids_table=old_ids_table, hasher=hasher, matching=matching,
            allow_non_restored_state=allow_non_restored_state, flink_version=flink_version), staged, tasks)
        inputs = spark.sparkContext.parallelize([(p,) for p in parts], max(1, len(parts))).toDF("part string")
        return _check_staged(spark, inputs, staged, total, output, started, ids_table, scan_table, log,
                             progress_interval=progress_interval, worst=worst, overwrite=overwrite, gating=gating)
    finally:
        fleet_inputs.remove_staged(staged)


def staging_folder(output: str) -> str:
    """Beside the output, never inside it: the inputs are not part of what the check writes."""
    loc = common.parse_location(output)
    name = f".{loc.path.rstrip('/').rsplit('/', 1)[-1]}.inputs-{uuid.uuid4().hex[:12]}"
    if loc.scheme == "s3":
        parent = loc.path.rstrip("/").rsplit("/", 1)[0] if "/" in loc.path.rstrip("/") else ""
        return f"s3://{loc.bucket}/{parent + '/' if parent else ''}{name}"
    return str(Path(loc.path).resolve().parent / name)


def _check_staged(spark: SparkSession, inputs: DataFrame, staged: str, total: int, output: str, started: float,
                  ids_table: str, scan_table: str, log: Any, *, progress_interval: float, worst: int,
                  overwrite: bool, gating: policy.GatePolicy) -> dict[str, Any]:
    paired = time.perf_counter()
    with common.atomic_output(output, overwrite=overwrite) as tmp:
        target = common.parse_location(tmp)
        verdict_path = target.child("verdicts").uri
        hasher = common.hasher_use(spark)
        with Progress.for_session(spark, log, JOB, total, progress_interval) as progress:
            address = progress.address
            rows = ArrowRows(inputs, lambda it: check_partition(fleet_inputs.staged_batches(it, staged), address,
                                                                hasher, gating), SCHEMA_DDL)
            # on s3:// the old summary goes before the verdicts commit (write_tables' before_commit)
            write_table(rows, verdict_path, overwrite=overwrite,
                        before_commit=lambda: common.remove_object(target.child("summary.json").uri))
        checked = time.perf_counter()
        summary = summarize_table(verdict_path, worst)
        # which hasher the executors ran (a cluster ships our code as a zip: common.compiled_hasher_file)
        summary["hasher_implementation"] = common.hasher_used(hasher)
        log.info("hasher: %s (what the executors ran: hashing/_fastids, or the Python rules)",
                 summary["hasher_implementation"])
        summary["timings"] = {
            **{f"{name}_write_s": s for name, s in (("fleet_ids", table_seconds(ids_table)),
                                                     ("savepoint_scan", table_seconds(scan_table))) if s is not None},
            "pair_inputs_s": round(paired - started, 3), "check_s": round(checked - paired, 3),
            "summary_s": round(time.perf_counter() - checked, 3),
            "fleet_check_s": round(time.perf_counter() - started, 3)}
        common.write_json(summary, target.child("summary.json").uri, overwrite=True)
    return summary


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="spark-submit spark_jobs/fleet_check.py",
        description="Simulate the restore of every job's newest savepoint into its new graph: a verdict table "
                    "and a summary.json (counts per verdict, bytes at risk, worst jobs, gate PASS/BLOCK).")
    p.add_argument("--ids", required=True, help="fleet_ids output (Parquet) of the NEW graphs")
    p.add_argument("--scan", required=True, help="savepoint_scan output (Parquet)")
    p.add_argument("--old-ids", default=None,
                   help="fleet_ids output of the graphs running today (optional): lets the simulator tell misrouted "
                        "state (STATE_MISROUTED) from lost state")
    add_check_options(p)
    common.add_spark_arguments(p, "folder for verdicts/ and summary.json (atomic)")
    return p


def add_check_options(p: argparse.ArgumentParser) -> None:
    """The per-job options of a check (a plan, else these flags), shared with `fleet_gate`."""
    p.add_argument("--plan", default=None,
                   help="per-job options (CSV/JSON/Parquet): job[, hasher, matching, allow_non_restored_state, "
                        "flink_version]; missing values fall back to the flags below")
    p.add_argument("--hasher", default=DEFAULT_HASHER, choices=HASHERS)
    p.add_argument("--matching", default=DEFAULT_MATCHING, choices=MATCHING_MODES)
    p.add_argument("--allow-non-restored-state", action="store_true")
    p.add_argument("--flink-version", default=None,
                   help=f"Flink version that will run the new jobs (default {DEFAULT_FLINK_VERSION})")
    p.add_argument("--worst", type=int, default=DEFAULT_WORST, help="how many worst jobs the summary lists")
    p.add_argument("--waivers", default=None, metavar="FILE",
                   help="the repository's .upgrade-gate.yaml (path or s3:// URI): intended losses, each for one job "
                        "(`job:`) or any, and the fail_on threshold; a job whose every loss is waived passes the gate "
                        "(docs/guide.md, \"Recording an intended loss\")")


def read_gating(location: str | None) -> policy.GatePolicy:
    """The waivers file's policy, read once in the driver (before Spark starts: a bad file fails at once, exit 2),
    with today's UTC date fixed for the whole run."""
    from datetime import UTC, datetime

    from upgrade_gate.storage.waivers import read_policy_file

    today = datetime.now(UTC).date()
    if not location:
        return policy.GatePolicy(today=today)
    found = read_policy_file(location, client=common.s3_client() if location.startswith(("s3://", "s3a://"))
                             else None)
    return policy.GatePolicy(found.waivers, found.fail_on or policy.DEFAULT_FAIL_ON, today)


def check_options(args: argparse.Namespace) -> dict[str, Any]:
    """`add_check_options`' values, plus the Spark arguments, as `run_check` / `run_gate` keywords."""
    return {"gating": read_gating(args.waivers), "plan": args.plan, "hasher": args.hasher, "matching": args.matching,
            "allow_non_restored_state": args.allow_non_restored_state, "flink_version": args.flink_version,
            "partitions": args.partitions, "worst": args.worst, "overwrite": args.overwrite,
            "progress_interval": args.progress_interval}


def report(log: Any, summary: dict[str, Any], started: float) -> int:
    """The closing log line, the one-line JSON a caller parses (the last line of stdout), the exit code."""
    log.info("%d jobs: %s, %d unchecked; %d bytes at risk; gate %s (%.1f s)", summary["jobs"], summary["verdicts"],
             summary["errors"], summary["bytes_at_risk"], summary["gate"], time.perf_counter() - started)
    print(json.dumps({k: summary[k] for k in ("gate", "jobs", "verdicts", "errors", "bytes_at_risk")}))
    return 0 if summary["gate"] == "PASS" else 1


def _run(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    options = check_options(args)  # the waivers file first: a bad one fails before Spark starts
    log, spark = common.start(JOB, args.master, python_bound=True)
    t = time.perf_counter()
    summary = run_check(spark, args.ids, args.scan, args.output, old_ids_table=args.old_ids, **options)
    return report(log, summary, t)


def main(argv: list[str] | None = None) -> int:
    return common.run_main(JOB, _run, argv)


if __name__ == "__main__":
    sys.exit(main())

"""flink_fleet_scan: every job of the fleet against its newest savepoint, daily.

    fleet_ids (Spark) ──┐
    savepoint_scan (Spark) ┴─ fleet_check (Spark) ──┐
    state_serializers (Spark) ─────────────────────┴─ publish_reports ── alert_incompatible ── summary

`state_serializers` reads every state's serializer from the same savepoints, so the fleet report also says
how many jobs hold Kryo state and which of them a Flink 1.x -> 2.x upgrade would restore corrupted.

The run says what it blocked: `summary` notes "BLOCKED 3 of 4 jobs (…), 12.3 KiB at risk — summary:
<link>" on itself and on the run, and its "Upgrade report" link opens the fleet summary.

Inputs: the catalogue of the *next* job graphs (one spec per job, named by its path) and the
savepoint root (one prefix per job); both default to Airflow Variables
(`upgrade_gate_catalogue`, `upgrade_gate_savepoint_root`). Reports land in the store the UI view
reads; each incompatible job gets the same alert as `flink_upgrade_gate`. Wiring only.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import Param, dag, task
from flink_gate import fleet
from flink_gate.dag_parts import CHECK, check_params, in_section, notifiers, storage_param, waivers_param
from flink_gate.operators.fleet import FleetSummaryOperator
from flink_gate.operators.spark import SparkGateJobOperator
from flink_gate.paths import REPO

WORK = "{{ ti.xcom_pull(task_ids='prepare') }}"
CATALOGUE = "{{ params.catalogue or var.value.get('upgrade_gate_catalogue', '') }}"
SAVEPOINTS = "{{ params.savepoint_root or var.value.get('upgrade_gate_savepoint_root', '') }}"
PARTITIONS = "{{ params.partitions }}"
SPARK = "Spark: where and how wide the scan runs (the spark_default connection names the master)"
SPARK_CONF = {"spark.ui.enabled": "false", "spark.driver.memory": "768m", "spark.sql.shuffle.partitions": "4",
              "spark.default.parallelism": PARTITIONS, "spark.executor.memory": "{{ params.executor_memory }}"}


@dag(
    dag_id="flink_fleet_scan",
    schedule="@daily",
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    # at most two of its three parallel Spark tasks at once: a running task holds its executor slot until it ends
    # (priority only orders the queue), so with parallelism >= 3 a manual gate always finds a free slot instead of
    # waiting for a Spark job (docs/guide.md, "Sharing Airflow with the fleet scan")
    max_active_tasks=2,
    tags=["flink", "upgrade-gate"],
    description="Daily: every job of the fleet against its newest savepoint (Spark); a report per job, an "
                "alert per blocked job, the count of blocked jobs in the run note",
    doc_md=__doc__,
    default_args={"retries": 1, "retry_delay": timedelta(minutes=1)},
    params=in_section(CHECK, {
        "catalogue": Param(None, type=["null", "string"], title="Catalogue of next job graphs",
                           description="Folder or s3:// prefix of graph specs, one per job. Empty: the Variable "
                           "upgrade_gate_catalogue."),
        "savepoint_root": Param(None, type=["null", "string"], title="Savepoint root",
                                description="One prefix per job. Empty: the Variable upgrade_gate_savepoint_root."),
        **check_params(),
        # each entry with `job:` waives a loss of that job only (spark_jobs/fleet_check.py --waivers)
        "waivers": waivers_param(),
        "aws_conn_id": storage_param(),
    }) | in_section(SPARK, {
        "partitions": Param(2, type="integer", minimum=1, maximum=100_000, title="Tasks per Spark job",
                            description="Jobs are dealt out round-robin to this many tasks: at least the number of "
                            "executor cores of the cluster (2 suits the embedded local[2])."),
        "executor_memory": Param("1g", type="string", pattern="^[0-9]+[kmgt]?$", title="Executor memory",
                                 description="spark.executor.memory; a worker must offer at least this much or "
                                 "no executor starts."),
    }),
)
def flink_fleet_scan() -> None:
    @task
    def prepare(**context) -> str:
        d = fleet.fleet_dir(context["ti"].run_id)
        d.mkdir(parents=True, exist_ok=True)
        return str(d)

    work = prepare()
    ids = SparkGateJobOperator(
        task_id="fleet_ids", application=str(REPO / "spark_jobs" / "fleet_ids.py"), conn_id="spark_default",
        application_args=["--catalogue", CATALOGUE, "--output", f"{WORK}/ids", "--overwrite",
                          "--partitions", PARTITIONS, "--flink-version", "{{ params.flink_version }}"],
        aws_conn_id="{{ params.aws_conn_id }}", conf=SPARK_CONF, name="upgrade-gate-fleet-ids")
    scan = SparkGateJobOperator(
        task_id="savepoint_scan", application=str(REPO / "spark_jobs" / "savepoint_scan.py"), conn_id="spark_default",
        application_args=["--savepoints", SAVEPOINTS, "--output", f"{WORK}/scan", "--overwrite",
                          "--partitions", PARTITIONS],
        aws_conn_id="{{ params.aws_conn_id }}", conf=SPARK_CONF, name="upgrade-gate-savepoint-scan")
    serializers = SparkGateJobOperator(
        task_id="state_serializers", application=str(REPO / "spark_jobs" / "state_serializers.py"),
        conn_id="spark_default",
        application_args=["--savepoints", SAVEPOINTS, "--output", f"{WORK}/serializers", "--overwrite",
                          "--partitions", PARTITIONS, "--summary", f"{WORK}/kryo_summary.json"],
        aws_conn_id="{{ params.aws_conn_id }}", conf=SPARK_CONF, name="upgrade-gate-state-serializers",
        summary_path=f"{WORK}/kryo_summary.json")
    check = SparkGateJobOperator(
        task_id="fleet_check", application=str(REPO / "spark_jobs" / "fleet_check.py"), conn_id="spark_default",
        application_args=["--ids", f"{WORK}/ids", "--scan", f"{WORK}/scan", "--output", f"{WORK}/check",
                          "--overwrite", "--partitions", PARTITIONS, "--hasher", "{{ params.hasher }}",
                          "--matching", "{{ params.matching }}",
                          "--flink-version", "{{ params.flink_version }}",
                          "{{ '--allow-non-restored-state' if params.allow_non_restored_state else '--worst=20' }}",
                          "{{ '--waivers=' ~ params.waivers if params.waivers else '--worst=20' }}"],
        aws_conn_id="{{ params.aws_conn_id }}", conf=SPARK_CONF, name="upgrade-gate-fleet-check",
        summary_path=f"{WORK}/check/summary.json", accept_block=True)

    @task
    def publish_reports(summary: dict, kryo_state: dict, work_dir: str, **context) -> dict:
        return fleet.publish(context, {**summary, "kryo_state": kryo_state}, f"{work_dir}/check")

    @task(retries=0)
    def alert_incompatible(published: dict, **context) -> list[str]:
        return fleet.alert(context, published, notifiers())

    work >> [ids, scan] >> check
    work >> serializers
    published = publish_reports(check.output, serializers.output, work)
    FleetSummaryOperator(task_id="summary", published=published, alerted=alert_incompatible(published))


flink_fleet_scan()

"""`flink_fleet_scan` with its `spark_default` connection pointed at a real Spark standalone cluster.

The fleet is the stack's: savepoints real Flink wrote and the next job graphs, in SeaweedFS S3
(demo/stack.py). The DAG runs twice through `airflow dags test`: once as configured (`local[2]`),
once with `spark_default` = `spark://127.0.0.1:<port>`, a master and two one-core workers in their
own JVMs (tests/spark_cluster.py). Nothing in the DAG changes between the runs. The cluster run must
give the same verdict table and the same summary, its Spark tasks must have run in executors on the
workers, and the Airflow task logs must show each job's progress lines (jobs done / total, rate, ETA).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

DAG = "flink_fleet_scan"
PROGRESS = r"{job}: ([\d,]+)/([\d,]+) jobs \(([\d.]+) %\), ([\d.]+) jobs/s, ([^,]+), \d+ s elapsed"
# a worker must offer at least the DAG's executor_memory param (default 1g, Spark's own default)
WORKER_MEMORY = "1200m"


def _last_run(stack: Any) -> str:
    import sqlite3

    with sqlite3.connect(stack.home / "airflow.db") as db:
        return str(db.execute("select run_id from dag_run where dag_id=? order by id desc limit 1", (DAG,))
                   .fetchone()[0])


def _task_logs(stack: Any, run_id: str, output: str) -> str:
    """The run's task logs: `airflow dags test` prints them (the hook logs spark-submit's output line by
    line), plus any log files Airflow stored for the run."""
    stored = sorted((stack.home / "logs" / f"dag_id={DAG}" / f"run_id={run_id}").rglob("*.log"))
    return "\n".join([output, *(p.read_text(errors="replace") for p in stored)])


def _outputs(stack: Any, run_id: str, monkeypatch: pytest.MonkeyPatch) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The run's verdict rows (sorted by job) and its summary.json, from the DAG's work folder."""
    import pyarrow.parquet as pq
    from flink_gate import fleet

    monkeypatch.setenv("UPGRADE_GATE_WORK_DIR", stack.env["UPGRADE_GATE_WORK_DIR"])  # where the DAG's tasks wrote
    check = fleet.fleet_dir(run_id) / "check"
    rows = pq.read_table(check / "verdicts").to_pylist()
    summary = json.loads((check / "summary.json").read_text())
    return sorted(rows, key=lambda r: r["job"]), summary


def _run(stack: Any) -> tuple[str, dict[str, str], str, str]:
    state, tasks, output = stack.dags_test(DAG, {}, timeout=1500)
    return state, tasks, output, _last_run(stack)


@pytest.fixture
def cluster(stack: Any, tmp_path: Path):
    from tests import spark_cluster
    from tests.s3_server import ACCESS_KEY, SECRET_KEY

    # the workers' environment: the S3 endpoint and keys (a cluster's instance credentials); their executors
    # run this Python (the Airflow environment's), as the DAG's local[2] run does
    aws = {"AWS_ENDPOINT_URL_S3": stack.s3.endpoint, "AWS_ACCESS_KEY_ID": ACCESS_KEY,
           "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_REGION": "us-east-1"}
    c = spark_cluster.start_cluster(tmp_path / "cluster", aws, worker_memory=WORKER_MEMORY)
    try:
        yield c
    finally:
        c.stop()


@pytest.mark.timeout(3600)  # two DAG runs, four spark-submits each: 6 minutes on a quiet machine, 30+ at load 25
def test_fleet_scan_on_a_two_worker_cluster_equals_local_mode(stack: Any, cluster: Any, monkeypatch) -> None:
    state, tasks, output, local_run = _run(stack)
    assert state == "success", output[-4000:]
    local_rows, local_summary = _outputs(stack, local_run, monkeypatch)

    host, port = cluster.master_url.rsplit(":", 1)
    monkeypatch.setitem(stack.env, "AIRFLOW_CONN_SPARK_DEFAULT",
                        json.dumps({"conn_type": "spark", "host": host, "port": int(port)}))
    state, tasks, output, run_id = _run(stack)
    assert state == "success", output[-4000:]
    assert all(v == "success" for v in tasks.values()), tasks
    rows, summary = _outputs(stack, run_id, monkeypatch)

    # the same verdicts, byte for byte, and the same gate document (timings aside)
    assert [r["job"] for r in rows] == [r["job"] for r in local_rows] and len(rows) == summary["jobs"] > 0
    assert rows == local_rows
    assert {k: v for k, v in summary.items() if k != "timings"} == {
        k: v for k, v in local_summary.items() if k != "timings"}
    assert summary["gate"] == "BLOCK" and summary["errors"] == 0

    # spark-submit really went to the cluster, and each Spark job ran executors on the workers
    log = _task_logs(stack, run_id, output)
    for job in ("fleet_ids", "savepoint_scan", "state_serializers", "fleet_check"):
        # progress in the Airflow task log: the driver's lines, the last one at the total, done
        lines = re.findall(PROGRESS.format(job=job), log)
        assert lines and lines[-1][0] == lines[-1][1] == str(summary["jobs"]) and lines[-1][4] == "done", (
            job, lines, log[-3000:])
    apps = [sorted(p.name for p in (cluster.logs / w).glob("app-*")) for w in ("worker-0", "worker-1")]
    assert len({a for names in apps for a in names}) == 4 and all(apps), apps  # ids, scan, serializers, check
    assert summary["timings"]["fleet_check_s"] > 0

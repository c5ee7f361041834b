"""Deferred waits at fleet scale (issue #30): a wave of four real upgrades on ONE worker slot.

`airflow standalone` (scheduler, triggerer, LocalExecutor) with `core.parallelism` 1: one task at a time
may hold a worker slot. A real Flink 2.3 cluster runs four copies of v1 of the counter job of
tests/jobs/upgrade/, each under its own name (`pipeline.name`), each with a savepoint under its own prefix.
One `flink_rolling_upgrade` run with `deferrable: true` upgrades all four to the compatible v2 in one wave.

What a user would notice, all read from Airflow's REST API, the upgrade records in the object store and
Flink itself:

* while the `roll_out` task is `deferred` (holding no slot), several upgrades are in flight at once (their
  records between the stop and the verified restore): more concurrent upgrades than worker slots;
* never more than one task running at a time (the one slot);
* every job upgraded and verified: the new job RUNNING, restored from exactly the savepoint its old job
  stopped with, the old job FINISHED, and every counter continuing from where the old job stopped.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
import urllib.error
from pathlib import Path
from typing import Any

import pytest

from tests.upgrade_jobs import JobOutput, build_jobs, job_graphs, parse_output, wait_for_counts

pytestmark = pytest.mark.flink

DAG = "flink_rolling_upgrade"
STATE_BUCKET = "upgrade-state"
STATE_PREFIX = "deferred/"
JOBS = [f"ugate-deferred-{i}" for i in range(4)]
SLOTS = 1
KEYS = {f"k{i}" for i in range(8)}
IN_FLIGHT = ("stopping", "stopped", "starting")  # an upgrade record between the stop and the verified restore


@dataclasses.dataclass
class Env:
    cluster: Any
    stack: Any
    server: Any
    hook: Any
    jars: dict[str, Path]
    graphs: dict[str, Path]
    v1: dict[str, str] = dataclasses.field(default_factory=dict)  # job name -> running v1 job id
    _api: Any = None

    def api(self, path: str, method: str = "GET", payload: Any = None) -> Any:
        if self._api is None:
            self._api = self.server.api()
        return self._api(path, method, payload)

    def tasks(self, run_id: str) -> dict[str, str | None]:
        tis = self.api(f"/api/v2/dags/{DAG}/dagRuns/{run_id}/taskInstances")["task_instances"]
        return {t["task_id"]: t["state"] for t in tis}

    def running_tasks(self) -> int:
        """Task instances of any DAG holding a worker slot now."""
        return int(self.api("/api/v2/dags/~/dagRuns/~/taskInstances?state=running")["total_entries"])

    def record(self, job: str) -> dict[str, Any] | None:
        from flink_gate.upgrade_records import job_key

        try:
            body = self.stack.s3.client().get_object(
                Bucket=STATE_BUCKET, Key=f"{STATE_PREFIX}upgrades/{job_key(job)}/record.json")["Body"]
        except Exception as exc:
            if "NoSuchKey" in str(exc):
                return None
            raise
        return json.loads(body.read())

    def output(self) -> dict[str, JobOutput]:
        return parse_output(self.cluster.read_taskmanager_out())

    def wait_for_output(self, job_id: str, timeout: float = 90) -> JobOutput:
        return wait_for_counts(self.cluster, job_id, timeout)

    def logs(self, run_id: str) -> str:
        try:
            doc = self.api(f"/api/v2/dags/{DAG}/dagRuns/{run_id}/taskInstances/roll_out/logs/1?full_content=true")
        except (urllib.error.HTTPError, OSError) as exc:
            return f"(no roll_out log: {exc})"
        return json.dumps(doc.get("content"))[-4000:]


@pytest.fixture(scope="module")
def env(stack):
    import os
    import shutil

    from demo import stack as st
    from flink_bridge.cluster import FlinkCluster, default_workdir

    jars = build_jobs("2.3")
    graphs = job_graphs(jars, ("v1", "v2-compatible"))
    workdir = default_workdir("deferred-upgrades")
    shutil.rmtree(workdir, ignore_errors=True)
    # four jobs of one slot each, and room for a new copy to start while its old one still stops
    cluster = FlinkCluster(workdir, extra_config={"taskmanager.numberOfTaskSlots": 8}).start()
    server = None
    try:
        try:
            stack.s3.client().create_bucket(Bucket=STATE_BUCKET)
        except Exception as exc:  # created by another module of the session
            if "BucketAlready" not in type(exc).__name__ + str(exc):
                raise
        host, port = cluster.rest_url.removeprefix("http://").split(":")
        conn = json.dumps({"conn_type": "http", "host": host, "port": int(port), "schema": "http"})
        airflow = dataclasses.replace(stack, env={**stack.env, "AIRFLOW_CONN_FLINK_DEFAULT": conn,
                                                  "AIRFLOW_VAR_UPGRADE_GATE_STATE_ROOT":
                                                  f"s3://{STATE_BUCKET}/{STATE_PREFIX}"}, procs=[])
        server = st.start_standalone(airflow, parallelism=SLOTS)
        os.environ["AIRFLOW_CONN_FLINK_DEFAULT"] = conn
        from flink_gate.hooks.flink_rest import FlinkRestHook

        hook = FlinkRestHook("flink_default", retries=2)
        e = Env(cluster, airflow, server, hook, jars, graphs)
        jar_id = hook.upload_jar(jars["v1"])
        for name in JOBS:
            e.v1[name] = hook.run_jar(jar_id, flink_configuration={"pipeline.name": name})
        for name, job_id in e.v1.items():
            hook.wait_until_restored(job_id, timeout=120)
            e.wait_for_output(job_id)
            trigger = hook.trigger_savepoint(job_id, f"{cluster.savepoint_uri}/{name}")
            hook.wait_for_savepoint(job_id, trigger, timeout=120)
        deadline = time.monotonic() + 180
        while True:  # the DAG parsed by the standalone's DAG processor
            try:
                e.api(f"/api/v2/dags/{DAG}")
                break
            except (urllib.error.HTTPError, OSError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(1)
        e.api(f"/api/v2/dags/{DAG}", "PATCH", {"is_paused": False})
        yield e
    finally:
        os.environ.pop("AIRFLOW_CONN_FLINK_DEFAULT", None)
        if server is not None:
            st.stop_process_group(server.proc, timeout=20)
        cluster.stop()


def _conf(e: Env) -> dict[str, Any]:
    jobs = [{"job_name": name, "graph": str(e.graphs["v2-compatible"]), "jar": str(e.jars["v2-compatible"]),
             "rollback_jar": str(e.jars["v1"]), "flink_job_id": e.v1[name],
             "flink_settings": [f"pipeline.name={name}"]} for name in JOBS]
    return {"jobs": jobs, "canary": 0, "batch_size": len(JOBS), "mode": "upgrade", "deferrable": True,
            "savepoint_root": e.cluster.savepoint_uri, "flink_version": "2.3", "timeout_s": 120}


def test_a_wave_of_four_upgrades_completes_on_one_worker_slot_waiting_in_the_triggerer(env):
    before = env.output()
    started = time.monotonic()
    run_id = str(env.api(f"/api/v2/dags/{DAG}/dagRuns", "POST", {"logical_date": None, "conf": _conf(env)})
                 ["dag_run_id"])
    samples: list[dict[str, Any]] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            try:
                tasks = env.tasks(run_id)
                records = {name: (env.record(name) or {}).get("state") for name in JOBS}
                samples.append({"roll_out": tasks.get("roll_out"), "records": records,
                                "running": env.running_tasks()})
            except OSError:  # the API server (one worker, SQLite) can stall under load: sample again
                pass
            stop.wait(0.3)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        deadline = time.monotonic() + 300
        while (run := env.api(f"/api/v2/dags/{DAG}/dagRuns/{run_id}"))["state"] not in ("success", "failed"):
            if time.monotonic() > deadline:
                raise AssertionError(f"run not finished in 300 s: {env.tasks(run_id)}\n{env.logs(run_id)}")
            time.sleep(1)
    finally:
        stop.set()
        watcher.join(timeout=30)
    took = time.monotonic() - started
    assert run["state"] == "success", (env.tasks(run_id), env.logs(run_id))

    # at some moment the rollout held no slot (deferred) while more upgrades than slots were in flight
    deferred = [s for s in samples if s["roll_out"] == "deferred"]
    assert deferred, f"roll_out was never seen deferred ({len(samples)} samples)"
    concurrent = max(sum(state in IN_FLIGHT for state in s["records"].values()) for s in deferred)
    assert concurrent > SLOTS, deferred
    # and the one slot was never exceeded
    assert max(s["running"] for s in samples) <= SLOTS, samples
    print(f"\n{len(JOBS)} upgrades on {SLOTS} slot in {took:.0f} s; up to {concurrent} in flight while roll_out was "
          f"deferred ({len(deferred)} of {len(samples)} samples deferred)")

    result = env.api(f"/api/v2/dags/{DAG}/dagRuns/{run_id}/taskInstances/roll_out/xcomEntries/return_value")
    value = result["value"] if isinstance(result["value"], dict) else json.loads(result["value"])
    assert value["upgraded"] == JOBS and value["stopped_at"] is None, value
    for name in JOBS:
        up = env.record(name)
        assert up is not None and up["state"] == "running-verified" and up["run"] == f"{DAG}/{run_id}", up
        old, new = up["old_job_id"], up["new_job_id"]
        assert old == env.v1[name] and env.hook.job_status(old) == "FINISHED"
        assert env.hook.job_status(new) == "RUNNING"
        assert env.hook.restored_from(new).rstrip("/") == up["savepoint"].rstrip("/")
        assert Path(up["savepoint"].removeprefix("file:")).parent == env.cluster.savepoint_dir / name
        assert env.hook.job_details(new)["name"] == name
        # every counter continues from the savepoint its old job stopped with
        last, after = env.output()[old].last(), env.wait_for_output(new)
        assert after.variant == "v2-compatible"
        assert {k: after.first().get(k) for k in KEYS} == {k: last[k] + 1 for k in KEYS}, (name, last, after.first())
        assert min(after.first().values()) > 1, "a counter restarted from zero"
    assert set(before) <= set(env.output())

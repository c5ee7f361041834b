"""`flink_upgrade_gate` in upgrade mode, end to end on a real Flink 2.3 standalone cluster.

The single-job gate's own upgrade path (mode=upgrade, no approval asked: the approval step has
its own test, test_hitl_approval.py): `airflow dags test` of the real DAG against one cluster
(flink_bridge/cluster.py) running v1 of the counter job of tests/jobs/upgrade/. The DAG reaches
Flink only through the plugins' FlinkRestHook (connection `flink_default`); what happened to the
state is read from the jobs' own output (each counter update prints `key,count`).

In order, on one evolving job: a blocked upgrade (uid-less chain change: Flink would refuse the
savepoint) never touches v1; a SAFE upgrade stops v1 with a savepoint, re-gates it, starts v2
from it and every counter continues where v1 stopped.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.flink

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from upgrade_jobs import JOB_NAME, JobOutput, build_jobs, job_graphs, parse_output, wait_for_counts  # noqa: E402

DAG = "flink_upgrade_gate"
STATE_BUCKET = "upgrade-state"
STATE_ROOT = f"s3://{STATE_BUCKET}/gate-mode/"
KEYS = {f"k{i}" for i in range(8)}
NOT_RUN = ("skipped", "upstream_failed", "removed", None)


@dataclasses.dataclass
class Cluster:
    """The cluster, the Airflow stack pointed at it, the jars and graphs, the job as it evolves."""

    cluster: Any
    stack: Any
    hook: Any
    jars: dict[str, Path]
    graphs: dict[str, Path]
    current_job: str | None = None

    @property
    def job_prefix(self) -> Path:
        return self.cluster.savepoint_dir / JOB_NAME

    def output(self) -> dict[str, JobOutput]:
        return parse_output(self.cluster.read_taskmanager_out())

    def savepoints(self) -> dict[str, tuple[int, int]]:
        return {m.parent.name: (m.stat().st_size, m.stat().st_mtime_ns)
                for m in sorted(self.job_prefix.glob("savepoint-*/_metadata"))}

    def jobs(self) -> dict[str, str]:
        return {j["jid"]: j["state"] for j in self.hook.list_jobs()}

    def conf(self, variant: str, **extra: Any) -> dict[str, Any]:
        """The trigger form of an upgrade of the running job to `variant`, no approval asked."""
        conf = {"job_name": JOB_NAME, "savepoint": "latest", "savepoint_root": self.cluster.savepoint_uri,
                "graph": str(self.graphs[variant]), "jar": str(self.jars[variant]), "hasher": "v2",
                "matching": "fixed", "allow_non_restored_state": False, "flink_version": "2.3",
                "mode": "upgrade", "require_approval": False, "rollback_jar": str(self.jars["v1"]),
                "savepoint_target_dir": f"{self.cluster.savepoint_uri}/{JOB_NAME}", "timeout_s": 120}
        conf.update(extra)
        return conf

    def upgrade_record(self) -> dict[str, Any] | None:
        from flink_gate.upgrade_records import job_key

        try:
            body = self.stack.s3.client().get_object(
                Bucket=STATE_BUCKET, Key=f"gate-mode/upgrades/{job_key(JOB_NAME)}/record.json")["Body"]
        except Exception as exc:
            if "NoSuchKey" in str(exc):
                return None
            raise
        return json.loads(body.read())

    def wait_for_output(self, job_id: str, timeout: float = 90) -> JobOutput:
        return wait_for_counts(self.cluster, job_id, timeout)


def flink_connection(rest_url: str) -> str:
    host, port = rest_url.removeprefix("http://").split(":")
    return json.dumps({"conn_type": "http", "host": host, "port": int(port), "schema": "http"})


@pytest.fixture(scope="module")
def real(stack):
    """A Flink cluster running v1 (with a regular savepoint under the job's prefix: what the gate
    checks as `latest`), and the stack's Airflow environment pointed at it."""
    import os
    import shutil

    from flink_bridge.cluster import FlinkCluster, default_workdir

    jars = build_jobs("2.3")
    graphs = job_graphs(jars, ("v1", "v2-compatible", "v2-broken"))
    workdir = default_workdir("gate-upgrade-mode")
    shutil.rmtree(workdir, ignore_errors=True)
    cluster = FlinkCluster(workdir).start()
    conn = flink_connection(cluster.rest_url)
    os.environ["AIRFLOW_CONN_FLINK_DEFAULT"] = conn  # the test's own calls go through the product's hook
    from flink_gate.hooks.flink_rest import FlinkRestHook

    try:
        try:
            stack.s3.client().create_bucket(Bucket=STATE_BUCKET)
        except Exception as exc:  # created by another module of the session
            if "BucketAlready" not in type(exc).__name__ + str(exc):
                raise
        airflow = dataclasses.replace(stack, env={**stack.env, "AIRFLOW_CONN_FLINK_DEFAULT": conn,
                                                  "AIRFLOW_VAR_UPGRADE_GATE_STATE_ROOT": STATE_ROOT})
        hook = FlinkRestHook("flink_default", retries=2)
        real = Cluster(cluster, airflow, hook, jars, graphs)
        job_id = hook.run_jar(hook.upload_jar(jars["v1"]))
        hook.wait_until_restored(job_id, timeout=120)
        real.wait_for_output(job_id)
        trigger = hook.trigger_savepoint(job_id, f"{cluster.savepoint_uri}/{JOB_NAME}")
        hook.wait_for_savepoint(job_id, trigger, timeout=120)
        real.current_job = job_id
        yield real
    finally:
        os.environ.pop("AIRFLOW_CONN_FLINK_DEFAULT", None)
        cluster.stop()


def _run(real: Cluster, conf: dict[str, Any]) -> dict[str, Any]:
    before = len(real.stack.receiver.received)
    state, tasks, output = real.stack.dags_test(DAG, conf, timeout=600)
    return {"state": state, "tasks": tasks, "output": output,
            "alerts": [a["body"] for a in real.stack.receiver.received[before:]]}


def test_blocked_upgrade_never_touches_the_running_job(real):
    v1 = real.current_job
    jobs, savepoints = real.jobs(), real.savepoints()
    assert jobs[v1] == "RUNNING"

    run = _run(real, real.conf("v2-broken"))

    tasks = run["tasks"]
    # (how the run shows "blocked" is the gate's business; here: nothing after it ran)
    assert tasks["check"] == "success", run["output"][-3000:]
    for step in ("approve", "no_approval_needed", "upgrade", "verify"):
        assert tasks.get(step) in NOT_RUN, (step, tasks)
    # v1 untouched: still RUNNING, no job started or stopped, no savepoint taken, no upgrade record
    assert real.jobs() == jobs and real.hook.job_status(v1) == "RUNNING"
    assert real.savepoints() == savepoints
    assert real.upgrade_record() is None
    # one alert, with Flink's own refusal
    assert len(run["alerts"]) == 1, run["alerts"]
    alert = run["alerts"][0]
    assert alert["job"] == JOB_NAME and alert["verdict"] == "RESTORE_FAILS", alert
    assert "Cannot map checkpoint/savepoint state for operator" in alert["flink_error"]


def test_safe_upgrade_stops_with_a_savepoint_and_every_counter_continues(real):
    old = real.current_job
    if old is None or real.hook.job_status(old) != "RUNNING":
        pytest.fail("needs v1 running (the blocked upgrade before must have left it alone)")
    savepoints = real.savepoints()

    # the -D pairs the gate checked reach the new job (Flink REST `flinkConfiguration`)
    run = _run(real, real.conf("v2-compatible", flink_settings=["pipeline.operator-chaining.enabled=true",
                                                                "execution.checkpointing.interval=7 s"]))

    assert run["state"] == "success", run["output"][-4000:]
    expected = {"check": "success", "gate": "success", "decide": "success", "approve": "skipped",
                "no_approval_needed": "success", "upgrade": "success", "verify": "success"}
    assert {k: run["tasks"].get(k) for k in expected} == expected, run["tasks"]
    assert run["alerts"] == []
    up = real.upgrade_record()
    assert up is not None and up["state"] == "running-verified", up
    new = up["new_job_id"]
    # stop-with-savepoint: v1 FINISHED, one new savepoint under the job's prefix, kept
    assert up["old_job_id"] == old and real.hook.job_status(old) == "FINISHED"
    taken = set(real.savepoints()) - set(savepoints)
    sp = Path(up["savepoint"].removeprefix("file:"))
    assert taken == {sp.name} and sp.parent == real.job_prefix and (sp / "_metadata").is_file()
    # the new job started from exactly that savepoint and runs
    assert real.hook.job_status(new) == "RUNNING"
    assert real.hook.restored_from(new).rstrip("/") == up["savepoint"].rstrip("/")
    # every counter continues from where v1's savepoint left it; the tagger's list state came along
    before, after = real.output()[old], real.wait_for_output(new)
    assert after.variant == "v2-compatible"
    last, first = before.last(), after.first()
    assert set(last) == KEYS and {k: first.get(k) for k in KEYS} == {k: last[k] + 1 for k in KEYS}, (last, first)
    assert min(first.values()) > 1, "a counter restarted from zero"
    assert after.restored_seen() == before.snapshot_seen() > 0
    # v1 ran without checkpointing; the new job checkpoints every 7 s because the run said so
    assert real.hook.request("GET", f"/jobs/{new}/checkpoints/config").get("interval") == 7000
    real.current_job = new
    real.hook.cancel(new)

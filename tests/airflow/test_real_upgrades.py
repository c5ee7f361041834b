"""Zero state loss, proven on a real Flink cluster: `flink_rolling_upgrade` against Flink 2.3.0.

One standalone cluster for the module (flink_bridge/cluster.py: JobManager + TaskManager from the
`apache-flink` package's bin/, on 127.0.0.1), the test jobs of tests/jobs/upgrade/ compiled with
javac (a keyed counter in ValueState, a tagger with operator ListState), and the real DAG run with
`airflow dags test`. The DAG reaches Flink only through the plugins' FlinkRestHook (connection
`flink_default`). Every verdict about state is read from the jobs' own output: each counter update
prints `key,count`, the tagger prints what it snapshotted and what it restored.

Savepoints go to a `file://` directory: the `apache-flink` package ships no S3 filesystem plugin
and none can be fetched here, so Flink cannot write `s3://` (see flink_bridge/cluster.py); the
gate reads them through the same storage code it uses for S3.

The scenarios run in order on one evolving job, as a platform team would live it:
blocked upgrades (v1 untouched) -> a restore that crashes in reality (rolled back to v1) ->
a compatible upgrade with a rescale (every counter continues) -> a lossy upgrade whose loss is
explicitly accepted.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from hashing.murmur import uid_hash

pytestmark = pytest.mark.flink

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from upgrade_jobs import JOB_NAME, VARIANTS, JobOutput, build_jobs, parse_output, wait_for_counts  # noqa: E402

DAG = "flink_rolling_upgrade"
STATE_BUCKET = "upgrade-state"
KEYS = {f"k{i}" for i in range(8)}
BLOCKED = {
    "broken: no uids + a chaining change": ("v2-broken", {}, "RESTORE_FAILS"),
    "lossy: a stateful operator removed": ("v2-lossy", {}, "RESTORE_FAILS"),
    "fails: explicit max parallelism changed": ("v2-fails", {}, "RESTORE_FAILS"),
    "lossy + allowNonRestoredState": ("v2-lossy", {"allow_non_restored_state": True}, "STATE_LOSS"),
    "lossy + allowNonRestoredState, another loss accepted": (
        "v2-lossy", {"allow_non_restored_state": True, "accept_state_loss": ["counter"]}, "STATE_LOSS"),
}


@dataclasses.dataclass
class Real:
    """Everything the scenarios share: cluster, Airflow stack, jars, graphs, the job as it evolves."""

    cluster: Any
    stack: Any
    hook: Any
    jars: dict[str, Path]
    graphs: dict[str, Path]
    current_job: str | None = None  # the job id of the version running now

    @property
    def savepoint_root(self) -> str:
        return self.cluster.savepoint_uri

    @property
    def job_prefix(self) -> Path:
        return self.cluster.savepoint_dir / JOB_NAME

    def output(self) -> dict[str, JobOutput]:
        return parse_output(self.cluster.read_taskmanager_out())

    def savepoints(self) -> dict[str, tuple[int, int]]:
        """Every savepoint directory of the job -> (size, mtime_ns) of its _metadata."""
        out = {}
        for meta in sorted(self.job_prefix.glob("savepoint-*/_metadata")):
            st = meta.stat()
            out[meta.parent.name] = (st.st_size, st.st_mtime_ns)
        return out

    def jobs(self) -> dict[str, str]:
        return {j["jid"]: j["state"] for j in self.hook.list_jobs()}

    def job_conf(self, variant: str, **extra: Any) -> dict[str, Any]:
        job = {"job_name": JOB_NAME, "graph": str(self.graphs[variant]), "jar": str(self.jars[variant]),
               "rollback_jar": str(self.jars["v1"])}
        job.update(extra)
        return {"jobs": [job], "canary": 1, "batch_size": 1, "mode": "upgrade", "savepoint_root": self.savepoint_root,
                "flink_version": "2.3", "timeout_s": 120}

    def upgrade_record(self) -> dict[str, Any] | None:
        """The job's upgrade record in the object store (the Variable upgrade_gate_state_root)."""
        from flink_gate.upgrade_records import job_key

        try:
            body = self.stack.s3.client().get_object(Bucket=STATE_BUCKET,
                                                     Key=f"gate/upgrades/{job_key(JOB_NAME)}/record.json")["Body"]
        except Exception as exc:
            if "NoSuchKey" in str(exc):
                return None
            raise
        return json.loads(body.read())

    def rollout(self, conf: dict[str, Any]) -> dict[str, Any]:
        """One `airflow dags test` of the rolling upgrade; its state, tasks and rollout record, and
        the job's upgrade record if this run wrote one."""
        before = len(self.stack.receiver.received)
        record_before = self.upgrade_record()
        state, tasks, output = self.stack.dags_test(DAG, conf, timeout=600)
        rolling = Path(self.stack.env["UPGRADE_GATE_WORK_DIR"]) / "_rolling"
        newest = max(rolling.glob("*/rollout.json"), key=lambda p: p.stat().st_mtime)
        record = self.upgrade_record()
        changed = record is not None and (record_before is None or record["write_id"] != record_before["write_id"])
        return {"state": state, "tasks": tasks, "output": output, "rollout": json.loads(newest.read_text()),
                "upgrade": record if changed else None,
                "alerts": [a["body"] for a in self.stack.receiver.received[before:]]}

    def wait_for_output(self, job_id: str, timeout: float = 60) -> JobOutput:
        return wait_for_counts(self.cluster, job_id, timeout)


def _flink_connection(rest_url: str) -> str:
    host, port = rest_url.removeprefix("http://").split(":")
    return json.dumps({"conn_type": "http", "host": host, "port": int(port), "schema": "http"})


@pytest.fixture(scope="module")
def real(stack, tmp_path_factory):
    import os

    from flink_bridge.cluster import FlinkCluster, default_workdir
    from flink_bridge.exporter import export_spec

    jars = build_jobs("2.3")
    graphs_dir = tmp_path_factory.mktemp("graphs")
    graphs = {}
    for variant in VARIANTS:  # the new versions' graphs, built from the jars by real Flink
        graphs[variant] = graphs_dir / f"{variant}.json"
        graphs[variant].write_text(json.dumps(export_spec("jar", jars[variant])))
    workdir = default_workdir("real-upgrades")
    if workdir.exists():
        import shutil

        shutil.rmtree(workdir)
    cluster = FlinkCluster(workdir).start()
    conn = _flink_connection(cluster.rest_url)
    os.environ["AIRFLOW_CONN_FLINK_DEFAULT"] = conn  # the test's own calls use the product's hook too
    from flink_gate.hooks.flink_rest import FlinkRestHook

    try:
        try:
            stack.s3.client().create_bucket(Bucket=STATE_BUCKET)
        except Exception as exc:  # created by another module of the session
            if "BucketAlready" not in type(exc).__name__ + str(exc):
                raise
        airflow = dataclasses.replace(stack, env={**stack.env, "AIRFLOW_CONN_FLINK_DEFAULT": conn,
                                                  "AIRFLOW_VAR_UPGRADE_GATE_STATE_ROOT": f"s3://{STATE_BUCKET}/gate/"})
        yield Real(cluster, airflow, FlinkRestHook("flink_default", retries=2), jars, graphs)
    finally:
        os.environ.pop("AIRFLOW_CONN_FLINK_DEFAULT", None)
        cluster.stop()


@pytest.fixture(scope="module")
def v1(real):
    """v1 running with some state, and a regular savepoint of it under the job's prefix (what the
    gate checks: the newest savepoint of the job)."""
    hook = real.hook
    job_id = hook.run_jar(hook.upload_jar(real.jars["v1"]))
    hook.wait_until_restored(job_id, timeout=120)
    real.wait_for_output(job_id)
    time.sleep(3)
    trigger = hook.trigger_savepoint(job_id, f"{real.savepoint_root}/{JOB_NAME}")
    hook.wait_for_savepoint(job_id, trigger, timeout=120)
    real.current_job = job_id
    return job_id


def assert_state_continues(before: JobOutput, after: JobOutput) -> None:
    """Every key's counter goes on from exactly where the old job's savepoint left it."""
    last, first = before.last(), after.first()
    assert set(last) == KEYS, last
    assert {k: first.get(k) for k in KEYS} == {k: last[k] + 1 for k in KEYS}, (last, first)
    assert min(first.values()) > 1, "a counter restarted from zero"


# ---- blocked: the running job is never touched ----------------------------------------------
@pytest.mark.parametrize("case", list(BLOCKED))
def test_incompatible_upgrade_is_blocked_before_the_job_is_touched(real, v1, case):
    variant, extra, verdict = BLOCKED[case]
    savepoints, jobs = real.savepoints(), real.jobs()
    assert jobs[v1] == "RUNNING"

    run = real.rollout(real.job_conf(variant, **extra))

    # a rollout a gate stopped is not done: the run is failed, `outcome` the failed task (its note says why)
    assert run["state"] == "failed", run["output"][-3000:]
    assert run["tasks"] == {"plan_waves": "success", "roll_out": "success", "outcome": "failed"}, run["tasks"]
    record = run["rollout"]["jobs"][JOB_NAME]
    assert record["status"] == "blocked" and record["verdict"] == verdict, record
    # v1 untouched: still RUNNING, no job started or stopped, no savepoint taken, changed or disposed
    assert real.jobs() == jobs and real.hook.job_status(v1) == "RUNNING"
    assert real.savepoints() == savepoints
    assert run["upgrade"] is None
    # the alert went out, naming what would be lost
    assert len(run["alerts"]) == 1, run["alerts"]
    alert = run["alerts"][0]
    assert alert["event"] == "flink_upgrade_blocked" and alert["job"] == JOB_NAME and alert["verdict"] == verdict
    if variant == "v2-fails":  # nothing is unmatched: the whole restore fails on the counter's max parallelism
        assert "Max parallelism mismatch" in alert["flink_error"]
        assert f"Cannot map operator {uid_hash('counter').hex()} with max parallelism 128" in alert["flink_error"]
    else:
        assert alert["bytes_at_risk"] > 0
    names = {o["name"]: o["state_names"] for o in alert["operators"]}
    if variant == "v2-lossy":
        assert names == {"tagger": ["seen"]}, names  # only the removed operator's list state
    if verdict == "RESTORE_FAILS" and variant != "v2-fails":
        assert "Cannot map checkpoint/savepoint state for operator" in alert["flink_error"]
    if extra.get("accept_state_loss"):
        assert "not accepted for tagger" in record["gate"], record


# ---- the gate passed, reality failed: roll back ---------------------------------------------
def test_restore_failure_in_reality_rolls_back_to_v1_from_the_upgrade_savepoint(real, v1):
    old = real.current_job
    run = real.rollout(real.job_conf("v2-restore-crash"))

    assert run["state"] == "failed", run["output"][-3000:]
    record = run["rollout"]["jobs"][JOB_NAME]
    assert record["status"] == "failed" and "rolled back" in record["error"], record
    up = run["upgrade"]
    # the gate passed (the upgrade was performed), Flink stopped v1 with a savepoint ...
    assert up["old_job_id"] == old and real.hook.job_status(old) == "FINISHED"
    savepoint = up["savepoint"]
    assert Path(savepoint.removeprefix("file:")).parent == real.job_prefix
    # ... the new version failed while restoring ...
    assert real.hook.job_status(up["new_job_id"]) == "FAILED"
    assert up["new_job_id"] not in real.output() or not real.output()[up["new_job_id"]].counts
    # ... and v1 runs again, restored from that same savepoint
    back = up["rollback_job_id"]
    assert real.hook.job_status(back) == "RUNNING"
    assert real.hook.restored_from(back).rstrip("/") == savepoint.rstrip("/")
    assert (Path(savepoint.removeprefix("file:")) / "_metadata").is_file()  # never disposed
    before, after = real.output()[old], real.wait_for_output(back)
    assert after.variant == "v1"
    assert_state_continues(before, after)
    assert after.restored_seen() == before.snapshot_seen() > 0
    real.current_job = back


# ---- compatible: every counter continues ----------------------------------------------------
def test_compatible_upgrade_with_rescale_keeps_every_counter(real, v1):
    old = real.current_job
    if old is None or real.hook.job_status(old) != "RUNNING":
        pytest.fail("needs the running v1 of the previous scenario, which did not leave it running")
    run = real.rollout(real.job_conf("v2-compatible"))

    assert run["state"] == "success", run["output"][-3000:]
    assert run["tasks"] == {"plan_waves": "success", "roll_out": "success", "outcome": "success"}, run["tasks"]
    record = run["rollout"]["jobs"][JOB_NAME]
    assert record["status"] == "upgraded" and record["verdict"] == "SAFE", record
    assert run["alerts"] == []
    up = run["upgrade"]
    new = up["new_job_id"]
    assert up["old_job_id"] == old and real.hook.job_status(old) == "FINISHED"
    assert real.hook.job_status(new) == "RUNNING" and "rollback_job_id" not in up
    assert real.hook.restored_from(new).rstrip("/") == up["savepoint"].rstrip("/")
    counter = next(v for v in real.hook.job_details(new)["vertices"] if "counter" in v["name"])
    assert counter["parallelism"] == 2  # rescaled: keyed state redistributed by key group
    before, after = real.output()[old], real.wait_for_output(new)
    assert after.variant == "v2-compatible"
    assert_state_continues(before, after)
    assert after.restored_seen() == before.snapshot_seen() > 0
    real.current_job = new


# ---- blocked, then repaired: the upgrade goes ahead from a repaired copy of its savepoint -----
def test_a_blocked_upgrade_goes_ahead_from_a_repaired_savepoint_and_every_counter_continues(real, v1):
    """v2-fails sets the counter's max parallelism to 256: Flink refuses every savepoint of v1 (max parallelism
    128), and nothing in the job can change that. With `repair_savepoint` the rollout stops the job with a
    savepoint, writes a repaired copy beside it (every keyed counter moved into the key groups of 256), checks it
    and starts v2-fails from the copy: every counter continues, and the stop-with-savepoint is left as it was."""
    old = real.current_job
    if old is None or real.hook.job_status(old) != "RUNNING":
        pytest.fail("needs the running job of the previous scenario, which did not leave it running")
    run = real.rollout(real.job_conf("v2-fails", repair_savepoint=True))

    assert run["state"] == "success", run["output"][-3000:]
    assert run["tasks"] == {"plan_waves": "success", "roll_out": "success", "outcome": "success"}, run["tasks"]
    record = run["rollout"]["jobs"][JOB_NAME]
    assert record["status"] == "upgraded" and record["verdict"] == "RESTORE_FAILS", record
    assert record["gate"] == "RESTORE_FAILS; repaired savepoint", record
    assert run["alerts"] == []  # the run was asked to repair: nothing was blocked
    up = run["upgrade"]
    new = up["new_job_id"]
    assert up["old_job_id"] == old and real.hook.job_status(old) == "FINISHED"
    assert up["start_from"] == up["savepoint"].rstrip("/") + "-repaired" == up["repaired"]
    assert real.hook.restored_from(new).rstrip("/") == up["start_from"]
    original = Path(up["savepoint"].removeprefix("file:"))
    repaired = Path(up["start_from"].removeprefix("file:"))
    assert (original / "_metadata").is_file() and (repaired / "_metadata").is_file()
    assert (original / "_metadata").read_bytes() != (repaired / "_metadata").read_bytes()
    counter = next(v for v in real.hook.job_details(new)["vertices"] if "counter" in v["name"])
    assert counter["maxParallelism"] == 256
    before, after = real.output()[old], real.wait_for_output(new)
    assert after.variant == "v2-fails"
    assert_state_continues(before, after)
    assert after.restored_seen() == before.snapshot_seen() > 0
    real.current_job = new


# ---- lossy, with the loss accepted by name ---------------------------------------------------
def test_lossy_upgrade_passes_only_with_the_named_loss_accepted(real, v1):
    old = real.current_job
    if old is None or real.hook.job_status(old) != "RUNNING":
        pytest.fail("needs the running job of the previous scenario, which did not leave it running")
    run = real.rollout(real.job_conf("v2-lossy", allow_non_restored_state=True, accept_state_loss=["tagger"]))

    assert run["state"] == "success", run["output"][-3000:]
    record = run["rollout"]["jobs"][JOB_NAME]
    assert record["status"] == "upgraded" and record["verdict"] == "STATE_LOSS", record
    assert record["gate"] == "STATE_LOSS accepted explicitly for tagger"
    new = run["upgrade"]["new_job_id"]
    assert real.hook.job_status(real.current_job) == "FINISHED" and real.hook.job_status(new) == "RUNNING"
    before, after = real.output()[old], real.wait_for_output(new)
    assert_state_continues(before, after)  # the keyed counters survived; only "seen" was dropped
    assert after.inits == []  # the tagger is gone, and with it (as accepted) its state
    real.current_job = new
    real.hook.cancel(new)

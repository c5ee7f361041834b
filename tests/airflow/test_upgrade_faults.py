"""Upgrades that cannot cause an outage, proven under injected faults on a real Flink cluster.

One standalone Flink 2.3 cluster for the module (flink_bridge/cluster.py) with tests/fault_proxy.py
in front of its REST port: the product's FlinkRestHook (`flink_default`) talks to the proxy, the
test's own look at the cluster (`flink_direct`) does not. Upgrade records and leases live in the
session stack's real SeaweedFS (conditional writes), as they would in production.

Every scenario starts from exactly one running copy of the test job, injects one fault on one
REST step (the request reaches Flink and the answer is dropped, a 5xx without forwarding, a TCP
reset, a delay longer than the client's timeout), drives the product's step functions and then
checks what a user would notice: exactly one copy of the job runs, restored from a completed
savepoint, every counter continues from that savepoint (read from the jobs' own output), and the
reported outcome ("upgraded" or "rolled back") is what happened on the cluster.

`make test` runs a bounded selection; `UPGRADE_FAULTS_FULL=1` (`make fuzz`) runs every step x fault.
`UPGRADE_FAULTS_DEFERRED=1` drives the fault matrix's upgrades as the `deferrable` upgrade task does (`_upgrade`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest

pytestmark = pytest.mark.flink

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from fault_proxy import FaultProxy  # noqa: E402
from upgrade_jobs import JOB_NAME, JobOutput, build_jobs, job_graphs, parse_output, wait_for_counts  # noqa: E402

FULL = os.environ.get("UPGRADE_FAULTS_FULL") == "1"
DEFERRED = os.environ.get("UPGRADE_FAULTS_DEFERRED") == "1"
KEYS = {f"k{i}" for i in range(8)}
BUCKET = "upgrade-state"
STATE_ROOT = f"s3://{BUCKET}/gate/"
HEX = "[0-9a-f]{32}"
ACTIVE = ("INITIALIZING", "CREATED", "RUNNING", "RESTARTING", "FAILING", "CANCELLING", "RECONCILING")

# step -> (HTTP method, path regex, scenario kind). "{rollback_jar}" is filled in with the jar id.
STEPS = {
    "stop": ("POST", rf"^/jobs/{HEX}/stop$", "upgrade"),
    "savepoint-poll": ("GET", rf"^/jobs/{HEX}/savepoints/", "upgrade"),
    "jar-upload": ("POST", r"^/jars/upload", "upgrade-upload"),
    "run": ("POST", r"^/jars/[^/]+/run", "upgrade"),
    "status-poll": ("GET", rf"^/jobs/{HEX}$", "upgrade"),
    "cancel": ("PATCH", rf"^/jobs/{HEX}", "cancel"),
    "rollback-run": ("POST", r"^/jars/{rollback_jar}/run", "crash"),
}
FAULTS = {"drop_response": {}, "status": {"status": 503}, "reset": {}, "delay": {"delay": 8.0}}
BOUNDED = [("stop", "drop_response"), ("stop", "delay"), ("savepoint-poll", "status"), ("jar-upload", "reset"),
           ("run", "drop_response"), ("run", "status"), ("status-poll", "drop_response"),
           ("cancel", "drop_response"), ("rollback-run", "drop_response")]
MATRIX = [(s, f) for s in STEPS for f in FAULTS] if FULL else BOUNDED


@dataclasses.dataclass
class Lab:
    cluster: Any
    proxy: FaultProxy
    direct: Any  # FlinkRestHook straight to the cluster (the test's eyes), never through the proxy
    s3: Any
    jars: dict[str, Path]
    jar_ids: dict[str, str]
    graphs: dict[str, Path]
    current: str = ""  # the one running copy
    runs: int = 0

    def output(self) -> dict[str, JobOutput]:
        return parse_output(self.cluster.read_taskmanager_out())

    def active(self) -> list[dict[str, Any]]:
        return [j for j in self.direct.list_jobs() if j["name"] == JOB_NAME and j["state"] in ACTIVE]

    def wait_for_output(self, job_id: str, timeout: float = 60) -> JobOutput:
        return wait_for_counts(self.cluster, job_id, timeout)

    def params(self, target: str = "v2-compatible", **extra: Any) -> dict[str, Any]:
        self.runs += 1
        p = {"job_name": JOB_NAME, "dag_id": "faults", "run_id": f"scenario-{self.runs}-{time.time_ns()}",
             "state_root": STATE_ROOT, "aws_conn_id": "aws_default", "flink_conn_id": "flink_default",
             "flink_jar_id": self.jar_ids[target], "jar": str(self.jars[target]),
             "rollback_jar_id": self.jar_ids["v2-compatible"], "hasher": "v2", "matching": "fixed",
             "allow_non_restored_state": False, "flink_version": "2.3",
             "savepoint_target_dir": f"{self.cluster.savepoint_uri}/{JOB_NAME}", "timeout_s": 90,
             "rest_timeout_s": 5, "reconcile_grace_s": 10}
        p.update(extra)
        return p

    def record(self) -> dict[str, Any]:
        from flink_gate.upgrade_records import job_key

        body = self.s3.get_object(Bucket=BUCKET, Key=f"gate/upgrades/{job_key(JOB_NAME)}/record.json")["Body"]
        return json.loads(body.read())


def _conn(url: str) -> str:
    host, port = url.removeprefix("http://").split(":")
    return json.dumps({"conn_type": "http", "host": host, "port": int(port), "schema": "http"})


@pytest.fixture(scope="module")
def lab(stack):
    from flink_bridge.cluster import FlinkCluster, default_workdir

    jars = build_jobs("2.3")
    graphs = job_graphs(jars, ("v2-compatible", "v2-restore-crash"))
    workdir = default_workdir("upgrade-faults")
    if workdir.exists():
        import shutil

        shutil.rmtree(workdir)
    # room for two copies of the job (2 slots each): a second copy must be able to run, or the tests could
    # never see one
    cluster = FlinkCluster(workdir, extra_config={"taskmanager.numberOfTaskSlots": 4}).start()
    port = int(cluster.rest_url.rsplit(":", 1)[1])
    proxy = FaultProxy("127.0.0.1", port)
    saved = {k: os.environ.get(k) for k in ("AIRFLOW_CONN_FLINK_DEFAULT", "AIRFLOW_CONN_FLINK_DIRECT",
                                            "AIRFLOW_CONN_AWS_DEFAULT")}
    os.environ["AIRFLOW_CONN_FLINK_DEFAULT"] = _conn(proxy.url)
    os.environ["AIRFLOW_CONN_FLINK_DIRECT"] = _conn(cluster.rest_url)
    os.environ["AIRFLOW_CONN_AWS_DEFAULT"] = stack.env["AIRFLOW_CONN_AWS_DEFAULT"]
    try:
        from flink_gate.hooks.flink_rest import FlinkRestHook

        direct = FlinkRestHook("flink_direct", retries=2)
        s3 = stack.s3.client()
        try:
            s3.create_bucket(Bucket=BUCKET)
        except Exception as exc:  # the bucket survives from another module of the session
            if "BucketAlready" not in type(exc).__name__ + str(exc):
                raise
        jar_ids = {v: direct.upload_jar(jars[v]) for v in ("v2-compatible", "v2-restore-crash")}
        first = direct.run_jar(jar_ids["v2-compatible"])
        direct.wait_until_restored(first, timeout=120)
        lab = Lab(cluster, proxy, direct, s3, jars, jar_ids, graphs, current=first)
        lab.wait_for_output(first)
        time.sleep(2)
        yield lab
    finally:
        proxy.close()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        cluster.stop()


def assert_state_continues(before: JobOutput, after: JobOutput) -> None:
    """Every key's counter goes on from exactly where the old job's savepoint left it."""
    last, first = before.last(), after.first()
    assert set(last) == KEYS, last
    assert {k: first.get(k) for k in KEYS} == {k: last[k] + 1 for k in KEYS}, (last, first)
    assert min(first.values()) > 1, "a counter restarted from zero"


def assert_one_copy(lab: Lab, job_id: str, savepoint: str) -> None:
    """Exactly one copy of the job is active, it is `job_id`, RUNNING, restored from `savepoint`; and the run that
    ended gave the job's lease back (the next run may start at once)."""
    from flink_gate.upgrade_records import job_key

    with pytest.raises(Exception, match=r"NoSuchKey|404|Not Found"):
        lab.s3.head_object(Bucket=BUCKET, Key=f"gate/upgrades/{job_key(JOB_NAME)}/lease.json")
    active = lab.active()
    assert [j["jid"] for j in active] == [job_id], active
    assert active[0]["state"] == "RUNNING"
    assert lab.direct.restored_from(job_id).rstrip("/") == savepoint.rstrip("/")
    assert (Path(savepoint.removeprefix("file:")) / "_metadata").is_file()


def _running(lab: Lab) -> str:
    active = lab.active()
    if len(active) != 1 or active[0]["jid"] != lab.current:
        pytest.fail(f"needs exactly one running copy ({lab.current}) from the previous scenario, found {active}")
    return lab.current


# ---- the fault matrix -------------------------------------------------------------------------
def _upgrade(p: dict[str, Any], graph: str) -> dict[str, Any]:
    """The upgrade task's body: `run_upgrade` waiting in the slot; with `UPGRADE_FAULTS_DEFERRED=1` as the
    `deferrable` task runs it (`operators/upgrade.py`): at each wait the step raises `WaitFor`, the trigger's own
    code (`FlinkWaitsTrigger.run`, here in-process, through the same proxy) polls until the wait settles or
    `timeout_s` runs out, and the step runs again (in the slot for good once the trigger gave up)."""
    import asyncio

    from flink_gate.rollback import run_upgrade
    from flink_gate.triggers.flink_waits import FlinkWaitsTrigger
    from flink_gate.upgrade_machine import WaitFor

    async def first_event(trigger: FlinkWaitsTrigger) -> dict[str, Any]:
        async for event in trigger.run():
            return dict(event.payload)
        raise AssertionError("the trigger ended without an event")

    defer = DEFERRED
    while True:
        try:
            return run_upgrade({**p, "defer_waits": defer}, graph)
        except WaitFor as wait:
            trigger = FlinkWaitsTrigger([{**wait.wait, "job": p["job_name"]}], flink_conn_id=p["flink_conn_id"],
                                        rest_timeout_s=p["rest_timeout_s"], timeout_s=p["timeout_s"], poll_s=0.5)
            event = asyncio.run(first_event(trigger))
            print(f"deferred: {wait}; the trigger fired {event}")
            defer = not event["timed_out"]


@pytest.mark.parametrize(("step", "fault"), MATRIX, ids=[f"{s}-{f}" for s, f in MATRIX])
def test_fault_leaves_exactly_one_copy_with_its_state(lab, step, fault):
    from flink_gate.rollback import UpgradeRolledBack, roll_back
    from flink_gate.upgrade_records import exclusive

    old = _running(lab)
    method, regex, kind = STEPS[step]
    regex = regex.replace("{rollback_jar}", lab.jar_ids["v2-compatible"])
    times = 2 if method == "GET" else 1
    lab.proxy.clear()

    if kind == "cancel":
        # The upgrade itself succeeds; then the rollback (an operator's, or verification's) must
        # cancel the running new job through the fault before restarting the old version.
        from flink_gate.rollback import begin
        from flink_gate.upgrade_machine import holder_of, perform_upgrade

        p = lab.params()
        with exclusive(p, holder_of(p)) as (record, lease):
            begin(p, record, lease, holder_of(p))
            perform_upgrade(p, record, str(lab.graphs["v2-compatible"]), lease)
            lab.direct.wait_until_restored(record["new_job_id"], timeout=60)
            rule = lab.proxy.add_rule(regex, fault, method=method, times=times, **FAULTS[fault])
            roll_back(p, record, "rolled back by the test", lease)
        outcome = "rolled back"
    else:
        target = "v2-restore-crash" if kind == "crash" else "v2-compatible"
        p = lab.params(target)
        if kind == "upgrade-upload":
            p.pop("flink_jar_id")
        rule = lab.proxy.add_rule(regex, fault, method=method, times=times, **FAULTS[fault])
        try:
            result = _upgrade(p, str(lab.graphs[target]))
            outcome = "upgraded"
        except UpgradeRolledBack as exc:
            outcome, message = "rolled back", str(exc)
        except Exception:
            print("proxy log:", *lab.proxy.log[-40:], sep="\n  ")
            raise
    lab.proxy.clear()

    assert rule.hits >= 1, f"the fault on {step} was never hit: {lab.proxy.log[-20:]}"
    record = lab.record()
    if kind in ("upgrade", "upgrade-upload"):
        assert outcome == "upgraded" and record["state"] == "running-verified", record
        new = record["new_job_id"]
        assert result["new_job_id"] == new and result["restored_from"].rstrip("/") == record["savepoint"].rstrip("/")
    else:
        assert outcome == "rolled back" and record["state"] == "rolled-back-verified", record
        new = record["rollback_job_id"]
        assert lab.direct.job_status(record["new_job_id"]) in ("FAILED", "CANCELED")
        if kind == "crash":
            assert new in message and "rolled back" in message
    assert record["old_job_id"] == old and lab.direct.job_status(old) == "FINISHED"
    assert_one_copy(lab, new, record["savepoint"])
    stops = [e for e in lab.proxy.log if e[0] == "POST" and e[1] == f"/jobs/{old}/stop"]
    assert 1 <= len(stops) <= 3, stops  # one stop; repeated only with the same trigger id when unanswered
    before, after = lab.output()[old], lab.wait_for_output(new)
    assert_state_continues(before, after)
    lab.current = new


# ---- a task killed mid-upgrade, then retried ---------------------------------------------------
KILLED_TASK = """
import json, sys
sys.path[:0] = [{repo!r}, {plugins!r}]
from flink_gate.rollback import run_upgrade
p = json.loads(sys.argv[1])
run_upgrade(p, sys.argv[2])
"""


def test_task_killed_after_the_stop_resumes_on_retry_with_one_copy(lab):
    from flink_gate.rollback import run_upgrade

    old = _running(lab)
    p = lab.params()
    lab.proxy.clear()
    seen = len(lab.proxy.log)
    # Keep the task waiting on the savepoint long enough to kill it after Flink took the stop.
    lab.proxy.add_rule(rf"^/jobs/{HEX}/savepoints/", "delay", method="GET", times=-1, delay=4.0)
    code = KILLED_TASK.format(repo=str(REPO), plugins=str(REPO / "plugins"))
    task = subprocess.Popen([sys.executable, "-c", code, json.dumps(p), str(lab.graphs["v2-compatible"])],
                            env=dict(os.environ), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                record = lab.record()
            except Exception:
                record = {}
            if record.get("run") == f"faults/{p['run_id']}" and record.get("state") == "stopping":
                status = lab.direct.savepoint_status_or_none(record["old_job_id"], record["trigger"])
                if status is not None:
                    break
            assert task.poll() is None, task.stdout.read().decode()[-3000:] if task.stdout else ""
            assert time.monotonic() < deadline, f"the task never reached the stop: {record}"
            time.sleep(0.2)
        task.send_signal(signal.SIGKILL)
        task.wait(timeout=30)
    finally:
        if task.poll() is None:
            task.kill()
            task.wait()
    lab.proxy.clear()
    assert lab.record()["state"] == "stopping"

    result = run_upgrade(p, str(lab.graphs["v2-compatible"]))  # the Airflow retry: same DAG run

    record = lab.record()
    assert record["state"] == "running-verified" and result["new_job_id"] == record["new_job_id"]
    stops = [e for e in lab.proxy.log[seen:] if e[0] == "POST" and e[1] == f"/jobs/{old}/stop"]
    runs = [e for e in lab.proxy.log[seen:] if e[0] == "POST" and e[1].endswith("/run")]
    assert len(stops) == 1 and len(runs) == 1, (stops, runs)  # never stopped or started twice
    assert lab.direct.job_status(old) == "FINISHED"
    assert_one_copy(lab, record["new_job_id"], record["savepoint"])
    assert_state_continues(lab.output()[old], lab.wait_for_output(record["new_job_id"]))
    lab.current = record["new_job_id"]


# ---- one upgrade per job; distinct records per exact name ---------------------------------------
def test_second_concurrent_upgrade_of_the_same_job_is_refused_naming_the_holder(lab):
    from flink_gate.rollback import run_upgrade
    from flink_gate.upgrade_records import Lease, LeaseHeld, open_store

    running = _running(lab)
    first = lab.params()
    lease = Lease(open_store(first), JOB_NAME, f"faults/{first['run_id']}", ttl=600).acquire()
    try:
        second = lab.params()
        with pytest.raises(LeaseHeld) as refused:
            run_upgrade(second, str(lab.graphs["v2-compatible"]))
        assert f"faults/{first['run_id']}" in str(refused.value) and "expires" in str(refused.value)
        assert [j["jid"] for j in lab.active()] == [running]  # nothing touched
    finally:
        lease.release()
    # an expired lease is taken over (and the taker reconciles the record before acting)
    stale = Lease(open_store(first), JOB_NAME, "faults/crashed-run", ttl=1).acquire()
    time.sleep(1.5)
    taker = Lease(open_store(first), JOB_NAME, "faults/next-run", ttl=60).acquire()
    assert taker.taken_over_from and taker.taken_over_from["holder"] == "faults/crashed-run"
    with pytest.raises(Exception, match="taken by faults/next-run"):
        stale.renew()
    taker.release()


def test_names_that_share_a_file_name_get_distinct_records(lab):
    from flink_gate.upgrade_records import Conflict, UpgradeRecord, job_key, open_store, report_name

    store = open_store({"state_root": STATE_ROOT, "aws_conn_id": "aws_default"})
    a, b = UpgradeRecord(store, "orders v2").load(), UpgradeRecord(store, "orders_v2").load()
    assert job_key("orders v2") != job_key("orders_v2") and report_name("orders v2") != report_name("orders_v2")
    a.save(state="planned", run="x/1")
    b.save(state="running-verified", run="y/2")
    assert UpgradeRecord(store, "orders v2").load().state == "planned"
    assert UpgradeRecord(store, "orders_v2").load().state == "running-verified"
    # conditional writes: two writers read the same version, only the first write wins
    w1, w2 = UpgradeRecord(store, "orders v2").load(), UpgradeRecord(store, "orders v2").load()
    w1.save(state="stopping")
    with pytest.raises(Conflict):
        w2.save(state="planned")
    assert UpgradeRecord(store, "orders v2").load().state == "stopping"


# ---- a real Airflow DAG run through the proxy ---------------------------------------------------
def test_rolling_dag_run_through_a_lost_run_answer_upgrades_once(lab, stack):
    old = _running(lab)
    lab.proxy.clear()
    rule = lab.proxy.add_rule(r"^/jars/[^/]+/run", "drop_response", method="POST", times=1)
    env = {**stack.env, "AIRFLOW_CONN_FLINK_DEFAULT": _conn(lab.proxy.url),
           "AIRFLOW_VAR_UPGRADE_GATE_STATE_ROOT": STATE_ROOT}
    conf = {"jobs": [{"job_name": JOB_NAME, "graph": str(lab.graphs["v2-compatible"]),
                      "jar": str(lab.jars["v2-compatible"]), "rollback_jar": str(lab.jars["v2-compatible"])}],
            "canary": 1, "batch_size": 1, "mode": "upgrade", "savepoint_root": lab.cluster.savepoint_uri,
            "flink_version": "2.3", "timeout_s": 120}
    state, tasks, output = dataclasses.replace(stack, env=env).dags_test("flink_rolling_upgrade", conf, timeout=600)
    lab.proxy.clear()

    assert rule.hits == 1
    assert state == "success", output[-3000:]
    assert tasks == {"plan_waves": "success", "roll_out": "success", "outcome": "success"}, tasks
    record = lab.record()
    assert record["state"] == "running-verified" and record["old_job_id"] == old, record
    assert record["run"].startswith("flink_rolling_upgrade/")
    assert_one_copy(lab, record["new_job_id"], record["savepoint"])
    assert_state_continues(lab.output()[old], lab.wait_for_output(record["new_job_id"]))
    lab.current = record["new_job_id"]


def test_abandoned_upgrade_is_reconciled_before_another_run_takes_over(lab):
    """A run died after recording its stop but before sending it, and its lease expired: the next
    run asks the cluster (the trigger is unknown to Flink, the old job still runs), records the
    abandoned upgrade as not started, and only then upgrades, with exactly one copy."""
    from flink_gate.hooks.flink_rest import new_flink_id
    from flink_gate.rollback import run_upgrade
    from flink_gate.upgrade_records import Lease, UpgradeRecord, open_store

    old = _running(lab)
    p = lab.params()
    store = open_store(p)
    abandoned = UpgradeRecord(store, JOB_NAME).load()
    abandoned.doc = {}
    abandoned.save(state="stopping", run="faults/crashed-run", old_job_id=old, trigger=new_flink_id(),
                   flink_job_name=JOB_NAME, plan={"timeout_s": 60})
    Lease(store, JOB_NAME, "faults/crashed-run", ttl=1).acquire()
    time.sleep(1.5)
    lab.proxy.clear()

    result = run_upgrade(p, str(lab.graphs["v2-compatible"]))

    record = lab.record()
    assert record["previous"] == {"run": "faults/crashed-run", "state": "not-started"}, record["previous"]
    assert record["state"] == "running-verified" and record["old_job_id"] == old
    assert result["new_job_id"] == record["new_job_id"]
    assert_one_copy(lab, record["new_job_id"], record["savepoint"])
    assert_state_continues(lab.output()[old], lab.wait_for_output(record["new_job_id"]))
    lab.current = record["new_job_id"]


def test_without_an_object_store_records_fall_back_to_a_local_directory_with_the_same_rules(tmp_path):
    """No state root configured: the work directory (single worker only), same compare-and-swap and lease."""
    from flink_gate.upgrade_records import Conflict, Lease, LeaseHeld, LocalStore, UpgradeRecord, open_store

    store = open_store({"state_root": str(tmp_path)})
    assert isinstance(store, LocalStore)
    w1, w2 = UpgradeRecord(store, "orders v2").load(), UpgradeRecord(store, "orders v2").load()
    w1.save(state="planned")
    with pytest.raises(Conflict):
        w2.save(state="planned")
    Lease(store, "orders v2", "dag/run-1", ttl=60).acquire()
    with pytest.raises(LeaseHeld, match="dag/run-1"):
        Lease(store, "orders v2", "dag/run-2", ttl=60).acquire()
    Lease(store, "orders v2", "dag/run-1", ttl=60).acquire()  # the same run's retry takes it back


def test_a_holder_paused_past_its_lease_fails_its_fence_and_its_own_heartbeat_never_does(tmp_path):
    """The fencing step is a conditional write of the lease: a holder paused (no heartbeat either) while
    another run took the lease finds out before its next acting call; the heartbeat and the fence write the
    same lease concurrently without either mistaking the other for a takeover; and a run that failed for
    good gives the lease back, and only its own."""
    from flink_gate.upgrade_records import Lease, LeaseLost, open_store, release_after_final_failure

    p = {"state_root": str(tmp_path), "job_name": "orders"}
    store = open_store(p)
    a = Lease(store, "orders", "dag/run-a", ttl=0.5).acquire()
    a.fence()
    time.sleep(0.8)  # "paused": a long GC pause, a frozen VM; its heartbeat was paused with it
    b = Lease(store, "orders", "dag/run-b", ttl=60).acquire()
    assert b.taken_over_from and b.taken_over_from["holder"] == "dag/run-a"
    with pytest.raises(LeaseLost, match="taken by dag/run-b"):
        a.fence()

    c = Lease(store, "payments", "dag/run-c", ttl=3).acquire()
    c.start_heartbeat()  # beats every second
    deadline, fences = time.monotonic() + 3.5, 0
    while time.monotonic() < deadline:
        c.fence()
        fences += 1
    c.stop_heartbeat()
    assert c.lost is None and fences > 100

    assert not release_after_final_failure(p, "dag/run-a")  # run-b holds it: not run-a's to give back
    assert release_after_final_failure(p, "dag/run-b")
    assert store.get(b.key) == (None, None)
    Lease(store, "orders", "dag/run-d", ttl=60).acquire()  # free at once, no TTL to wait out


def test_a_fencing_write_answered_after_the_lease_ran_out_proves_nothing(stack, monkeypatch):
    """The store applied holder A's fencing write at once, but A learnt it only after its lease's TTL (A was
    paused while the answer was on its way back, or the network back was slow); meanwhile B took the expired
    lease. A success that arrives that late proves nothing: the fence writes again and loses. A slow answer
    with nobody taking over is written again too, and holds. (Real SeaweedFS; the late answer is made by the
    fault proxy in front of it.)"""
    from flink_gate.upgrade_records import Lease, LeaseLost, open_store

    s3_port = urlparse(stack.s3.endpoint).port
    with FaultProxy("127.0.0.1", s3_port) as s3_proxy:
        monkeypatch.setenv("AIRFLOW_CONN_AWS_LATE", stack.env["AIRFLOW_CONN_AWS_DEFAULT"].replace(stack.s3.endpoint,
                                                                                                 s3_proxy.url))
        monkeypatch.setenv("AIRFLOW_CONN_AWS_FENCE_DIRECT", stack.env["AIRFLOW_CONN_AWS_DEFAULT"])
        with contextlib.suppress(Exception):  # the bucket survives from another test of the session
            stack.s3.client().create_bucket(Bucket=BUCKET)
        root = f"s3://{BUCKET}/fence-{time.time_ns()}/"
        store_a = open_store({"state_root": root, "aws_conn_id": "aws_late"})
        store_b = open_store({"state_root": root, "aws_conn_id": "aws_fence_direct"})
        a = Lease(store_a, "orders", "dag/run-a", ttl=2).acquire()
        late = s3_proxy.add_rule(r"/lease\.json$", "late_response", method="PUT", times=1, delay=3.0)
        taken: dict[str, Lease] = {}

        def b_takes_over() -> None:
            _wait_for("A never sent its fencing write", lambda: late.hits >= 1, 10)
            time.sleep(2.3)  # A's lease (2 s from its write) has run out: B may take it
            taken["b"] = Lease(store_b, "orders", "dag/run-b", ttl=60).acquire()

        thread = threading.Thread(target=b_takes_over, daemon=True)
        thread.start()
        with pytest.raises(LeaseLost, match="taken by dag/run-b"):
            a.fence()
        thread.join(timeout=10)
        assert taken["b"].taken_over_from and taken["b"].taken_over_from["holder"] == "dag/run-a"

        c = Lease(store_a, "payments", "dag/run-c", ttl=2).acquire()
        seen = len(s3_proxy.log)
        s3_proxy.add_rule(r"/lease\.json$", "late_response", method="PUT", times=1, delay=1.5)
        c.fence()  # answered late, nobody took it: written again, holds
        puts = [e for e in s3_proxy.log[seen:] if e[0] == "PUT" and e[1].endswith("/lease.json")]
        assert len(puts) == 2 and c.lost is None, puts
        c.release()


# ---- a holder paused past its lease (SIGSTOP), and the rolling DAG through failed reads -----------------
PAUSED_HOLDER = """
import json, sys, time
sys.path[:0] = [{repo!r}, {plugins!r}]
from flink_gate.rollback import UpgradeInterrupted, begin, roll_back, run_upgrade, verify_restored
from flink_gate.upgrade_machine import holder_of, perform_upgrade
from flink_gate.upgrade_records import exclusive
p, graph, driver = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
try:
    if driver == "upgrade":
        run_upgrade(p, graph)
    else:  # the upgrade succeeds, then it is rolled back (an operator's decision), as the DAG's rollback does
        with exclusive(p, holder_of(p)) as (record, lease):
            begin(p, record, lease, holder_of(p))
            up = perform_upgrade(p, record, graph, lease)
            verify_restored(p, up["new_job_id"], up["savepoint"])
            time.sleep(3)  # the test's cue: the next look at the new job is the rollback's
            roll_back(p, record, "rolled back by the operator", lease)
except Exception as exc:
    print("HOLDER-A:", type(exc).__name__, exc, flush=True)
    sys.exit(1)
print("HOLDER-A: done", flush=True)
"""


def _wait_for(what: str, predicate: Any, timeout: float, task: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if task is not None and task.poll() is not None:
            raise AssertionError(f"{what}: the holder exited first: {task.stdout.read().decode()[-3000:]}")
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


# Where holder A is paused, point by point of the upgrade state machine (upgrade_machine.perform_upgrade,
# rollback.roll_back):
#   ("look", method, regex, after): before an acting call. A's last look before it is answered 2 s late, so the
#       test can hold A's next lease write (the fencing write) and pause A right there. `after`: a request that
#       must have been seen first, so that the look caught is the right one ("{new}": A's new job id).
#   ("act", method, regex, n): after an acting call: A's n-th such request was seen by the cluster.
# The driver ("upgrade": the upgrade task's body; "roll-back": an upgrade, then an operator's rollback), A's
# target jar, and the state the run that takes over (B) brings A's upgrade to when it settles it.
RUN = r"^/jars/[^/]+/run"
PAUSES = {
    "before-stop": ("upgrade", "v2-compatible", ("look", "GET", rf"^/jobs/{HEX}/savepoints/", None), "not-started"),
    "after-stop": ("upgrade", "v2-compatible", ("act", "POST", rf"^/jobs/{HEX}/stop$", 1), "rolled-back-verified"),
    "before-run": ("upgrade", "v2-compatible", ("look", "GET", r"^/jobs/overview$", None), "rolled-back-verified"),
    "after-run": ("upgrade", "v2-compatible", ("act", "POST", RUN, 1), "running-verified"),
    "before-rollback-cancel": ("roll-back", "v2-compatible",
                               ("look", "GET", "^/jobs/{new}$", ("GET", "^/jobs/{new}/checkpoints")),
                               "rolled-back-verified"),
    "after-rollback-cancel": ("roll-back", "v2-compatible", ("act", "PATCH", rf"^/jobs/{HEX}(\?|$)", 1),
                              "rolled-back-verified"),
    "before-rollback-run": ("upgrade", "v2-restore-crash", ("look", "GET", r"^/jobs/overview$", ("POST", RUN)),
                            "rolled-back-verified"),
    "after-rollback-run": ("upgrade", "v2-restore-crash", ("act", "POST", RUN, 2), "rolled-back-verified"),
}
PAUSES_BOUNDED = ("before-run", "after-run", "before-rollback-cancel", "after-rollback-run")
PAUSE_POINTS = list(PAUSES) if FULL else list(PAUSES_BOUNDED)


@pytest.mark.parametrize("point", PAUSE_POINTS)
def test_a_holder_paused_past_its_lease_never_acts_again_and_one_copy_runs(lab, stack, point):
    """Holder A is paused (SIGSTOP: a GC pause, a frozen VM) before or after an acting call of the upgrade or of
    its rollback. Its lease expires; B takes it over, settles A's upgrade from the cluster with A's own ids, then
    upgrades from a savepoint of its own. A resumes: its fencing write (or its next record write) loses, it sends
    nothing more to the cluster, and it says so. Exactly one copy runs, B's, every counter continuing. Before
    fencing, A paused before its run POST started a second copy from the older savepoint.

    A's object-store client waits out the whole pause for an answer (`UPGRADE_GATE_S3_TIMEOUT`), so a fencing
    write answered while A was paused is read as a success when A resumes: the fence must see that it came back
    too late to prove anything (`Lease.fence`)."""
    from flink_gate.rollback import run_upgrade
    from flink_gate.upgrade_records import LeaseHeld

    driver, target, (how, method, regex, cue), settled = PAUSES[point]
    old = _running(lab)
    s3_port = urlparse(stack.s3.endpoint).port
    with FaultProxy("127.0.0.1", s3_port) as s3_proxy:
        a = lab.params(target, flink_job_id=old, lease_ttl_s=6, rest_timeout_s=30)
        env = {**os.environ, "UPGRADE_GATE_S3_TIMEOUT": "600",
               "AIRFLOW_CONN_AWS_DEFAULT": stack.env["AIRFLOW_CONN_AWS_DEFAULT"].replace(stack.s3.endpoint,
                                                                                        s3_proxy.url)}
        lab.proxy.clear()
        seen = len(lab.proxy.log)

        def count(m: str, rx: str) -> int:
            return sum(1 for e in lab.proxy.log[seen:] if e[0] == m and re.match(rx, e[1]))

        def new_job(rx: str) -> str:
            return rx.replace("{new}", lab.record().get("new_job_id") or "-") if "{new}" in rx else rx

        code = PAUSED_HOLDER.format(repo=str(REPO), plugins=str(REPO / "plugins"))
        task = subprocess.Popen([sys.executable, "-c", code, json.dumps(a), str(lab.graphs[target]), driver],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            if how == "look":
                if cue is not None:
                    _wait_for(f"A never sent {cue}", lambda: count(cue[0], new_job(cue[1])) >= 1, 120, task)
                look = lab.proxy.add_rule(new_job(regex), "delay", method=method, times=1, delay=2.0)
                _wait_for(f"A never reached its look before {point}", lambda: look.hits >= 1, 120, task)
                fence = s3_proxy.add_rule(r"/lease\.json$", "delay", method="PUT", times=1, delay=4.0)
                _wait_for("A never wrote its lease after the look", lambda: fence.hits >= 1, 30, task)
            else:
                _wait_for(f"A never sent the request of {point}", lambda: count(method, regex) >= cue, 180, task)
            task.send_signal(signal.SIGSTOP)
            paused_at = time.monotonic()
            stale = lab.record()
            assert stale["run"] == f"faults/{a['run_id']}", stale

            b = lab.params()
            deadline = time.monotonic() + 30
            while True:  # B waits out A's lease (A cannot renew it: it is paused)
                try:
                    result = run_upgrade(b, str(lab.graphs["v2-compatible"]))
                    break
                except LeaseHeld:
                    assert time.monotonic() < deadline, "A's lease never expired"
                    time.sleep(1.0)
            paused_for = time.monotonic() - paused_at
            resumed = len(lab.proxy.log)
        finally:
            task.send_signal(signal.SIGCONT)
        out, _ = task.communicate(timeout=180)
    said = out.decode()
    lab.proxy.clear()

    # A sent nothing to the cluster after it resumed, and no job of A's ids runs
    acting = [e for e in lab.proxy.log[resumed:] if e[0] in ("POST", "PATCH")]
    assert not acting, (acting, said[-2000:])
    record = lab.record()
    previous = record["previous"]
    if point == "before-run":
        assert lab.direct.job_or_none(stale["new_job_id"]) is None, "A's new job reached the cluster"
    assert task.returncode == 1, said[-3000:]
    if driver == "upgrade":
        assert "sent nothing more" in said and "UpgradeInterrupted" in said, said[-3000:]
    else:  # the rollback's own fencing write, or its next record write, lost
        assert re.search(r"HOLDER-A: (LeaseLost|Conflict)", said), said[-3000:]
    assert paused_for > 6, paused_for  # A really was paused past its lease
    # B settled A's upgrade with A's ids, then upgraded from its own stop
    assert previous["run"] == f"faults/{a['run_id']}" and previous["state"] == settled, previous
    assert record["run"] == f"faults/{b['run_id']}" and record["state"] == "running-verified", record
    assert result["new_job_id"] == record["new_job_id"]
    stops = [e for e in lab.proxy.log[seen:] if e[0] == "POST" and e[1] == f"/jobs/{old}/stop"]
    assert len(stops) == 1, stops  # the old job was stopped once, by A's stop or by B's
    assert_one_copy(lab, record["new_job_id"], record["savepoint"])
    if previous.get("rollback_job_id"):  # the old version came back from A's savepoint, then B upgraded it
        assert record["old_job_id"] == previous["rollback_job_id"]
        assert_state_continues(lab.output()[old], lab.wait_for_output(previous["rollback_job_id"]))
    assert_state_continues(lab.output()[record["old_job_id"]], lab.wait_for_output(record["new_job_id"]))
    lab.current = record["new_job_id"]


# ---- what fencing cannot exclude, cleaned up: a late run request, a late stop ---------------------------
def _savepoint_of(lab: Lab, job_id: str) -> str:
    """A savepoint of the running job, taken straight from the cluster (not through the product)."""
    trigger = lab.direct.trigger_savepoint(job_id, f"{lab.cluster.savepoint_uri}/{JOB_NAME}")
    return lab.direct.wait_for_savepoint(job_id, trigger, timeout=120)


def test_a_copy_started_by_a_late_run_request_is_cancelled_by_the_next_run(lab):
    """The window fencing cannot close (docs/guarantees.md, "A paused holder"): a run request already on the wire
    when its sender lost the lease lands after the taker's last look, and a second copy runs from an older
    savepoint. The taker recorded that holder's job ids as stale; the next run of the job cancels the copy
    before anything else, says so in its record, and upgrades the job: one copy, counters continuing from the
    job that was the job, not from the stale copy."""
    from flink_gate.hooks.flink_rest import new_flink_id
    from flink_gate.rollback import run_upgrade
    from flink_gate.upgrade_records import UpgradeRecord, open_store

    old = _running(lab)
    older = _savepoint_of(lab, old)
    time.sleep(3)  # the job moves on past that savepoint: a copy restored from it rewinds every counter
    p = lab.params()
    taker = UpgradeRecord(open_store(p), JOB_NAME).load()
    stale = new_flink_id()
    taker.doc = {}  # what the taker left: its upgrade verified, the paused holder's job id kept as stale
    taker.save(state="running-verified", run="faults/taker", old_job_id="0" * 32, new_job_id=old,
               savepoint=older, stale_ids=[stale], previous={"run": "faults/paused-holder", "state": "stopped"})
    lab.direct.run_jar(lab.jar_ids["v2-compatible"], savepoint_path=older, job_id=stale)  # the late request lands
    lab.direct.wait_until_restored(stale, timeout=120)
    assert sorted(j["jid"] for j in lab.active()) == sorted([old, stale])  # two copies
    lab.proxy.clear()

    result = run_upgrade(p, str(lab.graphs["v2-compatible"]))

    record = lab.record()
    assert lab.direct.job_status(stale) == "CANCELED"
    assert record["stale_cancelled"] == [stale] and record["old_job_id"] == old, record
    assert record["state"] == "running-verified" and result["new_job_id"] == record["new_job_id"]
    assert_one_copy(lab, record["new_job_id"], record["savepoint"])
    assert_state_continues(lab.output()[old], lab.wait_for_output(record["new_job_id"]))
    lab.current = record["new_job_id"]


def test_a_late_stop_that_lands_before_the_takers_stop_gives_the_savepoint_the_job_finished_with(lab):
    """A stop-with-savepoint a holder sent before it lost its lease, delivered late, lands just before the taker's
    own stop: Flink stops the job with the late stop's savepoint and refuses the taker's. The taker adopts the
    savepoint the job finished with (re-gated as every stop is) instead of failing with the job stopped, and
    upgrades from it: one copy, every counter continuing."""
    from flink_gate.hooks.flink_rest import new_flink_id
    from flink_gate.rollback import run_upgrade

    old = _running(lab)
    p = lab.params(flink_job_id=old, rest_timeout_s=30)
    lab.proxy.clear()
    held = lab.proxy.add_rule(rf"^/jobs/{old}/stop$", "delay", method="POST", times=1, delay=10.0)
    outcome: dict[str, Any] = {}

    def taker() -> None:
        try:
            outcome["result"] = run_upgrade(p, str(lab.graphs["v2-compatible"]))
        except Exception as exc:  # reported by the assertions below
            outcome["error"] = exc

    thread = threading.Thread(target=taker, daemon=True)
    thread.start()
    _wait_for("the taker never sent its stop", lambda: held.hits >= 1, 120)
    late = new_flink_id()  # the stale holder's stop, with its own trigger id
    lab.direct.stop_with_savepoint(old, f"{lab.cluster.savepoint_uri}/{JOB_NAME}", trigger_id=late)
    finished_with = lab.direct.wait_for_savepoint(old, late, timeout=60)
    thread.join(timeout=240)
    lab.proxy.clear()

    assert "error" not in outcome, outcome.get("error")
    record = lab.record()
    assert record["trigger"] != late and record["savepoint"].rstrip("/") == finished_with.rstrip("/"), record
    assert record["state"] == "running-verified" and outcome["result"]["new_job_id"] == record["new_job_id"]
    assert lab.direct.job_status(old) == "FINISHED"
    assert_one_copy(lab, record["new_job_id"], record["savepoint"])
    assert_state_continues(lab.output()[old], lab.wait_for_output(record["new_job_id"]))
    lab.current = record["new_job_id"]


# ---- the object store out after Flink acted ------------------------------------------------------------
# after which acting call the store goes out: (driver, target jar, request, n-th such request)
OUTAGE_POINTS = {
    "stop": ("upgrade", "v2-compatible", ("POST", rf"^/jobs/{HEX}/stop$", 1)),
    "run": ("upgrade", "v2-compatible", ("POST", RUN, 1)),
    "rollback-cancel": ("roll-back", "v2-compatible", ("PATCH", rf"^/jobs/{HEX}(\?|$)", 1)),
    "rollback-run": ("upgrade", "v2-restore-crash", ("POST", RUN, 2)),
}
# "down": every request fails until the attempt has failed; "blip": exactly one call's worth of failed requests
# (the client's own attempts), so the store is back for the very next call
OUTAGES = {"down": {"status": 503}, "blip": {"status": 503}, "reset": {}}
OUTAGES_BOUNDED = [("stop", "down"), ("run", "blip"), ("rollback-run", "reset")]
OUTAGE_MATRIX = [(pt, o) for pt in OUTAGE_POINTS for o in OUTAGES] if FULL else OUTAGES_BOUNDED


def _attempt(driver: str, p: dict[str, Any], graph: str) -> dict[str, Any]:
    """One attempt of the upgrade task's body (or of an upgrade an operator then rolls back), as a retry runs it."""
    from flink_gate.rollback import begin, roll_back, run_upgrade, verify_restored
    from flink_gate.upgrade_machine import holder_of, perform_upgrade
    from flink_gate.upgrade_records import exclusive

    if driver == "upgrade":
        return run_upgrade(p, graph)
    with exclusive(p, holder_of(p)) as (record, lease):
        begin(p, record, lease, holder_of(p))
        if record.state not in ("rolling-back", "rolled-back-verified"):
            up = perform_upgrade(p, record, graph, lease)
            verify_restored(p, up["new_job_id"], up["savepoint"])
        if record.state != "rolled-back-verified":
            roll_back(p, record, "rolled back by the operator", lease)
        return dict(record.doc)


@pytest.mark.parametrize(("point", "outage"), OUTAGE_MATRIX, ids=[f"{pt}-{o}" for pt, o in OUTAGE_MATRIX])
def test_the_object_store_out_after_flink_acted_interrupts_and_the_retry_resumes_with_one_copy(lab, stack, point,
                                                                                              outage, monkeypatch):
    """The object store holding the records and the lease stops answering (5xx or reset) right after Flink took
    an acting call. The attempt fails saying where the job stands in words (never a bare timeout or a raw S3
    error) and decides nothing on it: in particular a verified new job is never rolled back because the record
    write saying so failed once. The retry (the same run, as Airflow's retry) resumes from the record: the job is
    stopped once, each job started once, one copy from a complete savepoint, every counter continuing."""
    from flink_gate.rollback import UpgradeRolledBack

    from upgrade_gate.storage.s3 import Timeouts, timeout_budget

    driver, target, (method, regex, nth) = OUTAGE_POINTS[point]
    old = _running(lab)
    graph = str(lab.graphs[target])
    s3_port = urlparse(stack.s3.endpoint).port
    with FaultProxy("127.0.0.1", s3_port) as s3_proxy:
        monkeypatch.setenv("AIRFLOW_CONN_AWS_OUTAGE", stack.env["AIRFLOW_CONN_AWS_DEFAULT"].replace(stack.s3.endpoint,
                                                                                                   s3_proxy.url))
        p = lab.params(target, flink_job_id=old, aws_conn_id="aws_outage")
        lab.proxy.clear()
        seen = len(lab.proxy.log)
        times = Timeouts.for_budget(timeout_budget()).attempts if outage == "blip" else -1
        action = "reset" if outage == "reset" else "status"
        cut: list[Any] = []

        def cut_the_store() -> None:
            deadline = time.monotonic() + 300
            while sum(1 for e in lab.proxy.log[seen:] if e[0] == method and re.match(regex, e[1])) < nth:
                if time.monotonic() > deadline:
                    return
                time.sleep(0.02)
            cut.append(s3_proxy.add_rule(".*", action, times=times, **OUTAGES[outage]))

        watcher = threading.Thread(target=cut_the_store, daemon=True)
        watcher.start()
        try:
            with pytest.raises(Exception) as interrupted:
                _attempt(driver, p, graph)
        finally:
            watcher.join(timeout=5)
            s3_proxy.clear()  # the store is back
        assert cut and cut[0].hits >= 1, f"the store never went out after {point}: {lab.proxy.log[seen:][-20:]}"
        said = str(interrupted.value)
        if driver == "upgrade":
            assert type(interrupted.value).__name__ == "UpgradeInterrupted", said
            assert "a retry resumes" in said and "object store did not answer" in said, said
            assert re.search(r"is stopped|may be stopping|may be (re)?starting", said), said
        else:
            assert type(interrupted.value).__name__ == "StoreUnavailable", said
        before = lab.record()
        assert before["state"] not in ("rolled-back-verified", "running-verified", "needs-operator"), before

        try:  # the retry: the same run
            _attempt(driver, p, graph)
            outcome = "upgraded" if driver == "upgrade" else "rolled back"
        except UpgradeRolledBack:
            outcome = "rolled back"
    lab.proxy.clear()

    record = lab.record()
    posts = [e for e in lab.proxy.log[seen:] if e[0] == "POST"]
    assert len([e for e in posts if e[1] == f"/jobs/{old}/stop"]) == 1, posts
    if driver == "upgrade" and target == "v2-compatible":
        assert outcome == "upgraded" and record["state"] == "running-verified", record
        assert "rollback_job_id" not in record, record
        assert len([e for e in posts if re.match(RUN, e[1])]) == 1, posts  # started once, never rolled back
        if point == "run":
            assert before.get("new_job_id") == record["new_job_id"]
        live = record["new_job_id"]
    else:
        assert outcome == "rolled back" and record["state"] == "rolled-back-verified", record
        assert lab.direct.job_status(record["new_job_id"]) in ("FAILED", "CANCELED")
        live = record["rollback_job_id"]
    assert record["old_job_id"] == old and lab.direct.job_status(old) == "FINISHED"
    assert_one_copy(lab, live, record["savepoint"])
    assert_state_continues(lab.output()[old], lab.wait_for_output(live))
    lab.current = live


# the two DAGs that upgrade: the fleet's rollout (its `roll_out` task upgrades every job of a wave) and the
# single-job gate in upgrade mode (gate tasks, then its `upgrade` task)
UPGRADE_DAGS = {"flink_rolling_upgrade": "roll_out", "flink_upgrade_gate": "upgrade"}


def _dag_conf(lab: Lab, dag: str, timeout_s: int) -> dict[str, Any]:
    jar, graph = str(lab.jars["v2-compatible"]), str(lab.graphs["v2-compatible"])
    if dag == "flink_upgrade_gate":
        if lab.direct.job_status(lab.current) == "RUNNING":  # the gate checks the job's latest savepoint
            _savepoint_of(lab, lab.current)
        return {"job_name": JOB_NAME, "savepoint": "latest", "savepoint_root": lab.cluster.savepoint_uri,
                "graph": graph, "jar": jar, "hasher": "v2", "matching": "fixed", "allow_non_restored_state": False,
                "flink_version": "2.3", "mode": "upgrade", "require_approval": False, "rollback_jar": jar,
                "savepoint_target_dir": f"{lab.cluster.savepoint_uri}/{JOB_NAME}", "timeout_s": timeout_s}
    return {"jobs": [{"job_name": JOB_NAME, "graph": graph, "jar": jar, "rollback_jar": jar}],
            "canary": 1, "batch_size": 1, "mode": "upgrade", "savepoint_root": lab.cluster.savepoint_uri,
            "flink_version": "2.3", "timeout_s": timeout_s}


def _after_the_stop(lab: Lab, seen: int, fail_for: float) -> threading.Thread:
    """Once Flink got the stop POST: every savepoint-status read answers 503 for `fail_for` seconds."""
    def run() -> None:
        deadline = time.monotonic() + 300
        while not any(e[0] == "POST" and e[1].endswith("/stop") for e in lab.proxy.log[seen:]):
            if time.monotonic() > deadline:
                return
            time.sleep(0.05)
        lab.proxy.add_rule(rf"^/jobs/{HEX}/savepoints/", "status", method="GET", times=-1, status=503)
        time.sleep(fail_for)
        lab.proxy.clear()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("dag", list(UPGRADE_DAGS))
def test_a_dag_rides_out_failed_savepoint_reads_after_flink_took_the_stop(lab, stack, dag):
    """12 s of failed savepoint-status reads right after Flink took the stop (it used to take 8 s to end the
    rollout with the job stopped and its lease kept for 15 minutes): the step keeps asking within its
    deadline and the real DAG run upgrades the job once, with its state, in both DAGs that upgrade."""
    old = _running(lab)
    lab.proxy.clear()
    env = {**stack.env, "AIRFLOW_CONN_FLINK_DEFAULT": _conn(lab.proxy.url),
           "AIRFLOW_VAR_UPGRADE_GATE_STATE_ROOT": STATE_ROOT}
    conf = _dag_conf(lab, dag, 120)
    seen = len(lab.proxy.log)
    faults = _after_the_stop(lab, seen, fail_for=12.0)
    state, tasks, output = dataclasses.replace(stack, env=env).dags_test(dag, conf, timeout=600)
    faults.join(timeout=60)
    lab.proxy.clear()

    failed_reads = [e for e in lab.proxy.log[seen:] if e[2] == "status"]
    assert len(failed_reads) >= 3, lab.proxy.log[seen:]
    assert state == "success", output[-3000:]
    assert tasks[UPGRADE_DAGS[dag]] == "success" and set(tasks.values()) <= {"success", "skipped"}, tasks
    record = lab.record()
    assert record["state"] == "running-verified" and record["old_job_id"] == old, record
    assert record["run"].startswith(f"{dag}/"), record
    assert_one_copy(lab, record["new_job_id"], record["savepoint"])
    assert_state_continues(lab.output()[old], lab.wait_for_output(record["new_job_id"]))
    lab.current = record["new_job_id"]


@pytest.mark.parametrize("dag", list(UPGRADE_DAGS) if FULL else ["flink_rolling_upgrade"])
def test_a_run_that_fails_for_good_gives_the_job_back_and_the_next_run_restores_one_copy(lab, stack, dag):
    """The cluster answers no savepoint-status read after it took the stop, through every retry of the upgrade
    task (in both DAGs that upgrade): the run fails, saying where the job stands in words (never a bare
    timeout), and gives the job's lease back on its last failure. The next run (no faults) takes the job at
    once, settles the interrupted upgrade from the cluster (rolls the old version back from the stop's
    savepoint) and upgrades it: one copy, every counter continuing."""
    from flink_gate.upgrade_records import job_key

    old = _running(lab)
    lab.proxy.clear()
    env = {**stack.env, "AIRFLOW_CONN_FLINK_DEFAULT": _conn(lab.proxy.url),
           "AIRFLOW_VAR_UPGRADE_GATE_STATE_ROOT": STATE_ROOT}
    airflow = dataclasses.replace(stack, env=env)
    conf = _dag_conf(lab, dag, 15)
    seen = len(lab.proxy.log)
    faults = _after_the_stop(lab, seen, fail_for=400.0)
    try:
        state, tasks, output = airflow.dags_test(dag, conf, timeout=900)
    finally:
        lab.proxy.clear()
    faults.join(timeout=1)
    assert state == "failed" and tasks[UPGRADE_DAGS[dag]] == "failed", (tasks, output[-3000:])
    assert "is stopped" in output or "may be stopping" in output, output[-4000:]
    assert "a retry resumes" in output and "UpgradeInterrupted" in output, output[-4000:]
    attempts = [e for e in lab.proxy.log[seen:] if e[0] == "POST" and e[1] == f"/jobs/{old}/stop"]
    assert len(attempts) == 1, attempts  # the retries resumed the recorded stop; none sent another
    interrupted = lab.record()
    assert interrupted["state"] == "stopping" and lab.direct.job_status(old) == "FINISHED", interrupted
    with pytest.raises(Exception, match=r"NoSuchKey|404|Not Found"):  # the failed run gave the lease back
        lab.s3.get_object(Bucket=BUCKET, Key=f"gate/upgrades/{job_key(JOB_NAME)}/lease.json")

    state, tasks, output = airflow.dags_test(dag, _dag_conf(lab, dag, 120), timeout=600)

    assert state == "success", output[-3000:]
    record = lab.record()
    previous = record["previous"]
    assert previous["run"] == interrupted["run"] and previous["state"] == "rolled-back-verified", previous
    assert record["state"] == "running-verified" and record["old_job_id"] == previous["rollback_job_id"]
    assert_one_copy(lab, record["new_job_id"], record["savepoint"])
    assert_state_continues(lab.output()[old], lab.wait_for_output(previous["rollback_job_id"]))
    assert_state_continues(lab.output()[previous["rollback_job_id"]], lab.wait_for_output(record["new_job_id"]))
    lab.current = record["new_job_id"]

"""Deferred waits at fleet scale (issue #30): a wave of four real upgrades, then two single-job gate upgrades,
on ONE worker slot.

`airflow standalone` (scheduler, triggerer, LocalExecutor) with `core.parallelism` 1: one task at a time
may hold a worker slot. A real Flink 2.3 cluster runs four copies of v1 of the counter job of
tests/jobs/upgrade/, each under its own name (`pipeline.name`), each with a savepoint under its own prefix.
One `flink_rolling_upgrade` run with `deferrable: true` upgrades all four to the compatible v2 in one wave;
then two more jobs are upgraded by two concurrent `flink_upgrade_gate` runs (upgrade mode, `deferrable: true`,
no approval asked) on the same one slot.

What a user would notice, all read from Airflow's REST API, the upgrade records in the object store and
Flink itself:

* while the `roll_out` task is `deferred` (holding no slot), several upgrades are in flight at once (their
  records between the stop and the verified restore): more concurrent upgrades than worker slots;
* never more than one task running at a time (the one slot);
* every job upgraded and verified: the new job RUNNING, restored from exactly the savepoint its old job
  stopped with, the old job FINISHED, and every counter continuing from where the old job stopped;
* for the single-job gate: each run's `upgrade` task seen `deferred` (sampled from the metadata database),
  both runs green, and the same checks of each upgraded job.

Then a wait the triggerer gives up on (`timeout_s`): Flink itself holds the new version's restore (the
v2-compatible job's `-D ugate.restore-hold-file`: its tagger stays INITIALIZING until the file exists). Let go
while the resumed task waits in its slot, the job upgrades; never let go, the run fails with the step's own
message and the old version runs again, as an in-slot upgrade whose restore timed out leaves it.

The tests share the module's cluster and `airflow standalone` (their start-up is most of the module's time).
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

from tests.airflow.task_states import StateWatch, task_log, task_states
from tests.upgrade_jobs import JobOutput, build_jobs, job_graphs, parse_output, wait_for_counts

pytestmark = pytest.mark.flink

DAG = "flink_rolling_upgrade"
GATE_DAG = "flink_upgrade_gate"
GATE_JOBS = [f"ugate-gate-deferred-{i}" for i in range(2)]
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

    def logs(self, run_id: str, dag_id: str = DAG, task: str = "roll_out", attempt: int = 1) -> str:
        try:
            doc = self.api(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task}/logs/{attempt}"
                           "?full_content=true")
        except (urllib.error.HTTPError, OSError) as exc:
            return f"(no {task} log: {exc})"
        return json.dumps(doc.get("content"))[-6000:]


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
    # v1 takes one slot, v2 two (its counter runs at parallelism 2): a wave's four jobs with their new copies starting
    # while the old ones stop, or (the gate test alone) the wave's four v1 jobs beside the gate's two and their new
    # copies; each test cancels the jobs it upgraded once it has looked at them
    cluster = FlinkCluster(workdir, extra_config={"taskmanager.numberOfTaskSlots": 12}).start()
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
        _start_v1(e, JOBS)
        deadline = time.monotonic() + 180
        for dag_id in (DAG, GATE_DAG):
            while True:  # the DAG parsed by the standalone's DAG processor
                try:
                    e.api(f"/api/v2/dags/{dag_id}")
                    break
                except (urllib.error.HTTPError, OSError):
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(1)
            e.api(f"/api/v2/dags/{dag_id}", "PATCH", {"is_paused": False})
        yield e
    finally:
        os.environ.pop("AIRFLOW_CONN_FLINK_DEFAULT", None)
        if server is not None:
            st.stop_process_group(server.proc, timeout=20)
        cluster.stop()


def _start_v1(e: Env, names: list[str]) -> None:
    """v1 of the counter job under each name, counting, with a savepoint under `<savepoint root>/<name>/`."""
    jar_id = e.hook.upload_jar(e.jars["v1"])
    for name in names:
        e.v1[name] = e.hook.run_jar(jar_id, flink_configuration={"pipeline.name": name})
    for name in names:
        job_id = e.v1[name]
        e.hook.wait_until_restored(job_id, timeout=120)
        e.wait_for_output(job_id)
        trigger = e.hook.trigger_savepoint(job_id, f"{e.cluster.savepoint_uri}/{name}")
        e.hook.wait_for_savepoint(job_id, trigger, timeout=120)


def _assert_upgraded(e: Env, name: str, dag_id: str, run_id: str) -> str:
    """What the user checks after an upgrade: the record verified by that run; the old job FINISHED with the
    savepoint under the job's prefix; the new job RUNNING, restored from exactly it; every counter continuing."""
    up = e.record(name)
    assert up is not None and up["state"] == "running-verified" and up["run"] == f"{dag_id}/{run_id}", up
    old, new = up["old_job_id"], up["new_job_id"]
    assert old == e.v1[name] and e.hook.job_status(old) == "FINISHED"
    assert e.hook.job_status(new) == "RUNNING"
    assert e.hook.restored_from(new).rstrip("/") == up["savepoint"].rstrip("/")
    assert Path(up["savepoint"].removeprefix("file:")).parent == e.cluster.savepoint_dir / name
    assert e.hook.job_details(new)["name"] == name
    # every counter continues from the savepoint its old job stopped with
    last, after = e.output()[old].last(), e.wait_for_output(new)
    assert after.variant == "v2-compatible"
    assert {k: after.first().get(k) for k in KEYS} == {k: last[k] + 1 for k in KEYS}, (name, last, after.first())
    assert min(after.first().values()) > 1, "a counter restarted from zero"
    return str(new)


def _cancel(e: Env, job_ids: list[str]) -> None:
    """Give the cluster's slots back once a test has looked at its jobs (a job of the counter takes two: the
    module's tests share one cluster)."""
    for job_id in job_ids:
        e.hook.cancel(job_id, wait=60)


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
    upgraded = [_assert_upgraded(env, name, DAG, run_id) for name in JOBS]
    assert set(before) <= set(env.output())
    _cancel(env, upgraded)


def _gate_conf(e: Env, name: str) -> dict[str, Any]:
    """The single-job gate's form for an upgrade of `name` to v2, no approval asked, its waits deferred."""
    return {"job_name": name, "savepoint": "latest", "savepoint_root": e.cluster.savepoint_uri,
            "graph": str(e.graphs["v2-compatible"]), "jar": str(e.jars["v2-compatible"]), "flink_version": "2.3",
            "mode": "upgrade", "require_approval": False, "deferrable": True, "flink_job_id": e.v1[name],
            "flink_settings": [f"pipeline.name={name}"], "rollback_jar": str(e.jars["v1"]),
            "savepoint_target_dir": f"{e.cluster.savepoint_uri}/{name}", "timeout_s": 120}


def _finished(e: Env, name: str, run_id: str, timeout: float, expected: str) -> dict[str, Any]:
    """Until the gate run of `name` ends; fails with its task states and the upgrade tasks' logs unless it ended
    `expected`."""
    deadline = time.monotonic() + timeout
    while (run := e.api(f"/api/v2/dags/{GATE_DAG}/dagRuns/{run_id}"))["state"] not in ("success", "failed"):
        if time.monotonic() > deadline:
            raise AssertionError(f"{name}: run not finished in {timeout:.0f} s: {_run_states(e, run_id)}")
        time.sleep(1)
    if run["state"] != expected:
        pytest.fail(f"{name}: run {run['state']}: {_run_states(e, run_id)}\n" +
                    "\n".join(task_log(e.stack.home, GATE_DAG, run_id, task)[-4000:] for task in ("upgrade", "verify")),
                    pytrace=False)
    return run


def _run_states(e: Env, run_id: str) -> dict[str, str | None]:
    return {task: state for run, task, state in task_states(e.stack.home, GATE_DAG)[0] if run == run_id}


def test_concurrent_single_job_gate_upgrades_on_one_worker_slot_wait_in_the_triggerer(env):
    """Two `flink_upgrade_gate` runs in upgrade mode with `deferrable`, on one worker slot: both upgrades finish
    and restore, each `upgrade` task was seen `deferred` (holding no slot), and no more than one task ever ran."""
    _start_v1(env, GATE_JOBS)
    started = time.monotonic()
    runs = {name: str(env.api(f"/api/v2/dags/{GATE_DAG}/dagRuns", "POST",
                              {"logical_date": None, "conf": _gate_conf(env, name)})["dag_run_id"])
            for name in GATE_JOBS}
    in_flight_while_deferred = 0

    def in_flight(rows: list[tuple[str, str, str | None]]) -> None:
        nonlocal in_flight_while_deferred
        if any(state == "deferred" for _, _, state in rows):
            now = sum((env.record(n) or {}).get("state") in IN_FLIGHT for n in GATE_JOBS)
            in_flight_while_deferred = max(in_flight_while_deferred, now)

    with StateWatch(env.stack.home, GATE_DAG, in_flight) as watch:
        for name, run_id in runs.items():
            _finished(env, name, run_id, 300, "success")
    took = time.monotonic() - started
    deferred = watch.deferred()

    # each upgrade waited for Flink without a worker slot; the one slot was never exceeded
    assert {(run_id, "upgrade") for run_id in runs.values()} <= deferred, deferred
    assert watch.most_running <= SLOTS, watch.most_running
    print(f"\n{len(GATE_JOBS)} gate runs (upgrade mode) on {SLOTS} slot in {took:.0f} s; deferred: {sorted(deferred)}; "
          f"up to {in_flight_while_deferred} upgrade(s) in flight while a task was deferred")
    _cancel(env, [_assert_upgraded(env, name, GATE_DAG, run_id) for name, run_id in runs.items()])


# ---- a wait the triggerer gives up on -------------------------------------------------------------------------------
GAVE_UP = "without the wait settling"  # the resumed task's log line (operators/flink_waits.timed_out_waits)


def _held_restore_conf(e: Env, name: str, hold: Path, timeout_s: int) -> dict[str, Any]:
    """The gate's upgrade of `name` with a small `timeout_s`, the new version's restore held by Flink itself until
    `hold` exists (`-D ugate.restore-hold-file`, read by the v2-compatible job: its tagger stays INITIALIZING)."""
    conf = _gate_conf(e, name)
    return {**conf, "timeout_s": timeout_s,
            "flink_settings": [*conf["flink_settings"], f"ugate.restore-hold-file={hold}"]}


def _jobs_named(e: Env, name: str) -> dict[str, str]:
    """Every job the cluster ran under `name`: id -> state (one stop and one start leave exactly two)."""
    return {j["jid"]: j["state"] for j in e.hook.list_jobs() if j.get("name") == name}


def _held(e: Env, job_id: str) -> bool:
    return f"UGATE-HOLD variant=v2-compatible job={job_id}" in e.cluster.read_taskmanager_out()


def test_a_restore_slower_than_the_triggers_timeout_is_waited_for_in_the_task_and_the_job_upgrades(env, tmp_path):
    """Flink holds the new version's restore longer than the run's `timeout_s` (20 s): the `upgrade` task is
    `deferred`, the triggerer gives up, the task resumes and says so, and waits in its slot; the restore is let go
    while it waits. The run succeeds and the job is exactly as a non-deferred upgrade leaves it: old job FINISHED
    with the savepoint, new job RUNNING restored from it, every counter continuing, one stop and one start."""
    name, timeout_s = "ugate-deferred-held", 20
    hold = tmp_path / "let-the-restore-go"
    _start_v1(env, [name])
    started = time.monotonic()
    run_id = str(env.api(f"/api/v2/dags/{GATE_DAG}/dagRuns", "POST",
                         {"logical_date": None, "conf": _held_restore_conf(env, name, hold, timeout_s)})["dag_run_id"])
    try:
        with StateWatch(env.stack.home, GATE_DAG) as watch:
            deadline = time.monotonic() + 240
            while GAVE_UP not in (log := task_log(env.stack.home, GATE_DAG, run_id, "upgrade")):
                assert time.monotonic() < deadline, (f"the trigger never gave up: {_run_states(env, run_id)} "
                                                     f"{watch.states(run_id, 'upgrade')}\n{log[-4000:]}")
                time.sleep(0.3)
            gave_up = time.monotonic() - started
            record = env.record(name) or {}
            # Flink really was still restoring when the task took the wait back: the new job is held
            assert record.get("state") == "starting" and _held(env, record["new_job_id"]), record
            assert env.hook.job_status(record["new_job_id"]) == "RUNNING"
            hold.touch()  # the restore goes on while the task waits in its slot (up to timeout_s more)
            run = _finished(env, name, run_id, 240, "success")
    finally:
        hold.touch()
    took = time.monotonic() - started
    states = watch.states(run_id, "upgrade")

    assert "deferred" in states and states[-1] == "success", states
    assert states.index("running", states.index("deferred")) > 0, states  # resumed in a slot after the deferral
    log = task_log(env.stack.home, GATE_DAG, run_id, "upgrade")
    assert f"the triggerer waited {timeout_s}s (timeout_s)" in log and name in log, log[-4000:]
    assert watch.most_running <= SLOTS, watch.most_running
    assert run["state"] == "success"
    new = _assert_upgraded(env, name, GATE_DAG, run_id)
    old = env.record(name)["old_job_id"]
    assert _jobs_named(env, name) == {old: "FINISHED", new: "RUNNING"}  # stopped once, started once
    print(f"\ntrigger gave up {gave_up:.0f} s after the run started (timeout_s {timeout_s}); run took {took:.0f} s; "
          f"upgrade task states {states}")
    _cancel(env, [new])


def test_a_restore_that_never_comes_fails_the_run_with_the_steps_message_and_rolls_back_once(env, tmp_path):
    """Flink holds the new version's restore past the triggerer's `timeout_s` (15 s) and past the task's own wait
    after it: the run fails with the step's own message naming the job and the restore that did not come, and the
    job is left as a non-deferred upgrade whose restore timed out leaves it: rolled back to the old version from the
    same savepoint (record `rolled-back-verified`), the held new job cancelled, one stop, one start of each version
    (the task's retries replay the record), every counter of the old version continuing."""
    name, timeout_s = "ugate-deferred-never", 15
    hold = tmp_path / "never"
    _start_v1(env, [name])
    run_id = str(env.api(f"/api/v2/dags/{GATE_DAG}/dagRuns", "POST",
                         {"logical_date": None, "conf": _held_restore_conf(env, name, hold, timeout_s)})["dag_run_id"])
    try:
        with StateWatch(env.stack.home, GATE_DAG) as watch:
            _finished(env, name, run_id, 360, "failed")
    finally:
        hold.touch()  # nothing may stay held (the new job should be cancelled already)
    states = watch.states(run_id, "upgrade")
    log = task_log(env.stack.home, GATE_DAG, run_id, "upgrade")

    assert "deferred" in states and states[-1] == "failed", states
    assert f"the triggerer waited {timeout_s}s (timeout_s)" in log, log[-4000:]
    record = env.record(name)
    assert record is not None and record["state"] == "rolled-back-verified", record
    assert record["run"] == f"{GATE_DAG}/{run_id}", record
    old, new, back = record["old_job_id"], record["new_job_id"], record["rollback_job_id"]
    said = f"{name}: the new version did not restore (FlinkRestError: job {new} not fully RUNNING after {timeout_s}s"
    assert said in log and f"rolled back: the old version runs again as job {back}" in log, log[-4000:]
    assert _held(env, new)  # Flink was holding it, not our code
    assert old == env.v1[name] and _jobs_named(env, name) == {old: "FINISHED", new: "CANCELED", back: "RUNNING"}
    assert env.hook.restored_from(back).rstrip("/") == record["savepoint"].rstrip("/")
    last, after = env.output()[old].last(), env.wait_for_output(back)
    assert after.variant == "v1" and {k: after.first().get(k) for k in KEYS} == {k: last[k] + 1 for k in KEYS}
    _cancel(env, [back])

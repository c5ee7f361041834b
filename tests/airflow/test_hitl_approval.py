"""The human approval of `flink_upgrade_gate`, answered through Airflow's HITL REST API.

`airflow standalone` (demo/stack.py) and a real Flink 2.3 standalone cluster running v1 of the
counter job of tests/jobs/upgrade/. Each run asks to upgrade v1 to a compatible v2 (the gate
finds it SAFE) with `require_approval`, so the `approve` task (Airflow 3's ApprovalOperator)
waits in `awaiting_input` until someone answers
`PATCH /api/v2/dags/{dag}/dagRuns/{run}/taskInstances/approve/-1/hitlDetails`, as the UI's
Required Actions page does:

* Reject: nothing is upgraded (`upgrade` and `verify` skipped, v1 untouched, no savepoint taken),
  and the run records who rejected it and when (its HITL records: the run's Required Actions);
* Approve: the upgrade steps run: v1 is stopped with a savepoint, v2 starts from it and every
  counter continues where v1 stopped; approved once more with `deferrable`, the upgrade's waits for Flink go to the
  triggerer (the `upgrade` task seen `deferred`) and the job is upgraded the same way;
* a blocked upgrade asked to repair (`repair_savepoint`): the question says what the repair does, and on
  Approve the new version starts from a repaired copy of the stop-with-savepoint, every counter continuing.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import threading
import time
import urllib.error
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.flink

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from upgrade_jobs import JOB_NAME, JobOutput, build_jobs, job_graphs, parse_output  # noqa: E402

from tests.airflow.task_states import StateWatch  # noqa: E402

DAG = "flink_upgrade_gate"
STATE_BUCKET = "upgrade-state"
STATE_PREFIX = "hitl/"
KEYS = {f"k{i}" for i in range(8)}
ENDED = ("success", "failed", "skipped", "upstream_failed", "removed")


@dataclasses.dataclass
class Env:
    """The cluster, the standalone Airflow talking to it, the jars and graphs, the job as it evolves."""

    cluster: Any
    stack: Any
    server: Any
    hook: Any
    jars: dict[str, Path]
    graphs: dict[str, Path]
    current_job: str | None = None
    _api: Any = None

    def api(self, path: str, method: str = "GET", payload: Any = None) -> Any:
        if self._api is None:
            self._api = self.server.api()
        return self._api(path, method, payload)

    def tasks(self, run_id: str) -> dict[str, str | None]:
        tis = self.api(f"/api/v2/dags/{DAG}/dagRuns/{run_id}/taskInstances")["task_instances"]
        return {t["task_id"]: t["state"] for t in tis}

    def wait(self, what: str, probe: Any, timeout: float) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            try:
                found = probe()
            except urllib.error.HTTPError:
                raise
            except OSError:  # the API server (one worker, SQLite) can stall under load: ask again
                found = None
            if found:
                return found
            if time.monotonic() > deadline:
                raise AssertionError(f"{what} not reached in {timeout:.0f}s")
            time.sleep(0.5)

    def trigger(self, variant: str, **extra: Any) -> str:
        conf = {"job_name": JOB_NAME, "savepoint": "latest", "savepoint_root": self.cluster.savepoint_uri,
                "graph": str(self.graphs[variant]), "jar": str(self.jars[variant]), "hasher": "v2",
                "matching": "fixed", "allow_non_restored_state": False, "flink_version": "2.3",
                "mode": "upgrade", "require_approval": True, "rollback_jar": str(self.jars["v1"]),
                "savepoint_target_dir": f"{self.cluster.savepoint_uri}/{JOB_NAME}", "timeout_s": 120, **extra}
        run = self.api(f"/api/v2/dags/{DAG}/dagRuns", "POST", {"logical_date": None, "conf": conf})
        return str(run["dag_run_id"])

    def awaiting_approval(self, run_id: str) -> dict[str, str | None]:
        """Until `approve` waits for a human; fails early if the run ends without asking."""
        def probe() -> dict[str, str | None] | None:
            tasks = self.tasks(run_id)
            if tasks.get("approve") == "awaiting_input":
                return tasks
            if tasks.get("approve") in ENDED or self.run(run_id)["state"] in ("success", "failed"):
                raise AssertionError(f"the run never asked for approval: {tasks}\n{self.logs(run_id)}")
            return None
        return self.wait("approve awaiting input", probe, 180)

    def answer(self, run_id: str, option: str) -> dict[str, Any]:
        """Answer as the UI does; if the answer's reply is lost, the HITL record says whether it landed."""
        path = f"/api/v2/dags/{DAG}/dagRuns/{run_id}/taskInstances/approve/-1/hitlDetails"
        try:
            return self.api(path, "PATCH", {"chosen_options": [option], "params_input": {}})
        except urllib.error.HTTPError:
            raise
        except OSError:
            detail = self.wait("the answer recorded", lambda: (d := self.api(path))["response_received"] and d, 60)
            return {**detail, "responded_by": detail["responded_by_user"]}

    def run(self, run_id: str) -> dict[str, Any]:
        return self.api(f"/api/v2/dags/{DAG}/dagRuns/{run_id}")

    def finished(self, run_id: str, option: str, timeout: float = 420) -> dict[str, Any]:
        """Until the run ends. Should the question be asked again (on a loaded machine Airflow's
        LocalExecutor can lose the task's start acknowledgement and retry `approve`, which then
        asks anew), the same answer is given again, as a person at the UI would."""
        path = f"/api/v2/dags/{DAG}/dagRuns/{run_id}/taskInstances/approve/-1/hitlDetails"

        def probe() -> dict[str, Any] | None:
            run = self.run(run_id)
            if run["state"] in ("success", "failed"):
                return run
            if self.tasks(run_id).get("approve") == "awaiting_input" and not self.api(path)["response_received"]:
                self.answer(run_id, option)
            return None

        try:
            return self.wait("run finished", probe, timeout)
        except AssertionError as exc:
            raise AssertionError(f"{exc}: tasks {self.tasks(run_id)}\n{self.logs(run_id)}") from None

    def logs(self, run_id: str) -> str:
        """The upgrade task's log, for a failure message."""
        try:
            doc = self.api(f"/api/v2/dags/{DAG}/dagRuns/{run_id}/taskInstances/upgrade/logs/1?full_content=true")
        except urllib.error.HTTPError as exc:
            return f"(no upgrade log: {exc})"
        return json.dumps(doc.get("content"))[-3000:]

    def output(self) -> dict[str, JobOutput]:
        return parse_output(self.cluster.read_taskmanager_out())

    def savepoints(self) -> set[str]:
        return {m.parent.name for m in (self.cluster.savepoint_dir / JOB_NAME).glob("savepoint-*/_metadata")}

    def upgrade_record(self) -> dict[str, Any] | None:
        from flink_gate.upgrade_records import job_key

        try:
            body = self.stack.s3.client().get_object(
                Bucket=STATE_BUCKET, Key=f"{STATE_PREFIX}upgrades/{job_key(JOB_NAME)}/record.json")["Body"]
        except Exception as exc:
            if "NoSuchKey" in str(exc):
                return None
            raise
        return json.loads(body.read())

    def wait_for_output(self, job_id: str, timeout: float = 90) -> JobOutput:
        def probe() -> JobOutput | None:
            out = self.output().get(job_id)
            return out if out is not None and set(out.counts) >= KEYS else None
        return self.wait(f"job {job_id} counting every key", probe, timeout)


@pytest.fixture(scope="module")
def env(stack):
    """Flink (v1 running, one savepoint under the job's prefix) and `airflow standalone`, started
    side by side to save a minute; the standalone gets the Flink connection and the record root."""
    import os
    import shutil

    from demo import stack as st
    from flink_bridge.cluster import FlinkCluster, default_workdir

    jars = build_jobs("2.3")
    graphs = job_graphs(jars, ("v1", "v2-compatible", "v2-fails"))
    workdir = default_workdir("hitl-approval")
    shutil.rmtree(workdir, ignore_errors=True)
    cluster = FlinkCluster(workdir)
    started: dict[str, Any] = {}

    def start_flink() -> None:
        try:
            started["cluster"] = cluster.start()
        except BaseException as exc:  # reported by the main thread
            started["error"] = exc

    flink = threading.Thread(target=start_flink)
    # the REST port is chosen when the config is written: start Flink first, then give Airflow its address
    flink.start()
    deadline = time.monotonic() + 120
    while not (cluster.conf_dir / "config.yaml").is_file() and flink.is_alive() and time.monotonic() < deadline:
        time.sleep(0.2)
    server = None
    try:
        try:
            stack.s3.client().create_bucket(Bucket=STATE_BUCKET)
        except Exception as exc:  # created by another module of the session
            if "BucketAlready" not in type(exc).__name__ + str(exc):
                raise
        conn = _flink_connection(cluster.rest_url)
        airflow = dataclasses.replace(stack, env={**stack.env, "AIRFLOW_CONN_FLINK_DEFAULT": conn,
                                                  "AIRFLOW_VAR_UPGRADE_GATE_STATE_ROOT":
                                                  f"s3://{STATE_BUCKET}/{STATE_PREFIX}"}, procs=[])
        server = st.start_standalone(airflow)
        flink.join()
        if "error" in started:
            raise started["error"]
        os.environ["AIRFLOW_CONN_FLINK_DEFAULT"] = conn
        from flink_gate.hooks.flink_rest import FlinkRestHook

        hook = FlinkRestHook("flink_default", retries=2)
        e = Env(cluster, airflow, server, hook, jars, graphs)
        e.wait("DAG parsed", lambda: _exists(e, f"/api/v2/dags/{DAG}"), 180)
        e.api(f"/api/v2/dags/{DAG}", "PATCH", {"is_paused": False})
        job_id = hook.run_jar(hook.upload_jar(jars["v1"]))
        hook.wait_until_restored(job_id, timeout=120)
        e.wait_for_output(job_id)
        trigger = hook.trigger_savepoint(job_id, f"{cluster.savepoint_uri}/{JOB_NAME}")
        hook.wait_for_savepoint(job_id, trigger, timeout=120)
        e.current_job = job_id
        yield e
    finally:
        os.environ.pop("AIRFLOW_CONN_FLINK_DEFAULT", None)
        if server is not None:
            st.stop_process_group(server.proc, timeout=20)
        flink.join()
        cluster.stop()


def _flink_connection(rest_url: str) -> str:
    host, port = rest_url.removeprefix("http://").split(":")
    return json.dumps({"conn_type": "http", "host": host, "port": int(port), "schema": "http"})


def _exists(e: Env, path: str) -> bool:
    try:
        return bool(e.api(path))
    except urllib.error.HTTPError:
        return False


def test_reject_leaves_the_running_job_alone_and_says_who_rejected(env):
    v1 = env.current_job
    savepoints = env.savepoints()
    run_id = env.trigger("v2-compatible")
    tasks = env.awaiting_approval(run_id)
    # the gate has spoken (SAFE) and nothing has touched the cluster while the question is open
    assert tasks["gate"] == "success" and tasks["upgrade"] in (None, "none", "scheduled", "queued"), tasks
    detail = env.api(f"/api/v2/dags/{DAG}/dagRuns/{run_id}/taskInstances/approve/-1/hitlDetails")
    assert detail["options"] == ["Approve", "Reject"] and detail["response_received"] is False, detail
    assert detail["subject"] == f"Upgrade Flink job {JOB_NAME}?"
    assert "SAFE" in detail["body"] and f"/report/{JOB_NAME}/" in detail["body"], detail["body"]
    # what an Approve sets in motion: which job stops, where its savepoint goes, what starts, the way back
    assert f"the RUNNING Flink job named {JOB_NAME} is stopped with a savepoint into " in detail["body"], detail["body"]
    assert "ugate-counter-v2-compatible.jar" in detail["body"] and "ugate-counter-v1.jar is restarted" in detail["body"]
    assert env.hook.job_status(v1) == "RUNNING"

    answered = env.answer(run_id, "Reject")
    assert answered["chosen_options"] == ["Reject"] and answered["responded_by"]["name"] == env.server.user

    run = env.finished(run_id, "Reject")
    tasks = env.tasks(run_id)
    assert tasks["approve"] == "success", tasks  # a human answered: the question itself succeeded
    assert tasks["upgrade"] == "skipped" and tasks["verify"] == "skipped", tasks
    assert run["state"] == "success", run
    # who rejected it, and when, stays on the run: its HITL records (the run's Required Actions tab)
    listed = env.api(f"/api/v2/dags/{DAG}/dagRuns/{run_id}/hitlDetails")["hitl_details"]
    assert len(listed) == 1, listed
    detail = listed[0]
    assert detail["task_instance"]["task_id"] == "approve" and detail["response_received"] is True
    assert detail["chosen_options"] == ["Reject"] and detail["responded_at"], detail
    assert detail["responded_by_user"]["name"] == env.server.user, detail
    # and the run's note, in the grid (steps.approval_note, copied by the plugin's listener)
    assert run["note"] and f"REJECTED by {env.server.user} at " in run["note"], run["note"]
    assert "nothing was upgraded" in run["note"]
    # no upgrade: v1 still RUNNING, no new job, no savepoint taken, no upgrade record
    assert env.hook.job_status(v1) == "RUNNING"
    assert {j["jid"] for j in env.hook.list_jobs() if j["state"] == "RUNNING"} == {v1}
    assert env.savepoints() == savepoints
    assert env.upgrade_record() is None


@pytest.mark.parametrize("deferrable", [False, True], ids=["in-slot", "deferrable"])
def test_approve_runs_the_upgrade_and_every_counter_continues(env, deferrable):
    """Approved, the upgrade runs; with `deferrable` its waits for Flink after the answer go to the triggerer (the
    `upgrade` task seen `deferred`) and it ends the same way. The second run upgrades the job the first started."""
    old = env.current_job
    if old is None or env.hook.job_status(old) != "RUNNING":
        pytest.fail("needs the job running (the rejected run before must have left it alone)")
    savepoints = env.savepoints()
    run_id = env.trigger("v2-compatible", deferrable=deferrable)
    env.awaiting_approval(run_id)
    assert env.hook.job_status(old) == "RUNNING" and env.savepoints() == savepoints  # nothing before the answer

    answered = env.answer(run_id, "Approve")
    assert answered["chosen_options"] == ["Approve"]

    with StateWatch(env.stack.home, DAG) as watch:
        run = env.finished(run_id, "Approve")
    tasks = env.tasks(run_id)
    assert ("deferred" in watch.states(run_id, "upgrade")) is deferrable, watch.states(run_id, "upgrade")
    assert run["state"] == "success", (tasks, env.logs(run_id))
    assert tasks["approve"] == "success" and tasks["no_approval_needed"] == "skipped", tasks
    assert tasks["upgrade"] == "success" and tasks["verify"] == "success", tasks
    assert f"APPROVED by {env.server.user} at " in (run["note"] or ""), run["note"]
    assert "UPGRADED: " in run["note"] and "upgrading" not in run["note"], run["note"]
    up = env.upgrade_record()
    assert up is not None and up["state"] == "running-verified" and up.get("run") == f"{DAG}/{run_id}", up
    new = up["new_job_id"]
    # stopped with a savepoint, the new job started from exactly that savepoint
    assert up["old_job_id"] == old and env.hook.job_status(old) == "FINISHED"
    assert env.savepoints() - savepoints == {Path(up["savepoint"].removeprefix("file:")).name}
    assert env.hook.job_status(new) == "RUNNING"
    assert env.hook.restored_from(new).rstrip("/") == up["savepoint"].rstrip("/")
    before, after = env.output()[old], env.wait_for_output(new)
    assert after.variant == "v2-compatible"
    last, first = before.last(), after.first()
    assert {k: first.get(k) for k in KEYS} == {k: last[k] + 1 for k in KEYS}, (last, first)
    assert min(first.values()) > 1, "a counter restarted from zero"
    env.current_job = new


def test_an_approved_repair_upgrades_a_blocked_job_and_every_counter_continues(env):
    """v2-fails changes the counter's max parallelism: the gate blocks it as it is, and with `repair_savepoint`
    notes REPAIRABLE instead; the question says what the repair will do; on Approve the job is stopped with a
    savepoint, a repaired copy is written beside it and checked, and v2-fails starts from the copy."""
    old = env.current_job
    if old is None or env.hook.job_status(old) != "RUNNING":
        pytest.fail("needs the job the approved upgrade before started")
    savepoints = env.savepoints()
    run_id = env.trigger("v2-fails", repair_savepoint=True)
    tasks = env.awaiting_approval(run_id)
    assert tasks["gate"] == "success", tasks  # blocked as it is, repairable: on to the question, nothing touched
    detail = env.api(f"/api/v2/dags/{DAG}/dagRuns/{run_id}/taskInstances/approve/-1/hitlDetails")
    assert "BLOCKED the upgrade as it is (RESTORE_FAILS)" in detail["body"], detail["body"]
    assert "--max-parallelism 256" in detail["body"] and "not modified" in detail["body"], detail["body"]
    assert env.hook.job_status(old) == "RUNNING" and env.savepoints() == savepoints

    env.answer(run_id, "Approve")
    run = env.finished(run_id, "Approve")
    tasks = env.tasks(run_id)
    assert run["state"] == "success", (tasks, env.logs(run_id))
    assert tasks["upgrade"] == "success" and tasks["verify"] == "success", tasks
    up = env.upgrade_record()
    assert up is not None and up["state"] == "running-verified", up
    new = up["new_job_id"]
    assert up["start_from"] == up["savepoint"].rstrip("/") + "-repaired"
    assert env.hook.restored_from(new).rstrip("/") == up["start_from"]
    assert (Path(up["savepoint"].removeprefix("file:")) / "_metadata").is_file()  # the stop-with-savepoint stays
    before, after = env.output()[old], env.wait_for_output(new)
    assert after.variant == "v2-fails"
    last, first = before.last(), after.first()
    assert {k: first.get(k) for k in KEYS} == {k: last[k] + 1 for k in KEYS}, (last, first)
    env.current_job = new
    env.hook.cancel(new)

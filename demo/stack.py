"""The embedded stack the demo and the Airflow tests run on (docs/design.md, Real components): all local, all real.

* SeaweedFS `weed mini` on 127.0.0.1 (tests/s3_server.py), loaded with the bundled real
  savepoints and job graphs of the restore scenarios that real Flink ran
  (tests/fixtures/restores/<release>/<scenario>/): `s3://flink-savepoints/<job>/<savepoint>/_metadata`
  and `s3://flink-graphs/<job>/<scenario>.json`;
* an HTTP receiver on 127.0.0.1 that records every alert the webhook notifier posts;
* an Airflow home under `.work/airflow-<name>` (SQLite, no examples, low parallelism), with
  connections and variables passed as `AIRFLOW_CONN_*` / `AIRFLOW_VAR_*` environment variables
  made from generated test keys, so nothing secret is written to code or to the database;
* `airflow dags test` runs of `flink_upgrade_gate` (Spark `local[*]` does the operator IDs).

Everything started here is stopped by `Stack.stop()` (SIGINT to each process group).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
WORK = REPO / ".work"
AIRFLOW_VENV = WORK / "venv-airflow"
RESTORES = REPO / "tests" / "fixtures" / "restores"
RELEASE = "2.3.0"
SAVEPOINT_BUCKET = "flink-savepoints"
GRAPH_BUCKET = "flink-graphs"
CATALOGUE = "s3://flink-graphs/next"  # the fleet's next graphs, one spec per job: <CATALOGUE>/<job>.json

# job name -> (release, scenario): upgrades that real Flink ran. orders-enrichment is compatible
# (SAFE); fraud-scoring inserts a map before a uid-less keyed operator: Flink starts and hands the
# keyed state to the map, which ignores it (STATE_MISROUTED); payments-dedup changes a parallelism
# that breaks a chain of uid-less operators: Flink refuses the savepoint (RESTORE_FAILS);
# ledger-rollup drops a uid, and with allowNonRestoredState Flink starts without that state
# (STATE_LOSS).
SCENARIOS = {
    "orders-enrichment": (RELEASE, "identical-no-uids"),
    "fraud-scoring": (RELEASE, "map-inserted-before-uidless-keyed"),
    "payments-dedup": (RELEASE, "parallelism-breaks-chain-no-uids"),
    "ledger-rollup": (RELEASE, "uid-removed"),
}


# ---- the alert receiver ---------------------------------------------------------------------
class AlertReceiver:
    """A real HTTP endpoint on 127.0.0.1 that keeps every JSON body POSTed to it."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                try:
                    doc = json.loads(body)
                except ValueError:
                    doc = {"raw": body.decode("utf-8", "replace")}
                receiver.received.append({"path": self.path, "body": doc})
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# ---- S3 -------------------------------------------------------------------------------------
def _s3_server_module() -> Any:
    sys.path.insert(0, str(REPO / "tests"))
    try:
        import s3_server
    finally:
        sys.path.remove(str(REPO / "tests"))
    return s3_server


def load_bucket(client: Any) -> dict[str, dict[str, str]]:
    """Upload each scenario's savepoint (`_metadata` only: sizes and handles are all the gate reads)
    and both job graphs; returns, per job, the URIs the DAG is triggered with."""
    for bucket in (SAVEPOINT_BUCKET, GRAPH_BUCKET):
        client.create_bucket(Bucket=bucket)
    out: dict[str, dict[str, str]] = {}
    for job, (release, scenario) in SCENARIOS.items():
        case = RESTORES / release / scenario
        outcome = json.loads((case / "outcome.json").read_text())
        sp_dir = (case / outcome["savepoint"]["fixture"]).resolve()
        sp_name = outcome["savepoint"]["pointer"].rstrip("/").rsplit("/", 1)[-1]
        key = f"{job}/{sp_name}/_metadata"
        client.put_object(Bucket=SAVEPOINT_BUCKET, Key=key, Body=(sp_dir / "_metadata").read_bytes())
        for name in ("graph-a", "graph-b"):
            client.put_object(Bucket=GRAPH_BUCKET, Key=f"{job}/{scenario}-{name}.json",
                              Body=(case / f"{name}.json").read_bytes())
        client.put_object(Bucket=GRAPH_BUCKET, Key=f"next/{job}.json", Body=(case / "graph-b.json").read_bytes())
        out[job] = {"savepoint": f"s3://{SAVEPOINT_BUCKET}/{job}/{sp_name}",
                    "graph": f"s3://{GRAPH_BUCKET}/{job}/{scenario}-graph-b.json",
                    "scenario": f"{release}/{scenario}", "flink_restore": outcome["restore"]["status"]}
    return out


# ---- Airflow --------------------------------------------------------------------------------
def airflow_bin(name: str = "airflow") -> str:
    return str(AIRFLOW_VENV / "bin" / name)


@dataclass
class Stack:
    name: str
    home: Path
    env: dict[str, str]
    s3: Any
    receiver: AlertReceiver
    inputs: dict[str, dict[str, str]]
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def reports_dir(self) -> Path:
        return Path(self.env["UPGRADE_GATE_REPORTS_DIR"])

    def airflow(self, *args: str, timeout: float = 600, check: bool = False) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([airflow_bin(), *args], env=self.env, cwd=self.home, capture_output=True, text=True,
                              timeout=timeout)
        if check and proc.returncode != 0:
            raise RuntimeError(f"airflow {' '.join(args)} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n"
                               f"{proc.stderr[-3000:]}")
        return proc

    def dags_test(self, dag_id: str, conf: dict[str, Any], timeout: float = 600) -> tuple[str, dict[str, str], str]:
        """`airflow dags test` one run; returns (run state, {task_id: state}, output)."""
        before = self._last_run_id(dag_id)
        proc = self.airflow("dags", "test", dag_id, "-c", json.dumps(conf), timeout=timeout)
        run_id = self._last_run_id(dag_id)
        if run_id is None or run_id == before:
            raise RuntimeError(f"airflow dags test made no run:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
        with sqlite3.connect(self.home / "airflow.db") as db:
            state = db.execute("select state from dag_run where dag_id=? and run_id=?", (dag_id, run_id)).fetchone()[0]
            tasks = dict(db.execute("select task_id, state from task_instance where dag_id=? and run_id=?",
                                    (dag_id, run_id)).fetchall())
        return str(state), {k: str(v) for k, v in tasks.items()}, proc.stdout + proc.stderr

    def _last_run_id(self, dag_id: str) -> str | None:
        db_path = self.home / "airflow.db"
        if not db_path.exists():
            return None
        with sqlite3.connect(db_path) as db:
            row = db.execute("select run_id from dag_run where dag_id=? order by id desc limit 1", (dag_id,)).fetchone()
        return row[0] if row else None

    def stop(self) -> None:
        for proc in reversed(self.procs):
            stop_process_group(proc)
        self.receiver.stop()
        self.s3.stop()


def stop_process_group(proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    """SIGINT to the process group (how `airflow standalone` shuts its children down), then SIGKILL."""
    import signal

    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=timeout)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def airflow_env(home: Path, s3_endpoint: str, access: str, secret: str, webhook_port: int,
                extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment an embedded Airflow runs with: config, connections, variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "AWS_"))}
    env.update({
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__PARALLELISM": "4",
        "AIRFLOW__CORE__MAX_ACTIVE_TASKS_PER_DAG": "4",
        "AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT": "120",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
        "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
        "UPGRADE_GATE_REPORTS_DIR": str(home / "gate-reports"),
        "UPGRADE_GATE_WORK_DIR": str(home / "gate-work"),
        "PATH": f"{AIRFLOW_VENV / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": str(AIRFLOW_VENV / "bin" / "python"),
        "PYSPARK_DRIVER_PYTHON": str(AIRFLOW_VENV / "bin" / "python"),
        "PYTHONPATH": str(REPO),
        "AIRFLOW_CONN_AWS_DEFAULT": json.dumps({
            "conn_type": "aws", "login": access, "password": secret,
            "extra": {"endpoint_url": s3_endpoint, "region_name": "us-east-1",
                      "config_kwargs": {"s3": {"addressing_style": "path"}, "retries": {"max_attempts": 3}}}}),
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
        "AIRFLOW_CONN_UPGRADE_GATE_WEBHOOK": json.dumps({"conn_type": "http", "host": "127.0.0.1",
                                                         "port": webhook_port, "schema": "http"}),
        "AIRFLOW_VAR_UPGRADE_GATE_SAVEPOINT_ROOT": f"s3://{SAVEPOINT_BUCKET}",
        "AIRFLOW_VAR_UPGRADE_GATE_CATALOGUE": CATALOGUE,
    })
    env.update(extra or {})
    return env


def start(name: str, *, fresh: bool = True, extra_env: dict[str, str] | None = None) -> Stack:
    """SeaweedFS + alert receiver + an initialised Airflow home `.work/airflow-<name>`."""
    home = WORK / f"airflow-{name}"
    if fresh and home.exists():
        shutil.rmtree(home)
    home.mkdir(parents=True, exist_ok=True)
    s3mod = _s3_server_module()
    # The throwaway test keys SeaweedFS is started with (it enforces them); they reach Airflow only
    # through the AIRFLOW_CONN_AWS_DEFAULT environment variable.
    access, secret = s3mod.ACCESS_KEY, s3mod.SECRET_KEY
    (home / "s3").mkdir(exist_ok=True)
    s3 = s3mod.start(home / "s3")
    receiver = AlertReceiver()
    try:
        inputs = load_bucket(s3.client(access, secret))
        env = airflow_env(home, s3.endpoint, access, secret, receiver.port, extra_env)
        stack = Stack(name, home, env, s3, receiver, inputs)
        stack.airflow("db", "migrate", timeout=600, check=True)
    except BaseException:
        receiver.stop()
        s3.stop()
        raise
    return stack


def expected_verdict(job: str, **options: Any) -> str:
    """What the core says about a loaded job's upgrade, read straight from the fixture files: the
    DAG must come to the same verdict through S3, Spark and Airflow."""
    from upgrade_gate.storage.check_inputs import check_upgrade

    release, scenario = SCENARIOS[job]
    case = RESTORES / release / scenario
    outcome = json.loads((case / "outcome.json").read_text())
    savepoint = (case / outcome["savepoint"]["fixture"]).resolve()
    return check_upgrade(str(savepoint), case / "graph-b.json", flink_version=release.rsplit(".", 1)[0],
                         **options).verdict


def gate_conf(stack: Stack, job: str, **overrides: Any) -> dict[str, Any]:
    """The trigger params of a check-only run for one of the loaded jobs."""
    conf = {"job_name": job, "savepoint": "latest", "graph": stack.inputs[job]["graph"], "hasher": "v2",
            "matching": "fixed", "allow_non_restored_state": False, "flink_version": RELEASE.rsplit(".", 1)[0],
            "mode": "check"}
    conf.update(overrides)
    return conf


# ---- airflow standalone (UI tests) -----------------------------------------------------------
class AirflowApi:
    """Airflow's public REST API with a JWT from the Simple auth manager (fetched on first use, renewed after
    10 minutes): `api("/api/v2/dags/…")`, `api(path, "POST", payload)`. The one client of the tests and benchmarks
    that drive a standalone Airflow."""

    def __init__(self, url: str, user: str, password: str) -> None:
        self.url, self.user, self.password = url, user, password
        self._token: str | None = None
        self._token_at = 0.0

    def token(self) -> str:
        import urllib.request

        if self._token is None or time.monotonic() - self._token_at > 600:
            body = json.dumps({"username": self.user, "password": self.password}).encode()
            req = urllib.request.Request(f"{self.url}/auth/token", data=body,
                                         headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=30) as resp:
                self._token = json.loads(resp.read())["access_token"]
            self._token_at = time.monotonic()
        return self._token

    def __call__(self, path: str, method: str = "GET", payload: Any = None) -> Any:
        import urllib.request

        req = urllib.request.Request(f"{self.url}{path}", method=method,
                                     data=json.dumps(payload).encode() if payload is not None else None,
                                     headers={"Authorization": f"Bearer {self.token()}",
                                              "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read())


@dataclass
class Standalone:
    url: str
    user: str
    password: str
    proc: subprocess.Popen[bytes]
    log: Path

    def api(self) -> AirflowApi:
        return AirflowApi(self.url, self.user, self.password)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# one slot more than the fleet scan may hold (its `max_active_tasks`): a manual gate never waits for a Spark job
STANDALONE_PARALLELISM = 3


def start_standalone(stack: Stack, timeout: float = 240, parallelism: int = STANDALONE_PARALLELISM) -> Standalone:
    """`airflow standalone` on 127.0.0.1 with low parallelism (`parallelism` worker slots: tasks running at once;
    a deferred task holds none) and a generated admin password.

    Started in its own process group; `Stack.stop()` stops it with SIGINT to that group
    (SIGTERM leaves children behind; docs/design.md, Real components)."""
    import secrets
    import urllib.request

    port = free_port()
    password = secrets.token_urlsafe(16)
    pw_file = stack.home / "simple_auth_manager_passwords.json"
    pw_file.write_text(json.dumps({"gate-admin": password}))
    pw_file.chmod(0o600)
    url = f"http://127.0.0.1:{port}"
    stack.env.update({
        "AIRFLOW__API__HOST": "127.0.0.1", "AIRFLOW__API__PORT": str(port), "AIRFLOW__API__BASE_URL": url,
        "AIRFLOW__API__WORKERS": "1", "AIRFLOW__CORE__PARALLELISM": str(parallelism),
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "gate-admin:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(pw_file),
        # the DAG files do not change while the stack runs: re-parsing them every few seconds competed with
        # the gate's tasks for the two cores; a shorter scheduler idle sleep hands tasks on sooner
        # (bench/bench_airflow_gate.py, docs/performance.md "Gate: trigger to verdict")
        "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "300", "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
        "AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME": "0.25",
        # every DAG starts paused: the test unpauses the one it triggers, so the scheduled fleet
        # scan does not start on its own in the middle of other tests
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
    })
    log = stack.home / "standalone.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([airflow_bin(), "standalone"], env=stack.env, cwd=stack.home, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    stack.procs.append(proc)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"airflow standalone exited {proc.returncode}:\n{log.read_text()[-4000:]}")
        try:
            with urllib.request.urlopen(f"{url}/api/v2/monitor/health", timeout=2) as resp:
                health = json.loads(resp.read())
            if all(health.get(k, {}).get("status") == "healthy" for k in ("metadatabase", "scheduler")):
                # the task execution API builds its versioned routes on its first request, blocking the API
                # server for 11-35 s on this machine: paid here, not by the first task (docs/performance.md,
                # "Gate: trigger to verdict")
                warm = max(30.0, deadline - time.monotonic())
                urllib.request.urlopen(f"{url}/execution/health", timeout=warm).close()
                return Standalone(url, "gate-admin", password, proc, log)
        except OSError:
            pass
        time.sleep(1)
    raise RuntimeError(f"airflow standalone not healthy after {timeout:.0f}s:\n{log.read_text()[-4000:]}")

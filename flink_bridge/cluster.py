"""A real Flink standalone cluster (one JobManager, one TaskManager) on 127.0.0.1.

The zero-state-loss promise is only worth something if it holds on a real cluster, so the
end-to-end tests stop, savepoint and restart jobs on one. It is started from the `bin/` scripts
of the full `apache-flink` package (`pyflink/bin/start-cluster.sh`, the same scripts operators
use), with a generated `config.yaml`:

* every address bound to 127.0.0.1, every port (REST, RPC, blob, data) chosen free, so two
  checkouts on one machine never collide and nothing listens beyond loopback;
* small memory (JobManager 768 MiB, TaskManager 1 GiB, 2 slots; managed memory cut to 10 %
  because the jobs use the heap state backend), so it fits a 2-core machine beside Airflow;
* `restart-strategy: none`, so a job that cannot restore ends FAILED at once instead of
  restarting forever: that is what makes a failed upgrade visible to the rollback logic;
* `state.savepoints.dir` a `file://` directory: the `apache-flink` package ships no S3
  filesystem plugin (its `opt/` and `plugins/` hold only metrics and GPU plugins) and no other
  source of the plugin jar is reachable here, so Flink cannot write `s3://` savepoints. The gate
  reads `file://` with the same code path (`upgrade_gate.storage.savepoints`) it uses for `s3://`.

Configuration, logs (`*.log`, the TaskManager's `*.out`, which holds what jobs print) and pid
files live in one directory under `.work/` and are kept after the cluster stops, for post-mortems.
`stop()` runs `stop-cluster.sh` and then kills, by pid, any of *this* cluster's JVMs still alive.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flink_bridge.dist import WORK_DIR
from hashing.versions import DEFAULT, PATCH_RELEASES

RELEASE = PATCH_RELEASES[DEFAULT]  # the release the gate targets by default (hashing/versions.py)
JOBMANAGER_MEMORY = "768m"
TASKMANAGER_MEMORY = "1024m"
SLOTS = 2


class ClusterError(RuntimeError):
    """The cluster did not start (the message carries the tail of the JobManager/TaskManager logs)."""


def flink_home(release: str = RELEASE) -> Path:
    """FLINK_HOME of the full `apache-flink` package (its `pyflink/` folder: bin, lib, opt, plugins).

    Installed into `.work/pyflink/<release>` on first use by the exporter's `pyflink_python`."""
    from flink_bridge.exporter import pyflink_python

    python = pyflink_python(release)
    found = sorted(python.parent.parent.glob("lib/python3*/site-packages/pyflink/bin/start-cluster.sh"))
    if not found:
        raise ClusterError(f"no pyflink/bin/start-cluster.sh in {python.parent.parent}")
    return found[0].parent.parent


def free_ports(n: int) -> list[int]:
    """`n` distinct free loopback ports; all sockets stay bound until every port is chosen."""
    held: list[socket.socket] = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            held.append(s)
        return [s.getsockname()[1] for s in held]
    finally:
        for s in held:
            s.close()


def render_config(*, rest_port: int, rpc_port: int, blob_port: int, tm_rpc_port: int, data_port: int,
                  savepoint_dir: str, tmp_dir: Path, upload_dir: Path, slots: int = SLOTS,
                  jobmanager_memory: str = JOBMANAGER_MEMORY, taskmanager_memory: str = TASKMANAGER_MEMORY,
                  extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The cluster's `config.yaml` as a flat dict of Flink option keys (Flink accepts flat keys)."""
    conf: dict[str, Any] = {
        "jobmanager.rpc.address": "127.0.0.1",
        "jobmanager.rpc.port": rpc_port,
        "jobmanager.bind-host": "127.0.0.1",
        "jobmanager.memory.process.size": jobmanager_memory,
        "taskmanager.host": "127.0.0.1",
        "taskmanager.bind-host": "127.0.0.1",
        "taskmanager.rpc.port": tm_rpc_port,
        "taskmanager.data.port": data_port,
        "taskmanager.numberOfTaskSlots": slots,
        "taskmanager.memory.process.size": taskmanager_memory,
        "taskmanager.memory.managed.fraction": 0.1,
        "blob.server.port": blob_port,
        "rest.address": "127.0.0.1",
        "rest.bind-address": "127.0.0.1",
        "rest.port": rest_port,
        "web.upload.dir": str(upload_dir),
        "io.tmp.dirs": str(tmp_dir),
        "parallelism.default": 1,
        "state.backend.type": "hashmap",
        "state.savepoints.dir": savepoint_dir,
        "restart-strategy.type": "none",
        "jobmanager.execution.failover-strategy": "region",
    }
    conf.update(extra or {})
    return conf


@dataclass
class FlinkCluster:
    """One standalone cluster: `start()` it, use `rest_url`, `stop()` it (also a context manager)."""

    workdir: Path
    release: str = RELEASE
    savepoint_dir: Path | None = None
    extra_config: dict[str, Any] = field(default_factory=dict)
    home: Path | None = None
    rest_port: int = 0
    _env: dict[str, str] = field(default_factory=dict, repr=False)

    # ---- paths ------------------------------------------------------------------------------
    @property
    def conf_dir(self) -> Path:
        return self.workdir / "conf"

    @property
    def log_dir(self) -> Path:
        return self.workdir / "log"

    @property
    def pid_dir(self) -> Path:
        return self.workdir / "pid"

    @property
    def rest_url(self) -> str:
        return f"http://127.0.0.1:{self.rest_port}"

    @property
    def savepoint_uri(self) -> str:
        assert self.savepoint_dir is not None
        return self.savepoint_dir.resolve().as_uri()

    def taskmanager_out(self) -> list[Path]:
        """The TaskManagers' stdout files: what the jobs print (`PrintSink`, `System.out`)."""
        return sorted(self.log_dir.glob("flink-*-taskexecutor-*.out"))

    def read_taskmanager_out(self) -> str:
        return "".join(p.read_text(errors="replace") for p in self.taskmanager_out())

    def logs(self) -> list[Path]:
        return sorted(self.log_dir.glob("flink-*"))

    def log_tail(self, chars: int = 3000) -> str:
        parts = []
        for p in self.logs():
            if p.suffix in (".log", ".out"):
                text = p.read_text(errors="replace")
                parts.append(f"==> {p.name} <==\n{text[-chars:]}")
        return "\n".join(parts)

    # ---- lifecycle --------------------------------------------------------------------------
    def _script(self, name: str) -> list[str]:
        assert self.home is not None
        return ["bash", str(self.home / "bin" / name)]

    def _write_config(self) -> None:
        rest, rpc, blob, tm_rpc, data = free_ports(5)
        self.rest_port = rest
        if self.savepoint_dir is None:
            self.savepoint_dir = self.workdir / "savepoints"
        self.savepoint_dir.mkdir(parents=True, exist_ok=True)
        for d in (self.conf_dir, self.log_dir, self.pid_dir, self.workdir / "tmp", self.workdir / "upload"):
            d.mkdir(parents=True, exist_ok=True)
        conf = render_config(rest_port=rest, rpc_port=rpc, blob_port=blob, tm_rpc_port=tm_rpc, data_port=data,
                             savepoint_dir=self.savepoint_uri, tmp_dir=self.workdir / "tmp",
                             upload_dir=self.workdir / "upload", extra=self.extra_config)
        # JSON is valid YAML: no quoting surprises for paths and values.
        lines = [f"{k}: {json.dumps(v)}" for k, v in conf.items()]
        assert self.home is not None
        java_opts = _default_java_opts(self.home)
        if java_opts:
            lines.append(f"env.java.opts.all: {json.dumps(java_opts)}")
        (self.conf_dir / "config.yaml").write_text("\n".join(lines) + "\n")
        (self.conf_dir / "masters").write_text(f"127.0.0.1:{rest}\n")
        (self.conf_dir / "workers").write_text("127.0.0.1\n")
        for name in ("log4j.properties", "log4j-console.properties", "log4j-cli.properties"):
            src = self.home / "conf" / name
            if src.is_file():
                shutil.copy(src, self.conf_dir / name)

    def start(self, timeout: float = 120) -> FlinkCluster:
        """Start JobManager + TaskManager and wait until REST answers with a registered TaskManager."""
        if self.home is None:
            self.home = flink_home(self.release)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._write_config()
        self._env = {k: v for k, v in os.environ.items() if not k.startswith(("FLINK_", "HADOOP_"))}
        self._env.update(FLINK_CONF_DIR=str(self.conf_dir), FLINK_LOG_DIR=str(self.log_dir),
                         FLINK_PID_DIR=str(self.pid_dir), MAX_LOG_FILE_NUMBER="3")
        proc = subprocess.run(self._script("start-cluster.sh"), env=self._env, capture_output=True, text=True,
                              timeout=120, cwd=self.workdir)
        if proc.returncode != 0:
            self.stop()
            raise ClusterError(f"start-cluster.sh exited {proc.returncode}: {proc.stdout}{proc.stderr}")
        try:
            self.wait_ready(timeout)
        except ClusterError:
            tail = self.log_tail()
            self.stop()
            raise ClusterError(f"Flink cluster at {self.rest_url} not ready after {timeout:.0f}s\n{tail}") from None
        return self

    def wait_ready(self, timeout: float = 120) -> dict[str, Any]:
        """Block until `/overview` reports a TaskManager with free slots; return the overview."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.pids():
                raise ClusterError("the Flink JVMs exited")
            try:
                overview = self.get("/overview")
            except (OSError, urllib.error.URLError, ValueError):
                overview = {}
            if overview.get("taskmanagers", 0) >= 1 and overview.get("slots-total", 0) >= 1:
                return overview
            time.sleep(0.5)
        raise ClusterError("timeout")

    def get(self, path: str) -> Any:
        """A GET for readiness and test assertions (the product's client is the plugins' FlinkRestHook)."""
        with urllib.request.urlopen(f"{self.rest_url}/{path.lstrip('/')}", timeout=10) as resp:
            return json.loads(resp.read() or b"null")

    def pids(self) -> list[int]:
        """The pids of this cluster's daemons, from its private pid directory, that are alive."""
        alive = []
        for f in sorted(self.pid_dir.glob("*.pid")) + sorted(self.pid_dir.glob("*.pid.tmp")):
            for line in f.read_text().split():
                if line.isdigit() and _alive(int(line)):
                    alive.append(int(line))
        return alive

    def stop(self, timeout: float = 30) -> None:
        """stop-cluster.sh, then SIGTERM / SIGKILL whatever of this cluster is still alive."""
        leftovers = self.pids()
        if self.home is not None and self._env:
            with contextlib.suppress(subprocess.SubprocessError, OSError):
                subprocess.run(self._script("stop-cluster.sh"), env=self._env, capture_output=True, timeout=90,
                               cwd=self.workdir)
        deadline = time.monotonic() + timeout
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for pid in leftovers:
                if _alive(pid):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, sig)
            while any(_alive(p) for p in leftovers) and time.monotonic() < deadline:
                time.sleep(0.2)
            if not any(_alive(p) for p in leftovers):
                break
            deadline = time.monotonic() + 10

    def __enter__(self) -> FlinkCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    # A zombie is dead for our purposes.
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def _default_java_opts(home: Path) -> str:
    """The `--add-opens` flags the package's own config.yaml gives every JVM (Java 17 needs them)."""
    try:
        import yaml
    except ImportError:
        return ""
    try:
        doc = yaml.safe_load((home / "conf" / "config.yaml").read_text()) or {}
    except (OSError, yaml.YAMLError):
        return ""
    opts = ((doc.get("env") or {}).get("java") or {}).get("opts") or {}
    return str(opts.get("all") or "")


def default_workdir(name: str = "cluster") -> Path:
    return WORK_DIR / "flink-cluster" / name


if __name__ == "__main__":  # manual use: python -m flink_bridge.cluster  (Ctrl-C stops it)
    cluster = FlinkCluster(default_workdir("manual")).start()
    print(f"Flink {cluster.release} REST at {cluster.rest_url}; logs in {cluster.log_dir}")
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        cluster.stop()

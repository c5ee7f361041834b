"""A real Spark standalone cluster for tests: one master and two workers, each its own JVM.

Started through the `spark-class` script the pip-installed pyspark ships (the same launcher a
platform's cluster uses), bound to 127.0.0.1 on free ports, one core and a small memory per
worker. Executors run this interpreter without the repository's editable install (`executor_python`).
Each worker has its own work directory (`SPARK_WORKER_DIR`): the executors fetch our
code from the driver (`common._ship_packages`) and read and write every input and output in
S3, so they share no files with the driver. Every daemon runs in its own process group and is
stopped with it at teardown, so no JVM outlives the test session.

The workers' environment carries the S3 endpoint and keys, as a cluster's instance credentials
would: executors inherit it, the driver gets its own through `spark-submit`'s environment.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.s3_server import _free_ports

WORKER_MEMORY = "768m"
EXECUTOR_MEMORY = "512m"


def pyspark_bin() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent / "bin"


@dataclass
class SparkCluster:
    master_url: str
    env: dict[str, str]
    logs: Path
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def submit_command(self, conf: dict[str, str] | None = None) -> list[str]:
        """`spark-submit --master spark://... --conf ...`, to be followed by the application and its
        arguments. Small executors with the fleet jobs' lighter JIT and GC (common.PYTHON_BOUND_JVM_OPTIONS)."""
        from spark_jobs.common import PYTHON_BOUND_JVM_OPTIONS

        confs = {"spark.executor.memory": EXECUTOR_MEMORY, "spark.driver.memory": "512m",
                 "spark.executor.cores": "1", "spark.driver.extraJavaOptions": PYTHON_BOUND_JVM_OPTIONS,
                 "spark.executor.extraJavaOptions": PYTHON_BOUND_JVM_OPTIONS, **(conf or {})}
        cmd = [str(pyspark_bin() / "spark-submit"), "--master", self.master_url]
        for k, v in confs.items():
            cmd += ["--conf", f"{k}={v}"]
        return cmd

    def alive_workers(self) -> int:
        text = (self.logs / "master.log").read_text(errors="replace")
        return len(re.findall(r"Registering worker 127\.0\.0\.1:\d+ with 1 cores", text))

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in reversed(self.procs):
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def executor_python(root: Path) -> str:
    """The executors' Python: this interpreter and its third-party libraries, without this repository's
    editable install (`pip install -e .` adds an import hook through site-packages' .pth files; `-S` skips
    them). A cluster host has only the libraries, so executors import our code from the zip the driver
    ships, and the compiled hasher only from the file shipped beside it (spark_jobs.common)."""
    import sysconfig

    script = root / "python-executor"
    site = sysconfig.get_paths()["purelib"]
    script.write_text(f'#!/bin/sh\nPYTHONPATH="{site}${{PYTHONPATH:+:$PYTHONPATH}}" exec "{sys.executable}" -S "$@"\n')
    script.chmod(0o755)
    return str(script)


def start_cluster(root: Path, extra_env: dict[str, str], workers: int = 2, timeout: float = 120,
                  worker_memory: str = WORKER_MEMORY) -> SparkCluster:
    """A master and `workers` workers on free loopback ports; returns once every worker has registered.

    `worker_memory`: what each worker offers its executors (an application asking more per executor waits)."""
    root.mkdir(parents=True, exist_ok=True)
    ports = _free_ports(2 + 2 * workers)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK_"))}
    env.update(extra_env, SPARK_LOCAL_IP="127.0.0.1", SPARK_LOCAL_HOSTNAME="127.0.0.1",
               PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               SPARK_LOG_DIR=str(root / "logs"), SPARK_DAEMON_MEMORY="256m",
               SPARK_DAEMON_JAVA_OPTS="-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
    env["PYSPARK_PYTHON"] = executor_python(root)
    spark_class = str(pyspark_bin() / "spark-class")
    cluster = SparkCluster(f"spark://127.0.0.1:{ports[0]}", env, root)
    try:
        with open(root / "master.log", "wb") as log:
            cluster.procs.append(subprocess.Popen(
                [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(ports[0]),
                 "--webui-port", str(ports[1])], stdout=log, stderr=subprocess.STDOUT, env=env, cwd=root,
                start_new_session=True))
        for i in range(workers):
            work = root / f"worker-{i}"
            work.mkdir(exist_ok=True)
            with open(root / f"worker-{i}.log", "wb") as log:
                cluster.procs.append(subprocess.Popen(
                    [spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                     "--port", str(ports[2 + 2 * i]), "--webui-port", str(ports[3 + 2 * i]), "--cores", "1",
                     "--memory", worker_memory, "--work-dir", str(work), cluster.master_url],
                    stdout=log, stderr=subprocess.STDOUT, env={**env, "SPARK_WORKER_DIR": str(work)}, cwd=work,
                    start_new_session=True))
        deadline = time.monotonic() + timeout
        while cluster.alive_workers() < workers:
            dead = [p for p in cluster.procs if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                logs = "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-2000:]}"
                                 for p in sorted(root.glob("*.log")))
                raise RuntimeError(f"Spark cluster did not start ({len(dead)} daemons exited):\n{logs}")
            time.sleep(0.5)
    except BaseException:
        cluster.stop()
        raise
    return cluster


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[SparkCluster]:
    """A two-worker standalone cluster whose executors reach the session's SeaweedFS S3 server."""
    spark_env = request.getfixturevalue("spark_env")
    cluster = start_cluster(tmp_path_factory.mktemp("spark-cluster"), spark_env.aws_env)
    try:
        yield cluster
    finally:
        cluster.stop()

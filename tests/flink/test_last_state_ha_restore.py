"""The Kubernetes operator's `last-state` upgrade (`upgrade_gate.gate.upgrade_modes`), as a real restore on Flink 2.3.0
with ZooKeeper HA, done as the operator does it.

Each case: a ZooKeeper (Flink's own `bin/zookeeper.sh`, `FlinkZooKeeperQuorumPeer`) on a free loopback port; an
application cluster (`bin/standalone-job.sh start --job-classname V1 --job-id <fixed id>` and `bin/taskmanager.sh`,
the job jar in the copied Flink home's `usrlib/`) with `high-availability.type: zookeeper` and checkpoints every
second; after a completed checkpoint the JobManager and TaskManager are killed with SIGKILL (the HA data survives, as
when the operator deletes the JobManager deployment), the execution plan is deleted from ZooKeeper (the operator's
`FlinkUtils.deleteJobGraphInZookeeperHA`: else the recovered v1 plan would run), and the cluster starts again with the
same job id and cluster-id but the new main class, `execution.state-recovery.ignore-unclaimed-state: true`
(allowNonRestoredState) set. The new JobMaster recovers the latest checkpoint from its ZooKeeper checkpoint store.

* v2-stateless-rekeyed (only the stateless print sink under another uid): Flink refuses the restore despite
  allowNonRestoredState (`CheckpointCoordinator.restoreInitialCheckpointIfPresent` passes false), with
  `IllegalStateException: There is no operator for the state <id>`, and the gate, given that checkpoint, says
  RESTORE_FAILS with the same words for `upgradeMode: last-state`, SAFE for `upgradeMode: savepoint`.
* v2-compatible (the same uids): Flink restores the checkpoint (the counter continues); the gate says SAFE.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from flink_bridge.cluster import _alive, _default_java_opts, flink_home, free_ports, render_config
from tests.conftest import run_cli

TESTS = Path(__file__).resolve().parents[1]
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from upgrade_jobs import build_jobs, main_class, parse_output  # noqa: E402

pytestmark = pytest.mark.flink
JOB_ID = "5e1f0000000000000000000000000a1e"  # the operator gives an application a fixed job id
K8S = TESTS / "fixtures" / "k8s"
NO_OPERATOR = re.compile(r"IllegalStateException: There is no operator for the state ([0-9a-f]{32})")


def _home(root: Path, jar: Path) -> Path:
    """A Flink home for one application: `bin/` copied, `lib/` and `plugins/` linked jar by jar (config.sh lists
    `lib/` with `find`, which does not follow a linked directory), the job jar in `usrlib/` (as in the operator's
    image). The shared Flink home is never modified."""
    src = flink_home()
    home = root / "flink-home"
    shutil.rmtree(home, ignore_errors=True)
    shutil.copytree(src / "bin", home / "bin")
    for sub in ("lib", "plugins", "opt"):
        for f in (src / sub).rglob("*"):
            if f.is_file():
                (home / sub / f.relative_to(src / sub)).parent.mkdir(parents=True, exist_ok=True)
                (home / sub / f.relative_to(src / sub)).symlink_to(f)
    (home / "usrlib").mkdir()
    shutil.copy(jar, home / "usrlib" / jar.name)
    return home


@dataclass
class Daemons:
    """The JVMs one test started (ZooKeeper, JobManager, TaskManager), each with its own pid dir, killed by pid."""

    root: Path
    zk_port: int = 0
    pids: list[int] = field(default_factory=list)

    def env(self, conf: Path, log: Path, pid: Path) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("FLINK_", "HADOOP_"))}
        env.update(FLINK_CONF_DIR=str(conf), FLINK_LOG_DIR=str(log), FLINK_PID_DIR=str(pid), MAX_LOG_FILE_NUMBER="3")
        return env

    def daemon(self, home: Path, conf: Path, log: Path, pid: Path, script: str, *args: str) -> list[int]:
        """Start one daemon script and return the pids it wrote (flink-daemon.sh writes `<pid dir>/*.pid`)."""
        pid.mkdir(parents=True, exist_ok=True)
        log.mkdir(parents=True, exist_ok=True)  # flink-daemon.sh redirects into it and does not create it
        before = {p for f in pid.glob("*.pid") for p in f.read_text().split()}
        proc = subprocess.run(["bash", str(home / "bin" / script), *args], env=self.env(conf, log, pid),
                              capture_output=True, text=True, timeout=60, cwd=self.root)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        new = [int(p) for f in pid.glob("*.pid") for p in f.read_text().split() if p.isdigit() and p not in before]
        self.pids.extend(new)
        return new

    def kill(self, pids: list[int]) -> None:
        """SIGKILL, as a deleted pod: no shutdown hook runs, the HA data stays."""
        for p in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, signal.SIGKILL)
        deadline = time.monotonic() + 20
        while any(_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.1)

    def start_zookeeper(self, home: Path) -> None:
        conf, data = self.root / "zk-conf", self.root / "zk-data"
        conf.mkdir(parents=True)
        data.mkdir()
        (self.zk_port,) = free_ports(1)
        # No server.N lines: FlinkZooKeeperQuorumPeer runs a standalone ZooKeeperServerMain.
        (conf / "zoo.cfg").write_text(f"tickTime=2000\ndataDir={data}\nclientPort={self.zk_port}\n"
                                      "clientPortAddress=127.0.0.1\nadmin.enableServer=false\n")
        (conf / "config.yaml").write_text("zookeeper.heap.mb: 96\n")
        shutil.copy(flink_home() / "conf" / "log4j.properties", conf / "log4j.properties")
        self.daemon(home, conf, self.root / "zk-log", self.root / "zk-pid", "zookeeper.sh", "start", "1")

    def zk(self, home: Path, *command: str) -> str:
        """ZooKeeper's own command line (shaded in flink-dist), e.g. `deleteall PATH`."""
        cp = ":".join(str(j) for j in sorted((home / "lib").glob("*.jar")))
        proc = subprocess.run(["java", "-Xmx64m", "-cp", cp,
                               "org.apache.flink.shaded.zookeeper3.org.apache.zookeeper.ZooKeeperMain",
                               "-server", f"127.0.0.1:{self.zk_port}", *command],
                              capture_output=True, text=True, timeout=60)
        return proc.stdout + proc.stderr

    def stop_all(self) -> None:
        self.kill(self.pids)


@dataclass
class Application:
    """One application cluster generation (JobManager + TaskManager) of one HA cluster-id."""

    daemons: Daemons
    home: Path
    workdir: Path
    main: str
    cluster_id: str
    checkpoints: Path
    pids: list[int] = field(default_factory=list)

    @property
    def log(self) -> Path:
        return self.workdir / "log"

    def start(self) -> None:
        conf = self.workdir / "conf"
        conf.mkdir(parents=True)
        rest, rpc, blob, tm_rpc, data = free_ports(5)
        config = render_config(
            rest_port=rest, rpc_port=rpc, blob_port=blob, tm_rpc_port=tm_rpc, data_port=data,
            savepoint_dir=(self.workdir.parent / "savepoints").as_uri(), tmp_dir=self.workdir / "tmp",
            upload_dir=self.workdir / "upload",
            extra={"high-availability.type": "zookeeper",
                   "high-availability.zookeeper.quorum": f"127.0.0.1:{self.daemons.zk_port}",
                   "high-availability.storageDir": (self.workdir.parent / "ha").as_uri(),
                   "high-availability.cluster-id": self.cluster_id,
                   "execution.checkpointing.interval": "1 s",
                   "execution.checkpointing.dir": self.checkpoints.as_uri(),
                   "execution.checkpointing.num-retained": 3,
                   "execution.checkpointing.externalized-checkpoint-retention": "RETAIN_ON_CANCELLATION",
                   # allowNonRestoredState, as the operator sets it from spec.job.allowNonRestoredState
                   "execution.state-recovery.ignore-unclaimed-state": True})
        lines = [f"{k}: {json.dumps(v)}" for k, v in config.items()]
        if opts := _default_java_opts(flink_home()):
            lines.append(f"env.java.opts.all: {json.dumps(opts)}")
        (conf / "config.yaml").write_text("\n".join(lines) + "\n")
        for name in ("log4j.properties", "log4j-console.properties", "log4j-cli.properties"):
            shutil.copy(flink_home() / "conf" / name, conf / name)
        (self.workdir / "tmp").mkdir()
        (self.workdir / "upload").mkdir()
        pid = self.workdir / "pid"
        self.pids += self.daemons.daemon(self.home, conf, self.log, pid, "standalone-job.sh", "start",
                                         "--job-classname", self.main, "--job-id", JOB_ID)
        self.pids += self.daemons.daemon(self.home, conf, self.log, pid, "taskmanager.sh", "start")

    def jm_log(self) -> str:
        return "".join(p.read_text(errors="replace") for p in sorted(self.log.glob("flink-*-standalonejob-*.log")))

    def tm_out(self) -> str:
        return "".join(p.read_text(errors="replace") for p in sorted(self.log.glob("flink-*-taskexecutor-*.out")))

    def wait(self, what: str, done: Callable[[], object], timeout: float = 100) -> object:
        """Poll `done` until true; fail with the JobManager log once the time is up or every JVM has exited (an
        application cluster whose job failed shuts itself down)."""
        deadline = time.monotonic() + timeout
        while not (result := done()):
            if time.monotonic() > deadline or not any(_alive(p) for p in self.pids):
                if result := done():
                    return result
                pytest.fail(f"{what}: not seen in {timeout:.0f}s\n{self.jm_log()[-4000:]}")
            time.sleep(0.5)
        return result


def _latest_checkpoint(checkpoints: Path) -> Path | None:
    done = [m.parent for m in checkpoints.glob(f"{JOB_ID}/chk-*/_metadata")]
    return max(done, key=lambda p: int(p.name.split("-")[1])) if done else None


def _upgrade(daemons: Daemons, home_of: dict[str, Path], root: Path, new: str) -> dict[str, object]:
    """v1 until a checkpoint completed, SIGKILL, the execution plan deleted from ZooKeeper, `new` started."""
    cluster_id = f"ugate-{new}"
    checkpoints = root / "checkpoints"
    v1 = Application(daemons, home_of["v1"], root / "v1", main_class("v1"), cluster_id, checkpoints)
    v1.start()
    v1.wait("v1 completed a checkpoint", lambda: "Completed checkpoint" in v1.jm_log() and "UGATE " in v1.tm_out())
    daemons.kill(v1.pids)
    checkpoint = _latest_checkpoint(checkpoints)
    assert checkpoint is not None
    kept = root / "retained" / checkpoint.name  # what the operator would pass the gate: the latest checkpoint
    shutil.copytree(checkpoint, kept)
    # FlinkUtils.deleteJobGraphInZookeeperHA: the operator removes the job graph (2.x: execution plan) entry
    daemons.zk(home_of["v1"], "deleteall", f"/flink/{cluster_id}/execution-plans")
    v2 = Application(daemons, home_of[new], root / new, main_class(new), cluster_id, checkpoints)
    v2.start()

    def settled() -> bool:  # restored and running the new code, or failed
        jm = v2.jm_log()
        # a count line ("UGATE variant=..."), not only the operators' init lines ("UGATE-INIT variant=...")
        return bool(("from Checkpoint" in jm and f"UGATE variant={new} " in v2.tm_out()) or NO_OPERATOR.search(jm)
                    or re.search(r"switched from state \w+ to FAILED", jm))

    v2.wait("the new job restored or failed", settled)
    daemons.kill(v2.pids)
    return {"checkpoint": kept, "jm_log": v2.jm_log(), "tm_out": v2.tm_out(),
            "v1_out": v1.tm_out()}


@pytest.fixture(scope="module")
def restores(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, dict[str, object]]]:
    jars = build_jobs("2.3")
    root = tmp_path_factory.mktemp("last-state-ha")
    homes = {v: _home(root / v, jars[v]) for v in ("v1", "v2-stateless-rekeyed", "v2-compatible")}
    daemons = Daemons(root)
    try:
        daemons.start_zookeeper(homes["v1"])
        yield {new: _upgrade(daemons, homes, root / f"case-{new}", new)
               for new in ("v2-stateless-rekeyed", "v2-compatible")}
    finally:
        daemons.stop_all()


def _deployment(tmp_path: Path, mode: str) -> Path:
    doc = yaml.safe_load((K8S / "orders-new.yaml").read_text())
    doc["spec"]["flinkVersion"] = "v2_3"
    doc["spec"]["job"].update(upgradeMode=mode, allowNonRestoredState=True)
    path = tmp_path / f"{mode}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _gate(tmp_path: Path, restore: dict[str, object], variant: str, mode: str) -> dict[str, object]:
    graph = tmp_path / f"{variant}.json"
    if not graph.is_file():
        jar = build_jobs("2.3")[variant]
        proc = run_cli("export", "--jar", str(jar), "--main-class", main_class(variant), "--flink-version", "2.3",
                       "-o", str(graph))
        assert proc.returncode == 0, proc.stderr
    proc = run_cli("check", "--savepoint", str(restore["checkpoint"]), "--graph", str(graph),
                   "--deployment", str(_deployment(tmp_path, mode)), "--format", "json")
    return json.loads(proc.stdout)


def test_flink_refuses_a_rekeyed_stateless_operator_despite_allow_non_restored_state(
        restores: dict[str, dict[str, object]], tmp_path: Path) -> None:
    restore = restores["v2-stateless-rekeyed"]
    log = str(restore["jm_log"])
    found = NO_OPERATOR.search(log)
    assert found, log[-6000:]
    # the recovered checkpoint, not a submitted savepoint: the plan store was empty (the v1 plan deleted, as the
    # operator does), the new plan came from main(), and the refusal came from the initial HA restore
    assert "Retrieved job ids [] from ZooKeeperStateHandleStore{namespace='flink/ugate-v2-stateless-rekeyed/" \
           "execution-plans'}" in log
    assert re.search(r"Found [1-9]\d* checkpoints in ZooKeeperStateHandleStore", log)
    assert "CheckpointCoordinator.restoreInitialCheckpointIfPresent" in log
    assert "StateAssignmentOperation.checkStateMappingCompleteness" in log
    assert "variant=v2-stateless-rekeyed" not in str(restore["tm_out"])  # no record went through the new job
    doc = _gate(tmp_path, restore, "v2-stateless-rekeyed", "last-state")
    assert doc["verdict"] == "RESTORE_FAILS", doc
    assert f"There is no operator for the state {found.group(1)}" in json.dumps(doc), doc
    assert _gate(tmp_path, restore, "v2-stateless-rekeyed", "savepoint")["verdict"] == "SAFE"


def test_the_same_operators_restore_the_recovered_checkpoint(
        restores: dict[str, dict[str, object]], tmp_path: Path) -> None:
    restore = restores["v2-compatible"]
    log = str(restore["jm_log"])
    assert not NO_OPERATOR.search(log), log[-6000:]
    assert re.search(r"Restoring job 5e1f0000000000000000000000000a1e from Checkpoint \d+", log), log[-6000:]
    after = parse_output(str(restore["tm_out"]))[JOB_ID]
    assert after.variant == "v2-compatible" and max(after.first().values()) > 1, after.first()  # the counter continued
    assert _gate(tmp_path, restore, "v2-compatible", "last-state")["verdict"] == "SAFE"

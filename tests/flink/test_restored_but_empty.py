"""The restored-but-empty hazard (issue #33), on a real Flink 2.3.0 standalone cluster.

v1 runs and is stopped with a savepoint; v2-rekeyed (v1 with the stateful "tagger" under another uid) starts from it
with allowNonRestoredState. Flink drops the tagger's operator state ("seen"), yet the new tagger is told it was
restored: its `initializeState` sees `isRestored() == true` and an empty "seen" (the UGATE-INIT line the job prints).
The gate, given that savepoint and the graph `upgrade-gate export` builds from the v2-rekeyed jar, says STATE_LOSS and
warns that 'tagger' starts empty in a restored job. Jobs are run and stopped with Flink's own CLI (`CliFrontend`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from flink_bridge.cluster import FlinkCluster, default_workdir
from flink_bridge.dist import flink_home
from flink_bridge.jvm import java_command, run_process
from tests.conftest import run_cli

TESTS = Path(__file__).resolve().parents[1]
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from upgrade_jobs import JobOutput, build_jobs, main_class, parse_output  # noqa: E402

pytestmark = pytest.mark.flink
KEYS = {f"k{i}" for i in range(8)}


def _cli(cluster: FlinkCluster, *args: str) -> subprocess.CompletedProcess[str]:
    """`bin/flink ARGS` against the cluster: its conf dir as FLINK_CONF_DIR, the release's plugins (as bin/flink)."""
    cmd = java_command("streamgraph", "2.3", "org.apache.flink.client.cli.CliFrontend", list(args), heap="384m")
    return run_process(cmd, timeout=180, env=dict(os.environ, FLINK_CONF_DIR=str(cluster.conf_dir),
                                                  FLINK_PLUGINS_DIR=str(flink_home("2.3") / "plugins")))


def _flink(cluster: FlinkCluster, *args: str) -> str:
    proc = _cli(cluster, *args)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


def _run(cluster: FlinkCluster, jar: Path, *options: str) -> str:
    out = _flink(cluster, "run", "-d", *options, str(jar))
    return next(line.split()[-1] for line in out.splitlines() if "JobID" in line)


def _output(cluster: FlinkCluster, job_id: str, timeout: float = 90) -> JobOutput:
    """Until the job has initialised its tagger and printed a counter for every key."""
    deadline = time.monotonic() + timeout
    while True:
        out = parse_output(cluster.read_taskmanager_out()).get(job_id)
        if out is not None and out.inits and set(out.counts) >= KEYS:
            return out
        assert time.monotonic() < deadline, f"job {job_id} printed too little:\n{cluster.log_tail(2000)}"
        time.sleep(0.5)


def _stop_with_savepoint(cluster: FlinkCluster, job_id: str, target: Path) -> Path:
    for _ in range(5):  # a stop right after the job started can find a task not yet running: Flink says retry
        proc = _cli(cluster, "stop", "--savepointPath", target.as_uri(), job_id)
        if proc.returncode == 0:
            break
        time.sleep(2)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (found,) = target.glob("savepoint-*/_metadata")
    return found.parent


@pytest.fixture(scope="module")
def rekeyed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """v1 stopped with a savepoint, v2-rekeyed restored from it; the outputs, the savepoint, the exported graph."""
    jars = build_jobs("2.3")
    root = tmp_path_factory.mktemp("restored-empty")
    graph = root / "v2-rekeyed.json"
    export = run_cli("export", "--jar", str(jars["v2-rekeyed"]), "--main-class", main_class("v2-rekeyed"),
                     "--flink-version", "2.3", "-o", str(graph))
    assert export.returncode == 0, export.stderr
    cluster = FlinkCluster(default_workdir("restored-empty"))
    try:
        cluster.start()
        v1 = _run(cluster, jars["v1"])
        _output(cluster, v1)
        time.sleep(2)  # let the tagger see some more records
        savepoint = _stop_with_savepoint(cluster, v1, root / "savepoints")
        before = parse_output(cluster.read_taskmanager_out())[v1]  # with its UGATE-SNAP of the savepoint
        v2 = _run(cluster, jars["v2-rekeyed"], "-s", str(savepoint), "--allowNonRestoredState")
        after = _output(cluster, v2)
        _flink(cluster, "cancel", v2)
    finally:
        cluster.stop()
    return {"before": before, "after": after, "savepoint": savepoint, "graph": graph}


def test_an_operator_whose_state_is_dropped_is_told_it_was_restored(rekeyed: dict[str, object]) -> None:
    before, after = rekeyed["before"], rekeyed["after"]
    assert isinstance(before, JobOutput) and isinstance(after, JobOutput)
    assert before.snapshot_seen(), "v1's tagger had state in the savepoint"
    # every subtask of the new tagger: restored=true, yet "seen" is empty
    assert after.inits and all(i["restored"] == "true" and i["seen"] == "0" for i in after.inits), after.inits
    assert after.restored_seen() == 0
    # the counter kept its state: the restore itself did restore (so this is not a fresh start)
    assert all(after.first()[k] > 1 for k in KEYS), after.first()


def test_the_gate_says_state_loss_and_names_the_operator_that_starts_empty(rekeyed: dict[str, object]) -> None:
    graph = rekeyed["graph"]
    assert isinstance(graph, Path) and graph.is_file(), "upgrade-gate export wrote the graph"
    proc = run_cli("check", "--savepoint", str(rekeyed["savepoint"]), "--graph", str(graph),
                   "--allow-non-restored-state", "--flink-version", "2.3", "--format", "json")
    report = json.loads(proc.stdout)
    assert report["verdict"] == "STATE_LOSS", proc.stdout[-2000:] + proc.stderr
    assert report["restore_succeeds"] is True
    warned = [w for w in report["warnings"] if "starts empty in a restored job" in w]
    assert len(warned) == 1 and warned[0].startswith("'tagger' starts empty in a restored job: Flink reports "
                                                     "isRestored() == true to it"), report["warnings"]
    (loss,) = report["losses"]
    # said once, as the warning above: the loss's consequence does not repeat it
    assert loss["state_names"] == ["seen"] and "starts empty in a restored job" not in loss["consequence"]

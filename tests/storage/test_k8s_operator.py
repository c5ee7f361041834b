"""Flink Kubernetes Operator resources: the savepoint a FlinkDeployment / FlinkSessionJob status records,
the new spec's settings, and `check --deployment NEW --current CURRENT` as a CI gate before `kubectl apply`.

The savepoint the fixtures' statuses point at is a real Flink 1.20.5 savepoint on a real S3 server
(SeaweedFS), under Flink's own directory name; every other location the fixtures mention does not exist,
so choosing the wrong field fails the read.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests import s3_server
from tests.conftest import REPO
from upgrade_gate.cli.commands.deployment import export_command
from upgrade_gate.storage import discovery, k8s_operator
from upgrade_gate.storage.s3 import StorageError

K8S = REPO / "tests" / "fixtures" / "k8s"
RESTORES = REPO / "tests" / "fixtures" / "restores" / "1.20.5"
SAVEPOINT = RESTORES / "savepoints" / "uids-p2"
SAFE_GRAPH = RESTORES / "identical" / "graph-b.json"
FAILS_GRAPH = RESTORES / "uid-removed" / "graph-b.json"
BUCKET = "flink-state"
SP_URI = f"s3://{BUCKET}/savepoints/savepoint-c9dfb5-cd654d33cd20"


@pytest.fixture(scope="module")
def s3_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    server = s3_server.start(tmp_path_factory.mktemp("weed-k8s"))
    try:
        c = server.client()
        c.create_bucket(Bucket=BUCKET)
        c.put_object(Bucket=BUCKET, Key="savepoints/savepoint-c9dfb5-cd654d33cd20/_metadata",
                     Body=(SAVEPOINT / "_metadata").read_bytes())
        yield {"AWS_ENDPOINT_URL_S3": server.endpoint, "AWS_ACCESS_KEY_ID": s3_server.ACCESS_KEY,
               "AWS_SECRET_ACCESS_KEY": s3_server.SECRET_KEY, "AWS_REGION": "us-east-1"}
    finally:
        server.stop()


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    exe = Path(sys.executable).with_name("upgrade-gate")
    return subprocess.run([str(exe), *args], capture_output=True, text=True, cwd=REPO, timeout=300,
                          env={**base, **(env or {})})


def _one_line_exit_2(res: subprocess.CompletedProcess[str], *parts: str) -> None:
    assert res.returncode == 2, (res.returncode, res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    for p in parts:
        assert p in lines[0], lines[0]


# ---- which savepoint the status names --------------------------------------------------------------------------
@pytest.mark.parametrize("fixture, field", [
    ("orders-current.yaml", "status.jobStatus.savepointInfo.lastSavepoint"),  # running: newest, not the upgrade sp
    ("orders-snapshots.yaml", "upgradeSnapshotReference -> FlinkStateSnapshot/orders-upgrade-1763900000000"),
    ("session-job-current.yaml", "status.jobStatus.upgradeSavepointPath"),  # suspended: the upgrade savepoint
])
def test_status_names_the_savepoint_the_next_start_restores(fixture: str, field: str) -> None:
    found = discovery.resolve(f"k8s:{K8S / fixture}")
    assert found.location == SP_URI
    assert field in found.how


def test_running_job_newest_completed_snapshot_resource_wins(tmp_path: Path) -> None:
    """Operator 1.10+, running: the newest COMPLETED FlinkStateSnapshot of *this* job (not another job's newer
    one, not a FAILED one)."""
    docs = yaml.safe_load((K8S / "orders-snapshots.yaml").read_text())
    dep = docs["items"][0]
    dep["spec"]["job"]["state"] = "running"
    dep["status"]["lifecycleState"] = "STABLE"
    del dep["status"]["jobStatus"]["upgradeSnapshotReference"]
    docs["items"][2]["status"]["resultTimestamp"] = "2025-11-23T15:00:00Z"  # orders-upgrade-… is now the newest
    (tmp_path / "running.yaml").write_text(yaml.safe_dump(docs))
    snap = k8s_operator.current_snapshot(k8s_operator.load_resources(str(tmp_path / "running.yaml")))
    assert snap.path == SP_URI and snap.field.startswith("FlinkStateSnapshot/orders-upgrade-")


def test_savepoints_older_than_the_running_job_lose_to_its_upgrade_savepoint(tmp_path: Path) -> None:
    doc = yaml.safe_load((K8S / "orders-current.yaml").read_text())
    js = doc["status"]["jobStatus"]
    js["startTime"] = "1763950000000"  # the job restarted after its last savepoint
    js["upgradeSavepointPath"] = SP_URI
    js["savepointInfo"]["lastSavepoint"]["location"] = "s3://flink-state/savepoints/savepoint-c9dfb5-0000000000ff"
    js["savepointInfo"]["savepointHistory"] = []
    (tmp_path / "restarted.yaml").write_text(yaml.safe_dump(doc))
    snap = k8s_operator.current_snapshot(k8s_operator.load_resources(str(tmp_path / "restarted.yaml")))
    assert (snap.path, snap.field) == (SP_URI, "status.jobStatus.upgradeSavepointPath")


def test_several_jobs_in_one_file_need_a_name(tmp_path: Path) -> None:
    both = tmp_path / "both.yaml"
    both.write_text((K8S / "orders-current.yaml").read_text() + "---\n"
                    + (K8S / "session-job-current.yaml").read_text())
    with pytest.raises(StorageError, match=r"ambiguous.*FlinkDeployment/orders, FlinkSessionJob/orders-session"):
        discovery.resolve(f"k8s:{both}")
    assert discovery.resolve(f"k8s:{both}#orders-session").location == SP_URI
    with pytest.raises(StorageError, match="no FlinkDeployment or FlinkSessionJob named 'nope'"):
        discovery.resolve(f"k8s:{both}#nope")


# ---- what the new spec runs ------------------------------------------------------------------------------------
def test_new_spec_settings_and_the_export_they_give(tmp_path: Path) -> None:
    settings = k8s_operator.job_settings(k8s_operator.load_resources(str(K8S / "orders-new.yaml")))
    assert (settings.resource, settings.flink_version, settings.parallelism) == ("FlinkDeployment/orders", "1.20", 4)
    assert settings.jar_uri == "local:///opt/flink/usrlib/orders.jar"
    assert settings.entry_class == "com.example.orders.OrdersJob" and settings.args == ("--region", "eu-west-1")
    assert settings.flink_configuration["pipeline.max-parallelism"] == "128"
    cmd = export_command(Path("orders.jar"), settings, tmp_path / "g.json")
    assert cmd[cmd.index("-p") + 1] == "4" and cmd[cmd.index("--flink-version") + 1] == "1.20"
    assert "pipeline.max-parallelism=128" in cmd and cmd[-3:] == ["--", "--region", "eu-west-1"]
    assert cmd[cmd.index("--main-class") + 1] == "com.example.orders.OrdersJob"


def test_nested_configuration_and_parallelism_default(tmp_path: Path) -> None:
    (tmp_path / "nested.yaml").write_text(
        "kind: FlinkSessionJob\nmetadata: {name: s}\nspec:\n  deploymentName: shared\n"
        "  flinkConfiguration:\n    parallelism: {default: 3}\n    pipeline: {operator-chaining: {enabled: false}}\n"
        "  job: {jarURI: 'file:///jobs/s.jar'}\n")
    s = k8s_operator.job_settings(k8s_operator.load_resources(str(tmp_path / "nested.yaml")))
    assert s.parallelism == 3 and s.flink_version is None
    assert s.flink_configuration == {"parallelism.default": "3", "pipeline.operator-chaining.enabled": "false"}


# ---- the CI gate: check --deployment NEW --current CURRENT --------------------------------------------------------
@pytest.mark.s3
def test_gate_a_spec_change_before_kubectl_apply(s3_env: dict[str, str]) -> None:
    res = cli("check", "--deployment", str(K8S / "orders-new.yaml"), "--current", str(K8S / "orders-current.yaml"),
              "--graph", str(SAFE_GRAPH), "--format", "json", env=s3_env)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["verdict"] == "SAFE" and doc["flink_version"] == "1.20"  # from spec.flinkVersion v1_20
    assert doc["savepoint"] == f"{SP_URI}/_metadata"
    assert f"savepoint: {SP_URI}/_metadata" in res.stderr and "lastSavepoint" in res.stderr
    res = cli("check", "--deployment", str(K8S / "orders-new.yaml"), "--current", str(K8S / "orders-current.yaml"),
              "--graph", str(FAILS_GRAPH), env=s3_env)
    assert res.returncode == 1 and "VERDICT: RESTORE_FAILS" in res.stdout
    res = cli("check", "--savepoint", f"k8s:{K8S / 'orders-snapshots.yaml'}", "--graph", str(SAFE_GRAPH),
              "--flink-version", "1.20", env=s3_env)
    assert res.returncode == 0 and "FlinkStateSnapshot/orders-upgrade-1763900000000" in res.stderr


def test_allow_non_restored_state_comes_from_the_spec(s3_env: dict[str, str], tmp_path: Path) -> None:
    doc = yaml.safe_load((K8S / "orders-new.yaml").read_text())
    doc["spec"]["job"]["allowNonRestoredState"] = True
    (tmp_path / "new.yaml").write_text(yaml.safe_dump(doc))
    res = cli("check", "--deployment", str(tmp_path / "new.yaml"), "--current", str(K8S / "orders-current.yaml"),
              "--graph", str(FAILS_GRAPH), "--format", "json", env=s3_env)
    assert res.returncode == 1 and json.loads(res.stdout)["verdict"] == "STATE_LOSS"  # starts, drops state


def _spec(tmp_path: Path, mode: str | None, allow: bool = False, **spec: str) -> Path:
    doc = yaml.safe_load((K8S / "orders-new.yaml").read_text())
    doc["spec"]["job"].pop("upgradeMode")
    if mode is not None:
        doc["spec"]["job"]["upgradeMode"] = mode
    doc["spec"]["job"]["allowNonRestoredState"] = allow
    doc["spec"].update(spec)
    path = tmp_path / "new.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


# The operator's upgradeMode decides how the new job gets its state (gate.upgrade_modes); the HA path's rule is read
# from every release's bytecode by tests/flink/test_ha_restore_bytecode.py. Graphs: real Flink 1.20.5 restores of
# the savepoint on S3 (`savepoint` is what Flink did with them: stateless-operator-removed restored, uid-removed
# dropped the state with allowNonRestoredState).
@pytest.mark.s3
@pytest.mark.parametrize("mode, scenario, allow, verdict, says", [
    ("savepoint", "stateless-operator-removed", False, "SAFE", None),
    ("last-state", "stateless-operator-removed", False, "RESTORE_FAILS", "There is no operator for the state"),
    ("savepoint", "uid-removed", True, "STATE_LOSS", "dropped by --allowNonRestoredState"),
    ("last-state", "uid-removed", True, "RESTORE_FAILS", "Flink ignores allowNonRestoredState"),
    ("last-state", "identical", True, "SAFE", "Flink ignores allowNonRestoredState"),
    ("stateless", "identical", False, "STATE_LOSS", "starts the new job from empty state"),
    (None, "identical", False, "STATE_LOSS", "the operator's default"),
])
def test_the_upgrade_mode_decides_how_the_new_job_gets_its_state(
        s3_env: dict[str, str], tmp_path: Path, mode: str | None, scenario: str, allow: bool, verdict: str,
        says: str | None) -> None:
    res = cli("check", "--deployment", str(_spec(tmp_path, mode, allow)), "--current", str(K8S / "orders-current.yaml"),
              "--graph", str(RESTORES / scenario / "graph-b.json"), "--format", "json", env=s3_env)
    assert res.returncode == (0 if verdict == "SAFE" else 1), res.stderr
    doc = json.loads(res.stdout)
    assert doc["verdict"] == verdict
    if says:
        assert says in json.dumps(doc), doc["warnings"]
    if mode in (None, "stateless"):  # every state is lost, and no pin in the job would bring it back
        assert doc["losses"] and doc["remedies"] == [] and doc["repair"] is None
        assert all("empty state" in loss["reason"] for loss in doc["losses"])


@pytest.mark.s3
def test_last_state_across_a_flink_version_change_or_for_a_session_job_restores_as_a_savepoint(
        s3_env: dict[str, str], tmp_path: Path) -> None:
    """The operator never uses HA metadata across a Flink version change, and restores a FlinkSessionJob from the
    latest retained checkpoint as from a savepoint: the stateless operator removed is skipped, as Flink skipped it."""
    graph = str(RESTORES / "stateless-operator-removed" / "graph-b.json")
    res = cli("check", "--deployment", str(_spec(tmp_path, "last-state", flinkVersion="v2_3")),
              "--current", str(K8S / "orders-current.yaml"), "--graph", graph, "--format", "json", env=s3_env)
    assert res.returncode == 0 and json.loads(res.stdout)["verdict"] == "SAFE", res.stdout
    doc = yaml.safe_load((K8S / "orders-new.yaml").read_text())
    doc["kind"] = "FlinkSessionJob"
    doc["spec"] = {"deploymentName": "shared", "job": {**doc["spec"]["job"], "upgradeMode": "last-state"}}
    (tmp_path / "session.yaml").write_text(yaml.safe_dump(doc))
    res = cli("check", "--deployment", str(tmp_path / "session.yaml"), "--current", str(K8S / "orders-current.yaml"),
              "--graph", graph, "--flink-version", "1.20", "--format", "json", env=s3_env)
    assert res.returncode == 0 and json.loads(res.stdout)["verdict"] == "SAFE", res.stdout


@pytest.mark.s3
def test_a_blue_green_deployment_gates_the_spec_green_will_run(s3_env: dict[str, str], tmp_path: Path) -> None:
    """FlinkBlueGreenDeployment (operator 1.14+): `spec.template.spec` is the FlinkDeployment spec Green runs, and
    Green starts from a savepoint of Blue, so even `last-state` is checked as a savepoint restore."""
    new = yaml.safe_load((K8S / "orders-new.yaml").read_text())
    new["spec"]["job"]["upgradeMode"] = "last-state"
    bg = {"apiVersion": "flink.apache.org/v1beta1", "kind": "FlinkBlueGreenDeployment",
          "metadata": {"name": "orders"},
          "spec": {"configuration": {"kubernetes.operator.bluegreen.deployment-deletion.delay": "0ms"},
                   "template": {"spec": new["spec"]}}}
    (tmp_path / "bg.yaml").write_text(yaml.safe_dump(bg))
    res = cli("check", "--deployment", str(tmp_path / "bg.yaml"), "--current", str(K8S / "orders-current.yaml"),
              "--graph", str(RESTORES / "stateless-operator-removed" / "graph-b.json"), "--format", "json", env=s3_env)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["verdict"] == "SAFE" and doc["flink_version"] == "1.20"  # the template's flinkVersion
    res = cli("check", "--deployment", str(tmp_path / "bg.yaml"), "--current", str(K8S / "orders-current.yaml"),
              "--graph", str(FAILS_GRAPH), env=s3_env)
    assert res.returncode == 1 and "VERDICT: RESTORE_FAILS" in res.stdout


def test_an_unknown_upgrade_mode_is_bad_input(tmp_path: Path) -> None:
    res = cli("check", "--deployment", str(_spec(tmp_path, "last_state")),
              "--current", str(K8S / "orders-current.yaml"), "--graph", str(RESTORES / "identical" / "graph-b.json"))
    _one_line_exit_2(res, "new.yaml", "spec.job.upgradeMode 'last_state' is not one of savepoint, last-state, "
                                      "stateless")


@pytest.mark.parametrize("args, parts", [
    (["--deployment", "{k8s}/orders-new.yaml", "--current", "{k8s}/orders-current.yaml"],
     ["orders-new.yaml", "local:///opt/flink/usrlib/orders.jar is a path inside the Flink image", "--jar"]),
    (["--current", "{k8s}/last-state-no-savepoint.yaml", "--graph", "{graph}"],
     ["last-state-no-savepoint.yaml: FlinkDeployment/clicks records no completed savepoint", "last-state"]),
    (["--current", "{k8s}/README.md", "--graph", "{graph}"], ["README.md: invalid YAML at line 10"]),
    (["--current", "{k8s}/nope.yaml", "--graph", "{graph}"], ["nope.yaml: no such file"]),
    (["--current", "{graph}", "--graph", "{graph}"], ["graph-b.json: no FlinkDeployment or FlinkSessionJob"]),
    (["--savepoint", "k8s:{k8s}/orders-current.yaml", "--current", "{k8s}/orders-current.yaml", "--graph", "{graph}"],
     ["give --savepoint or --current, not both"]),
    (["--graph", "{graph}"], ["--savepoint is required"]),
    (["--current", "{k8s}/orders-current.yaml"], ["--graph is required"]),
    (["--deployment", "{tmp}/bad-version.yaml", "--current", "{k8s}/orders-current.yaml", "--graph", "{graph}"],
     ["bad-version.yaml: FlinkDeployment/orders: spec.flinkVersion 'latest' is not a Flink version"]),
    (["--deployment", "{tmp}/missing-jar.yaml", "--current", "{k8s}/orders-current.yaml"],
     ["missing-jar.yaml: spec.job.jarURI file:///nonexistent/orders.jar: no such file here"]),
])
def test_bad_resources_are_one_line_exit_2(args: list[str], parts: list[str], tmp_path: Path) -> None:
    doc = yaml.safe_load((K8S / "orders-new.yaml").read_text())
    doc["spec"]["flinkVersion"] = "latest"
    (tmp_path / "bad-version.yaml").write_text(yaml.safe_dump(doc))
    doc["spec"]["flinkVersion"] = "v1_20"
    doc["spec"]["job"]["jarURI"] = "file:///nonexistent/orders.jar"
    (tmp_path / "missing-jar.yaml").write_text(yaml.safe_dump(doc))
    fmt = {"k8s": str(K8S), "graph": str(SAFE_GRAPH), "tmp": str(tmp_path)}
    _one_line_exit_2(cli("check", *[a.format(**fmt) for a in args]), *parts)


def test_session_cluster_gives_its_jobs_their_flink_version_and_initial_state_is_the_fallback(tmp_path: Path) -> None:
    """A file as `kubectl get flinkdeployment,flinksessionjob -o yaml` lists a session setup: the session
    cluster (no spec.job) is not a job; a new session job starting from a declared savepoint snapshot."""
    (tmp_path / "session.yaml").write_text(f"""\
apiVersion: flink.apache.org/v1beta1
kind: FlinkDeployment
metadata: {{name: shared-session}}
spec: {{flinkVersion: v1_19, serviceAccount: flink}}
---
apiVersion: flink.apache.org/v1beta1
kind: FlinkStateSnapshot
metadata: {{name: orders-migrated}}
spec:
  savepoint: {{alreadyExists: true, path: '{SP_URI}'}}
---
apiVersion: flink.apache.org/v1beta1
kind: FlinkSessionJob
metadata: {{name: orders}}
spec:
  deploymentName: shared-session
  job:
    jarURI: https://artifacts.example.com/orders-1.5.0.jar
    parallelism: 2
    upgradeMode: savepoint
    initialStateReference: {{name: orders-migrated}}
""")
    res = k8s_operator.load_resources(str(tmp_path / "session.yaml"))
    assert [j["kind"] for j in res.jobs] == ["FlinkSessionJob"]
    assert k8s_operator.job_settings(res).flink_version == "1.19"
    snap = k8s_operator.current_snapshot(res)
    assert snap.path == SP_URI and "initialStateReference -> FlinkStateSnapshot/orders-migrated" in snap.field
    (tmp_path / "session-only.yaml").write_text("kind: FlinkDeployment\nmetadata: {name: s}\n"
                                                "spec: {flinkVersion: v1_19}\n")
    with pytest.raises(StorageError, match=r"only a session cluster, without spec\.job"):
        k8s_operator.load_resources(str(tmp_path / "session-only.yaml"))
    assert k8s_operator.flink_version_of("1.14.3") == "1.14" and k8s_operator.flink_version_of("v2_0") == "2.0"

"""The Flink Kubernetes Operator's resources from the Kubernetes API (`kube://`), and `upgrade-gate apply`.

THIS IS A RECORDING, NOT A LIVE API: no Kubernetes API server can run on the test machine, so the official client
talks to `tests/k8s_api_server.py`, which answers the REST paths of the operator's CRDs with the committed resource
fixtures (`tests/fixtures/k8s/`) wrapped as the API server returns them, and does the API server's optimistic
concurrency (a patch's resourceVersion precondition, 409). The client code (configuration, requests, errors) and
the gate on real resources are what is tested; what a live cluster and the operator then do is not.

The savepoint the fixtures name is the real Flink 1.20.5 savepoint on a real S3 server (SeaweedFS), as in
tests/storage/test_k8s_operator.py; the graphs are real Flink 1.20.5 restores of it.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import s3_server
from tests.conftest import REPO
from tests.k8s_api_server import RecordedApi, kubeconfig, merge, recorded_api
from upgrade_gate.storage import k8s_live, k8s_operator
from upgrade_gate.storage.s3 import StorageError

K8S = REPO / "tests" / "fixtures" / "k8s"
RESTORES = REPO / "tests" / "fixtures" / "restores" / "1.20.5"
SAVEPOINT = RESTORES / "savepoints" / "uids-p2"
SAFE_GRAPH = RESTORES / "identical" / "graph-b.json"
FAILS_GRAPH = RESTORES / "uid-removed" / "graph-b.json"
BUCKET = "flink-state"
ORDERS = "kube://streaming/flinkdeployment/orders"
FIXTURES = sorted(p.name for p in K8S.glob("*.yaml"))


@pytest.fixture(scope="module")
def s3_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    server = s3_server.start(tmp_path_factory.mktemp("weed-k8s-live"))
    try:
        c = server.client()
        c.create_bucket(Bucket=BUCKET)
        c.put_object(Bucket=BUCKET, Key="savepoints/savepoint-c9dfb5-cd654d33cd20/_metadata",
                     Body=(SAVEPOINT / "_metadata").read_bytes())
        yield {"AWS_ENDPOINT_URL_S3": server.endpoint, "AWS_ACCESS_KEY_ID": s3_server.ACCESS_KEY,
               "AWS_SECRET_ACCESS_KEY": s3_server.SECRET_KEY, "AWS_REGION": "us-east-1"}
    finally:
        server.stop()


@pytest.fixture
def api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[RecordedApi]:
    """The recorded API holding orders-current.yaml, and a kubeconfig whose current-context is that server."""
    with recorded_api() as recorded:
        recorded.load(K8S / "orders-current.yaml")
        monkeypatch.setenv("KUBECONFIG", str(kubeconfig(tmp_path / "kubeconfig", recorded)))
        yield recorded


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    exe = Path(sys.executable).with_name("upgrade-gate")
    return subprocess.run([str(exe), *args], capture_output=True, text=True, cwd=REPO, timeout=300,
                          env={**base, **(env or {})})


def _one_line_exit_2(res: subprocess.CompletedProcess[str], *parts: str) -> str:
    assert res.returncode == 2, (res.returncode, res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    for p in parts:
        assert p in lines[0], lines[0]
    return lines[0]


def _outcome(call: Any) -> tuple[str, Any]:
    """A reader's answer, or its error without the source's name (a file's path, the kube:// form)."""
    try:
        return "ok", call()
    except StorageError as exc:
        return "error", str(exc).split(": ", 1)[1]


# ---- one reader: the live form chooses what the file form chooses -------------------------------------------------
@pytest.mark.parametrize("fixture", FIXTURES)
def test_the_live_reader_picks_the_same_savepoint_and_settings_as_the_file_reader(
        fixture: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from_file = k8s_operator.load_resources(str(K8S / fixture))
    with recorded_api() as recorded:
        recorded.load(K8S / fixture)
        monkeypatch.setenv("KUBECONFIG", str(kubeconfig(tmp_path / "kubeconfig", recorded)))
        for job in from_file.jobs:
            meta = job["metadata"]
            live = k8s_live.read_live(k8s_live.parse_ref(
                f"kube://{meta.get('namespace', 'default')}/{job['kind'].lower()}/{meta['name']}"))
            name = meta["name"]
            assert (_outcome(lambda r=live.resources: k8s_operator.current_snapshot(r))
                    == _outcome(lambda n=name: k8s_operator.current_snapshot(from_file, n)))
            assert (_outcome(lambda r=live.resources: k8s_operator.job_settings(r))
                    == _outcome(lambda n=name: k8s_operator.job_settings(from_file, n)))
        paths = {(r.method, r.path) for r in recorded.received}
        assert ("GET", "/apis/flink.apache.org/v1beta1/namespaces/streaming/flinkstatesnapshots") in paths
        assert all(r.method == "GET" for r in recorded.received)  # reading never writes


def test_a_session_job_gets_its_flink_version_from_its_live_session_cluster(api: RecordedApi) -> None:
    api.load(K8S / "session-job-current.yaml")
    api.put({"apiVersion": "flink.apache.org/v1beta1", "kind": "FlinkDeployment",
             "metadata": {"name": "shared-session-cluster", "namespace": "streaming"},
             "spec": {"flinkVersion": "v1_19"}})
    live = k8s_live.read_live(k8s_live.parse_ref("kube://streaming/flinksessionjob/orders-session"))
    assert k8s_operator.job_settings(live.resources).flink_version == "1.19"
    assert k8s_operator.current_snapshot(live.resources).field == "status.jobStatus.upgradeSavepointPath"


# ---- check --current kube://: the same verdict as --current FILE -------------------------------------------------
@pytest.mark.s3
def test_check_against_the_live_resource_gives_the_file_checks_verdict(api: RecordedApi,
                                                                        s3_env: dict[str, str]) -> None:
    env = {**s3_env, "KUBECONFIG": os.environ["KUBECONFIG"]}
    common = ["check", "--deployment", str(K8S / "orders-new.yaml"), "--graph", str(SAFE_GRAPH), "--format", "json"]
    live = cli(*common, "--current", ORDERS, env=env)
    file = cli(*common, "--current", str(K8S / "orders-current.yaml"), env=env)
    assert live.returncode == file.returncode == 0, live.stderr
    assert json.loads(live.stdout) == json.loads(file.stdout)
    assert f"({ORDERS}: status.jobStatus.savepointInfo.lastSavepoint)" in live.stderr
    assert api.patches() == []


# ---- apply: gate, then patch only what passed ------------------------------------------------------------------------
@pytest.mark.s3
def test_apply_patches_exactly_the_new_spec_with_the_resource_version_it_gated(
        api: RecordedApi, s3_env: dict[str, str]) -> None:
    key = ("streaming", "flinkdeployments", "orders")
    before = json.loads(json.dumps(api.objects[key]))
    new = yaml.safe_load((K8S / "orders-new.yaml").read_text())
    res = cli("apply", "--deployment", str(K8S / "orders-new.yaml"), "--live", ORDERS, "--graph", str(SAFE_GRAPH),
              "--format", "json", env={**s3_env, "KUBECONFIG": os.environ["KUBECONFIG"]})
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["verdict"] == "SAFE"
    [patch] = api.patches()
    assert patch.headers["content-type"] == "application/merge-patch+json"
    assert patch.body["metadata"] == {"resourceVersion": before["metadata"]["resourceVersion"]}
    assert set(patch.body) == {"metadata", "spec"}  # the spec only: no status, labels or annotations
    assert patch.query == {"fieldManager": ["upgrade-gate"]}
    after = api.objects[key]
    assert after["spec"] == new["spec"] and merge(before["spec"], patch.body["spec"]) == new["spec"]
    assert after["status"] == before["status"]
    assert "apply: patched kube://streaming/flinkdeployment/orders (resourceVersion" in res.stderr
    assert "  spec.job.parallelism: 2 -> 4" in res.stderr
    assert '  spec.image: "registry.example.com/orders:1.4.0" -> "registry.example.com/orders:1.5.0"' in res.stderr


@pytest.mark.s3
def test_a_blocked_gate_sends_no_patch(api: RecordedApi, s3_env: dict[str, str]) -> None:
    before = copy.deepcopy(api.objects)
    res = cli("apply", "--deployment", str(K8S / "orders-new.yaml"), "--live", ORDERS, "--graph", str(FAILS_GRAPH),
              env={**s3_env, "KUBECONFIG": os.environ["KUBECONFIG"]})
    assert res.returncode == 1 and "VERDICT: RESTORE_FAILS" in res.stdout
    assert f"apply: {ORDERS} not patched: the gate blocks" in res.stderr
    assert api.patches() == [] and api.objects == before


@pytest.mark.s3
def test_a_resource_changed_between_gate_and_patch_is_refused_not_overwritten(
        api: RecordedApi, s3_env: dict[str, str]) -> None:
    """Another writer changes the spec right after the gate's read: the patch carries the read's resourceVersion,
    the API server answers 409, and the other writer's spec stays."""
    api.after_get = lambda obj: obj["spec"]["job"].update(parallelism=3)
    res = cli("apply", "--deployment", str(K8S / "orders-new.yaml"), "--live", ORDERS, "--graph", str(SAFE_GRAPH),
              "--format", "json", env={**s3_env, "KUBECONFIG": os.environ["KUBECONFIG"]})
    assert json.loads(res.stdout)["verdict"] == "SAFE"  # the report was written before the patch was tried
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    errors = [line for line in res.stderr.splitlines() if line.startswith("upgrade-gate: error:")]
    assert errors == [res.stderr.strip().splitlines()[-1]] and len(errors) == 1, res.stderr
    for part in (ORDERS, "changed since it was read and gated", "409 Conflict", "nothing was patched"):
        assert part in errors[0], errors[0]
    assert len(api.patches()) == 1
    assert api.objects[("streaming", "flinkdeployments", "orders")]["spec"]["job"]["parallelism"] == 3


@pytest.mark.s3
def test_a_dry_run_is_validated_by_the_server_and_stores_nothing(api: RecordedApi, s3_env: dict[str, str]) -> None:
    before = copy.deepcopy(api.objects)
    res = cli("apply", "--deployment", str(K8S / "orders-new.yaml"), "--live", ORDERS, "--graph", str(SAFE_GRAPH),
              "--dry-run", env={**s3_env, "KUBECONFIG": os.environ["KUBECONFIG"]})
    assert res.returncode == 0 and "VERDICT: SAFE" in res.stdout, res.stderr
    [patch] = api.patches()
    assert patch.query["dryRun"] == ["All"] and api.objects == before
    assert "apply: dry run: the API server accepted this patch" in res.stderr


@pytest.mark.s3
def test_applying_the_spec_the_resource_already_has_sends_nothing(api: RecordedApi, s3_env: dict[str, str],
                                                                 tmp_path: Path) -> None:
    same = tmp_path / "same.yaml"
    same.write_text(yaml.safe_dump(api.objects[("streaming", "flinkdeployments", "orders")]))
    res = cli("apply", "--deployment", str(same), "--live", ORDERS, "--graph", str(SAFE_GRAPH),
              env={**s3_env, "KUBECONFIG": os.environ["KUBECONFIG"]})
    assert res.returncode == 0 and f"apply: {ORDERS}: the live spec already is NEW's; nothing sent" in res.stderr
    assert api.patches() == []


# ---- bad input, unreachable, refused: one line, exit 2 ---------------------------------------------------------------
def test_a_kubeconfig_context_is_honoured(api: RecordedApi, tmp_path: Path) -> None:
    """The kubeconfig's current-context is a server that does not answer; `recorded@` picks the one that does."""
    config = kubeconfig(tmp_path / "elsewhere", api, current="elsewhere")
    env = {"KUBECONFIG": str(config)}
    res = cli("check", "--current", ORDERS, "--graph", str(SAFE_GRAPH), env=env)
    _one_line_exit_2(res, ORDERS, "cannot reach the Kubernetes API server http://127.0.0.1:9")
    assert api.received == []
    res = cli("check", "--current", "kube://nosuch@streaming/flinkdeployment/orders", "--graph", str(SAFE_GRAPH),
              env=env)
    _one_line_exit_2(res, "kube://nosuch@streaming/flinkdeployment/orders", "cannot configure the Kubernetes client",
                     "nosuch")
    live = k8s_live.read_live(k8s_live.parse_ref("kube://recorded@streaming/flinkdeployment/orders"),
                              k8s_live.api_client("recorded"))
    assert live.resource["metadata"]["name"] == "orders" and api.received


@pytest.mark.parametrize("setup, live, parts", [
    ("snapshots-forbidden", ORDERS, ["refused to list flinkstatesnapshots in namespace streaming",
                                     "forbidden (403 Forbidden)", 'User "system:serviceaccount:ci:gate"']),
    ("wrong-token", ORDERS, ["not authenticated (401 Unauthorized)"]),
    ("", "kube://streaming/flinkdeployment/payments", ["no FlinkDeployment 'payments' in namespace 'streaming'",
                                                       "404"]),
    ("", "kube://streaming/deployment/orders", ["'deployment' is not an operator job resource"]),
    ("", "kube://orders", ["expected kube://[CONTEXT@]NAMESPACE/KIND/NAME"]),
    ("", "kube://Streaming/flinkdeployment/orders", ["must be Kubernetes names"]),
])
def test_refused_missing_or_malformed_is_one_line_exit_2(api: RecordedApi, tmp_path: Path, setup: str, live: str,
                                                        parts: list[str]) -> None:
    if setup == "snapshots-forbidden":
        api.forbidden.add("/apis/flink.apache.org/v1beta1/namespaces/streaming/flinkstatesnapshots")
    config = kubeconfig(tmp_path / "kc", api, token="expired" if setup == "wrong-token" else "token")
    res = cli("check", "--current", live, "--graph", str(SAFE_GRAPH), env={"KUBECONFIG": str(config)})
    _one_line_exit_2(res, live, *parts)
    assert api.patches() == []


@pytest.mark.parametrize("path, body, says", [
    ("flinkdeployments/orders", b"{not json", "invalid JSON at line 1"),
    ("flinkdeployments/orders", b"[1, 2]", "answer to get flinkdeployments/orders in namespace streaming is not an "
                                           "object"),
    ("flinkdeployments/orders", b'{"kind": "ConfigMap", "metadata": {"name": "orders"}}',
     "answered with 'ConfigMap', not a FlinkDeployment"),
    ("flinkdeployments/orders", b'{"kind": "FlinkDeployment", "metadata": {"name": "orders"}, "spec": {}}',
     "no metadata.resourceVersion"),
    ("flinkdeployments/orders", b"[" * 100_000, "kube://streaming/flinkdeployment/orders (get flinkdeployments"),
    ("flinkstatesnapshots", b'{"items": "nope"}', "no completed savepoint"),  # items not a list: none
])
def test_a_broken_or_hostile_api_answer_is_one_line(api: RecordedApi, path: str, body: bytes, says: str) -> None:
    api.raw[f"/apis/flink.apache.org/v1beta1/namespaces/streaming/{path}"] = body
    if path == "flinkstatesnapshots":  # a status naming only snapshot resources: the list is all there is
        api.objects[("streaming", "flinkdeployments", "orders")]["status"] = {"jobStatus": {"state": "RUNNING"}}
    with pytest.raises(StorageError) as err:
        k8s_operator.current_snapshot(k8s_live.read_live(k8s_live.parse_ref(ORDERS)).resources)
    message = str(err.value)
    assert "\n" not in message and message.startswith(ORDERS) and says in message, message


def test_apply_refuses_a_new_resource_that_is_not_the_live_one_before_any_request(api: RecordedApi) -> None:
    res = cli("apply", "--deployment", str(K8S / "session-job-current.yaml"), "--live", ORDERS,
              "--graph", str(SAFE_GRAPH), env={"KUBECONFIG": os.environ["KUBECONFIG"]})
    _one_line_exit_2(res, "session-job-current.yaml: must hold exactly one FlinkDeployment named 'orders'",
                     "it holds FlinkSessionJob/orders-session")
    assert api.received == []


def test_the_merge_patch_turns_the_live_spec_into_the_new_one() -> None:
    """RFC 7386 both ways: removed keys become null, lists are replaced whole, equal values are not sent."""
    old = yaml.safe_load((K8S / "orders-current.yaml").read_text())["spec"]
    new = yaml.safe_load((K8S / "orders-new.yaml").read_text())["spec"]
    new["job"].pop("entryClass")
    patch = k8s_live.merge_patch(old, new)
    assert merge(old, patch) == new
    assert patch["job"]["entryClass"] is None and "serviceAccount" not in patch
    assert patch["job"]["args"] == ["--region", "eu-west-1"]

"""An Airflow connection of conn_type `kubernetes` reads the operator's resources like the CLI's `kube://`.

A RECORDING, NOT A LIVE API (tests/k8s_api_server.py): the official client, configured from the connection's extras
(the cncf.kubernetes provider's fields), talks to the recorded API serving the committed resource fixtures.

Both builders are run: the cncf.kubernetes provider's `KubernetesHook` (pinned in requirements.txt, so the Airflow
environment has it) and, for a deployment without the provider, the official client's own loaders (the provider's
module made unimportable, as in an environment that lacks it). The log line naming the builder says which ran.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO
from tests.k8s_api_server import RecordedApi, kubeconfig, recorded_api
from upgrade_gate.storage import k8s_operator
from upgrade_gate.storage.s3 import StorageError

K8S = REPO / "tests" / "fixtures" / "k8s"


@pytest.fixture
def api() -> Iterator[RecordedApi]:
    with recorded_api() as recorded:
        recorded.load(K8S / "orders-snapshots.yaml")
        yield recorded


def _connection(monkeypatch: pytest.MonkeyPatch, conn_id: str, extra: dict[str, object]) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({"conn_type": "kubernetes", "extra": extra}))


PROVIDER_HOOK = "airflow.providers.cncf.kubernetes.hooks.kubernetes"


@pytest.fixture(params=["provider", "official client"], autouse=True)
def builder(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Which builder configures the client: the provider's hook, or (its module unimportable, as where it is not
    installed) the official client's loaders."""
    import importlib
    import sys

    if request.param == "provider":
        importlib.import_module(PROVIDER_HOOK)  # installed (requirements.txt): a missing provider fails here
    else:
        monkeypatch.setitem(sys.modules, PROVIDER_HOOK, None)  # `import` raises ImportError, as without it
    return request.param


def _builder_logged(caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str], builder: str) -> None:
    """The hook's log names what built the client (Airflow's structlog may print the record rather than hand it to
    the capture handler: both are read)."""
    out, err = capfd.readouterr()
    said = [line for line in (caplog.text + out + err).splitlines() if "Kubernetes connection 'k8s_" in line]
    expected = "KubernetesHook" if builder == "provider" else "no cncf.kubernetes provider"
    assert said and all(expected in line for line in said), said


@pytest.mark.parametrize("how", ["kube_config", "kube_config_path", "prefixed"])
def test_a_kubernetes_connection_reads_what_the_file_reader_reads(
        api: RecordedApi, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        capfd: pytest.CaptureFixture[str], builder: str, how: str) -> None:
    from flink_gate.hooks.kubernetes import read_flink_resource

    caplog.set_level("INFO", logger="flink_gate.hooks.kubernetes")

    config = kubeconfig(tmp_path / "kc", api, current="elsewhere")  # the context must come from the connection
    extra: dict[str, object] = {"namespace": "streaming", "cluster_context": "recorded"}
    if how == "kube_config":
        extra["kube_config"] = json.dumps(yaml.safe_load(config.read_text()))
    elif how == "kube_config_path":
        extra["kube_config_path"] = str(config)
    else:  # the provider's older field names
        extra = {f"extra__kubernetes__{k}": v for k, v in {**extra, "kube_config_path": str(config)}.items()}
    _connection(monkeypatch, "k8s_test", extra)
    live = read_flink_resource("flinkdeployment/orders", "k8s_test")  # the namespace is the connection's
    from_file = k8s_operator.load_resources(str(K8S / "orders-snapshots.yaml"))
    assert k8s_operator.current_snapshot(live.resources) == k8s_operator.current_snapshot(from_file)
    assert k8s_operator.job_settings(live.resources) == k8s_operator.job_settings(from_file)
    assert live.ref.namespace == "streaming" and api.received
    _builder_logged(caplog, capfd, builder)


@pytest.mark.parametrize("extra", [{"kube_config_path": "missing"}, {"kube_config": "{not a kubeconfig"},
                                   {"kube_config": json.dumps({"contexts": []}), "cluster_context": "nowhere"}],
                         ids=["missing file", "malformed content", "unknown context"])
def test_a_connection_that_cannot_configure_the_client_is_one_line(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str],
        tmp_path: Path, builder: str, extra: dict[str, str]) -> None:
    from flink_gate.hooks.kubernetes import read_flink_resource

    caplog.set_level("INFO", logger="flink_gate.hooks.kubernetes")
    if "kube_config_path" in extra:
        extra = {"kube_config_path": str(tmp_path / extra["kube_config_path"])}
    _connection(monkeypatch, "k8s_bad", extra)
    with pytest.raises(StorageError, match=r"^(Airflow )?connection 'k8s_bad'[^\n]*$") as raised:
        read_flink_resource("streaming/flinkdeployment/orders", "k8s_bad")
    assert "Traceback" not in str(raised.value) and raised.value.__cause__ is None
    _builder_logged(caplog, capfd, builder)

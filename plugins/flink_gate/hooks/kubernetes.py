"""The Kubernetes API through an Airflow connection of conn_type `kubernetes`, for the Flink operator's resources.

The connection's fields are those of the cncf.kubernetes provider's `KubernetesHook` (extras `in_cluster`,
`kube_config_path`, `kube_config` (the kubeconfig's content), `cluster_context`, `namespace`; the older
`extra__kubernetes__` prefix is read too). With the provider installed its hook builds the client; without it, the
extras are handed to the official client's own loaders (the log says which). Either way a connection that cannot
configure a client fails in one line naming it, and the resources are read by
`upgrade_gate.storage.k8s_live`, the reader of the CLI's `kube://` form, so a DAG and the CLI choose the same
savepoint.
"""

from __future__ import annotations

import logging
from typing import Any

from airflow.sdk import BaseHook

from hashing.documents import parse_text
from upgrade_gate.storage import k8s_live
from upgrade_gate.storage.redact import one_line
from upgrade_gate.storage.s3 import StorageError

DEFAULT_CONN_ID = "kubernetes_default"
log = logging.getLogger(__name__)


def _field(extra: dict[str, Any], name: str) -> Any:
    value = extra.get(name)
    return extra.get(f"extra__kubernetes__{name}") if value in (None, "") else value


def provider_hook_class() -> type | None:
    """The cncf.kubernetes provider's `KubernetesHook`, or None where the provider is not installed (it is in our
    requirements.txt, but a deployment may leave it out: the official client alone reads the same fields)."""
    try:
        from airflow.providers.cncf.kubernetes.hooks.kubernetes import KubernetesHook
    except ImportError:
        return None
    return KubernetesHook


def api_client(conn_id: str = DEFAULT_CONN_ID) -> tuple[Any, str | None]:
    """(an `ApiClient`, the connection's namespace) for the connection `conn_id`.

    Which builder was used is logged: the provider's hook when it is installed, else the official client's loaders.
    Either way a connection that cannot configure a client is one line (`StorageError`), not a traceback."""
    import yaml
    from airflow.exceptions import AirflowException
    from kubernetes.config.config_exception import ConfigException

    conn = BaseHook.get_connection(conn_id)
    extra = conn.extra_dejson if isinstance(conn.extra_dejson, dict) else {}
    namespace = _field(extra, "namespace") or None
    hook_class = provider_hook_class()
    try:
        if hook_class is not None:
            log.info("Kubernetes connection %r: client built by the cncf.kubernetes provider's KubernetesHook", conn_id)
            return hook_class(conn_id=conn_id).api_client, namespace
        log.info("Kubernetes connection %r: no cncf.kubernetes provider; the official client's loaders read its "
                 "extras", conn_id)
        return _official_client(conn_id, extra), namespace
    # yaml.YAMLError: the provider's hook parses a malformed `kube_config` itself
    except (ConfigException, AirflowException, yaml.YAMLError, OSError, ValueError, TypeError, KeyError) as exc:
        raise StorageError(f"Airflow connection {conn_id!r}: cannot configure the Kubernetes client: "
                           f"{one_line(str(exc) or type(exc).__name__, 200)}") from None


def _official_client(conn_id: str, extra: dict[str, Any]) -> Any:
    """The official client configured from the provider's connection fields, as its `KubernetesHook` reads them."""
    from kubernetes import client, config

    configuration = client.Configuration()
    context = _field(extra, "cluster_context") or None
    if str(_field(extra, "in_cluster")).lower() == "true":
        config.load_incluster_config(client_configuration=configuration)
    elif _field(extra, "kube_config"):
        content = _field(extra, "kube_config")
        doc = content if isinstance(content, dict) else parse_text(
            str(content), f"connection {conn_id!r} extra kube_config", what="a kubeconfig", yaml_first=True,
            error=StorageError)
        config.load_kube_config_from_dict(doc, context=context, client_configuration=configuration)
    else:
        config.load_kube_config(config_file=_field(extra, "kube_config_path") or None, context=context,
                                client_configuration=configuration)
    return client.ApiClient(configuration)


def read_flink_resource(resource: str, conn_id: str = DEFAULT_CONN_ID) -> k8s_live.LiveResources:
    """The operator resource `[NAMESPACE/]KIND/NAME` (the namespace defaults to the connection's, else `default`)
    with its FlinkStateSnapshots, read through the connection."""
    api, namespace = api_client(conn_id)
    text = resource.strip().removeprefix(k8s_live.KUBE)
    if text.count("/") == 1:
        text = f"{namespace or 'default'}/{text}"
    return k8s_live.read_live(k8s_live.parse_ref(f"{k8s_live.KUBE}{text}"), api)

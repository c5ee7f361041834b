"""The Flink Kubernetes Operator's resources read from the live Kubernetes API, and a gated spec patched back.

`kube://[CONTEXT@]NAMESPACE/KIND/NAME` (KIND: flinkdeployment, flinksessionjob, flinkbluegreendeployment) names one
operator resource. It is read with the official `kubernetes` client through `CustomObjectsApi` (group
`flink.apache.org`, version `v1beta1`, the plurals of the operator's CRDs: `flinkdeployments`, `flinksessionjobs`,
`flinkbluegreendeployments`, `flinkstatesnapshots`): one GET of the resource, one LIST of the FlinkStateSnapshot
resources of its namespace (operator 1.10+; a cluster without that CRD answers 404, read as "none", as an older
operator writes none), and for a FlinkSessionJob a GET of its session cluster's FlinkDeployment (its Flink version).
What was read goes to `k8s_operator.resources_from_items`, the function a `kubectl get -o yaml` file goes to, so the
live form and the file form choose the same savepoint and settings (one implementation).

Answers are read raw (`_preload_content=False`) and parsed by the shared hardened reader with the YAML files'
limits, so a huge or hostile answer is one line, like a hostile file.

The configuration comes from the client's own loaders: the kubeconfig (`$KUBECONFIG`, else `~/.kube/config`;
`CONTEXT@` picks a context, else its current-context), or inside a pod with no kubeconfig the service account
(`load_incluster_config`). An Airflow connection builds its `ApiClient` itself (`plugins/flink_gate/hooks/
kubernetes.py`) and passes it in.

`patch_spec` writes NEW's spec as a JSON merge patch (RFC 7386) of the difference between the spec as read and
NEW's, with the read's `metadata.resourceVersion` in the patch: the API server applies a patch carrying a
resourceVersion only if the object still has it, else answers 409 Conflict, so a resource changed between the gate
and the patch is refused, never overwritten (docs/guide.md, "Gate and apply against the live API"). The client is
imported when a live form is used, never by a local `check` (tests/cli/test_check_imports.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from dataclasses import dataclass, field
from typing import Any

from hashing.documents import parse_bytes
from upgrade_gate.storage.k8s_operator import (
    RESOURCE_LIMITS,
    Resources,
    resources_from_items,
)
from upgrade_gate.storage.redact import one_line
from upgrade_gate.storage.s3 import StorageError

KUBE = "kube://"
GROUP, VERSION = "flink.apache.org", "v1beta1"
# the URI's KIND (singular or plural, as kubectl takes them) -> (the CRD's kind, its plural)
KINDS = {
    "flinkdeployment": ("FlinkDeployment", "flinkdeployments"),
    "flinksessionjob": ("FlinkSessionJob", "flinksessionjobs"),
    "flinkbluegreendeployment": ("FlinkBlueGreenDeployment", "flinkbluegreendeployments"),
}
SNAPSHOTS = "flinkstatesnapshots"
TIMEOUT = (10.0, 60.0)  # connect, read (seconds)
MERGE_PATCH = "application/merge-patch+json"
FIELD_MANAGER = "upgrade-gate"
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")  # a namespace (RFC 1123 label)
_DNS_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")  # a resource name (RFC 1123 subdomain)
_CONTEXT = re.compile(r"\S{1,253}")  # everything before the last "@": EKS names hold ":" and "/"
SYNTAX = "kube://[CONTEXT@]NAMESPACE/KIND/NAME (KIND: flinkdeployment, flinksessionjob or flinkbluegreendeployment)"


@dataclass(frozen=True, slots=True)
class LiveRef:
    """One operator resource in a cluster, as `kube://` names it."""

    context: str | None
    namespace: str
    kind: str  # the CRD's kind: FlinkDeployment, ...
    plural: str
    name: str

    def __str__(self) -> str:
        where = f"{self.context}@" if self.context else ""
        return f"{KUBE}{where}{self.namespace}/{self.kind.lower()}/{self.name}"


@dataclass(frozen=True)
class LiveResources:
    """What one read of the API gave: the resources (as a file's), the job resource as read and its
    resourceVersion (the precondition of a later patch), and the client that read them."""

    ref: LiveRef
    resources: Resources
    resource: dict[str, Any]
    resource_version: str
    api: Any = field(repr=False, compare=False)


def is_live(spec: str) -> bool:
    return spec.strip().startswith(KUBE)


def parse_ref(spec: str) -> LiveRef:
    """`kube://[CONTEXT@]NAMESPACE/KIND/NAME`, each part checked as Kubernetes names are."""
    text = spec.strip()
    rest = text[len(KUBE):] if text.startswith(KUBE) else ""
    context, at, rest = rest.rpartition("@") if "@" in rest else (None, "", rest)
    parts = rest.split("/")
    if len(parts) != 3 or (at and not _CONTEXT.fullmatch(context or "")):
        raise StorageError(f"{one_line(spec, 120)}: expected {SYNTAX}")
    namespace, kind, name = parts
    key = kind.lower().removesuffix("s")
    if key not in KINDS:
        raise StorageError(f"{one_line(spec, 120)}: {one_line(kind, 40)!r} is not an operator job resource "
                           f"(expected {', '.join(KINDS)})")
    if not _DNS_LABEL.fullmatch(namespace) or not _DNS_NAME.fullmatch(name):
        raise StorageError(f"{one_line(spec, 120)}: namespace and name must be Kubernetes names "
                           f"(lower-case letters, digits, '-')")
    crd_kind, plural = KINDS[key]
    return LiveRef(context or None, namespace, crd_kind, plural, name)


def api_client(context: str | None = None, label: str = "kube://") -> Any:
    """An `ApiClient` from the client's own loaders: the kubeconfig (`$KUBECONFIG`, else `~/.kube/config`) with
    `context` or its current-context; in a pod with no kubeconfig and no context asked for, the service account.
    `label` names the resource in a message."""
    from kubernetes import client, config
    from kubernetes.config.config_exception import ConfigException

    configuration = client.Configuration()
    files = os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
    has_file = any(os.path.isfile(f) for f in files.split(os.pathsep) if f)
    try:
        if not has_file and context is None and "KUBERNETES_SERVICE_HOST" in os.environ:
            config.load_incluster_config(client_configuration=configuration)
        else:
            config.load_kube_config(config_file=files, context=context, client_configuration=configuration)
    except (ConfigException, OSError, ValueError, TypeError, KeyError) as exc:
        where = f"context {context!r} of " if context else ""
        raise StorageError(f"{label}: cannot configure the Kubernetes client from {where}{files}: "
                           f"{one_line(str(exc) or type(exc).__name__, 200)}") from None
    return client.ApiClient(configuration)


def _server(api: Any) -> str:
    return one_line(getattr(getattr(api, "configuration", None), "host", None) or "?", 120)


def _status_message(body: Any) -> str:
    """The `message` of the `Status` object the API server sends with an error, else nothing."""
    try:
        doc = json.loads(body) if isinstance(body, bytes | str) and body else None
    except ValueError:
        doc = None
    message = doc.get("message") if isinstance(doc, dict) else None
    return f": {one_line(message, 240)}" if isinstance(message, str) and message else ""


class _Missing(Exception):
    """A 404: the caller decides whether that is an error (the resource) or nothing (a CRD not installed)."""


class _Conflict(Exception):
    """A 409: the object is not at the resourceVersion a patch named."""


def _call(ref: LiveRef, api: Any, what: str, request: Any) -> dict[str, Any]:
    """Run one API request; its answer as a dict, or one line naming the resource, the server and the cause."""
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    try:
        response = request()
        data = response.read(RESOURCE_LIMITS.max_bytes + 1)
    except ApiException as exc:
        if exc.status == 404:
            raise _Missing() from None
        if exc.status == 409:
            raise _Conflict() from None
        if exc.status == 0:  # TLS: the client's own wording of the urllib3 error
            raise StorageError(f"{ref}: cannot reach the Kubernetes API server {_server(api)} ({what}): "
                               f"{one_line(exc.reason, 200)}") from None
        refused = {401: "not authenticated (401 Unauthorized)", 403: "forbidden (403 Forbidden)"}.get(
            exc.status, f"{exc.status} {one_line(exc.reason, 60)}")
        raise StorageError(f"{ref}: the Kubernetes API server {_server(api)} refused to {what}: "
                           f"{refused}{_status_message(exc.body)}") from None
    except HTTPError as exc:  # urllib3: connection refused, DNS, timeout (after its retries)
        cause = getattr(exc, "reason", None) or exc
        raise StorageError(f"{ref}: cannot reach the Kubernetes API server {_server(api)} ({what}): "
                           f"{one_line(str(cause), 200)}") from None
    if len(data) > RESOURCE_LIMITS.max_bytes:
        raise StorageError(f"{ref}: the API server's answer to {what} is larger than "
                           f"{RESOURCE_LIMITS.max_bytes} bytes")
    doc = parse_bytes(data, f"{ref} ({what})", what="a Kubernetes API object (JSON)", limits=RESOURCE_LIMITS,
                      error=StorageError)
    if not isinstance(doc, dict):
        raise StorageError(f"{ref}: the API server's answer to {what} is not an object")
    return doc


def read_live(ref: LiveRef, api: Any | None = None) -> LiveResources:
    """GET the resource, LIST its namespace's FlinkStateSnapshots (and GET a session job's cluster): the same
    `Resources` a `kubectl get … -o yaml` file of them gives."""
    from kubernetes import client

    api = api if api is not None else api_client(ref.context, str(ref))
    objects = client.CustomObjectsApi(api)
    common = {"_preload_content": False, "_request_timeout": TIMEOUT}
    try:
        job = _call(ref, api, f"get {ref.plural}/{ref.name} in namespace {ref.namespace}",
                    lambda: objects.get_namespaced_custom_object(GROUP, VERSION, ref.namespace, ref.plural, ref.name,
                                                                 **common))
    except _Missing:
        raise StorageError(f"{ref}: no {ref.kind} {ref.name!r} in namespace {ref.namespace!r} on "
                           f"{_server(api)} (404; is the operator's CRD installed?)") from None
    if job.get("kind") != ref.kind:
        raise StorageError(f"{ref}: the API server answered with {one_line(job.get('kind'), 40)!r}, "
                           f"not a {ref.kind}")
    try:
        listed = _call(ref, api, f"list {SNAPSHOTS} in namespace {ref.namespace}",
                       lambda: objects.list_namespaced_custom_object(GROUP, VERSION, ref.namespace, SNAPSHOTS,
                                                                     **common))
    except _Missing:  # operator < 1.10: no FlinkStateSnapshot CRD, savepoints are in the status only
        listed = {"items": []}
    items = listed.get("items") if isinstance(listed.get("items"), list) else []
    snapshots = [{"kind": "FlinkStateSnapshot", **i} for i in items if isinstance(i, dict)]
    sessions = []
    cluster = (job.get("spec") or {}).get("deploymentName") if isinstance(job.get("spec"), dict) else None
    if ref.kind == "FlinkSessionJob" and isinstance(cluster, str) and _DNS_NAME.fullmatch(cluster):
        with contextlib.suppress(_Missing):  # a 404 leaves the version unknown, as a file without the cluster does
            sessions.append(_call(ref, api, f"get flinkdeployments/{cluster} in namespace {ref.namespace}",
                                  lambda: objects.get_namespaced_custom_object(
                                      GROUP, VERSION, ref.namespace, "flinkdeployments", cluster, **common)))
    version = (job.get("metadata") or {}).get("resourceVersion") if isinstance(job.get("metadata"), dict) else None
    if not isinstance(version, str) or not version:
        raise StorageError(f"{ref}: the API server's answer has no metadata.resourceVersion")
    resources = resources_from_items([job, *snapshots, *sessions], str(ref))
    return LiveResources(ref, resources, job, version, api)


def merge_patch(old: Any, new: Any) -> Any:
    """The JSON merge patch (RFC 7386) that turns `old` into `new`: changed values, removed keys as null, a list
    whole. Applied to `old` by the API server, it gives `new`."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        return new
    patch: dict[str, Any] = {key: None for key in old if key not in new}
    for key, value in new.items():
        if key not in old:
            patch[key] = value
        elif old[key] != value:
            patch[key] = merge_patch(old[key], value)
    return patch


def patch_lines(patch: Any, old: Any, prefix: str = "spec") -> list[str]:
    """One line per changed field of a merge patch: `spec.job.parallelism: 2 -> 4`, `… removed`."""
    lines: list[str] = []
    for key, value in patch.items():
        path, before = f"{prefix}.{key}", old.get(key) if isinstance(old, dict) else None
        if isinstance(value, dict) and isinstance(before, dict):
            lines += patch_lines(value, before, path)
        elif value is None:
            lines.append(f"{path}: removed (was {one_line(json.dumps(before), 80)})")
        else:
            shown = "(unset)" if before is None else one_line(json.dumps(before), 80)
            lines.append(f"{path}: {shown} -> {one_line(json.dumps(value), 80)}")
    return lines


@dataclass(frozen=True, slots=True)
class Patched:
    """What a patch changed, and the resourceVersion the resource has after it."""

    patch: dict[str, Any]
    resource_version: str | None
    dry_run: bool


def patch_spec(live: LiveResources, new_spec: dict[str, Any], *, dry_run: bool = False) -> Patched:
    """PATCH the resource's spec to `new_spec`, only if it still has the resourceVersion it was read (and gated)
    with; `dry_run` asks the server to validate the patch (admission webhooks included) and store nothing."""
    from kubernetes import client

    ref, api = live.ref, live.api
    spec_patch = merge_patch(live.resource.get("spec") or {}, new_spec)
    if not spec_patch:  # the live spec already is NEW's: nothing to send
        return Patched(spec_patch, live.resource_version, dry_run)
    body = {"metadata": {"resourceVersion": live.resource_version}, "spec": spec_patch}
    objects = client.CustomObjectsApi(api)
    try:
        answer = _call(ref, api, f"patch {ref.plural}/{ref.name} in namespace {ref.namespace}",
                       lambda: objects.patch_namespaced_custom_object(
                           GROUP, VERSION, ref.namespace, ref.plural, ref.name, body,
                           dry_run="All" if dry_run else None, field_manager=FIELD_MANAGER,
                           _content_type=MERGE_PATCH, _preload_content=False, _request_timeout=TIMEOUT))
    except _Missing:
        raise StorageError(f"{ref}: deleted since it was read; nothing was patched") from None
    except _Conflict:
        raise StorageError(f"{ref}: changed since it was read and gated (resourceVersion {live.resource_version} "
                           f"is no longer current: 409 Conflict); nothing was patched, run apply again to gate "
                           f"the resource as it is now") from None
    meta = answer.get("metadata") if isinstance(answer.get("metadata"), dict) else {}
    after = meta.get("resourceVersion")
    return Patched(spec_patch, after if isinstance(after, str) else None, dry_run)

"""A recorded Kubernetes API for tests, in-process on 127.0.0.1: NOT a live API server.

No Kubernetes API server can run on the test machine (no container engine, no kube-apiserver or etcd), so the
client code is tested against this: it serves the REST paths the official client calls for the Flink Kubernetes
Operator's custom resources (group `flink.apache.org`, version `v1beta1`), from RECORDED responses: the objects are
the committed resource fixtures (`tests/fixtures/k8s/*.yaml`, the shape `kubectl get -o yaml` prints), answered as
the API server answers them (an object with `metadata.resourceVersion`; a LIST as
`{"apiVersion", "kind": "<Kind>List", "items", "metadata": {"resourceVersion"}}`; errors as a `Status` object).

What it does of the API server's own behaviour, and only that: a GET or LIST answers what is stored; a PATCH with
`Content-Type: application/merge-patch+json` is applied as RFC 7386 says, refused with 409 Conflict when the patch's
`metadata.resourceVersion` is not the stored one (the API server's optimistic-concurrency precondition), stored
with the next resourceVersion, or with `dryRun=All` answered and not stored; a bearer token other than `token`
is 401, a path in `forbidden` is 403, a path in `raw` gets those bytes
(a broken or hostile server). Every request is recorded (method, path, query, headers, body).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import yaml

PREFIX = "/apis/flink.apache.org/v1beta1/namespaces/"
PLURALS = {"FlinkDeployment": "flinkdeployments", "FlinkSessionJob": "flinksessionjobs",
           "FlinkBlueGreenDeployment": "flinkbluegreendeployments", "FlinkStateSnapshot": "flinkstatesnapshots"}
TOKEN = "token"


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any = None


def merge(target: Any, patch: Any) -> Any:
    """RFC 7386 MergePatch(target, patch)."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge(out.get(key), value)
    return out


@dataclass
class RecordedApi:
    """The stored objects by (namespace, plural, name), and every request received."""

    objects: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)
    received: list[Request] = field(default_factory=list)
    forbidden: set[str] = field(default_factory=set)  # paths answered 403
    raw: dict[str, bytes] = field(default_factory=dict)  # paths answered 200 with these bytes (a broken server)
    # another writer (the operator, a kubectl edit) changing a stored object right after a GET of it was answered
    after_get: Callable[[dict[str, Any]], None] | None = None
    versions: Iterator[int] = field(default_factory=lambda: itertools.count(1001))
    port: int = 0

    def load(self, fixture: Path, namespace: str = "default") -> None:
        """Every resource of a `kubectl get -o yaml` file, as the API server would hold it."""
        for doc in yaml.safe_load_all(fixture.read_text()):
            for item in doc.get("items", []) if doc.get("kind") == "List" else [doc]:
                self.put(item, namespace)

    def put(self, item: dict[str, Any], namespace: str = "default") -> None:
        meta = item.setdefault("metadata", {})
        meta.setdefault("namespace", namespace)
        meta["resourceVersion"] = str(next(self.versions))
        meta.setdefault("uid", f"uid-{meta['name']}")
        self.objects[(meta["namespace"], PLURALS[item["kind"]], meta["name"])] = item

    def patches(self) -> list[Request]:
        return [r for r in self.received if r.method == "PATCH"]

    @property
    def server(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "code": code}


class _Handler(BaseHTTPRequestHandler):
    api: RecordedApi

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def _send(self, code: int, doc: Any) -> None:
        body = json.dumps(doc).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _handle(self, method: str) -> None:
        url = urlparse(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        req = Request(method, url.path, parse_qs(url.query), {k.lower(): v for k, v in self.headers.items()},
                      json.loads(raw) if raw else None)
        self.api.received.append(req)
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            return self._send(401, _status(401, "Unauthorized", "Unauthorized"))
        if url.path in self.api.forbidden:
            return self._send(403, _status(403, "Forbidden", f'{url.path} is forbidden: User "system:serviceaccount:'
                                                             f'ci:gate" cannot {method.lower()} this resource'))
        if url.path in self.api.raw:
            body = self.api.raw[url.path]
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return None
        parts = url.path[len(PREFIX):].split("/") if url.path.startswith(PREFIX) else []
        if len(parts) == 2 and method == "GET":  # LIST
            ns, plural = parts
            items = [o for (n, p, _), o in sorted(self.api.objects.items()) if (n, p) == (ns, plural)]
            kind = next((k for k, v in PLURALS.items() if v == plural), "Unknown")
            return self._send(200, {"apiVersion": "flink.apache.org/v1beta1", "kind": f"{kind}List", "items": items,
                                    "metadata": {"resourceVersion": str(next(self.api.versions))}})
        if len(parts) != 3 or (key := (parts[0], parts[1], parts[2])) not in self.api.objects:
            return self._send(404, _status(404, "NotFound", f"{'/'.join(parts[1:])} not found"))
        stored = self.api.objects[key]
        if method == "GET":
            self._send(200, stored)
            if self.api.after_get is not None:
                changed = json.loads(json.dumps(stored))
                self.api.after_get(changed)
                changed["metadata"]["resourceVersion"] = str(next(self.api.versions))
                self.api.objects[key] = changed
            return None
        if req.headers.get("content-type") != "application/merge-patch+json" or not isinstance(req.body, dict):
            return self._send(415, _status(415, "UnsupportedMediaType", "expected a merge patch"))
        wanted = (req.body.get("metadata") or {}).get("resourceVersion")
        if wanted is not None and wanted != stored["metadata"]["resourceVersion"]:
            return self._send(409, _status(409, "Conflict", f'Operation cannot be fulfilled on {parts[1]} '
                                                           f'"{parts[2]}": the object has been modified; please '
                                                           f'apply your changes to the latest version and try again'))
        result = merge(stored, req.body)
        result["metadata"]["resourceVersion"] = str(next(self.api.versions))
        if req.query.get("dryRun") != ["All"]:
            self.api.objects[key] = result
        return self._send(200, result)

    def do_GET(self) -> None:  # http.server calls do_<METHOD>
        self._handle("GET")

    def do_PATCH(self) -> None:
        self._handle("PATCH")


@contextlib.contextmanager
def recorded_api() -> Iterator[RecordedApi]:
    api = RecordedApi()
    handler = type("Handler", (_Handler,), {"api": api})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    api.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield api
    finally:
        server.shutdown()
        server.server_close()


def kubeconfig(path: Path, api: RecordedApi, *, current: str = "recorded", token: str = TOKEN) -> Path:
    """A kubeconfig with two contexts: `recorded` (this server) and `elsewhere` (a port nothing listens on)."""
    doc = {"apiVersion": "v1", "kind": "Config", "current-context": current,
           "clusters": [{"name": "recorded", "cluster": {"server": api.server}},
                        {"name": "elsewhere", "cluster": {"server": "http://127.0.0.1:9"}}],
           "users": [{"name": "gate", "user": {"token": token}}],
           "contexts": [{"name": "recorded", "context": {"cluster": "recorded", "user": "gate"}},
                        {"name": "elsewhere", "context": {"cluster": "elsewhere", "user": "gate"}}]}
    path.write_text(yaml.safe_dump(doc))
    return path

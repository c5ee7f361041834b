"""Flink's REST API (JobManager, port 8081 by default) through an Airflow HTTP connection.

The connection holds host, port and scheme (and basic-auth login/password or `headers` extra
when a proxy guards the JobManager).

Every failure is classified, because the upgrade steps act on the difference:

* `FlinkRestError`: a definite answer. Flink refused the request (4xx, with Flink's own `errors`
  list in the message) or an operation reported that it failed. Nothing more happened.
* `FlinkRestUnknown` (a `FlinkRestError`): the outcome is unknown. A timeout, a reset or refused
  connection, or a 5xx: the request may or may not have reached Flink and may or may not have
  taken effect. The caller must look at the cluster before deciding anything.

Reads (GET) are retried with exponential backoff. A non-idempotent call (`POST /jars/{id}/run`,
`POST /jobs/{id}/stop`, savepoint triggers, cancel) is sent exactly once and never retried
blindly: the steps reconcile with the cluster instead. They can, because the calls carry ids
chosen by the caller: `jobId` in Flink's `JarRunRequestBody` (the new job's id is known before it
is submitted; a second submission with the same id is refused by Flink's Dispatcher) and
`triggerId` in `StopWithSavepointRequestBody` / `SavepointTriggerRequestBody` (the savepoint can be
looked up by that id, and Flink deduplicates a repeated trigger with the same id).

Asynchronous operations (savepoint, stop-with-savepoint) return a trigger id that is polled until
Flink reports COMPLETED; a failed savepoint raises with Flink's failure cause.

Every call goes through the one client of Flink's REST API (`upgrade_gate.storage.remote`, which the
CLI's `flink-rest://` discovery uses too), so an answer is read like the CLI reads one: each attempt has one
total wall-clock limit (`timeout`) however slowly the bytes trickle (a watchdog shuts the connection down,
`upgrade_gate.storage.watchdog`), bodies are bounded in size and JSON depth, TLS is verified against the
system's trust store, a redirect is followed only for reads and never carries credentials (basic auth, the
connection's extra headers) to another scheme, host or port, and no URL with its userinfo (`user:password@`
in the connection's host field) reaches an error, a log line or an upgrade record. This module keeps only
what is Airflow's (the connection) and what is an upgrade's (the writes, and what an answer means for them).
"""

from __future__ import annotations

import dataclasses
import json
import secrets
import time
from functools import cached_property
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

from airflow.sdk import BaseHook

from hashing.documents import parse_json
from hashing.errors import InputError, describe
from upgrade_gate.storage import remote
from upgrade_gate.storage.redact import one_line, public_url, redact
from upgrade_gate.storage.remote import ANSWER_LIMITS
from upgrade_gate.storage.s3 import Deadline, StorageError

TERMINAL_JOB_STATES = ("FINISHED", "CANCELED", "FAILED", "SUSPENDED")
UPLOAD_BYTES_PER_S = 1_000_000  # a jar upload's time limit grows by its size at this rate
REST = "Flink's REST API"
_REDIRECTS = (301, 302, 303, 307, 308)


class FlinkRestError(Exception):
    """Flink refused a request or an operation failed; the message is Flink's own."""

    status: int | None = None


class FlinkRestUnknown(FlinkRestError):
    """The outcome of a call is unknown (timeout, reset, connection error, 5xx): look before acting."""


class FlinkRestNotFound(FlinkRestError):
    """HTTP 404: the job, trigger or jar does not exist (a definite answer)."""


def new_flink_id() -> str:
    """A fresh 32-hex-digit id, the format of Flink's `JobID` and `TriggerId` (`AbstractID`)."""
    return secrets.token_hex(16)


class FlinkRestHook(BaseHook):
    """Job status, savepoints, stop-with-savepoint, jar upload and run, cancel."""

    conn_name_attr = "flink_conn_id"
    default_conn_name = "flink_default"
    conn_type = "http"
    hook_name = "Flink REST"

    def __init__(self, flink_conn_id: str = default_conn_name, *, retries: int = 4, backoff: float = 0.5,
                 timeout: float = 30.0) -> None:
        super().__init__()
        self.flink_conn_id = flink_conn_id
        self.retries = retries
        self.backoff = backoff
        self.timeout = timeout

    # ---- plumbing -----------------------------------------------------------------------
    @cached_property
    def _target(self) -> tuple[str, remote.Endpoint, str]:
        """The JobManager's base URL without credentials; its endpoint with the basic auth (the connection's
        login, else a `user:password@` written into its host field) and the connection's extra headers, both
        bound to its origin; and the path a proxy may put in front of the REST API."""
        conn = self.get_connection(self.flink_conn_id)
        host = (conn.host or "127.0.0.1").strip()
        if "://" in host:
            base = host.rstrip("/")
        else:
            base = f"{conn.schema or 'http'}://{host}" + (f":{conn.port}" if conn.port else ":8081")
        try:
            prefix = urlsplit(base).path.rstrip("/")
            server = remote.endpoint(base)
        except (ValueError, StorageError):
            raise FlinkRestError(f"Flink connection {self.flink_conn_id!r}: the host field "
                                 f"{one_line(public_url(base), 100)!r} is not a URL") from None
        if conn.login:
            server = dataclasses.replace(server, username=conn.login, password=conn.password or "")
        server = dataclasses.replace(server, headers=tuple(self._extra_headers.items()))
        return public_url(base), server, prefix

    @property
    def base_url(self) -> str:
        """Where the JobManager answers, never with credentials (it appears in errors and records)."""
        return self._target[0]

    @cached_property
    def _extra_headers(self) -> dict[str, str]:
        headers = (self.get_connection(self.flink_conn_id).extra_dejson or {}).get("headers")
        return {str(k): str(v) for k, v in headers.items()} if isinstance(headers, dict) else {}

    def request(self, method: str, path: str, *, idempotent: bool | None = None, total_timeout: float | None = None,
                params: dict[str, str] | None = None, json: Any = None,
                files: dict[str, tuple[str, bytes, str]] | None = None) -> Any:
        """One REST call; returns the decoded JSON (or None).

        Idempotent calls (GET by default) are retried with backoff on unknown outcomes. Others are
        sent once: a timeout, reset or 5xx raises `FlinkRestUnknown` and the caller reconciles. Each
        attempt ends after `total_timeout` seconds (default `timeout`) however slowly the answer arrives.
        `files`: field -> (file name, bytes, content type), sent as multipart/form-data (a jar upload)."""
        if idempotent is None:
            idempotent = method.upper() in ("GET", "HEAD")
        limit = float(total_timeout if total_timeout is not None else self.timeout)
        attempts = self.retries + 1 if idempotent else 1
        headers, body = _payload(json, files)
        target = f"{self._target[2]}/{path.lstrip('/')}" + (f"?{urlencode(params)}" if params else "")

        def warn(last: Exception, delay: float) -> None:
            self.log.warning("Flink REST %s %s failed (%s); retrying in %.1fs", method, path, one_line(last, 500),
                             delay)

        try:
            return remote.retried(lambda: self._exchange(method, path, target, headers, body, limit),
                                  attempts=attempts, backoff=self.backoff,
                                  transient=(FlinkRestUnknown, remote.NoAnswer), warn=warn)
        except (FlinkRestUnknown, remote.NoAnswer) as last:
            if isinstance(last, FlinkRestUnknown) and not idempotent:
                raise
            tried = f"{attempts} attempts" if idempotent else "sent once: not idempotent"
            raise FlinkRestUnknown(f"{method} {path}: outcome unknown ({tried}) at {self.base_url}: "
                                   f"{one_line(last, 500)}") from None

    def _timed_out(self, method: str, path: str, limit: float) -> FlinkRestUnknown:
        return FlinkRestUnknown(f"{method} {path}: no complete answer within {limit:g} s at {self.base_url} "
                                f"(the JobManager or a proxy in front of it is too slow)")

    def _exchange(self, method: str, path: str, target: str, headers: dict[str, str], body: bytes | None,
                  limit: float) -> Any:
        """One attempt within `limit` seconds: a GET through `remote.get` (redirects followed under its credential
        rule), any other method through `remote.send` (sent once, a redirect not followed); then what the answer
        means. A `remote.NoAnswer` (no connection, cut, not HTTP) is passed on: the caller retries or reports it."""
        deadline = Deadline(limit)
        base_url, server, prefix = self._target
        label = base_url.removesuffix(prefix)  # what errors show for the JobManager's origin
        try:
            if method.upper() == "GET":
                answer = remote.get(server, target, deadline=deadline, service=REST, headers=headers, label=label)
            else:
                answer = remote.send(server, method, target, deadline=deadline, service=REST, headers=headers,
                                     body=body, label=label)
        except StorageError as exc:
            if deadline.remaining() <= 0:  # what arrived before the cut may be short
                raise self._timed_out(method, path, limit) from None
            if isinstance(exc, remote.NoAnswer):
                raise
            raise _error(FlinkRestError, f"{method} {exc}", None) from None
        status = answer.status
        if status in _REDIRECTS:
            raise _error(FlinkRestError, f"{method} {path}: HTTP {status}: redirected to "
                                         f"{one_line(public_url(answer.location or '?'), 200)}; not followed for a "
                                         f"{method} (point the Flink connection at the JobManager)", status)
        if status >= 500:
            raise _error(FlinkRestUnknown, f"{method} {path}: HTTP {status}: {_errors(answer.body)}", status)
        if status == 404:
            raise _error(FlinkRestNotFound, f"{method} {path}: HTTP 404: {_errors(answer.body)}", 404)
        if status >= 400:
            raise _error(FlinkRestError, f"{method} {path}: HTTP {status}: {_errors(answer.body)}", status)
        if not answer.body:
            return None
        try:
            doc = remote.json_answer(answer, REST)
        except StorageError as exc:  # a cut or garbled body: we do not know what Flink said
            raise FlinkRestUnknown(redact(f"{method} {exc}")) from None
        if not isinstance(doc, dict):  # every answer of Flink's REST API is an object
            raise FlinkRestUnknown(f"{method} {path}: the answer is not a JSON object; is this {REST}?")
        return doc

    # ---- jobs ---------------------------------------------------------------------------
    def overview(self) -> dict[str, Any]:
        return self.request("GET", "/overview")

    def list_jobs(self) -> list[dict[str, Any]]:
        """`/jobs/overview`: id (`jid`), name, state, start-time, end-time of every job."""
        jobs = (self.request("GET", "/jobs/overview") or {}).get("jobs")
        return [j for j in jobs if isinstance(j, dict)] if isinstance(jobs, list) else []

    def job_status(self, job_id: str) -> str:
        return _field(self.request("GET", f"/jobs/{job_id}/status"), "status", f"GET /jobs/{job_id}/status")

    def job_details(self, job_id: str) -> dict[str, Any]:
        return self.request("GET", f"/jobs/{job_id}")

    def job_or_none(self, job_id: str) -> dict[str, Any] | None:
        """The job's details, or None when the cluster does not know the id (definitely not submitted
        or long gone). Unknown outcomes still raise `FlinkRestUnknown`."""
        try:
            return self.job_details(job_id)
        except FlinkRestNotFound:
            return None

    def find_jobs(self, name: str, states: tuple[str, ...] | None = None) -> list[dict[str, Any]]:
        """Jobs called `name` (newest first), optionally only in `states`."""
        jobs = [j for j in self.list_jobs() if j.get("name") == name and (states is None or j.get("state") in states)]
        return sorted(jobs, key=lambda j: j["start-time"] if type(j.get("start-time")) is int else 0, reverse=True)

    def checkpoints(self, job_id: str) -> dict[str, Any]:
        return self.request("GET", f"/jobs/{job_id}/checkpoints")

    def restored_from(self, job_id: str) -> str | None:
        """The savepoint/checkpoint path this job restored from, as Flink reports it."""
        restored = _obj(_obj(_obj(self.checkpoints(job_id)).get("latest")).get("restored"))
        path = restored.get("external_path")
        return path if isinstance(path, str) else None

    def cancel(self, job_id: str, *, wait: float = 0.0) -> str:
        """Cancel a job (a no-op for a job that already ended); with `wait`, until it is terminal.

        Cancelling is safe to repeat, so an unknown outcome is settled by asking for the job's
        state (and cancelling again while it still runs). Returns the job's state."""
        deadline = time.monotonic() + wait
        while True:
            state = self.job_status(job_id)
            if state in TERMINAL_JOB_STATES or (state == "CANCELLING" and time.monotonic() > deadline):
                return state
            if state != "CANCELLING":
                try:
                    self.request("PATCH", f"/jobs/{job_id}", params={"mode": "cancel"})
                except FlinkRestUnknown as exc:
                    self.log.warning("cancel of %s: outcome unknown (%s); looking at the job", job_id, exc)
            if time.monotonic() > deadline:
                return self.job_status(job_id)
            time.sleep(0.5)

    def wait_for_state(self, job_id: str, states: tuple[str, ...], timeout: float = 120, poll: float = 1.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            state = self.job_status(job_id)
            if state in states:
                return state
            if state in TERMINAL_JOB_STATES:
                raise FlinkRestError(f"job {job_id} reached {state} while waiting for {'/'.join(states)}"
                                     + _exception_hint(self, job_id))
            if time.monotonic() > deadline:
                raise FlinkRestError(f"job {job_id} still {state} after {timeout:.0f}s (wanted {'/'.join(states)})")
            time.sleep(poll)

    def wait_until_restored(self, job_id: str, timeout: float = 120, poll: float = 1.0) -> dict[str, Any]:
        """Wait until every subtask of the job is RUNNING; return the job details.

        A job is RUNNING as soon as it is scheduled, before its tasks restore their state; each
        task restores while INITIALIZING and only then turns RUNNING. So "job RUNNING" does not
        mean "state restored": a state the new code cannot read fails the job a moment later.
        Raises `FlinkRestError` (with Flink's root exception) when the job ends instead."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                details = self.job_details(job_id)
            except FlinkRestUnknown:
                if time.monotonic() > deadline:
                    raise
                time.sleep(poll)
                continue
            state = str(details.get("state"))
            if restore_progress(details) == "ended":
                raise FlinkRestError(f"job {job_id} reached {state} while restoring" + _exception_hint(self, job_id))
            raw = details.get("vertices")
            vertices = [v for v in raw if isinstance(v, dict)] if isinstance(raw, list) else []
            if restore_progress(details) == "restored":
                return details
            if time.monotonic() > deadline:
                pending = {one_line(v.get("name"), 80): {k: n for k, n in _obj(v.get("tasks")).items() if n}
                           for v in vertices}
                raise FlinkRestError(f"job {job_id} not fully RUNNING after {timeout:.0f}s: {state} {pending}")
            time.sleep(poll)

    # ---- savepoints ---------------------------------------------------------------------
    def trigger_savepoint(self, job_id: str, target_directory: str | None = None, *,
                          format_type: str = "CANONICAL") -> str:
        body: dict[str, Any] = {"cancel-job": False, "formatType": format_type}
        if target_directory:
            body["target-directory"] = target_directory
        return _field(self.request("POST", f"/jobs/{job_id}/savepoints", json=body), "request-id",
                      f"POST /jobs/{job_id}/savepoints")

    def stop_with_savepoint(self, job_id: str, target_directory: str | None = None, *, drain: bool = False,
                            format_type: str = "CANONICAL", trigger_id: str | None = None) -> str:
        """Stop the job with a savepoint; returns the trigger id.

        Pass `trigger_id` (record it first): if the answer is lost, `savepoint_status(job, trigger)`
        tells whether Flink got the request, and Flink deduplicates a repeat with the same id."""
        body: dict[str, Any] = {"drain": drain, "formatType": format_type}
        if target_directory:
            body["targetDirectory"] = target_directory
        if trigger_id:
            body["triggerId"] = trigger_id
        return _field(self.request("POST", f"/jobs/{job_id}/stop", json=body), "request-id",
                      f"POST /jobs/{job_id}/stop")

    def savepoint_status(self, job_id: str, trigger_id: str) -> dict[str, Any]:
        return self.request("GET", f"/jobs/{job_id}/savepoints/{trigger_id}")

    def savepoint_status_or_none(self, job_id: str, trigger_id: str) -> dict[str, Any] | None:
        """The trigger's status, or None when Flink does not know the trigger (never received, or
        its result expired from the cache after `rest.async.store-duration`)."""
        try:
            return self.savepoint_status(job_id, trigger_id)
        except FlinkRestNotFound:
            return None
        except FlinkRestError as exc:  # Flink 2.x answers an unknown trigger id with 400 on some paths
            if exc.status == 400 and "trigger" in str(exc).lower():
                return None
            raise

    def last_savepoint(self, job_id: str) -> str | None:
        """The external path of the savepoint a finished job stopped with, from its checkpoint statistics
        (kept for a finished job too): what stop-with-savepoint wrote when its trigger is gone.

        Only a *synchronous* savepoint counts (`checkpoint_type` SYNC_SAVEPOINT, Flink's
        `CheckpointStatistics.RestAPICheckpointType` for a stop-with-savepoint): it is the job's final state. A job
        that finished otherwise (its input ended) may name an older, ordinary savepoint, which is not."""
        sp = _obj(_obj(_obj(self.checkpoints(job_id)).get("latest")).get("savepoint"))
        path = sp.get("external_path")
        if sp.get("checkpoint_type") not in (None, "SYNC_SAVEPOINT"):
            return None
        return path if isinstance(path, str) and path else None

    def wait_for_savepoint(self, job_id: str, trigger_id: str, timeout: float = 300, poll: float = 1.0) -> str:
        """Poll a savepoint (or stop-with-savepoint) trigger; return the savepoint's location."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                status = self.savepoint_status(job_id, trigger_id)
            except FlinkRestUnknown as exc:  # a read: keep asking until the deadline
                if time.monotonic() > deadline:
                    raise
                self.log.warning("savepoint %s status unknown (%s); asking again", trigger_id, exc)
                time.sleep(poll)
                continue
            if _obj(_obj(status).get("status")).get("id") == "COMPLETED":
                op = _obj(status.get("operation"))
                if isinstance(op.get("location"), str) and op["location"]:
                    return str(op["location"])
                cause = _obj(op.get("failure-cause")).get("stack-trace", "")
                cause = cause if isinstance(cause, str) else ""
                first = cause.strip().splitlines()[0] if cause.strip() else "no location and no cause reported"
                raise FlinkRestError(f"savepoint {trigger_id} of job {job_id} failed: {first}")
            if time.monotonic() > deadline:
                raise FlinkRestError(f"savepoint {trigger_id} of job {job_id} not completed after {timeout:.0f}s")
            time.sleep(poll)

    # ---- jars ---------------------------------------------------------------------------
    def upload_jar(self, jar_path: str | Path) -> str:
        """Upload a jar; returns Flink's jar id (the stored file name)."""
        path = Path(jar_path)
        last: Exception | None = None
        limit = self.timeout + path.stat().st_size / UPLOAD_BYTES_PER_S  # a big jar on a slow link takes longer
        # An upload only stores a file; repeating one whose answer was lost leaves a spare copy, no harm.
        for attempt in range(self.retries + 1):
            try:
                resp = self.request("POST", "/jars/upload", total_timeout=limit,
                                    files={"jarfile": (path.name, path.read_bytes(), "application/x-java-archive")})
                return _field(resp, "filename", "POST /jars/upload").rsplit("/", 1)[-1]
            except FlinkRestUnknown as exc:
                last = exc
                time.sleep(self.backoff * (2 ** attempt))
        raise FlinkRestUnknown(f"uploading {path.name}: {last}")

    def list_jars(self) -> list[dict[str, Any]]:
        return list(self.request("GET", "/jars").get("files", []))

    def run_jar(self, jar_id: str, *, entry_class: str | None = None, savepoint_path: str | None = None,
                allow_non_restored_state: bool = False, parallelism: int | None = None,
                program_args: list[str] | None = None, job_id: str | None = None,
                flink_configuration: dict[str, str] | None = None) -> str:
        """Start the jar's job (from a savepoint when given); returns the new job id.

        `flink_configuration`: `-D` pairs for this job (`JarRequestBody#flinkConfiguration`, Flink 1.17+).

        Pass `job_id` (record it first): if the answer is lost, `job_or_none(job_id)` tells whether
        the job was started. Sent once; an unknown outcome raises `FlinkRestUnknown`."""
        body: dict[str, Any] = {"allowNonRestoredState": bool(allow_non_restored_state)}
        if job_id:
            body["jobId"] = job_id
        if entry_class:
            body["entryClass"] = entry_class
        if savepoint_path:
            body["savepointPath"] = savepoint_path
        if parallelism:
            body["parallelism"] = parallelism
        if program_args:
            body["programArgsList"] = list(program_args)
        if flink_configuration:
            body["flinkConfiguration"] = dict(flink_configuration)
        # Never retried here: a retried POST without a job id could start the job twice.
        return _field(self.request("POST", f"/jars/{jar_id}/run", json=body), "jobid", f"POST /jars/{jar_id}/run")


def restore_progress(details: dict[str, Any]) -> str:
    """Where a job's restore stands, from `GET /jobs/{id}`: "restored" (every subtask RUNNING: each task restores
    its state while INITIALIZING), "ended" (terminal, failing or cancelling: it will not restore), or "pending".
    `wait_until_restored` polls it; a deferred upgrade's trigger (`flink_gate.triggers`) asks it between polls."""
    state = str(details.get("state"))
    if state in TERMINAL_JOB_STATES or state in ("FAILING", "CANCELLING"):
        return "ended"
    raw = details.get("vertices")
    vertices = [v for v in raw if isinstance(v, dict)] if isinstance(raw, list) else []
    if state == "RUNNING" and vertices and all(
            _obj(v.get("tasks")).get("RUNNING", 0) == v.get("parallelism", -1) for v in vertices):
        return "restored"
    return "pending"


def _error(cls: type[FlinkRestError], message: str, status: int | None) -> FlinkRestError:
    exc = cls(redact(message))
    exc.status = status
    return exc


def _obj(value: Any) -> dict[str, Any]:
    """A nested object of an answer, or an empty one when the server sent anything else."""
    return value if isinstance(value, dict) else {}


def _field(answer: Any, key: str, what: str) -> str:
    """A string field Flink always sends; without it the call's outcome is unknown (not Flink, or cut)."""
    value = answer.get(key) if isinstance(answer, dict) else None
    if not isinstance(value, str | int) or isinstance(value, bool) or not str(value).strip():
        raise FlinkRestUnknown(f"{what}: the answer has no {key!r} (got {one_line(describe(value), 80)}); "
                               f"is this Flink's REST API?")
    return one_line(str(value), 300)


def _payload(doc: Any, files: dict[str, tuple[str, bytes, str]] | None) -> tuple[dict[str, str], bytes | None]:
    """The headers and body of a request carrying JSON (Flink's request bodies) or files (a jar upload: the
    multipart/form-data Flink's `FileUploadHandler` reads, encoded by urllib3 as requests would)."""
    if files:
        from urllib3 import encode_multipart_formdata

        data, content_type = encode_multipart_formdata(files)
        return {"Content-Type": content_type}, data
    if doc is not None:
        return {"Content-Type": "application/json"}, json.dumps(doc).encode()
    return {}, None


def _errors(body: bytes) -> str:
    """Flink's `errors` list (first line of each), or the start of whatever else the body holds."""
    try:
        doc = parse_json(body, "answer", what="an error answer", limits=ANSWER_LIMITS)
    except InputError:
        return one_line(body[:500].decode("utf-8", "replace"), 500)
    errors = doc.get("errors") if isinstance(doc, dict) else None
    if isinstance(errors, list) and errors:
        return one_line(" | ".join(str(e).strip().splitlines()[0] if str(e).strip() else "" for e in errors[:20]),
                        2000)
    return one_line(str(doc)[:500], 500)


def _exception_hint(hook: FlinkRestHook, job_id: str) -> str:
    try:
        exc = hook.request("GET", f"/jobs/{job_id}/exceptions")
    except FlinkRestError:
        return ""
    root = _obj(exc).get("root-exception") or ""
    if not root:
        hist = _obj(_obj(exc).get("exceptionHistory")).get("entries") or []
        root = _obj(hist[0]).get("stacktrace", "") if isinstance(hist, list) and hist else ""
    root = root if isinstance(root, str) else ""
    return f": {one_line(root.strip().splitlines()[0], 500)}" if root.strip() else ""

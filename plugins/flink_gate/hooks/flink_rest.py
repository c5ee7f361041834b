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

Every answer is a document from outside, read like the CLI reads one (`upgrade_gate.storage.remote`): each
attempt has one total wall-clock limit (`timeout`) however slowly the bytes trickle (a watchdog shuts the
connection down, `upgrade_gate.storage.watchdog`), bodies are bounded in size and JSON depth, a redirect is
followed only for reads (and 307/308) and never carries credentials (basic auth, the connection's extra
headers) to another scheme, host or port, and no URL with its userinfo (`user:password@` in the
connection's host field) reaches an error, a log line or an upgrade record.
"""

from __future__ import annotations

import secrets
import time
from functools import cached_property
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urljoin, urlsplit

from airflow.sdk import BaseHook

from hashing.documents import parse_json
from hashing.errors import InputError, describe
from upgrade_gate.storage.redact import one_line, public_url, redact
from upgrade_gate.storage.remote import ANSWER_LIMITS, MAX_ANSWER_BYTES, MAX_REDIRECTS
from upgrade_gate.storage.watchdog import DeadlinePassed, Guard, guard_session
from upgrade_gate.storage.watchdog import current as current_guard

TRANSIENT_STATUS = (502, 503, 504)
TERMINAL_JOB_STATES = ("FINISHED", "CANCELED", "FAILED", "SUSPENDED")
UPLOAD_BYTES_PER_S = 1_000_000  # a jar upload's time limit grows by its size at this rate
_REDIRECTS = (301, 302, 303, 307, 308)
_CREDENTIAL_HEADERS = ("authorization", "proxy-authorization", "cookie")


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
    def _target(self) -> tuple[str, tuple[str, str] | None]:
        """The JobManager's base URL without credentials, and the basic-auth pair for it (the connection's
        login, else a `user:password@` written into its host field)."""
        conn = self.get_connection(self.flink_conn_id)
        host = (conn.host or "127.0.0.1").strip()
        if "://" in host:
            base = host.rstrip("/")
        else:
            base = f"{conn.schema or 'http'}://{host}" + (f":{conn.port}" if conn.port else ":8081")
        try:
            parts = urlsplit(base)
            user, password = parts.username, parts.password
        except ValueError:
            raise FlinkRestError(f"Flink connection {self.flink_conn_id!r}: the host field "
                                 f"{one_line(public_url(base), 100)!r} is not a URL") from None
        auth = (conn.login, conn.password or "") if conn.login else (
            (unquote(user), unquote(password or "")) if user is not None else None)
        return public_url(base), auth

    @property
    def base_url(self) -> str:
        """Where the JobManager answers, never with credentials (it appears in errors and records)."""
        return self._target[0]

    @cached_property
    def _extra_headers(self) -> dict[str, str]:
        headers = (self.get_connection(self.flink_conn_id).extra_dejson or {}).get("headers")
        return {str(k): str(v) for k, v in headers.items()} if isinstance(headers, dict) else {}

    @cached_property
    def session(self) -> Any:
        import requests

        s = guard_session(requests.Session())
        s.trust_env = False  # no .netrc credentials for whatever host a redirect names
        auth = self._target[1]
        if auth is not None:
            s.auth = auth
        s.headers.update(self._extra_headers)
        return s

    def request(self, method: str, path: str, *, idempotent: bool | None = None, total_timeout: float | None = None,
                **kwargs: Any) -> Any:
        """One REST call; returns the decoded JSON (or None).

        Idempotent calls (GET by default) are retried with backoff on unknown outcomes. Others are
        sent once: a timeout, reset or 5xx raises `FlinkRestUnknown` and the caller reconciles. Each
        attempt ends after `total_timeout` seconds (default `timeout`) however slowly the answer arrives."""
        import requests

        if idempotent is None:
            idempotent = method.upper() in ("GET", "HEAD")
        url = f"{self.base_url}/{path.lstrip('/')}"
        kwargs.setdefault("timeout", self.timeout)
        limit = float(total_timeout if total_timeout is not None else self.timeout)
        attempts = self.retries + 1 if idempotent else 1
        if not idempotent:
            # A fresh connection: a pooled keep-alive connection that a proxy or load balancer in
            # front of the JobManager already closed fails the request before it is sent, and a
            # call sent once would then fail for nothing (found with tests/fault_proxy.py, which
            # closes every connection after one exchange).
            self.session.close()
        last: Exception | None = None
        for attempt in range(attempts):
            guard = Guard(limit)
            try:
                with guard:
                    answer = self._exchange(method, path, url, idempotent, kwargs)
                if not guard.expired:
                    return answer
                last = self._timed_out(method, path, limit)  # what arrived before the cut may be short
            except FlinkRestError as exc:
                if not guard.expired and not isinstance(exc, FlinkRestUnknown):
                    raise  # a definite answer
                last = self._timed_out(method, path, limit) if guard.expired else exc
            except (requests.RequestException, OSError, DeadlinePassed) as exc:
                # a cut or garbled exchange (or one the watchdog cut): we do not know what Flink did
                last = self._timed_out(method, path, limit) if guard.expired else exc
            if attempt < attempts - 1:
                delay = self.backoff * (2 ** attempt)
                self.log.warning("Flink REST %s %s failed (%s); retrying in %.1fs", method, path,
                                 one_line(last, 500), delay)
                time.sleep(delay)
        if isinstance(last, FlinkRestUnknown) and not idempotent:
            raise last
        tried = f"{attempts} attempts" if idempotent else "sent once: not idempotent"
        raise FlinkRestUnknown(f"{method} {path}: outcome unknown ({tried}) at {self.base_url}: {one_line(last, 500)}")

    def _timed_out(self, method: str, path: str, limit: float) -> FlinkRestUnknown:
        return FlinkRestUnknown(f"{method} {path}: no complete answer within {limit:g} s at {self.base_url} "
                                f"(the JobManager or a proxy in front of it is too slow)")

    def _exchange(self, method: str, path: str, url: str, idempotent: bool, kwargs: dict[str, Any]) -> Any:
        """One attempt inside the caller's guard: send, follow redirects (reads only), read and decode.

        Across origins (scheme, host, port) the redirected request carries neither the basic auth nor the
        connection's extra headers; a `Location`'s own userinfo is never used."""
        origin = _origin(url)
        kwargs = dict(kwargs)
        headers: dict[str, Any] = dict(kwargs.pop("headers", None) or {})
        auth: Any = None  # the session's
        for _ in range(MAX_REDIRECTS + 1):
            resp = self.session.request(method, url, stream=True, allow_redirects=False, headers=headers, auth=auth,
                                        **kwargs)
            guard = current_guard()
            if guard is not None:  # the body is read through the response once the connection let go of it
                guard.add(resp.raw)
            try:
                status, location = resp.status_code, resp.headers.get("Location")
                if status in _REDIRECTS and location and idempotent:
                    url = public_url(urljoin(url, location.strip()))
                    kwargs.pop("params", None)  # the Location holds the query now
                    if _origin(url) != origin:
                        auth = _NoAuth()
                        headers = {**{k: v for k, v in headers.items() if k.lower() not in _CREDENTIAL_HEADERS},
                                   **dict.fromkeys(self._extra_headers)}  # None: requests drops the session's
                    else:
                        auth, headers = None, dict(kwargs.get("headers") or {})
                    continue
                body = _read_body(resp, f"{method} {path}")
            finally:
                resp.close()
            if status in _REDIRECTS:
                raise _error(FlinkRestError, f"{method} {path}: HTTP {status}: redirected to "
                                             f"{one_line(public_url(location or '?'), 200)}; not followed for a "
                                             f"{method} (point the Flink connection at the JobManager)", status)
            if status >= 500:
                raise _error(FlinkRestUnknown, f"{method} {path}: HTTP {status}: {_errors(body)}", status)
            if status == 404:
                raise _error(FlinkRestNotFound, f"{method} {path}: HTTP 404: {_errors(body)}", 404)
            if status >= 400:
                raise _error(FlinkRestError, f"{method} {path}: HTTP {status}: {_errors(body)}", status)
            if not body:
                return None
            try:
                answer = parse_json(body, f"{method} {path}", what="a JSON answer from Flink's REST API",
                                    limits=ANSWER_LIMITS)
            except InputError as exc:  # a cut or garbled body: we do not know what Flink said
                raise FlinkRestUnknown(redact(str(exc))) from None
            if not isinstance(answer, dict):  # every answer of Flink's REST API is an object
                raise FlinkRestUnknown(f"{method} {path}: the answer is not a JSON object; is this Flink's REST API?")
            return answer
        raise _error(FlinkRestError, f"{method} {path}: more than {MAX_REDIRECTS} redirects", None)

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
            if state in TERMINAL_JOB_STATES or state in ("FAILING", "CANCELLING"):
                raise FlinkRestError(f"job {job_id} reached {state} while restoring" + _exception_hint(self, job_id))
            raw = details.get("vertices")
            vertices = [v for v in raw if isinstance(v, dict)] if isinstance(raw, list) else []
            if state == "RUNNING" and vertices and all(
                    _obj(v.get("tasks")).get("RUNNING", 0) == v.get("parallelism", -1) for v in vertices):
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
                with open(path, "rb") as f:
                    resp = self.request("POST", "/jars/upload", total_timeout=limit,
                                        files={"jarfile": (path.name, f, "application/x-java-archive")})
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


class _NoAuth:
    """requests auth that sends nothing: the session's basic auth stays with the JobManager's origin."""

    def __call__(self, request: Any) -> Any:
        request.headers.pop("Authorization", None)
        return request


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), parts.port or {"http": 80, "https": 443}.get(scheme)


def _read_body(resp: Any, what: str) -> bytes:
    """The whole body in pieces, refused one byte past `MAX_ANSWER_BYTES` (the guard bounds the time)."""
    length = resp.headers.get("Content-Length")
    if length is not None and length.strip().isdigit() and int(length) > MAX_ANSWER_BYTES:
        raise FlinkRestError(f"{what}: an answer of {int(length)} bytes, more than the {MAX_ANSWER_BYTES}-byte limit")
    parts: list[bytes] = []
    got = 0
    for piece in resp.iter_content(64 * 1024):
        parts.append(piece)
        got += len(piece)
        if got > MAX_ANSWER_BYTES:
            raise FlinkRestError(f"{what}: an answer larger than the {MAX_ANSWER_BYTES}-byte limit")
    return b"".join(parts)


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

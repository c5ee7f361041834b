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
"""

from __future__ import annotations

import secrets
import time
from functools import cached_property
from pathlib import Path
from typing import Any

from airflow.sdk import BaseHook

TRANSIENT_STATUS = (502, 503, 504)
TERMINAL_JOB_STATES = ("FINISHED", "CANCELED", "FAILED", "SUSPENDED")


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
    def base_url(self) -> str:
        conn = self.get_connection(self.flink_conn_id)
        host = conn.host or "127.0.0.1"
        if "://" in host:
            base = host.rstrip("/")
        else:
            base = f"{conn.schema or 'http'}://{host}" + (f":{conn.port}" if conn.port else ":8081")
        return base

    @cached_property
    def session(self) -> Any:
        import requests

        conn = self.get_connection(self.flink_conn_id)
        s = requests.Session()
        if conn.login:
            s.auth = (conn.login, conn.password or "")
        headers = (conn.extra_dejson or {}).get("headers")
        if isinstance(headers, dict):
            s.headers.update({str(k): str(v) for k, v in headers.items()})
        return s

    def request(self, method: str, path: str, *, idempotent: bool | None = None, **kwargs: Any) -> Any:
        """One REST call; returns the decoded JSON (or None).

        Idempotent calls (GET by default) are retried with backoff on unknown outcomes. Others are
        sent once: a timeout, reset or 5xx raises `FlinkRestUnknown` and the caller reconciles."""
        import requests

        if idempotent is None:
            idempotent = method.upper() in ("GET", "HEAD")
        url = f"{self.base_url}/{path.lstrip('/')}"
        kwargs.setdefault("timeout", self.timeout)
        attempts = self.retries + 1 if idempotent else 1
        if not idempotent:
            # A fresh connection: a pooled keep-alive connection that a proxy or load balancer in
            # front of the JobManager already closed fails the request before it is sent, and a
            # call sent once would then fail for nothing (found with tests/fault_proxy.py, which
            # closes every connection after one exchange).
            self.session.close()
        last: Exception | None = None
        for attempt in range(attempts):
            try:
                resp = self.session.request(method, url, **kwargs)
            except (requests.ConnectionError, requests.Timeout) as exc:
                last = exc
            else:
                if resp.status_code >= 500:
                    last = _error(FlinkRestUnknown, f"{method} {path}: HTTP {resp.status_code}: {_errors(resp)}",
                                  resp.status_code)
                elif resp.status_code == 404:
                    raise _error(FlinkRestNotFound, f"{method} {path}: HTTP 404: {_errors(resp)}", 404)
                elif resp.status_code >= 400:
                    raise _error(FlinkRestError, f"{method} {path}: HTTP {resp.status_code}: {_errors(resp)}",
                                 resp.status_code)
                else:
                    try:
                        return resp.json() if resp.content else None
                    except ValueError as exc:  # a cut or garbled body: we do not know what Flink said
                        last = exc
            if attempt < attempts - 1:
                delay = self.backoff * (2 ** attempt)
                self.log.warning("Flink REST %s %s failed (%s); retrying in %.1fs", method, path, last, delay)
                time.sleep(delay)
        if isinstance(last, FlinkRestUnknown) and not idempotent:
            raise last
        tried = f"{attempts} attempts" if idempotent else "sent once: not idempotent"
        raise FlinkRestUnknown(f"{method} {path}: outcome unknown ({tried}) at {self.base_url}: {last}")

    # ---- jobs ---------------------------------------------------------------------------
    def overview(self) -> dict[str, Any]:
        return self.request("GET", "/overview")

    def list_jobs(self) -> list[dict[str, Any]]:
        """`/jobs/overview`: id (`jid`), name, state, start-time, end-time of every job."""
        return list(self.request("GET", "/jobs/overview").get("jobs", []))

    def job_status(self, job_id: str) -> str:
        return str(self.request("GET", f"/jobs/{job_id}/status")["status"])

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
        return sorted(jobs, key=lambda j: j.get("start-time", 0), reverse=True)

    def checkpoints(self, job_id: str) -> dict[str, Any]:
        return self.request("GET", f"/jobs/{job_id}/checkpoints")

    def restored_from(self, job_id: str) -> str | None:
        """The savepoint/checkpoint path this job restored from, as Flink reports it."""
        latest = (self.checkpoints(job_id) or {}).get("latest") or {}
        restored = latest.get("restored") or {}
        return restored.get("external_path")

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
            vertices = details.get("vertices") or []
            if state == "RUNNING" and vertices and all(
                    int((v.get("tasks") or {}).get("RUNNING", 0)) == int(v.get("parallelism", -1)) for v in vertices):
                return details
            if time.monotonic() > deadline:
                pending = {v.get("name"): {k: n for k, n in (v.get("tasks") or {}).items() if n}
                           for v in vertices}
                raise FlinkRestError(f"job {job_id} not fully RUNNING after {timeout:.0f}s: {state} {pending}")
            time.sleep(poll)

    # ---- savepoints ---------------------------------------------------------------------
    def trigger_savepoint(self, job_id: str, target_directory: str | None = None, *,
                          format_type: str = "CANONICAL") -> str:
        body: dict[str, Any] = {"cancel-job": False, "formatType": format_type}
        if target_directory:
            body["target-directory"] = target_directory
        return str(self.request("POST", f"/jobs/{job_id}/savepoints", json=body)["request-id"])

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
        return str(self.request("POST", f"/jobs/{job_id}/stop", json=body)["request-id"])

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
        """The external path of the newest completed savepoint in the job's checkpoint statistics
        (kept for a finished job too): what stop-with-savepoint wrote when its trigger is gone."""
        latest = (self.checkpoints(job_id) or {}).get("latest") or {}
        sp = latest.get("savepoint") or {}
        return sp.get("external_path") or None

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
            if status.get("status", {}).get("id") == "COMPLETED":
                op = status.get("operation") or {}
                if op.get("location"):
                    return str(op["location"])
                cause = (op.get("failure-cause") or {}).get("stack-trace", "")
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
        # An upload only stores a file; repeating one whose answer was lost leaves a spare copy, no harm.
        for attempt in range(self.retries + 1):
            try:
                with open(path, "rb") as f:
                    resp = self.request("POST", "/jars/upload",
                                        files={"jarfile": (path.name, f, "application/x-java-archive")})
                return str(resp["filename"]).rsplit("/", 1)[-1]
            except FlinkRestUnknown as exc:
                last = exc
                time.sleep(self.backoff * (2 ** attempt))
        raise FlinkRestUnknown(f"uploading {path.name}: {last}")

    def list_jars(self) -> list[dict[str, Any]]:
        return list(self.request("GET", "/jars").get("files", []))

    def run_jar(self, jar_id: str, *, entry_class: str | None = None, savepoint_path: str | None = None,
                allow_non_restored_state: bool = False, parallelism: int | None = None,
                program_args: list[str] | None = None, job_id: str | None = None) -> str:
        """Start the jar's job (from a savepoint when given); returns the new job id.

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
        # Never retried here: a retried POST without a job id could start the job twice.
        return str(self.request("POST", f"/jars/{jar_id}/run", json=body)["jobid"])


def _error(cls: type[FlinkRestError], message: str, status: int | None) -> FlinkRestError:
    exc = cls(message)
    exc.status = status
    return exc


def _errors(resp: Any) -> str:
    try:
        doc = resp.json()
    except ValueError:
        return resp.text[:500]
    errors = doc.get("errors") if isinstance(doc, dict) else None
    if isinstance(errors, list) and errors:
        return " | ".join(str(e).strip().splitlines()[0] if str(e).strip() else "" for e in errors)[:2000]
    return str(doc)[:500]


def _exception_hint(hook: FlinkRestHook, job_id: str) -> str:
    try:
        exc = hook.request("GET", f"/jobs/{job_id}/exceptions")
    except FlinkRestError:
        return ""
    root = (exc or {}).get("root-exception") or ""
    if not root:
        hist = ((exc or {}).get("exceptionHistory") or {}).get("entries") or []
        root = hist[0].get("stacktrace", "") if hist else ""
    return f": {root.strip().splitlines()[0]}" if root.strip() else ""

"""A total wall-clock deadline on a network call, however slowly its bytes trickle in.

Socket timeouts bound one `recv`: a server that sends one byte every half second never trips them, and
an HTTP client reading a status line, headers or a fixed-size piece of body waits for the whole thing
(one trickling S3 server held a 10 s read for 89 s, a trickling JobManager for 129 s). So the calls that
talk to servers run inside a `Guard`: one shared watchdog thread shuts the guarded sockets down when the
guard's time is up, which wakes the blocked `recv` at once; the caller then sees `Guard.expired` and
reports the deadline, whatever exception (or short answer) the shut-down socket produced.

What is guarded: anything registered with `Guard.add` (a socket, an `http.client`/urllib3 connection, a
urllib3 response: Flink's REST API is spoken through `http.client`, `upgrade_gate.storage.remote`), and every
connection a urllib3 pool hands out while a guard is active in the thread (`guard_pools`: boto3 clients sit
on urllib3 pools), so the connect, the request, the status line, the headers and the body are all inside
the deadline.
"""

from __future__ import annotations

import contextlib
import functools
import os
import socket
import threading
import time
from typing import Any

_TICK = 0.05  # after the deadline, guarded sockets are shut down again this often (a retry's new connection)
_local = threading.local()


class DeadlinePassed(Exception):
    """Raised instead of handing out a connection once the current guard's time is up (not an OSError, so
    HTTP libraries pass it up instead of retrying)."""


class Guard:
    """Sockets used by one call, shut down when `seconds` have passed. Use as a context manager."""

    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + max(0.0, seconds)
        self.expired = False
        self._objects: list[Any] = []
        self._lock = threading.Lock()
        self._outer: Guard | None = None

    def __enter__(self) -> Guard:
        self._outer = getattr(_local, "guard", None)
        _local.guard = self
        _WATCHDOG.watch(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _WATCHDOG.unwatch(self)
        _local.guard = self._outer

    def remaining(self) -> float:
        return self.end - time.monotonic()

    def add(self, obj: Any) -> Any:
        """Guard `obj` (a socket, or an object holding one) until this guard ends; returns `obj`."""
        with self._lock:
            self._objects.append(obj)
        if self.expired:
            _shutdown(obj)
        return obj

    def fire(self) -> None:
        """The deadline passed: shut every guarded socket down (called by the watchdog thread)."""
        self.expired = True
        with self._lock:
            objects = list(self._objects)
        for obj in objects:
            _shutdown(obj)


def current() -> Guard | None:
    """The innermost guard active in this thread, if any."""
    return getattr(_local, "guard", None)


def _socket_of(obj: Any, depth: int = 0) -> socket.socket | None:
    """The socket behind `obj`: itself, or reached through a connection (`sock`), a response (`_connection`,
    `_fp`/`fp`) or a socket file (`raw`, `_sock`). A connection whose answer says `Connection: close` has
    already dropped its `sock` while the body is read through the response's file, so every route is tried."""
    if isinstance(obj, socket.socket):
        return obj
    if obj is None or depth > 4:
        return None
    for attr in ("sock", "_sock", "_connection", "_fp", "fp", "raw"):
        inner = getattr(obj, attr, None)
        if inner is not None and inner is not obj:
            sock = _socket_of(inner, depth + 1)
            if sock is not None:
                return sock
    return None


def _shutdown(obj: Any) -> None:
    sock = _socket_of(obj)
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
    hook = getattr(obj, "_sock_shutdown", None)  # urllib3 2.3+ keeps the socket's shutdown on the response
    if callable(hook):
        with contextlib.suppress(OSError, ValueError, RuntimeError):
            hook(socket.SHUT_RDWR)


class _Watchdog:
    """One daemon thread for every guard of the process: sleeps until the earliest deadline."""

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        """Fresh state: also in a forked child (Spark's Python workers), whose copy of the lock may be held by
        a thread that does not exist there."""
        self._cond = threading.Condition()
        self._active: set[Guard] = set()
        self._thread: threading.Thread | None = None
        self._wakes_at = float("inf")  # when the thread looks next; a later guard needs no wake-up call

    def watch(self, guard: Guard) -> None:
        with self._cond:
            self._active.add(guard)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="upgrade-gate-deadlines", daemon=True)
                self._thread.start()
            if guard.end < self._wakes_at:
                self._cond.notify()

    def unwatch(self, guard: Guard) -> None:
        with self._cond:
            self._active.discard(guard)

    def _run(self) -> None:
        """Fire what is due, then sleep until the next end (or a tick, while fired guards are still open).
        One locked section from looking to sleeping, so a `watch` in between cannot lose its wake-up call."""
        with self._cond:
            while True:
                now = time.monotonic()
                due = [g for g in self._active if g.end <= now]
                for guard in due:
                    guard.fire()
                later = [g.end - now for g in self._active if g.end > now]
                wait = min(later) if later else None
                if due:
                    wait = _TICK if wait is None else min(wait, _TICK)
                self._wakes_at = now + wait if wait is not None else float("inf")
                self._cond.wait(timeout=wait)


_WATCHDOG = _Watchdog()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_WATCHDOG._reset)


# ---- urllib3 pools (boto3) ------------------------------------------------------------------------
@functools.cache
def _guarded_pool_class(cls: type) -> type:
    """`cls` whose `_get_conn` registers each connection it hands out with the thread's current guard."""

    def _get_conn(self: Any, timeout: float | None = None) -> Any:
        guard = current()
        if guard is not None and guard.expired:
            raise DeadlinePassed("the call's deadline passed")
        conn = super(guarded, self)._get_conn(timeout)  # type: ignore[misc]
        if guard is not None:
            guard.add(conn)
        return conn

    guarded = type(f"Guarded{cls.__name__}", (cls,), {"_get_conn": _get_conn, "_upgrade_gate_guarded": True})
    return guarded


def guard_pools(manager: Any) -> None:
    """Make the pools of a urllib3 `PoolManager` register their connections with the current guard.

    Pools already created are switched to the guarded class too (the class only adds a method)."""
    classes = getattr(manager, "pool_classes_by_scheme", None)
    if not isinstance(classes, dict):
        return
    manager.pool_classes_by_scheme = {scheme: cls if getattr(cls, "_upgrade_gate_guarded", False)
                                      else _guarded_pool_class(cls) for scheme, cls in classes.items()}
    pools = getattr(getattr(manager, "pools", None), "_container", None)
    for pool in list(pools.values()) if isinstance(pools, dict) else ():
        if not getattr(type(pool), "_upgrade_gate_guarded", False):
            with contextlib.suppress(TypeError):
                pool.__class__ = _guarded_pool_class(type(pool))


def _no_retry_after_deadline(**_: Any) -> None:
    """botocore's `needs-retry` hook: once the thread's guard has expired, the call ends now (no backoff)."""
    guard = current()
    if guard is not None and guard.expired:
        raise DeadlinePassed("the call's deadline passed")


def guard_boto_client(client: Any) -> Any:
    """A boto3 client whose HTTP pools are guarded; returns the client.

    botocore keeps its urllib3 `PoolManager` on the endpoint's HTTP session, which has no public accessor;
    if a botocore release moves it, the body reads stay guarded (each response is registered) and only
    the wait for the status line and headers falls back to botocore's own per-read timeouts."""
    session = getattr(getattr(client, "_endpoint", None), "http_session", None)
    if session is None or getattr(session, "_upgrade_gate_guarded", False):
        return client
    events = getattr(getattr(client, "meta", None), "events", None)
    if events is not None:  # botocore would sleep its backoff, then retry on a cut it cannot know we made
        service = client.meta.service_model.endpoint_prefix
        events.register_first(f"needs-retry.{service}", _no_retry_after_deadline, unique_id="upgrade-gate-deadline")
    classes = getattr(session, "_pool_classes_by_scheme", None)
    if isinstance(classes, dict):  # proxy managers created later take these
        session._pool_classes_by_scheme = {s: _guarded_pool_class(c) for s, c in classes.items()}
    for manager in (getattr(session, "_manager", None), *getattr(session, "_proxy_managers", {}).values()):
        if manager is not None:
            guard_pools(manager)
    with contextlib.suppress(AttributeError):
        session._upgrade_gate_guarded = True
    return client

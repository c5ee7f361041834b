"""The one client of Flink's REST API (an HTTP server we do not control), for the CLI's `flink-rest://`
discovery and the Airflow `FlinkRestHook` alike: reads (`get`, followed through redirects), the plumbing a
write reuses (`send`, once, never redirected) and the retry loop (`retried`).

A JobManager, or whatever answers on its port, is a server handing us a document, so its answer gets what a
user's file gets (`hashing.documents`: bounded size, values and depth, JSON only) plus what only a remote
read needs:

* one total wall-clock deadline per call (`Deadline.guard`): connect, status line, headers and body,
  however slowly the bytes trickle in (socket timeouts alone bound one `recv`, not the call);
* redirects are followed a few times, but credentials (`Authorization`, cookies, and every header given with
  the `Endpoint`) go only to the scheme, host and port they were given for, never to the host a redirect
  points at (not even when a later redirect leads back), and never from a `Location`;
* TLS is verified against the system's trust store (`ssl.create_default_context`, so `SSL_CERT_FILE` can
  add a private CA), host name included;
* no URL with its userinfo ever reaches an error message: errors name `Endpoint.public` (or the caller's
  label for it) and the path;
* a failure that leaves the outcome unknown (no connection, the deadline, a cut or garbled answer) is a
  `NoAnswer`, so a caller that writes can tell it from a definite refusal and look before acting.

No retries unless asked (`retried`): the CLI reports the first failure within its one deadline, the Airflow
hook retries reads with backoff.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import unquote, urljoin, urlsplit

from hashing.documents import Limits, parse_json
from upgrade_gate.storage.redact import one_line, public_url
from upgrade_gate.storage.s3 import Deadline, StorageError

if TYPE_CHECKING:
    import http.client

MAX_REDIRECTS = 3
MAX_ANSWER_BYTES = 8 * 1024 * 1024
# Flink's largest answers (job details, checkpoint statistics of a 1,000-vertex job) are a few MB and
# ~6 levels deep; 100 levels and 1M values leave room and stay cheap to refuse.
ANSWER_LIMITS = Limits(max_bytes=MAX_ANSWER_BYTES, max_values=1_000_000, max_depth=100, max_number_chars=100)
_PIECE = 64 * 1024
_CREDENTIAL_HEADERS = ("authorization", "proxy-authorization", "cookie")
_DEFAULT_PORTS = {"http": 80, "https": 443}
_REDIRECTS = (301, 302, 303, 307, 308)
T = TypeVar("T")


class NoAnswer(StorageError):
    """No complete answer arrived (the deadline, no connection, closed, cut off, not HTTP): the request may or
    may not have reached the server and taken effect."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where a service answers: scheme, host and port, and the credentials that belong to exactly them."""

    scheme: str  # http | https
    host: str
    port: int
    username: str | None = None
    password: str | None = None
    headers: tuple[tuple[str, str], ...] = ()  # e.g. an API key a proxy checks: sent to this origin only

    @property
    def origin(self) -> tuple[str, str, int]:
        return self.scheme, self.host.lower(), self.port

    @property
    def public(self) -> str:
        """`scheme://host:port`, without credentials: what errors and logs may show."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"

    def auth_headers(self) -> dict[str, str]:
        """What authenticates us at this origin: its headers and the basic auth of its user."""
        own = dict(self.headers)
        if self.username is None:
            return own
        token = f"{self.username}:{self.password or ''}".encode()
        return {**own, "Authorization": "Basic " + base64.b64encode(token).decode()}


def endpoint(url: str, *, scheme: str | None = None, default_port: int | None = None, shown: str = "") -> Endpoint:
    """The endpoint of `url` (`scheme` overrides the URL's, as `flink-rest+https://` means https);
    a URL without a host or with a port that is not a number is a `StorageError` naming `shown`."""
    shown = shown or public_url(url)
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise StorageError(f"{shown}: {one_line(exc, 100)}") from None
    scheme = scheme or parts.scheme
    if scheme not in _DEFAULT_PORTS:
        raise StorageError(f"{shown}: unsupported scheme {scheme!r} (http or https)")
    if not parts.hostname:
        raise StorageError(f"{shown}: no host")
    port = port or default_port or _DEFAULT_PORTS[scheme]
    return Endpoint(scheme, parts.hostname, port,
                    unquote(parts.username) if parts.username is not None else None,
                    unquote(parts.password) if parts.password is not None else None)


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    body: bytes
    where: str  # the public URL that answered (after redirects)
    location: str | None = None  # a redirect's `Location` that was not followed


def get(base: Endpoint, path: str, *, deadline: Deadline, service: str, headers: dict[str, str] | None = None,
        max_bytes: int = MAX_ANSWER_BYTES, label: str | None = None) -> Answer:
    """GET `path` from `base`, following redirects under the credential rule above; any status is returned.

    Errors (`StorageError`, one line naming `label` (what the user wrote, without credentials; default the
    public URL) or, after a redirect to another origin, that origin): the deadline, no connection, an answer
    that is not HTTP (these four `NoAnswer`s), a body over `max_bytes`, too many redirects."""
    common = {"Accept": "application/json", **(headers or {})}
    sent = {**common, **base.auth_headers()}
    here = Endpoint(base.scheme, base.host, base.port)
    target = path if path.startswith("/") else "/" + path
    for _ in range(MAX_REDIRECTS + 1):
        shown = (label or base.public) if here.origin == base.origin else here.public
        where = shown + target
        status, location, body = _once(here, "GET", target, sent, None, deadline, service, shown, max_bytes)
        if status not in _REDIRECTS or not location:
            return Answer(status, body, where)
        try:
            nxt = urljoin(here.public + target, location.strip())
            here = endpoint(nxt, shown=public_url(nxt))  # a Location's own userinfo is never used
            parts = urlsplit(nxt)
        except StorageError as exc:
            raise StorageError(f"{where}: redirected to an unusable location ({exc})") from None
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        if here.origin != base.origin:  # credentials belong to the origin they were given for
            sent = {k: v for k, v in common.items() if k.lower() not in _CREDENTIAL_HEADERS}
    raise StorageError(f"{label or base.public}{path}: more than {MAX_REDIRECTS} redirects")


def send(base: Endpoint, method: str, path: str, *, deadline: Deadline, service: str,
         headers: dict[str, str] | None = None, body: bytes | None = None, max_bytes: int = MAX_ANSWER_BYTES,
         label: str | None = None) -> Answer:
    """One request of any method, sent once and never redirected: what a write needs (a stop, a jar run), whose
    repetition at another address must be the caller's decision. A redirect comes back as its status with
    `Answer.location`. Errors as for `get`."""
    sent = {"Accept": "application/json", **(headers or {}), **base.auth_headers()}
    target = path if path.startswith("/") else "/" + path
    shown = label or base.public
    status, location, data = _once(base, method, target, sent, body, deadline, service, shown, max_bytes)
    return Answer(status, data, shown + target, location if status in _REDIRECTS else None)


def retried(attempt: Callable[[], T], *, attempts: int, backoff: float,
            transient: type[Exception] | tuple[type[Exception], ...] = NoAnswer,
            warn: Callable[[Exception, float], None] | None = None) -> T:
    """`attempt()` until it returns, at most `attempts` times, sleeping `backoff * 2**i` after failure i; only
    `transient` failures are retried (the last one is raised), any other at once. Only for what is safe to
    repeat: a read, or a write the server deduplicates."""
    for i in range(attempts):
        try:
            return attempt()
        except transient as exc:
            if i == attempts - 1:
                raise
            delay = backoff * (2 ** i)
            if warn is not None:
                warn(exc, delay)
            time.sleep(delay)
    raise ValueError(f"attempts={attempts}: expected at least 1")


def _once(here: Endpoint, method: str, target: str, headers: dict[str, str], body: bytes | None,
          deadline: Deadline, service: str, shown: str, max_bytes: int) -> tuple[int, str | None, bytes]:
    where = shown + target
    remaining = deadline.remaining()
    if remaining <= 0:
        raise NoAnswer(str(deadline.timed_out(where, f"{service} was too slow")))
    timeout = max(0.05, min(30.0, remaining))
    import http.client  # here, not at the top: a check of local files never opens a connection (30 ms of CPU)
    import ssl

    # One connection per request, never a pooled keep-alive one: a proxy or load balancer in front of the
    # JobManager may have closed that already, and a write sent once would then fail for nothing (found with
    # tests/fault_proxy.py, which closes every connection after one exchange).
    conn: http.client.HTTPConnection
    if here.scheme == "https":
        conn = http.client.HTTPSConnection(here.host, here.port, timeout=timeout,
                                           context=ssl.create_default_context())
    else:
        conn = http.client.HTTPConnection(here.host, here.port, timeout=timeout)
    try:
        with deadline.guard(where, f"{service} sent its answer too slowly") as guard:
            guard.add(conn)
            conn.request(method, target, body=body, headers=headers)
            resp = conn.getresponse()
            guard.add(resp)
            return resp.status, resp.getheader("Location"), _body(resp, where, max_bytes)
    except NoAnswer:
        raise
    except StorageError as exc:  # the deadline passed (`Deadline.guard`), or a body over `max_bytes`
        raise NoAnswer(str(exc)) if deadline.remaining() <= 0 else exc from None
    except TimeoutError:
        raise NoAnswer(str(deadline.timed_out(where, f"{service} did not answer"))) from None
    except http.client.RemoteDisconnected:
        raise NoAnswer(f"{where}: {service} closed the connection without answering") from None
    except http.client.IncompleteRead as exc:
        raise NoAnswer(f"{where}: the answer was cut off after {len(exc.partial)} bytes") from None
    except http.client.HTTPException as exc:
        raise NoAnswer(f"{where}: not an HTTP answer ({type(exc).__name__}); is this {service}?") from None
    except (OSError, UnicodeError, ValueError) as exc:
        reason = one_line(getattr(exc, "strerror", None) or exc, 160)
        raise NoAnswer(f"{shown}: cannot reach {service} ({reason}); check host, port and that it "
                       f"is up") from None
    finally:
        conn.close()


def _body(resp: http.client.HTTPResponse, where: str, max_bytes: int) -> bytes:
    """The whole body, read in pieces and refused one byte past `max_bytes` (or at once from its length)."""
    length = resp.getheader("Content-Length")
    if length is not None and length.strip().isdigit() and int(length) > max_bytes:
        raise StorageError(f"{where}: answer of {int(length)} bytes is larger than the {max_bytes}-byte limit")
    parts: list[bytes] = []
    got = 0
    while got <= max_bytes:
        piece = resp.read(min(_PIECE, max_bytes + 1 - got))
        if not piece:
            break
        parts.append(piece)
        got += len(piece)
    if got > max_bytes:
        raise StorageError(f"{where}: answer larger than the {max_bytes}-byte limit")
    return b"".join(parts)


def json_answer(answer: Answer, service: str, limits: Limits = ANSWER_LIMITS) -> Any:
    """The answer's JSON, bounded like every document (`hashing.documents.parse_json`)."""
    return parse_json(answer.body, answer.where, what=f"a JSON answer from {service}", limits=limits,
                      error=StorageError)


def error_detail(body: bytes) -> str:
    """The first line of a Flink-style `{"errors": [...]}` body, for an HTTP error message ('' if none)."""
    try:
        doc = parse_json(body, "answer", what="an error", limits=ANSWER_LIMITS)
    except Exception:  # an error page that is not JSON: the status says enough
        return ""
    errors = doc.get("errors") if isinstance(doc, dict) else None
    first = errors[0] if isinstance(errors, list) and errors and isinstance(errors[0], str) else ""
    first = first.strip().splitlines()[0] if first.strip() else ""
    return f": {one_line(first, 200)}" if first else ""

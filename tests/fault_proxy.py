"""A fault-injecting HTTP proxy for tests: sits in front of a real server on 127.0.0.1 and misbehaves on cue.

Why: the gate must survive a REST or S3 endpoint that is slow, drops answers, resets, returns 5xx, cuts a
download or never answers. These faults are injected on the wire in front of the real Flink REST server or
the real SeaweedFS S3 server, never by patching our own code.

Each client connection carries exactly one request: the proxy reads it (head + body by Content-Length or
`Transfer-Encoding: chunked`), rewrites `Connection: close` into the forwarded head, forwards it, then
relays the upstream response until the upstream closes. Bodies are streamed, so ~100 MB jar uploads pass
in bounded memory. The `Host` header is left untouched because S3 SigV4 signs it.

    with FaultProxy("127.0.0.1", s3_port) as proxy:
        proxy.add_rule(r"/_metadata", "cut_response", after_bytes=100, times=2)
        ...  # point the client at proxy.url
        assert proxy.log[0] == ("GET", "/bucket/sp/_metadata", "cut_response")

Actions:
    pass           forward normally
    delay          wait `delay` s, then forward normally
    drop_response  forward, read the whole upstream response, close the client without sending any of it
    reset          send a TCP RST to the client without forwarding (SO_LINGER 0, then close)
    status         reply `status` with a small JSON body, without forwarding
    cut_response   forward, relay the response head and only `after_bytes` body bytes, then close
    blackhole      read the request, never answer; keep the socket open until the client or proxy closes
    trickle        forward, relay the response (status line and headers too) one byte every `delay` s
    late_response  forward, read the whole upstream response, wait `delay` s, then relay it: the server acted
                   at once, the client learns it late (a client paused, or a slow network back)
"""

from __future__ import annotations

import contextlib
import json
import re
import select
import socket
import struct
import threading
from dataclasses import dataclass, field
from http.client import responses
from typing import Any

ACTIONS = ("pass", "delay", "drop_response", "reset", "status", "cut_response", "blackhole", "trickle",
           "late_response")
_MAX_HEAD = 256 * 1024
_CHUNK = 64 * 1024


@dataclass
class Rule:
    """One fault: applies to the first `times` requests it matches (times=-1: forever).

    `hits` counts the requests the rule was applied to; once exhausted the rule no longer matches, so a
    later rule (or plain forwarding) handles the next request."""

    pattern: re.Pattern[str]
    action: str
    method: str | None = None
    times: int = 1
    delay: float = 0.0
    after_bytes: int = 0
    status: int = 503
    hits: int = 0

    def exhausted(self) -> bool:
        return self.times >= 0 and self.hits >= self.times


class _Closed(Exception):
    """The client or the upstream went away (or the proxy is closing)."""


@dataclass
class _Reader:
    """A buffered reader over a socket: lines, heads and exact byte counts."""

    sock: socket.socket
    buf: bytearray = field(default_factory=bytearray)

    def _fill(self) -> None:
        try:
            data = self.sock.recv(_CHUNK)
        except OSError as exc:
            raise _Closed(str(exc)) from None
        if not data:
            raise _Closed("peer closed")
        self.buf += data

    def until(self, marker: bytes, limit: int = _MAX_HEAD) -> bytes:
        start = 0
        while True:
            idx = self.buf.find(marker, start)
            if idx >= 0:
                end = idx + len(marker)
                out = bytes(self.buf[:end])
                del self.buf[:end]
                return out
            if len(self.buf) > limit:
                raise _Closed("head too large")
            start = max(0, len(self.buf) - len(marker) + 1)
            self._fill()

    def pieces(self, n: int):  # type: ignore[no-untyped-def]
        """Yield exactly `n` bytes in pieces as they arrive (streaming, bounded memory)."""
        while n > 0:
            if not self.buf:
                self._fill()
            take = bytes(self.buf[:n])
            del self.buf[: len(take)]
            n -= len(take)
            yield take

    def rest(self):  # type: ignore[no-untyped-def]
        """Yield everything until the peer closes."""
        if self.buf:
            out = bytes(self.buf)
            self.buf.clear()
            yield out
        while True:
            try:
                data = self.sock.recv(_CHUNK)
            except OSError:
                return
            if not data:
                return
            yield data


def _parse_head(head: bytes) -> tuple[str, str, str, list[tuple[str, str]]]:
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) != 3:
        raise _Closed(f"bad request line {lines[0]!r}")
    method, target, version = parts
    headers = []
    for line in lines[1:]:
        if not line:
            continue
        name, _, value = line.partition(":")
        headers.append((name.strip(), value.strip()))
    return method, target, version, headers


def _header(headers: list[tuple[str, str]], name: str) -> str | None:
    for key, value in headers:
        if key.lower() == name:
            return value
    return None


def _body(reader: _Reader, headers: list[tuple[str, str]]):  # type: ignore[no-untyped-def]
    """Yield the raw request body bytes (chunked framing kept as is, so it can be forwarded verbatim)."""
    if "chunked" in (_header(headers, "transfer-encoding") or "").lower():
        while True:
            line = reader.until(b"\r\n", 4096)
            yield line
            size = int(line.split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                while True:  # trailers up to the empty line
                    trailer = reader.until(b"\r\n", 64 * 1024)
                    yield trailer
                    if trailer == b"\r\n":
                        return
            yield from reader.pieces(size + 2)
    else:
        yield from reader.pieces(int(_header(headers, "content-length") or 0))


def _path_of(target: str) -> str:
    if target.startswith(("http://", "https://")):  # absolute-form: keep only path + query
        rest = target.split("://", 1)[1]
        slash = rest.find("/")
        return rest[slash:] if slash >= 0 else "/"
    return target


class FaultProxy:
    """A threaded proxy on 127.0.0.1 (ephemeral port) in front of `upstream_host:upstream_port`."""

    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self._rules: list[Rule] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._socks: set[socket.socket] = set()
        self._threads: set[threading.Thread] = set()
        self.log: list[tuple[str, str, str]] = []
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(128)
        self._listener.settimeout(0.1)
        self.port: int = self._listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._acceptor = threading.Thread(target=self._accept_loop, name=f"fault-proxy-{self.port}", daemon=True)
        self._acceptor.start()

    # ---- public API -------------------------------------------------------------------------------------

    def add_rule(self, path_regex: str, action: str, *, method: str | None = None, times: int = 1,
                 delay: float = 0.0, after_bytes: int = 0, status: int = 503) -> Rule:
        if action not in ACTIONS:
            raise ValueError(f"unknown action {action!r}; expected one of {', '.join(ACTIONS)}")
        rule = Rule(re.compile(path_regex), action, method.upper() if method else None, times, delay,
                    after_bytes, status)
        with self._lock:
            self._rules.append(rule)
        return rule

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()

    def close(self) -> None:
        """Stop accepting, break every open connection and wait (briefly) for the threads to finish."""
        self._stop.set()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes a blocked accept() on Linux
        with contextlib.suppress(OSError):
            self._listener.close()
        self._acceptor.join(timeout=2)
        with self._lock:
            socks = list(self._socks)
            threads = list(self._threads)
        for sock in socks:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        for thread in threads:
            thread.join(timeout=2)

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ---- internals --------------------------------------------------------------------------------------

    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            client.settimeout(None)
            thread = threading.Thread(target=self._serve, args=(client,), daemon=True)
            with self._lock:
                if self._stop.is_set():
                    client.close()
                    return
                self._socks.add(client)
                self._threads.add(thread)
            thread.start()

    def _match(self, method: str, path: str) -> Rule | None:
        with self._lock:
            for rule in self._rules:
                if rule.exhausted() or (rule.method and rule.method != method) or not rule.pattern.search(path):
                    continue
                rule.hits += 1
                return rule
        return None

    def _serve(self, client: socket.socket) -> None:
        upstream: socket.socket | None = None
        try:
            reader = _Reader(client)
            head = reader.until(b"\r\n\r\n")
            method, target, version, headers = _parse_head(head)
            path = _path_of(target)
            rule = self._match(method, path)
            action = rule.action if rule else "pass"
            with self._lock:
                self.log.append((method, path, action))
            expects = (_header(headers, "expect") or "").lower() == "100-continue"

            if action == "reset":
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                return
            if action == "status":
                assert rule is not None
                if not expects:
                    for _ in _body(reader, headers):
                        pass
                payload = json.dumps({"errors": [f"injected {rule.status} by FaultProxy"]}).encode()
                reason = responses.get(rule.status, "Injected")
                client.sendall(f"HTTP/1.1 {rule.status} {reason}\r\nContent-Type: application/json\r\n"
                               f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n".encode() + payload)
                client.shutdown(socket.SHUT_WR)
                self._drain_until_closed(client, 1.0)
                return
            if action == "blackhole":
                if expects:
                    client.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
                for _ in _body(reader, headers):
                    pass
                self._drain_until_closed(client, None)
                return
            if action == "delay":
                assert rule is not None
                if self._stop.wait(rule.delay):
                    return

            # Forwarding actions: pass, delay, drop_response, cut_response.
            upstream = socket.create_connection(self.upstream, timeout=10)
            upstream.settimeout(None)
            with self._lock:
                self._socks.add(upstream)
            kept = [(k, v) for k, v in headers if k.lower() not in ("connection", "keep-alive", "expect",
                                                                     "proxy-connection")]
            kept.append(("Connection", "close"))
            new_head = f"{method} {target} {version}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in kept) + "\r\n"
            upstream.sendall(new_head.encode("latin-1"))
            if expects:
                client.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
            for piece in _body(reader, headers):
                upstream.sendall(piece)

            up = _Reader(upstream)
            if action == "drop_response":
                for _ in up.rest():
                    pass
                return
            if action == "cut_response":
                assert rule is not None
                resp_head = up.until(b"\r\n\r\n")
                while resp_head.startswith(b"HTTP/1.1 100") or resp_head.startswith(b"HTTP/1.0 100"):
                    resp_head = up.until(b"\r\n\r\n")
                client.sendall(resp_head)
                left = rule.after_bytes
                for piece in up.rest():
                    if left <= 0:
                        break
                    client.sendall(piece[:left])
                    left -= len(piece[:left])
                return
            if action == "late_response":
                assert rule is not None
                answer = b"".join(up.rest())
                if self._stop.wait(rule.delay):
                    return
                client.sendall(answer)
                return
            if action == "trickle":
                assert rule is not None
                for piece in up.rest():
                    for i in range(len(piece)):
                        if self._stop.wait(rule.delay):
                            return
                        client.sendall(piece[i:i + 1])
                return
            for piece in up.rest():
                client.sendall(piece)
            with contextlib.suppress(OSError):
                client.shutdown(socket.SHUT_WR)
        except (_Closed, OSError, ValueError):
            pass
        finally:
            for sock in (client, upstream):
                if sock is None:
                    continue
                with contextlib.suppress(OSError):
                    sock.close()
                with self._lock:
                    self._socks.discard(sock)
            with self._lock:
                self._threads.discard(threading.current_thread())

    def _drain_until_closed(self, sock: socket.socket, limit: float | None) -> None:
        """Read and discard until the peer closes, the proxy stops, or `limit` seconds pass."""
        waited = 0.0
        while not self._stop.is_set() and (limit is None or waited < limit):
            ready, _, _ = select.select([sock], [], [], 0.1)
            waited += 0.1
            if ready:
                try:
                    if not sock.recv(_CHUNK):
                        return
                except OSError:
                    return

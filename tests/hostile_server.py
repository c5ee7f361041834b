"""A hostile HTTP server for tests, in-process on 127.0.0.1: answers what a test tells it to, the way a broken
or malicious JobManager (or whatever listens on its port) would, and records every request it received.

Unlike `tests/fault_proxy.py`, which misbehaves in front of a real server, this one *is* the server: it sends
malformed, huge or wrongly typed JSON, trickles its answer one byte at a time (status line and headers too),
redirects elsewhere, or sends bytes that are not HTTP at all.

    with HostileServer() as server:
        server.route("/jobs/overview", Reply(body=b"[" * 100_000))
        server.route("/jobs/overview", Reply(trickle=0.5, body=b"{}"))  # the last route set for a path wins
        ... flink-rest://127.0.0.1:{server.port}/orders ...
        assert "authorization" not in server.received[0].headers
"""

from __future__ import annotations

import contextlib
import json
import socket
import socketserver
import threading
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Reply:
    """One answer. `raw` replaces the whole response (status line included); `trickle` sends it one byte per
    `trickle` seconds; `trickle_body` sends the head at once and the body one byte at a time; `length`
    overrides Content-Length (None: the body's; -1: none, the body ends when the connection closes)."""

    status: int = 200
    body: bytes | Any = b""
    headers: tuple[tuple[str, str], ...] = ()
    raw: bytes | None = None
    trickle: float | None = None
    trickle_body: float | None = None
    length: int | None = None

    def encoded(self) -> tuple[bytes, bytes]:
        if self.raw is not None:
            return self.raw, b""
        body = self.body if isinstance(self.body, bytes) else json.dumps(self.body).encode()
        head = [f"HTTP/1.1 {self.status} X", "Content-Type: application/json", "Connection: close"]
        if self.length != -1:
            head.append(f"Content-Length: {len(body) if self.length is None else self.length}")
        head += [f"{k}: {v}" for k, v in self.headers]
        return ("\r\n".join(head) + "\r\n\r\n").encode(), body


def json_reply(doc: Any, status: int = 200) -> Reply:
    return Reply(status=status, body=json.dumps(doc).encode())


def redirect(location: str, status: int = 302) -> Reply:
    return Reply(status=status, headers=(("Location", location),))


@dataclass(frozen=True)
class Received:
    method: str
    path: str
    headers: dict[str, str]  # lower-case names


@dataclass
class HostileServer:
    """A threaded server on an ephemeral port; `route(path, reply)` sets what a path (without query) answers."""

    routes: dict[str, Reply] = field(default_factory=dict)
    received: list[Received] = field(default_factory=list)

    def __post_init__(self) -> None:
        owner = self
        self._stop = threading.Event()

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                owner._serve(self.request)

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self._server = Server(("127.0.0.1", 0), Handler)
        self.port: int = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)
        self._thread.start()

    def route(self, path: str, reply: Reply) -> None:
        self.routes[path] = reply

    def close(self) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> HostileServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _serve(self, sock: socket.socket) -> None:
        sock.settimeout(10)
        data = b""
        with contextlib.suppress(OSError):
            while b"\r\n\r\n" not in data and len(data) < 65536:
                chunk = sock.recv(4096)
                if not chunk:
                    return
                data += chunk
        lines = data.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) < 2:
            return
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        path = parts[1].split("?", 1)[0]
        self.received.append(Received(parts[0], path, headers))
        reply = self.routes.get(path) or json_reply({"errors": [f"Not found: {path}"]}, 404)
        head, body = reply.encoded()
        try:
            if reply.trickle is not None:
                self._trickle(sock, head + body, reply.trickle)
            elif reply.trickle_body is not None:
                sock.sendall(head)
                self._trickle(sock, body, reply.trickle_body)
            else:
                sock.sendall(head + body)
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def _trickle(self, sock: socket.socket, data: bytes, pause: float) -> None:
        for i in range(len(data)):
            if self._stop.wait(pause):
                return
            sock.sendall(data[i:i + 1])

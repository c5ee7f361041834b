"""FaultProxy does each fault it promises, against a real (tiny) HTTP server, so the fault tests built on it
test the gate rather than the proxy."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest

from tests.fault_proxy import FaultProxy


class _Handler(BaseHTTPRequestHandler):
    """GET /bytes/<n> answers n bytes; POST answers the body's length and the Connection header; records paths."""

    hits: ClassVar[list[str]] = []

    def log_message(self, *args: object) -> None:  # keep test output quiet
        pass

    def do_GET(self) -> None:
        self.hits.append(self.path)
        n = int(self.path.split("/bytes/", 1)[1].split("?")[0]) if "/bytes/" in self.path else 2
        body = bytes(i % 251 for i in range(n))
        self.send_response(200)
        self.send_header("Content-Length", str(n))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        self.hits.append(self.path)
        size = 0
        if "chunked" in self.headers.get("Transfer-Encoding", ""):
            while True:
                chunk = int(self.rfile.readline().split(b";")[0], 16)
                if chunk == 0:
                    while self.rfile.readline() not in (b"\r\n", b""):
                        pass
                    break
                data = self.rfile.read(chunk)
                size += len(data)
                self.rfile.read(2)
        else:
            left = int(self.headers.get("Content-Length", 0))
            while left:
                data = self.rfile.read(min(left, 1 << 20))
                left -= len(data)
                size += len(data)
        payload = json.dumps({"size": size, "connection": self.headers.get("Connection")}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@pytest.fixture(scope="module")
def upstream() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


@pytest.fixture
def proxy(upstream: int) -> Iterator[FaultProxy]:
    _Handler.hits.clear()
    with FaultProxy("127.0.0.1", upstream) as p:
        yield p


def _request(proxy: FaultProxy, method: str, path: str, body: bytes | None = None,
             timeout: float = 5.0) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=timeout)
    try:
        conn.request(method, path, body=body)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def test_pass_forwards_and_logs_path_with_query(proxy: FaultProxy) -> None:
    status, body = _request(proxy, "GET", "/bytes/1000?x=1")
    assert status == 200 and body == bytes(i % 251 for i in range(1000))
    assert proxy.log == [("GET", "/bytes/1000?x=1", "pass")]


def test_forwarded_request_says_connection_close(proxy: FaultProxy) -> None:
    status, body = _request(proxy, "POST", "/echo", b"abc")
    assert status == 200 and json.loads(body) == {"size": 3, "connection": "close"}


def test_delay_waits_then_forwards(proxy: FaultProxy) -> None:
    proxy.add_rule(r"^/bytes/", "delay", delay=0.4)
    start = time.monotonic()
    status, _ = _request(proxy, "GET", "/bytes/10")
    assert status == 200 and time.monotonic() - start >= 0.4


def test_drop_response_takes_effect_but_client_gets_nothing(proxy: FaultProxy) -> None:
    proxy.add_rule(r"/submit", "drop_response", method="POST")
    with pytest.raises(http.client.RemoteDisconnected):
        _request(proxy, "POST", "/submit", b"payload")
    assert _Handler.hits == ["/submit"]  # the upstream did the work
    assert proxy.log == [("POST", "/submit", "drop_response")]


def test_reset_sends_rst_without_forwarding(proxy: FaultProxy) -> None:
    proxy.add_rule(r"/x", "reset")
    with pytest.raises(ConnectionResetError):
        _request(proxy, "GET", "/x")
    assert _Handler.hits == []


def test_status_replies_json_without_forwarding_and_method_filter(proxy: FaultProxy) -> None:
    proxy.add_rule(r"/jobs", "status", method="POST", status=502, times=-1)
    status, body = _request(proxy, "GET", "/jobs")  # method does not match: forwarded
    assert status == 200
    status, body = _request(proxy, "POST", "/jobs", b"x" * 1000)
    assert status == 502 and "errors" in json.loads(body)
    assert _Handler.hits == ["/jobs"]


def test_cut_response_relays_head_and_only_first_bytes(proxy: FaultProxy) -> None:
    proxy.add_rule(r"/bytes/", "cut_response", after_bytes=100)
    conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=5)
    conn.request("GET", "/bytes/100000")
    resp = conn.getresponse()
    assert resp.status == 200 and resp.getheader("Content-Length") == "100000"
    with pytest.raises(http.client.IncompleteRead) as info:
        resp.read()
    assert len(info.value.partial) == 100
    conn.close()


def test_blackhole_never_answers_and_close_is_prompt(proxy: FaultProxy) -> None:
    proxy.add_rule(r"/", "blackhole", times=-1)
    start = time.monotonic()
    with pytest.raises(TimeoutError):
        _request(proxy, "GET", "/anything", timeout=0.5)
    assert 0.5 <= time.monotonic() - start < 2 and _Handler.hits == []
    # A second client that stays connected must not hold up close().
    hanging = socket.create_connection(("127.0.0.1", proxy.port))
    hanging.sendall(b"GET /hang HTTP/1.1\r\nHost: x\r\n\r\n")
    time.sleep(0.2)
    start = time.monotonic()
    proxy.close()
    assert time.monotonic() - start < 3
    assert hanging.recv(10) == b""  # the proxy closed its end
    hanging.close()


def test_trickle_relays_the_whole_answer_one_byte_at_a_time(proxy: FaultProxy) -> None:
    proxy.add_rule(r"/slow", "trickle", delay=0.01)
    start = time.monotonic()
    status, body = _request(proxy, "GET", "/slow")
    elapsed = time.monotonic() - start
    assert status == 200 and body and _Handler.hits
    assert elapsed > 0.01 * 100  # a head of ~100 bytes and the body, each byte after its own pause


def test_times_limits_a_rule_then_later_rules_and_pass_apply(proxy: FaultProxy) -> None:
    first = proxy.add_rule(r"/r", "status", times=2, status=500)
    second = proxy.add_rule(r"/r", "status", times=1, status=429)
    codes = [_request(proxy, "GET", "/r")[0] for _ in range(4)]
    assert codes == [500, 500, 429, 200]
    assert (first.hits, second.hits) == (2, 1)
    proxy.clear()
    assert _request(proxy, "GET", "/r")[0] == 200


def test_chunked_request_body_is_forwarded(proxy: FaultProxy) -> None:
    def parts() -> Iterator[bytes]:
        for i in range(50):
            yield bytes([i]) * 1000

    conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=5)
    conn.request("POST", "/chunked", body=parts(), encode_chunked=True)
    resp = conn.getresponse()
    assert resp.status == 200 and json.loads(resp.read())["size"] == 50_000
    conn.close()


def test_expect_100_continue_upload(proxy: FaultProxy) -> None:
    sock = socket.create_connection(("127.0.0.1", proxy.port), timeout=5)
    sock.sendall(b"PUT /up HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
    assert sock.recv(100).startswith(b"HTTP/1.1 100")
    sock.close()


def test_large_upload_streams_through(proxy: FaultProxy) -> None:
    body = b"\x01" * (100 * 1024 * 1024)
    start = time.monotonic()
    status, answer = _request(proxy, "POST", "/jar", body, timeout=30)
    assert status == 200 and json.loads(answer)["size"] == len(body)
    assert time.monotonic() - start < 20


def test_urllib3_pool_reuse_and_multipart_jar_upload(proxy: FaultProxy) -> None:
    """The pooled clients the gate uses (botocore sits on urllib3): a pooled client gets a fresh
    connection per request, and a multipart jar upload (Flink's /jars/upload) streams through."""
    import urllib3

    pool = urllib3.PoolManager(retries=False, timeout=10)
    for _ in range(3):
        assert pool.request("GET", f"{proxy.url}/bytes/5000").data == bytes(i % 251 for i in range(5000))
    jar = bytes(range(256)) * 40_000  # 10 MB
    body, content_type = urllib3.encode_multipart_formdata({"jarfile": ("job.jar", jar, "application/x-java-archive")})
    resp = pool.request("POST", f"{proxy.url}/jars/upload", body=body, headers={"Content-Type": content_type})
    assert resp.status == 200 and json.loads(resp.data)["size"] == len(body)
    assert [a for _, _, a in proxy.log] == ["pass"] * 4


def test_the_rest_client_sees_each_fault(proxy: FaultProxy) -> None:
    """The one client of Flink's REST API (`upgrade_gate.storage.remote`, the CLI's and the Airflow hook's): a 5xx
    is an answer, a reset connection a `NoAnswer` (outcome unknown), and the next request gets through."""
    from upgrade_gate.storage import remote
    from upgrade_gate.storage.s3 import Deadline

    proxy.add_rule(r"/jobs", "status", status=500)
    proxy.add_rule(r"/jobs", "reset")
    base = remote.endpoint(proxy.url)

    def get() -> remote.Answer:
        return remote.get(base, "/jobs", deadline=Deadline(5), service="the upstream")

    assert get().status == 500
    with pytest.raises(remote.NoAnswer):
        get()
    assert get().status == 200

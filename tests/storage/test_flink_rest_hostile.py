"""`flink-rest://` against a hostile server (tests/hostile_server.py, in-process): malformed, huge, deep or
wrongly typed answers, a server that trickles its answer one byte every half second, and redirects to
another host and port.

What a user must see: exit 2 and one line naming the server and what is wrong (never a traceback), within
2 s of CPU and 200 MB, or within the configured deadline (`UPGRADE_GATE_S3_TIMEOUT`) however slowly the
bytes come; the credentials of `flink-rest://user:password@` only ever reach the host they were written
for, and never appear in any output.
"""

from __future__ import annotations

import base64
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.hostile_inputs import REPO, assert_one_line, report, run_measured
from tests.hostile_server import HostileServer, Reply, json_reply, redirect
from upgrade_gate.storage import discovery
from upgrade_gate.storage.s3 import TIMEOUT_ENV, StorageError

SAVEPOINT = REPO / "tests" / "fixtures" / "restores" / "1.20.5" / "savepoints" / "uids-p2"
GRAPH = REPO / "tests" / "fixtures" / "restores" / "1.20.5" / "identical" / "graph-b.json"
JID = "c9dfb5e1a3f04b6e9d2c7a8b5e4f3d21"
USER, SECRET = "gate", "s3cr3t-Pa55"
BASIC = "Basic " + base64.b64encode(f"{USER}:{SECRET}".encode()).decode()
OVERVIEW = {"jobs": [{"jid": JID, "name": "orders", "state": "RUNNING", "start-time": 1_763_900_000_000}]}
CHECKPOINTS = {"latest": {"savepoint": {"id": 7, "external_path": str(SAVEPOINT)}, "completed": None}}
DEADLINE_S = 3.0
MARGIN_S = 0.5  # the watchdog's tick and a loaded 2-core machine


@pytest.fixture
def server() -> Iterator[HostileServer]:
    with HostileServer() as s:
        s.route("/jobs/overview", json_reply(OVERVIEW))
        s.route(f"/jobs/{JID}/checkpoints", json_reply(CHECKPOINTS))
        yield s


def _spec(server: HostileServer, job: str = "orders") -> str:
    return f"flink-rest://{USER}:{SECRET}@127.0.0.1:{server.port}/{job}"


def _no_secret(*texts: str) -> None:
    for text in texts:
        assert SECRET not in text and f"{USER}:{SECRET}" not in text and "@127.0.0.1" not in text, text[-2000:]


def _checkpoint(**entry: object) -> Reply:
    return json_reply({"latest": {"savepoint": {"id": 7, "external_path": str(SAVEPOINT), **entry}}})


def _overview(**fields: object) -> Reply:
    return json_reply({"jobs": [{"jid": JID, "name": "orders", "state": "RUNNING", **fields}]})


# (test id, path, answer, what the one line must say)
OVERVIEW_PATH, CHECKPOINTS_PATH = "/jobs/overview", f"/jobs/{JID}/checkpoints"
HOSTILE: list[tuple[str, str, Reply, str]] = [
    ("html-not-json", OVERVIEW_PATH, Reply(body=b"<html><body>login</body></html>"), "not Flink's REST API (not JSON"),
    ("malformed-json", OVERVIEW_PATH, Reply(body=b'{"jobs": [{"jid": '), "invalid JSON at line 1"),
    ("deep-json", OVERVIEW_PATH, Reply(body=b"[" * 100_000 + b"]" * 100_000), "nested deeper than 100 levels"),
    ("deep-json-in-a-field", CHECKPOINTS_PATH, Reply(body=b'{"latest": ' + b"[" * 500 + b"]" * 500 + b"}"),
     "nested deeper than 100 levels"),
    ("int-5000-digits", OVERVIEW_PATH, Reply(body=b'{"jobs": [{"start-time": ' + b"9" * 5000 + b"}]}"),
     "a number has more than 4300 digits"),
    ("not-utf8", OVERVIEW_PATH, Reply(body=b'{"jobs": [{"name": "\xe9\xff"}]}'), "not UTF-8"),
    ("empty-answer", OVERVIEW_PATH, Reply(body=b""), "empty answer"),
    ("jobs-not-a-list", OVERVIEW_PATH, json_reply({"jobs": "orders"}), "no list of jobs"),
    ("answer-a-list", OVERVIEW_PATH, json_reply([OVERVIEW]), "no list of jobs"),
    ("missing-jid", OVERVIEW_PATH, json_reply({"jobs": [{"name": "orders", "state": "RUNNING"}]}), "field jid None"),
    ("jid-a-list", OVERVIEW_PATH, _overview(jid=[JID]), "field jid a list"),
    ("jid-not-hex", OVERVIEW_PATH, _overview(jid="../../etc/passwd"), "field jid '../../etc/passwd'"),
    ("start-time-not-a-number", OVERVIEW_PATH,
     json_reply({"jobs": [{"jid": JID, "name": "orders", "state": "FINISHED", "start-time": "yesterday"},
                          {"jid": "f" * 32, "name": "orders", "state": "FAILED", "start-time": 5}]}),
     "field start-time is 'yesterday'"),
    ("start-time-a-list", OVERVIEW_PATH,
     json_reply({"jobs": [{"jid": JID, "name": "orders", "state": "FINISHED", "start-time": [1]},
                          {"jid": "f" * 32, "name": "orders", "state": "FAILED", "start-time": 5}]}),
     "field start-time is a list"),
    ("checkpoint-id-a-string", CHECKPOINTS_PATH, _checkpoint(id="seven"), "field latest.savepoint.id is 'seven'"),
    ("checkpoint-id-a-list", CHECKPOINTS_PATH, _checkpoint(id=[7]), "field latest.savepoint.id is a list"),
    ("checkpoint-id-a-bool", CHECKPOINTS_PATH, _checkpoint(id=True), "field latest.savepoint.id is True"),
    ("checkpoint-id-a-float", CHECKPOINTS_PATH, _checkpoint(id=7.5), "field latest.savepoint.id is 7.5"),
    ("checkpoint-id-nan", CHECKPOINTS_PATH, Reply(body=b'{"latest": {"savepoint": {"id": NaN, "external_path": "'
                                                       + str(SAVEPOINT).encode() + b'"}}}'),
     "field latest.savepoint.id is nan"),
    ("checkpoint-id-beyond-long", CHECKPOINTS_PATH, _checkpoint(id=2**70), "field latest.savepoint.id is 1180591"),
    ("checkpoint-id-negative", CHECKPOINTS_PATH, _checkpoint(id=-1), "field latest.savepoint.id is -1"),
    ("path-with-newline", CHECKPOINTS_PATH, _checkpoint(external_path="s3://b/sp\nINJECTED"),
     "field latest.savepoint.external_path"),
    ("path-huge", CHECKPOINTS_PATH, _checkpoint(external_path="s3://b/" + "x" * 100_000),
     "field latest.savepoint.external_path"),
    ("answer-9mb-declared", OVERVIEW_PATH, Reply(body=b"{}", length=9_000_000), "is larger than the 8388608-byte"),
    ("answer-9mb-until-close", OVERVIEW_PATH, Reply(body=b" " * 9_000_000, length=-1), "larger than the 8388608-byte"),
    ("not-http", OVERVIEW_PATH, Reply(raw=b"SSH-2.0-OpenSSH_9.6\r\n\r\n"), "not an HTTP answer"),
    ("server-error", OVERVIEW_PATH, json_reply({"errors": ["boom\nat org.apache.flink..."]}, 500), "HTTP 500: boom"),
    ("error-text-huge", OVERVIEW_PATH, json_reply({"errors": ["x" * 1_000_000]}, 500), "HTTP 500: xxx"),
    ("redirect-loop", OVERVIEW_PATH, redirect("/jobs/overview"), "more than 3 redirects"),
    ("redirect-elsewhere-scheme", OVERVIEW_PATH, redirect("ftp://127.0.0.1/x"), "unsupported scheme 'ftp'"),
]


@pytest.mark.parametrize("path, answer, expect", [c[1:] for c in HOSTILE], ids=[c[0] for c in HOSTILE])
def test_hostile_answer_is_one_line_naming_the_server(server: HostileServer, path: str, answer: Reply,
                                                      expect: str) -> None:
    server.route(path, answer)
    res = run_measured("check", "--savepoint", _spec(server), "--graph", str(GRAPH))
    report("flink-rest", path.rsplit("/", 1)[-1] + "/" + expect[:30], res)
    line = assert_one_line(res, f"flink-rest://127.0.0.1:{server.port}/", expect)
    assert line.split(": ", 2)[2].startswith(f"flink-rest://127.0.0.1:{server.port}/jobs/")
    _no_secret(res.stderr, res.stdout)


def test_a_valid_server_still_works_and_the_credentials_reach_it(server: HostileServer) -> None:
    res = run_measured("check", "--savepoint", _spec(server), "--graph", str(GRAPH), "--flink-version", "1.20",
                       "--format", "json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["verdict"] == "SAFE"
    assert [r.headers.get("authorization") for r in server.received] == [BASIC, BASIC]
    _no_secret(res.stderr, res.stdout)


# ---- deadlines ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("how", ["trickle", "trickle_body"])
@pytest.mark.parametrize("path", [OVERVIEW_PATH, CHECKPOINTS_PATH])
def test_a_trickling_server_is_cut_at_the_configured_deadline(server: HostileServer, monkeypatch: pytest.MonkeyPatch,
                                                              how: str, path: str) -> None:
    """One byte every 0.5 s (the status line and headers too, or only the body): no socket timeout ever
    fires, yet the whole discovery ends at the deadline."""
    monkeypatch.setenv(TIMEOUT_ENV, str(DEADLINE_S))
    body = json.dumps(OVERVIEW if path == OVERVIEW_PATH else CHECKPOINTS).encode()
    server.route(path, Reply(body=body, **{how: 0.5}))
    start = time.monotonic()
    with pytest.raises(StorageError) as caught:
        discovery.resolve(_spec(server))
    elapsed = time.monotonic() - start
    report("flink-rest-deadline", f"{how}{path}", _inprocess(elapsed), deadline_s=DEADLINE_S)
    assert DEADLINE_S - 0.1 <= elapsed < DEADLINE_S + MARGIN_S, elapsed
    msg = str(caught.value)
    assert msg.startswith(f"flink-rest://127.0.0.1:{server.port}{path}: timed out after 3.0 s"), msg
    assert TIMEOUT_ENV in msg and SECRET not in msg


def test_the_cli_against_a_trickling_server_ends_at_the_deadline(server: HostileServer) -> None:
    server.route(OVERVIEW_PATH, Reply(body=json.dumps(OVERVIEW).encode(), trickle=0.5))
    env = {**os.environ, TIMEOUT_ENV: str(DEADLINE_S)}
    res = run_measured("check", "--savepoint", _spec(server), "--graph", str(GRAPH), env=env)
    report("flink-rest-deadline", "cli-trickle", res, deadline_s=DEADLINE_S)
    assert_one_line(res, f"flink-rest://127.0.0.1:{server.port}/jobs/overview: ", "timed out after 3.0 s")
    assert res.wall_s < DEADLINE_S + MARGIN_S + 1.0, res.wall_s  # + the interpreter's start
    _no_secret(res.stderr)


def _inprocess(elapsed: float) -> object:
    from tests.hostile_inputs import Measured

    return Measured(2, "", "", 0.0, 0.0, elapsed)


# ---- redirects and credentials --------------------------------------------------------------------------
@pytest.fixture
def other() -> Iterator[HostileServer]:
    """Another host:port that records what it received (the redirect's target)."""
    with HostileServer() as s:
        s.route("/jobs/overview", json_reply(OVERVIEW))
        s.route(f"/jobs/{JID}/checkpoints", json_reply(CHECKPOINTS))
        yield s


@pytest.mark.parametrize("location", ["http://127.0.0.1:{port}/jobs/overview",
                                      "http://mallory:stolen@127.0.0.1:{port}/jobs/overview",
                                      "//127.0.0.1:{port}/jobs/overview"])
def test_a_redirect_to_another_host_never_carries_the_credentials(server: HostileServer, other: HostileServer,
                                                                   location: str) -> None:
    server.route(OVERVIEW_PATH, redirect(location.format(port=other.port)))
    res = run_measured("check", "--savepoint", _spec(server), "--graph", str(GRAPH), "--flink-version", "1.20")
    assert res.returncode == 0, res.stderr  # followed: the other host's answer names the job
    assert [r.path for r in other.received] == [OVERVIEW_PATH]
    assert all("authorization" not in r.headers and "cookie" not in r.headers for r in other.received), \
        other.received
    assert [r.headers.get("authorization") for r in server.received] == [BASIC, BASIC]  # its own two calls
    _no_secret(res.stderr, res.stdout)


def test_a_redirect_within_the_same_origin_keeps_the_credentials(server: HostileServer) -> None:
    server.route(OVERVIEW_PATH, redirect("/v1/jobs/overview", status=307))
    server.route("/v1/jobs/overview", json_reply(OVERVIEW))
    found = discovery.resolve(_spec(server))
    assert found.location == str(SAVEPOINT)
    assert [(r.path, r.headers.get("authorization")) for r in server.received] == [
        (OVERVIEW_PATH, BASIC), ("/v1/jobs/overview", BASIC), (CHECKPOINTS_PATH, BASIC)]


def test_a_redirect_to_another_port_of_the_same_host_is_another_origin(server: HostileServer,
                                                                       other: HostileServer) -> None:
    server.route(CHECKPOINTS_PATH, redirect(f"{other.url}{CHECKPOINTS_PATH}", status=308))
    assert discovery.resolve(_spec(server)).location == str(SAVEPOINT)
    assert other.received and "authorization" not in other.received[0].headers


@pytest.mark.parametrize("spec, expect", [
    ("flink-rest://{cred}@127.0.0.1:{port}/orders?kind=both", "kind=both"),
    ("flink-rest://{cred}@127.0.0.1:{port}/orders?nope=1", "unknown option 'nope'"),
    ("flink-rest://{cred}@127.0.0.1:{port}/", "expected flink-rest://HOST:PORT/JOB"),
    ("flink-rest://{cred}@127.0.0.1:notaport/orders", "Port could not be cast"),
    ("flink-rest://{cred}@/orders", "expected flink-rest://HOST:PORT/JOB"),
    ("flink-rest://{cred}@127.0.0.1:1/orders", "cannot reach Flink's REST API"),
])
def test_credentials_never_appear_in_errors(server: HostileServer, spec: str, expect: str) -> None:
    res = run_measured("inspect", spec.format(cred=f"{USER}:{SECRET}", port=server.port))
    line = assert_one_line(res, "", expect)
    assert "flink-rest://" in line
    _no_secret(res.stderr, res.stdout)


def test_the_repair_offer_in_the_report_carries_no_credentials(server: HostileServer, tmp_path: Path) -> None:
    """A check that is not SAFE offers a `repair` command line built from --savepoint: without the userinfo."""
    fails = REPO / "tests" / "fixtures" / "restores" / "1.20.5" / "uid-removed" / "graph-b.json"
    res = run_measured("check", "--savepoint", _spec(server), "--graph", str(fails), "--flink-version", "1.20",
                       "--format", "json", limit_memory=False)
    assert res.returncode == 1, res.stderr
    _no_secret(res.stdout, res.stderr)

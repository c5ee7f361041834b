"""The Airflow Flink REST hook against a hostile server (tests/hostile_server.py, in-process), and where its
errors end up: upgrade records and task logs.

What must hold: every attempt ends within the hook's `timeout` however slowly the answer trickles; a broken
answer (deep, huge, not JSON, not an object) is an unknown outcome, never a traceback; a redirect never
carries the basic auth or the connection's extra headers to another scheme, host or port; credentials
written into the connection's host field (`http://user:password@jobmanager:8081`) still authenticate, but
never appear in an error, a log line or the stored upgrade record.
"""

from __future__ import annotations

import base64
import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.hostile_server import HostileServer, Reply, json_reply, redirect

SECRET = "s3cr3t-Pa55"
BASIC = "Basic " + base64.b64encode(f"admin:{SECRET}".encode()).decode()
JID = "c9dfb5e1a3f04b6e9d2c7a8b5e4f3d21"
OVERVIEW = {"jobs": [{"jid": JID, "name": "orders", "state": "RUNNING", "start-time": 1}]}


@pytest.fixture
def server() -> Iterator[HostileServer]:
    with HostileServer() as s:
        s.route("/jobs/overview", json_reply(OVERVIEW))
        yield s


@pytest.fixture
def other() -> Iterator[HostileServer]:
    with HostileServer() as s:
        s.route("/jobs/overview", json_reply({"jobs": [{"jid": "f" * 32, "name": "elsewhere", "state": "RUNNING"}]}))
        yield s


def _hook(server: HostileServer, monkeypatch: pytest.MonkeyPatch, *, timeout: float = 2.0, retries: int = 0):  # type: ignore[no-untyped-def]
    """A hook on a connection whose host field holds the credentials, plus an API-key header in its extras."""
    from flink_gate.hooks.flink_rest import FlinkRestHook

    conn = {"conn_type": "http", "host": f"http://admin:{SECRET}@127.0.0.1:{server.port}",
            "extra": {"headers": {"X-Api-Key": f"key-{SECRET}"}}}
    monkeypatch.setenv("AIRFLOW_CONN_FLINK_HOSTILE", json.dumps(conn))
    return FlinkRestHook("flink_hostile", timeout=timeout, retries=retries, backoff=0.1)


def test_credentials_in_the_host_field_authenticate_but_never_show(server: HostileServer,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from flink_gate.hooks.flink_rest import FlinkRestUnknown

    hook = _hook(server, monkeypatch)
    assert hook.list_jobs() == OVERVIEW["jobs"]
    assert server.received[0].headers.get("authorization") == BASIC
    assert SECRET not in hook.base_url and hook.base_url == f"http://127.0.0.1:{server.port}"
    server.route("/jobs/overview", json_reply({"errors": ["JobManager is restarting"]}, 503))
    with pytest.raises(FlinkRestUnknown) as caught:
        hook.list_jobs()
    assert "HTTP 503" in str(caught.value) and SECRET not in str(caught.value)


@pytest.mark.parametrize("how", ["trickle", "trickle_body"])
@pytest.mark.parametrize("retries", [0, 1])
def test_a_trickling_answer_ends_each_attempt_at_the_timeout(server: HostileServer, monkeypatch: pytest.MonkeyPatch,
                                                             caplog: pytest.LogCaptureFixture, retries: int,
                                                             how: str) -> None:
    from flink_gate.hooks.flink_rest import FlinkRestUnknown

    server.route("/jobs/overview", Reply(body=json.dumps(OVERVIEW).encode(), **{how: 0.5}))
    hook = _hook(server, monkeypatch, timeout=2.0, retries=retries)
    start = time.monotonic()
    with caplog.at_level(logging.WARNING), pytest.raises(FlinkRestUnknown) as caught:
        hook.list_jobs()
    elapsed = time.monotonic() - start
    limit = 2.0 * (retries + 1) + 0.1 * retries  # attempts x timeout + the backoff between them
    assert limit - 0.1 <= elapsed < limit + 0.5, elapsed
    assert "no complete answer within 2 s" in str(caught.value)
    assert SECRET not in str(caught.value) and SECRET not in caplog.text


@pytest.mark.parametrize("answer, kind", [
    (Reply(body=b"[" * 100_000 + b"]" * 100_000), "nested deeper than 100 levels"),
    (Reply(body=b"<html>proxy login</html>"), "not JSON"),
    (json_reply([OVERVIEW]), "not a JSON object"),
    (Reply(body=b'{"jobs": ' + b"9" * 5000 + b"}"), "more than 4300 digits"),
    (Reply(body=b"\xff\xfe{}"), "not UTF-8"),
])
def test_a_broken_answer_is_an_unknown_outcome(server: HostileServer, monkeypatch: pytest.MonkeyPatch,
                                               answer: Reply, kind: str) -> None:
    from flink_gate.hooks.flink_rest import FlinkRestUnknown

    server.route("/jobs/overview", answer)
    with pytest.raises(FlinkRestUnknown) as caught:
        _hook(server, monkeypatch).list_jobs()
    assert kind in str(caught.value) and SECRET not in str(caught.value)
    assert len(str(caught.value).splitlines()) == 1


def test_a_huge_answer_is_refused(server: HostileServer, monkeypatch: pytest.MonkeyPatch) -> None:
    from flink_gate.hooks.flink_rest import FlinkRestError

    server.route("/jobs/overview", Reply(body=b" " * 9_000_000, length=-1))
    with pytest.raises(FlinkRestError, match="larger than the 8388608-byte limit"):
        _hook(server, monkeypatch).list_jobs()


def test_wrong_types_in_answers_are_no_tracebacks(server: HostileServer, monkeypatch: pytest.MonkeyPatch) -> None:
    from flink_gate.hooks.flink_rest import FlinkRestUnknown

    hook = _hook(server, monkeypatch)
    server.route("/jobs/overview", json_reply({"jobs": "all of them"}))
    assert hook.list_jobs() == []
    server.route("/jobs/overview", json_reply({"jobs": [{"name": "orders", "start-time": "yesterday"}, 5]}))
    assert hook.find_jobs("orders") == [{"name": "orders", "start-time": "yesterday"}]
    server.route(f"/jobs/{JID}/status", json_reply({"status": ["RUNNING"]}))
    with pytest.raises(FlinkRestUnknown, match="has no 'status'"):
        hook.job_status(JID)
    server.route(f"/jobs/{JID}/checkpoints", json_reply({"latest": [1, 2]}))
    assert hook.last_savepoint(JID) is None and hook.restored_from(JID) is None


def test_only_a_savepoint_the_job_stopped_with_is_its_final_state(server: HostileServer,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A finished job's statistics name its latest savepoint; only a synchronous one (stop-with-savepoint) is the
    state it ended with. The real stop's SYNC_SAVEPOINT is adopted on a real cluster (tests/airflow/
    test_upgrade_faults.py, the late stop); an ordinary one a job took before its input ended is not."""
    hook = _hook(server, monkeypatch)
    path = "file:/sp/savepoint-1"
    for kind, expected in (("SYNC_SAVEPOINT", path), ("SAVEPOINT", None), (None, path)):
        savepoint = {"id": 7, "status": "COMPLETED", "is_savepoint": True, "external_path": path}
        if kind is not None:
            savepoint["checkpoint_type"] = kind
        server.route(f"/jobs/{JID}/checkpoints", json_reply({"latest": {"savepoint": savepoint}}))
        assert hook.last_savepoint(JID) == expected, kind


def test_a_redirect_to_another_origin_carries_no_credentials(server: HostileServer, other: HostileServer,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    server.route("/jobs/overview", redirect(f"http://mallory:pw@127.0.0.1:{other.port}/jobs/overview"))
    jobs = _hook(server, monkeypatch).list_jobs()
    assert [j["name"] for j in jobs] == ["elsewhere"]  # followed, for a read
    sent = other.received[0].headers
    assert "authorization" not in sent and "x-api-key" not in sent and "cookie" not in sent, sent
    assert server.received[0].headers.get("authorization") == BASIC
    assert server.received[0].headers.get("x-api-key") == f"key-{SECRET}"


def test_a_redirect_within_the_origin_keeps_the_credentials(server: HostileServer,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    server.route("/jobs/overview", redirect("/v1/jobs/overview"))
    server.route("/v1/jobs/overview", json_reply(OVERVIEW))
    assert _hook(server, monkeypatch).list_jobs() == OVERVIEW["jobs"]
    assert [r.headers.get("authorization") for r in server.received] == [BASIC, BASIC]


def test_a_redirected_post_is_not_followed(server: HostileServer, other: HostileServer,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from flink_gate.hooks.flink_rest import FlinkRestError, FlinkRestUnknown

    server.route(f"/jobs/{JID}/stop", redirect(f"{other.url}/jobs/{JID}/stop", status=307))
    with pytest.raises(FlinkRestError) as caught:
        _hook(server, monkeypatch).stop_with_savepoint(JID, trigger_id="a" * 32)
    assert not isinstance(caught.value, FlinkRestUnknown) and "not followed" in str(caught.value)
    assert other.received == []


def test_the_upgrade_record_never_keeps_credentials(tmp_path: Path) -> None:
    """Whatever error text reaches a record (`outcome`, nested fields), URL credentials are stripped."""
    from flink_gate.upgrade_records import LocalStore, UpgradeRecord

    record = UpgradeRecord(LocalStore(tmp_path), "orders").load()
    record.save(state="needs-operator", outcome=f"POST /jars/x/run: outcome unknown at http://admin:{SECRET}@jm:8081",
                plan={"flink": [f"https://admin:{SECRET}@jm/"]})
    stored = next(tmp_path.rglob("record.json")).read_text()
    assert SECRET not in stored and "http://jm:8081" in stored and "https://jm/" in stored

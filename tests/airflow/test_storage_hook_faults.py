"""The Airflow storage hook obeys the same S3 time budget as the CLI (`UPGRADE_GATE_S3_TIMEOUT`).

Its boto3 client comes from the amazon provider's S3Hook and the AWS connection; a server that accepts
connections but never answers (FaultProxy's blackhole) must fail the task in bounded time with the
core's one-line error, while the connection's own botocore settings (path-style addressing) survive.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator

import pytest

from tests.fault_proxy import FaultProxy
from upgrade_gate.storage.s3 import StorageError

CONN_ID = "gate_faulty_s3"


@pytest.fixture
def blackholed(monkeypatch: pytest.MonkeyPatch) -> Iterator[FaultProxy]:
    # Upstream port 1: nothing listens there, and a blackhole never connects upstream anyway.
    with FaultProxy("127.0.0.1", 1) as proxy:
        proxy.add_rule("", "blackhole", times=-1)
        extra = {"endpoint_url": proxy.url, "region_name": "us-east-1",
                 "config_kwargs": {"s3": {"addressing_style": "path"}}}
        monkeypatch.setenv(f"AIRFLOW_CONN_{CONN_ID.upper()}", json.dumps(
            {"conn_type": "aws", "login": "gate-access", "password": "gate-secret-value", "extra": extra}))
        monkeypatch.setenv("UPGRADE_GATE_S3_TIMEOUT", "3")
        yield proxy


def test_hook_never_waits_longer_than_the_budget(blackholed: FaultProxy) -> None:
    from flink_gate.hooks.storage import SavepointStorageHook

    hook = SavepointStorageHook(CONN_ID)
    assert hook.s3_client.meta.config.s3 == {"addressing_style": "path"}  # the connection's own setting kept
    start = time.monotonic()
    with pytest.raises(StorageError) as info:
        hook.load_savepoint("s3://bucket/job/savepoint-abcdef-0123456789ab")
    elapsed = time.monotonic() - start
    assert elapsed < 4.5, elapsed  # the 3 s budget plus scheduling slack on a loaded machine (the server: forever)
    assert "s3://bucket/job/savepoint-abcdef-0123456789ab/_metadata: timed out after" in str(info.value)
    assert blackholed.log and all(action == "blackhole" for _, _, action in blackholed.log)


@pytest.mark.parametrize("what", ["everything", "body"])
def test_hook_reading_a_trickling_server_ends_at_the_budget(monkeypatch: pytest.MonkeyPatch, what: str) -> None:
    """A server answering one byte every 0.5 s never trips botocore's read timeout; the budget still holds
    (the status line and headers too: the core guards the connection pools of the hook's own client)."""
    from flink_gate.hooks.storage import SavepointStorageHook

    from tests.hostile_server import HostileServer, Reply

    with HostileServer() as server:
        trickle = {"trickle": 0.5} if what == "everything" else {"trickle_body": 0.5}
        server.route("/bucket/job/sp/_metadata", Reply(body=b"\x49\x60\x67\x2d" + b"\0" * 200, **trickle))
        extra = {"endpoint_url": server.url, "region_name": "us-east-1",
                 "config_kwargs": {"s3": {"addressing_style": "path"}}}
        monkeypatch.setenv(f"AIRFLOW_CONN_{CONN_ID.upper()}", json.dumps(
            {"conn_type": "aws", "login": "gate-access", "password": "gate-secret-value", "extra": extra}))
        monkeypatch.setenv("UPGRADE_GATE_S3_TIMEOUT", "3")
        start = time.monotonic()
        with pytest.raises(StorageError) as info:
            SavepointStorageHook(CONN_ID).load_savepoint("s3://bucket/job/sp/_metadata")
        elapsed = time.monotonic() - start
    assert 2.9 <= elapsed < 4.5, elapsed  # the 3 s budget plus slack; trickled to the end it would take 100 s
    # the message gives the time measured (the budget plus the last read's slack on a busy machine) and the limit
    assert re.search(r"s3://bucket/job/sp/_metadata: timed out after [34]\.\d s .*the limit is 3 s", str(info.value))

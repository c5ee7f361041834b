"""The watcher's trigger on real SeaweedFS: what fires, and what a restarted triggerer does not fire again.

`ObjectLandedTrigger.run()` is driven directly against the embedded stack's bucket, through the same AWS
connection the DAGs use. Airflow's asset state store is stood in for by a dict holding what the trigger saved
(the store keeps JSON by key and nothing else), so a "restart" is a new trigger instance reading it back.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from typing import Any

import pytest

PREFIX = "s3://flink-graphs/watch-test/"


class DictStore:
    """What the trigger sees of Airflow's asset state store: `aget` / `aset` of JSON values by key."""

    def __init__(self) -> None:
        self.values: dict[str, str] = {}

    async def aget(self, key: str, default: Any = None) -> Any:
        return json.loads(self.values[key]) if key in self.values else default

    async def aset(self, key: str, value: Any) -> None:
        self.values[key] = json.dumps(value)  # what the metadata database keeps: JSON text


@pytest.fixture()
def aws_env(stack):
    old = os.environ.get("AIRFLOW_CONN_AWS_DEFAULT")
    os.environ["AIRFLOW_CONN_AWS_DEFAULT"] = stack.env["AIRFLOW_CONN_AWS_DEFAULT"]
    yield stack.s3.client()
    if old is None:
        os.environ.pop("AIRFLOW_CONN_AWS_DEFAULT", None)
    else:
        os.environ["AIRFLOW_CONN_AWS_DEFAULT"] = old


async def _events(store: DictStore, polls: int, between: Any = None) -> list[dict[str, Any]]:
    """The events of `polls` polls of a fresh trigger over PREFIX; `between` runs after the first poll."""
    from flink_gate.triggers.object_landed import ObjectLandedTrigger

    trigger = ObjectLandedTrigger(prefix=PREFIX, suffixes=(".json",), top_level=True, poll_interval=0.05)
    trigger.asset_state_store = store
    out: list[dict[str, Any]] = []
    done = 0
    saved = store.aset

    async def counting_set(key: str, value: Any) -> None:
        nonlocal done
        await saved(key, value)
        done += 1
        if done == 1 and between:
            between()

    store.aset = counting_set  # type: ignore[method-assign]
    async def consume() -> None:
        async for event in trigger.run():
            out.append(event.payload)

    task = asyncio.create_task(consume())
    try:
        while done < polls:  # a poll's events are yielded before its save
            assert not task.done(), task.exception()
            await asyncio.sleep(0.02)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    finally:
        store.aset = saved  # type: ignore[method-assign]
    return out


def test_only_new_objects_fire_and_a_restart_fires_nothing_twice(aws_env):
    s3 = aws_env
    s3.put_object(Bucket="flink-graphs", Key="watch-test/old.json", Body=b"{}")
    s3.put_object(Bucket="flink-graphs", Key="watch-test/sub/nested.json", Body=b"{}")  # not a catalogue entry
    store = DictStore()

    def push() -> None:
        s3.put_object(Bucket="flink-graphs", Key="watch-test/new.json", Body=b'{"v": 2}')
        s3.put_object(Bucket="flink-graphs", Key="watch-test/notes.txt", Body=b"x")  # not a spec

    fired = asyncio.run(_events(store, polls=3, between=push))
    assert [e["uri"] for e in fired] == [f"{PREFIX}new.json"]  # old.json was there before the first poll
    assert fired[0]["etag"] and fired[0]["size"] == len(b'{"v": 2}')
    # a restarted triggerer reads back what was saved: nothing fires again ...
    assert asyncio.run(_events(store, polls=2)) == []
    # ... and what landed while it was down fires once it is back, as does a re-push of an old key
    s3.put_object(Bucket="flink-graphs", Key="watch-test/while-down.json", Body=b"{}")
    s3.put_object(Bucket="flink-graphs", Key="watch-test/old.json", Body=b'{"v": 3}')
    assert sorted(e["uri"] for e in asyncio.run(_events(store, polls=2))) == [
        f"{PREFIX}old.json", f"{PREFIX}while-down.json"]

"""The waits of a deferred rolling upgrade, polled in the triggerer instead of in a worker slot.

A rolling upgrade spends most of its time waiting for Flink: a stop-with-savepoint to complete, a new job to
restore. `rolling.roll_out` (deferrable mode, docs/guide.md "Deferred waits") steps every upgrade of a wave
until each must wait (`upgrade_machine.WaitFor`), then defers with all of the wave's waits in one
`FlinkWaitsTrigger`. The trigger only *looks* (`GET /jobs/{id}/savepoints/{trigger}`, `GET /jobs/{id}`): it
never stops, starts or cancels anything, so the crash safety stays with the records (`upgrade_records.py`).
It fires as soon as one wait is settled, so that job's next step (start the new version, verify) is not held
up by the slowest job of the wave; the resumed task looks again itself before it decides anything.

The poll calls the same synchronous `FlinkRestHook` the steps use, in `asyncio.to_thread`: one client of
Flink's REST API (its time limits, answer bounds and credential rules, `upgrade_gate.storage.remote`) rather
than a second, asynchronous one; a few look-ups every couple of seconds are no load on the triggerer's
thread pool.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from flink_gate.hooks.flink_rest import FlinkRestHook, FlinkRestUnknown, restore_progress


class FlinkWaitsTrigger(BaseTrigger):
    """Fires when one of `waits` is settled (or all of them ran out of `timeout_s`).

    `waits`: `{"job": <rollout job name>, "kind": "savepoint"|"restored", "job_id": …, "trigger_id": …}` as the
    steps raised them (`upgrade_machine.WaitFor`). The event: `{"settled": [job names], "timed_out": [job names]}`.
    """

    def __init__(self, waits: list[dict[str, str]], flink_conn_id: str = "flink_default", rest_timeout_s: float = 30,
                 timeout_s: float = 600, poll_s: float = 2.0, started_at: float | None = None) -> None:
        super().__init__()
        self.waits = list(waits)
        self.flink_conn_id = flink_conn_id
        self.rest_timeout_s = float(rest_timeout_s)
        self.timeout_s = float(timeout_s)
        self.poll_s = float(poll_s)
        # wall clock: a trigger may be restarted in another triggerer; its deadline stays the same
        self.started_at = float(started_at if started_at is not None else time.time())

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{type(self).__module__}.{type(self).__qualname__}",
                {"waits": self.waits, "flink_conn_id": self.flink_conn_id, "rest_timeout_s": self.rest_timeout_s,
                 "timeout_s": self.timeout_s, "poll_s": self.poll_s, "started_at": self.started_at})

    async def run(self) -> AsyncIterator[TriggerEvent]:
        hook = FlinkRestHook(self.flink_conn_id, timeout=self.rest_timeout_s)
        while True:
            settled = [w["job"] for w in self.waits if await asyncio.to_thread(settled_now, hook, w)]
            if settled:
                yield TriggerEvent({"settled": settled, "timed_out": []})
                return
            if time.time() - self.started_at > self.timeout_s:
                # the resumed task waits for these in the worker, under the steps' own deadlines and messages
                yield TriggerEvent({"settled": [], "timed_out": [w["job"] for w in self.waits]})
                return
            await asyncio.sleep(self.poll_s)


def settled_now(hook: FlinkRestHook, wait: dict[str, str]) -> bool:
    """Whether the step that raised `wait` has something to do now: the savepoint trigger finished (completed
    or failed, or Flink no longer knows it), or the new job restored or ended. An unanswered look is "not yet"."""
    try:
        if wait["kind"] == "savepoint":
            status = hook.savepoint_status_or_none(wait["job_id"], wait["trigger_id"])
            return status is None or (status.get("status") or {}).get("id") == "COMPLETED"
        return restore_progress(hook.job_details(wait["job_id"])) != "pending"
    except FlinkRestUnknown as exc:
        hook.log.warning("waiting for %s of job %s: the cluster did not answer (%s)", wait["kind"], wait["job_id"], exc)
        return False
    except Exception as exc:  # a definite answer the step must read itself (a 404: the job is gone)
        hook.log.warning("waiting for %s of job %s: %s; the step looks itself", wait["kind"], wait["job_id"], exc)
        return True

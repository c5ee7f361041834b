"""One way for an operator to hand its upgrade waits to the triggerer (docs/guide.md, "Deferred waits").

Both deferrable upgrade tasks use it: `roll_out` of `flink_rolling_upgrade` (a wave's waits at once) and
`upgrade` / `verify` of `flink_upgrade_gate` (one job's wait). The waits are what the steps raised
(`upgrade_machine.WaitFor`, each named by its job); the trigger (`triggers.flink_waits.FlinkWaitsTrigger`) only
polls Flink, under the run's Flink connection and `timeout_s`, and the operator resumes in `method_name`.
"""

from __future__ import annotations

from typing import Any, NoReturn

from airflow.sdk import BaseOperator


def defer_to_triggerer(op: BaseOperator, params: Any, waits: list[dict[str, str]], method_name: str) -> NoReturn:
    """Defer `op` until one of `waits` is settled (or they all outlast `timeout_s`); raises `TaskDeferred`."""
    from flink_gate.triggers.flink_waits import FlinkWaitsTrigger

    op.log.info("deferring: %s", "; ".join(f"{w['job']} waits for {w['kind']} of job {w['job_id']}" for w in waits))
    op.defer(trigger=FlinkWaitsTrigger(waits, flink_conn_id=params.get("flink_conn_id") or "flink_default",
                                       rest_timeout_s=float(params.get("rest_timeout_s") or 30),
                                       timeout_s=float(params.get("timeout_s") or 600)),
             method_name=method_name)
    raise AssertionError("unreachable: BaseOperator.defer raises TaskDeferred")


def timed_out_waits(op: BaseOperator, params: Any, event: dict[str, Any] | None) -> tuple[str, ...]:
    """The jobs whose wait the trigger gave up on (`timed_out` of its event), said in the task's log: the resumed
    step waits for them in the task (its own deadline, `timeout_s` again, and its own message), so such a wait can
    last up to twice `timeout_s` in all (docs/guide.md, "Deferred waits")."""
    timed_out = tuple((event or {}).get("timed_out") or ())
    if timed_out:
        op.log.warning("the triggerer waited %ss (timeout_s) for Flink without the wait settling (%s); waiting for "
                       "it here, in the task, up to timeout_s more", params.get("timeout_s") or 600,
                       ", ".join(timed_out))
    return timed_out

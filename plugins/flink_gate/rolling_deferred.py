"""A rolling upgrade whose waits hold no worker slot: the `deferrable` mode of `flink_rolling_upgrade`.

Most of an upgrade is waiting for Flink (a stop-with-savepoint to complete, the new job to restore). In the
default mode `roll_out` waits in its worker slot, job after job. Here one `roll_out` task drives a whole wave
at once and, whenever every upgrade of the wave in flight is waiting, *defers* (docs/guide.md, "Deferred
waits"): the waits go to one trigger in the triggerer (`triggers.flink_waits.FlinkWaitsTrigger`, which only
polls), and no worker slot is held until one of them is settled. So a wave of N jobs upgrades concurrently on
one slot, and the slot is busy only while a step acts (stop, start, gate, verify).

Per wave:

1. gate every job of the wave (the same check, report and alert as the default mode); if one is blocked, the
   rollout stops there *before any job of the wave is touched*;
2. step every gated upgrade (`rollback.run_upgrade` with `defer_waits`): each goes as far as it can and stops
   at its first wait (`upgrade_machine.WaitFor`), leaving its durable record saying where it stands;
3. while any upgrade of the wave waits, defer; the resumed task steps the waiting ones again. They resume
   from their records and the cluster, exactly like an Airflow retry: never a second stop or start.

A failed upgrade (rolled back, or needing an operator) stops the rollout after the wave's other upgrades
in flight are finished: an upgrade is never abandoned half-way. A wait that outlasts `timeout_s` in the
triggerer is waited for once more in the task, under the step's own deadline and message. A rollback's
own waits stay in the task (a rare path that must not stop half-way).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from flink_gate.rollback import UpgradeInterrupted, default_target_dir, run_upgrade
from flink_gate.rolling import Rollout, graph_file, outcome
from flink_gate.upgrade_machine import WaitFor

STEPPED = ("gated", "waiting", "interrupted")  # statuses of a wave's upgrades that are not finished


class WaveWaiting(Exception):
    """Every upgrade of the wave still in flight is waiting for Flink; `waits` say for what (see `WaitFor`)."""

    def __init__(self, waits: list[dict[str, str]]) -> None:
        super().__init__(f"{len(waits)} upgrade(s) waiting for Flink")
        self.waits = waits


def roll_out_deferred(context: Any, waves: list[list[str]], notifiers: list[Any],
                      timed_out: Collection[str] = ()) -> dict[str, Any]:
    """Run (or resume) the rollout until it is done, or raise `WaveWaiting` when all it can do is wait.

    `timed_out`: jobs whose wait the trigger gave up on; this step waits for them in the task."""
    ro = Rollout.open(context)
    progress = ro.progress
    for wave_no, wave in enumerate(waves):
        stopped = _gate_wave(ro, wave_no, wave, notifiers)
        if stopped and not any(progress["jobs"].get(n, {}).get("status") in STEPPED for n in wave):
            break  # upgrades of this wave already in flight are finished first, whatever stopped the rollout
        waits = []
        for name in wave:
            entry = progress["jobs"].get(name, {})
            if entry.get("status") not in STEPPED:
                continue
            base = {k: entry[k] for k in ("wave", "verdict", "gate") if k in entry}
            p = {**ro.job_params(name), "defer_waits": name not in timed_out}
            try:
                verified = run_upgrade(default_target_dir(p, ro.savepoint_root), graph_file(p, ro.rdir))
                progress["jobs"][name] = {**base, "status": "upgraded", **verified}
            except WaitFor as wait:
                progress["jobs"][name] = {**base, "status": "waiting", "waiting_for": wait.wait}
                waits.append({**wait.wait, "job": name})
            except UpgradeInterrupted as exc:
                # as in the default mode: the task fails and its retry resumes this job from its record
                progress["jobs"][name] = {**base, "status": "interrupted", "error": str(exc)[:2000]}
                ro.save()
                raise
            except Exception as exc:
                progress["jobs"][name] = {**base, "status": "failed", "error": str(exc)[:2000]}
                progress["stopped_by"] = progress["stopped_by"] or {
                    "job": name, "reason": f"{type(exc).__name__}: {str(exc)[:500]}"}
            ro.save()
        if waits:
            raise WaveWaiting(waits)
        if progress["stopped_by"]:
            break
    return outcome(progress, waves)


def _gate_wave(ro: Rollout, wave_no: int, wave: list[str], notifiers: list[Any]) -> bool:
    """Gate the wave's jobs not gated yet; True when the rollout stops here (a job blocked or its check failed),
    in which case none of this wave's jobs is upgraded."""
    progress = ro.progress
    if progress["stopped_by"]:
        return True
    fresh = [name for name in wave if not progress["jobs"].get(name)]
    for name in fresh:
        try:
            gated = ro.gate_job(ro.job_params(name), wave_no, notifiers)
        except Exception as exc:
            progress["jobs"][name] = {"status": "failed", "wave": wave_no, "error": str(exc)[:2000]}
            progress["stopped_by"] = {"job": name, "reason": f"{type(exc).__name__}: {str(exc)[:500]}"}
            break
        if not gated.passes:
            progress["jobs"][name] = {"status": "blocked", "wave": wave_no, "verdict": gated.verdict,
                                      "gate": gated.reason}
            progress["stopped_by"] = {"job": name, "reason": f"gate: {gated.reason}"}
            break
        progress["jobs"][name] = {"status": "gated", "wave": wave_no, "verdict": gated.verdict, "gate": gated.how}
    if progress["stopped_by"]:
        for name in fresh:  # gated but never touched: left, like every job after the one that stopped it
            if progress["jobs"].get(name, {}).get("status") == "gated":
                del progress["jobs"][name]
    ro.save()
    return bool(progress["stopped_by"])

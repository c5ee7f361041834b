"""Benchmark: click -> verdict of `flink_upgrade_gate`, triggered through Airflow's REST API.

What a person waits for after pressing Trigger: the embedded stack the UI test uses
(demo/stack.py: SeaweedFS with the bundled real savepoints, SQLite, `airflow standalone` on
127.0.0.1), `POST /api/v2/dags/flink_upgrade_gate/dagRuns` with the same conf the form sends,
then polling `GET .../taskInstances` until the `gate` task has ended (the verdict exists: the
report was published by the `check` task, the gate passed or blocked). Runs are sequential, a
SAFE case (orders-enrichment) and a blocked one (fraud-scoring, STATE_MISROUTED), `--reps` each.

Reported per run:
* click -> verdict: wall time from just before the POST to the poll that sees `gate` ended;
* queued: from the POST to the first gate task's start (the scheduler creating and queuing work);
* gate tasks: the gate tasks' own run times (start -> end of each task instance, as Airflow
  recorded them): `check` (fetches, IDs, simulation, report in one task) then `gate`, and their span
  (check start -> gate end, which adds the scheduler's hand-off between them).
The browser's view of the same wait (click in the form -> note on the run page, a jar case too, the cold run
apart) is bench/bench_gate_click.py.
Goals (docs/performance.md, "Gate: trigger to verdict"): click -> verdict <= 20 s, gate tasks
<= 10 s.

`--env KEY=VALUE` (repeatable) passes Airflow settings to the stack, to measure a tuning before it
goes into demo/stack.py. Results are appended as JSON lines to `.work/bench/airflow-gate.jsonl`.

Usage: python -m bench.bench_airflow_gate [--reps 3] [--env AIRFLOW__SCHEDULER__...=...]
(run with the Airflow environment's interpreter, .work/venv-airflow/bin/python; `make bench` does)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from demo.stack import AirflowApi

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / ".work" / "bench" / "airflow-gate.jsonl"
DAG = "flink_upgrade_gate"
GATE_TASKS = ("check", "gate")
CASES = {"SAFE": "orders-enrichment", "blocked": "fraud-scoring"}
ENDED = ("success", "failed", "skipped", "upstream_failed", "removed")
GOAL_CLICK_S, GOAL_TASKS_S = 20.0, 10.0


class PinnedEnv(dict):
    """The stack's environment, where the settings under test win over start_standalone's defaults."""

    def __init__(self, env: dict[str, str], pinned: dict[str, str]) -> None:
        super().__init__(env)
        self.pinned = dict(pinned)
        super().update(self.pinned)

    def update(self, *args: Any, **kwargs: Any) -> None:
        super().update(*args, **kwargs)
        super().update(self.pinned)


def _ts(value: str | None) -> float | None:
    return datetime.fromisoformat(value).timestamp() if value else None


def trigger_and_wait(api: AirflowApi, conf: dict[str, Any], timeout: float = 300, poll: float = 0.2) -> dict[str, Any]:
    """One click: POST the run, poll until `gate` has ended; the timings of that run."""
    click_wall = time.time()
    t0 = time.monotonic()
    run = api(f"/api/v2/dags/{DAG}/dagRuns", "POST", {"logical_date": None, "conf": conf})
    run_id = run["dag_run_id"]
    path = f"/api/v2/dags/{DAG}/dagRuns/{run_id}/taskInstances"
    tis: dict[str, Any] = {}
    while True:
        try:
            tis = {t["task_id"]: t for t in api(path)["task_instances"]}
        except OSError as exc:  # the API server (one worker, SQLite) can stall under load: ask again
            print(f"  (poll: {exc}; asking again)", file=sys.stderr)
        gate = tis.get("gate")
        if gate is not None and gate["state"] in ENDED:
            verdict_s = time.monotonic() - t0
            break
        if time.monotonic() - t0 > timeout:
            raise TimeoutError(f"run {run_id}: no verdict after {timeout:.0f}s: "
                               f"{ {k: v['state'] for k, v in tis.items()} }")
        time.sleep(poll)
    starts = {k: _ts(tis[k]["start_date"]) for k in GATE_TASKS}
    ends = {k: _ts(tis[k]["end_date"]) for k in GATE_TASKS}
    own = {k: (ends[k] - starts[k]) if starts[k] and ends[k] else None for k in GATE_TASKS}
    first = min(s for s in starts.values() if s)
    return {"run_id": run_id, "gate_state": gate["state"], "click_to_verdict_s": round(verdict_s, 2),
            "queued_s": round(first - click_wall, 2),
            "gate_tasks_s": round(sum(own[k] or 0 for k in GATE_TASKS), 2),
            "gate_tasks_sum_s": round(sum(v for v in own.values() if v), 2),
            "gate_span_s": round(ends["gate"] - first, 2),
            "tasks_s": {k: round(v, 2) if v is not None else None for k, v in own.items()}}


def wait_for_dag(api: AirflowApi, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if api(f"/api/v2/dags/{DAG}").get("dag_id"):
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"{DAG} not parsed after {timeout:.0f}s")
        time.sleep(1)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.bench_airflow_gate", description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=3, help="runs per case (default 3)")
    ap.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                    help="an Airflow setting for the embedded stack (repeatable)")
    ap.add_argument("--label", default="", help="a name for this configuration in the output")
    args = ap.parse_args(argv)
    extra: dict[str, str] = {}
    for item in args.env:
        key, sep, value = item.partition("=")
        if not sep or not key:
            print(f"bench_airflow_gate: --env {item!r}: expected KEY=VALUE", file=sys.stderr)
            return 2
        extra[key] = value

    sys.path.insert(0, str(REPO))
    from demo import stack as st

    name = f"bench-{uuid.uuid4().hex[:8]}"
    t_start = time.monotonic()
    stack = st.start(name, extra_env=extra)
    stack.env = PinnedEnv(stack.env, extra)
    try:
        server = st.start_standalone(stack)
        startup_s = time.monotonic() - t_start
        api = server.api()
        wait_for_dag(api)
        api(f"/api/v2/dags/{DAG}", "PATCH", {"is_paused": False})
        ready_s = time.monotonic() - t_start
        rows = []
        for rep in range(args.reps):
            for case, job in CASES.items():
                row = trigger_and_wait(api, st.gate_conf(stack, job))
                row.update(case=case, job=job, rep=rep, load=os.getloadavg()[0])
                rows.append(row)
                print(f"{case:8} rep {rep}: click->verdict {row['click_to_verdict_s']:6.1f} s  queued "
                      f"{row['queued_s']:5.1f} s  gate tasks {row['gate_tasks_s']:5.1f} s  span "
                      f"{row['gate_span_s']:5.1f} s  gate={row['gate_state']}  {row['tasks_s']}", flush=True)
    finally:
        stack.stop()
        shutil.rmtree(stack.home, ignore_errors=True)

    summary = {"label": args.label, "env": extra, "date": datetime.now().isoformat(timespec="seconds"),
               "loadavg": os.getloadavg(), "cpus": os.cpu_count(), "startup_s": round(startup_s, 1),
               "ready_s": round(ready_s, 1), "runs": rows}
    print(f"\nstack up {startup_s:.0f} s, DAG ready {ready_s:.0f} s; load average {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} cores")
    print(f"{'case':8} {'click->verdict median (max)':>28} {'gate tasks median (max)':>24} {'queued median':>14}")
    ok = True
    for case in CASES:
        mine = [r for r in rows if r["case"] == case]
        click = [r["click_to_verdict_s"] for r in mine]
        own = [r["gate_tasks_s"] for r in mine]
        queued = [r["queued_s"] for r in mine]
        print(f"{case:8} {statistics.median(click):20.1f} s ({max(click):4.1f}) "
              f"{statistics.median(own):15.1f} s ({max(own):4.1f}) {statistics.median(queued):12.1f} s")
        ok &= statistics.median(click) <= GOAL_CLICK_S and statistics.median(own) <= GOAL_TASKS_S
    print(f"goals (click->verdict <= {GOAL_CLICK_S:.0f} s, gate tasks <= {GOAL_TASKS_S:.0f} s, medians): "
          f"{'met' if ok else 'MISSED'}")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with OUT.open("a") as f:
        f.write(json.dumps(summary) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

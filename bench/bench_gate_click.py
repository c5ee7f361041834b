"""Benchmark: click -> verdict of `flink_upgrade_gate` as a person sees it, in a real browser.

The embedded stack the UI test uses (demo/stack.py: SeaweedFS with the bundled real savepoints, SQLite,
`airflow standalone` on 127.0.0.1) and Debian's headless Chromium through Selenium (demo/browser.py, the
helpers the UI test drives). Per run: open the DAG page, press Trigger, fill the form's *Check* section, then
the clock starts at the click on the dialog's Trigger and stops when the run's page shows the verdict: "SAFE: …" /
"BLOCKED: …" (or "FAILED, no verdict", which fails the benchmark), which the gate task instance's row shows as soon
as the gate has decided (its rendered map index, docs/design.md "The verdict on the run page"). The page is
polled as it is; if it has not shown the verdict 5 s after the run ended (Airflow's REST API says so), it is
reloaded, as a person would press F5, and the run records that it was (`reloaded`: a regression).

Cases (runs are sequential):
* graph-SAFE: orders-enrichment, its graph spec by URI (the cold run is one of these);
* graph-blocked: fraud-scoring, STATE_MISROUTED;
* jar-SAFE: the counter job's v2-compatible jar (tests/upgrade_jobs.py) exported by real Flink in the `check`
  task (the form's parallelism is left at its default: its number field has no element id to fill),
  against a savepoint real Flink took of v1 at parallelism 2 (made once per benchmark
  on a Flink standalone cluster, before Airflow starts).

Reported: the first run after the stack came up (cold; `demo.stack.start_standalone` has already made the API server
build its task execution API, which it otherwise does on the first task's first call) apart from the
warm runs (median and min-max per case); per run also what Airflow recorded: queued (click -> `check` start),
the `check` and `gate` task times, and when the gate ended (click -> gate end). The 1-minute load average is
taken before every run: this machine is shared, and the numbers move with it. Results are appended as JSON
lines to `.work/bench/airflow-gate.jsonl` (`"bench": "click"`). Goal (issue 32): click -> verdict <= 20 s.

Usage: python -m bench.bench_gate_click [--reps 3] [--cases graph-SAFE,graph-blocked,jar-SAFE]
(with the Airflow environment's interpreter, .work/venv-airflow/bin/python, from the repository root)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / ".work" / "bench" / "airflow-gate.jsonl"
DAG = "flink_upgrade_gate"
SECTION_CHECK = "Check: which upgrade to judge"
# the run notes of flink_gate.outcome, as the UI test reads them on the run page
NOTE = re.compile(r"SAFE: the upgrade may proceed|BLOCKED: [A-Z_]+, [\d.]+ (?:B|KiB|MiB|GiB) at risk — report:"
                  r"|PASSED \(.{0,300}?report:|FAILED, no verdict: [a-z_]+ failed", re.DOTALL)
CRASH_NOTE = "FAILED, no verdict"
ENDED = ("success", "failed")
GOAL_CLICK_S = 20.0


def _ts(value: str | None) -> float | None:
    return datetime.fromisoformat(value).timestamp() if value else None


def form_fields(stack: Any, case: str, jar_inputs: dict[str, str] | None) -> dict[str, str]:
    """What a person types into the trigger form's *Check* section for one case (element id -> text)."""
    if case == "graph-SAFE":
        return {"element_job_name": "orders-enrichment", "element_graph": stack.inputs["orders-enrichment"]["graph"]}
    if case == "graph-blocked":
        return {"element_job_name": "fraud-scoring", "element_graph": stack.inputs["fraud-scoring"]["graph"]}
    if case == "jar-SAFE" and jar_inputs:
        return {"element_job_name": jar_inputs["job"], "element_savepoint_root": jar_inputs["savepoint_root"],
                "element_graph": "jar", "element_jar": jar_inputs["jar"],
                "element_main_class": jar_inputs["main_class"]}
    raise ValueError(f"unknown case {case!r}")


def jar_case_inputs(root: Path) -> dict[str, str]:
    """A real savepoint of the counter job's v1 at parallelism 2 (a Flink standalone cluster, stopped again
    before Airflow starts), and the v2-compatible jar that restores it."""
    from hashing.versions import DEFAULT
    from tests.upgrade_jobs import JOB_NAME, build_jobs, main_class, savepoint_of_v1

    jars = build_jobs(DEFAULT)  # the upgrade jobs run on the default release
    savepoints = savepoint_of_v1(root, parallelism=2, workdir_name="bench-gate-click")
    return {"job": JOB_NAME, "savepoint_root": savepoints.as_uri(), "jar": str(jars["v2-compatible"]),
            "main_class": main_class("v2-compatible")}


def click_to_verdict(driver: Any, api: Any, url: str, fields: dict[str, str], timeout: float = 300) -> dict[str, Any]:
    """One run from the trigger form; the click -> verdict time as the page shows it, and Airflow's own times."""
    from selenium.webdriver.common.by import By

    from demo.browser import trigger_from_form

    run_id, click_wall, t0 = trigger_from_form(driver, api, url, DAG, SECTION_CHECK, fields)
    # the trigger dialog takes the browser to the new run; if this Airflow does not, a person clicks the run
    page = f"{url}/dags/{DAG}/runs/{run_id}"
    deadline = time.monotonic() + 10
    while run_id not in driver.current_url and time.monotonic() < deadline:
        time.sleep(0.2)
    navigated = run_id in driver.current_url
    if not navigated:
        driver.get(page)
    reloaded, ended_at = False, None
    while True:
        body = driver.find_element(By.TAG_NAME, "body").text
        found = NOTE.search(body)
        if found:
            note = found.group(0)
            verdict_s = time.monotonic() - t0
            break
        if ended_at is None and api(f"/api/v2/dags/{DAG}/dagRuns/{run_id}")["state"] in ENDED:
            ended_at = time.monotonic()
        if ended_at is not None and time.monotonic() - ended_at > 5 and not reloaded:
            driver.get(page)  # the run ended and its page has not shown the note: a person presses F5
            reloaded = True
        if time.monotonic() - t0 > timeout:
            raise TimeoutError(f"run {run_id}: no verdict on the page after {timeout:.0f} s")
        time.sleep(0.2)
    if note.startswith(CRASH_NOTE):
        raise RuntimeError(f"run {run_id} crashed: {note}")
    tis = {t["task_id"]: t for t in api(f"/api/v2/dags/{DAG}/dagRuns/{run_id}/taskInstances")["task_instances"]}
    own = {k: round(_ts(tis[k]["end_date"]) - _ts(tis[k]["start_date"]), 2) for k in ("check", "gate")}
    return {"run_id": run_id, "click_to_verdict_s": round(verdict_s, 2), "note": note[:80],
            "queued_s": round(_ts(tis["check"]["start_date"]) - click_wall, 2),
            "click_to_gate_end_s": round(_ts(tis["gate"]["end_date"]) - click_wall, 2),
            "tasks_s": own, "navigated_by_ui": navigated, "reloaded": reloaded}


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The cold run apart; per case the warm runs' median and range."""
    cold = [r for r in rows if r["cold"]]
    out: dict[str, Any] = {"cold": {k: cold[0][k] for k in ("case", "click_to_verdict_s", "load1")} if cold else None}
    for case in dict.fromkeys(r["case"] for r in rows):
        warm = [r["click_to_verdict_s"] for r in rows if r["case"] == case and not r["cold"]]
        if warm:
            out[case] = {"n": len(warm), "median_s": round(statistics.median(warm), 2), "min_s": min(warm),
                         "max_s": max(warm)}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.bench_gate_click", description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=3, help="warm runs per case (default 3)")
    ap.add_argument("--cases", default="graph-SAFE,graph-blocked,jar-SAFE", help="comma-separated cases")
    ap.add_argument("--label", default="", help="a name for this configuration in the output")
    args = ap.parse_args(argv)
    cases = [c for c in args.cases.split(",") if c]
    unknown = set(cases) - {"graph-SAFE", "graph-blocked", "jar-SAFE"}
    if unknown or args.reps < 1:
        print(f"bench_gate_click: unknown case(s) {sorted(unknown)} or --reps < 1", file=sys.stderr)
        return 2
    for p in (str(REPO), str(REPO / "plugins")):
        if p not in sys.path:
            sys.path.insert(0, p)
    from bench.bench_airflow_gate import wait_for_dag
    from demo import stack as st
    from demo.browser import login, start_chromium

    scratch = Path(tempfile.mkdtemp(prefix="bench-gate-click-", dir=REPO / ".work"))
    jar_inputs = jar_case_inputs(scratch) if "jar-SAFE" in cases else None
    stack = st.start(f"bench-click-{uuid.uuid4().hex[:8]}")
    driver = None
    rows: list[dict[str, Any]] = []
    try:
        t_start = time.monotonic()
        server = st.start_standalone(stack)
        api = server.api()
        wait_for_dag(api)
        api(f"/api/v2/dags/{DAG}", "PATCH", {"is_paused": False})
        ready_s = time.monotonic() - t_start
        driver = start_chromium()
        login(driver, server.url, server.user, server.password)
        plan = [(cases[0], True)] + [(case, False) for _ in range(args.reps) for case in cases]
        for case, cold in plan:
            load1 = os.getloadavg()[0]
            row = click_to_verdict(driver, api, server.url, form_fields(stack, case, jar_inputs))
            row.update(case=case, cold=cold, load1=round(load1, 2))
            rows.append(row)
            print(f"{case:14} {'cold' if cold else 'warm'}: click->verdict {row['click_to_verdict_s']:6.1f} s  "
                  f"(gate ended {row['click_to_gate_end_s']:5.1f} s, queued {row['queued_s']:4.1f} s, "
                  f"tasks {row['tasks_s']}, load {load1:.1f}{', reloaded' if row['reloaded'] else ''})  "
                  f"{row['note'][:40]}", flush=True)
    finally:
        if driver is not None:
            driver.quit()
        stack.stop()
        shutil.rmtree(stack.home, ignore_errors=True)
        shutil.rmtree(scratch, ignore_errors=True)

    summary = summarize(rows)
    record = {"bench": "click", "label": args.label, "date": datetime.now().isoformat(timespec="seconds"),
              "dag_tasks": ["check", "gate"], "cpus": os.cpu_count(), "loadavg_end": os.getloadavg(),
              "ready_s": round(ready_s, 1), "summary": summary, "runs": rows}
    print(f"\nDAG ready {ready_s:.0f} s after start; {os.cpu_count()} cores")
    cold = summary["cold"]
    print(f"cold (first run, {cold['case']}): {cold['click_to_verdict_s']:.1f} s at load {cold['load1']:.1f}")
    for case in cases:
        s = summary.get(case)
        if s:
            print(f"{case:14} warm: median {s['median_s']:5.1f} s, {s['min_s']:.1f}-{s['max_s']:.1f} s (n={s['n']})")
    warm_ok = all(summary[c]["median_s"] <= GOAL_CLICK_S for c in cases if c in summary)
    print(f"goal (warm median click->verdict <= {GOAL_CLICK_S:.0f} s): {'met' if warm_ok else 'MISSED'}")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with OUT.open("a") as f:
        f.write(json.dumps(record) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What one `upgrade-gate check` costs in CPU, start to exit (issue 34: a check ≤ 0.25 CPU-s).

Every Airflow task and every CLI call in a CI job pays a whole process: interpreter start, imports, reading the
savepoint and the graph, the simulation, the output. So the figure is the CPU time (user + system) of the whole
child process, read from `RUSAGE_CHILDREN` around each run, for the console script exactly as users call it.
Alongside, the floor no change of ours can go below: the same interpreter running nothing (`python -c pass`),
and `python -c "import upgrade_gate.cli.main"` (start-up plus the entry point's imports). The three are
alternated run by run, and each is reported as the median with its min–max over `--runs` runs; the load average
before and after is recorded. Nothing here is compared with Flink: the goal is an absolute one.

    python -m bench.bench_check [--runs 15] [--record .work/bench/check.jsonl]
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from bench.fair import record

REPO = Path(__file__).resolve().parents[1]
CASE = REPO / "tests" / "fixtures" / "restores" / "2.3.0" / "chaining-disabled-uids"
SAVEPOINT = CASE.parent / "savepoints" / "uids-p2"
GRAPH = CASE / "graph-b.json"
GOAL_CPU_S = 0.25


def _script() -> list[str]:
    found = Path(sys.executable).with_name("upgrade-gate")
    return [str(found)] if found.exists() else [sys.executable, "-m", "upgrade_gate.cli.main"]


def cases() -> dict[str, list[str]]:
    """What is timed: the check in each output format, and the two floors."""
    check = [*_script(), "check", "--savepoint", str(SAVEPOINT), "--graph", str(GRAPH), "--flink-version", "2.3"]
    return {
        "python -c pass (floor)": [sys.executable, "-c", "pass"],
        "import upgrade_gate.cli.main": [sys.executable, "-c", "import upgrade_gate.cli.main"],
        "check --format json": [*check, "--format", "json"],
        "check --format table": [*check, "--format", "table"],
        "check --format html": [*check, "--format", "html"],
    }


def cpu_of(argv: list[str]) -> float:
    """CPU seconds (user + system) of one run of `argv`; its output is discarded, its exit code checked."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=REPO, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):  # 1 is a verdict other than SAFE: still a complete check
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.decode()[-2000:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure(runs: int) -> dict[str, object]:
    todo = cases()
    for argv in todo.values():  # once each, untimed: the page cache and any bytecode are warm for all alike
        cpu_of(argv)
    load_before = os.getloadavg()
    samples: dict[str, list[float]] = {name: [] for name in todo}
    for i in range(runs):
        order = list(todo) if i % 2 == 0 else list(reversed(todo))  # alternated, so drift hits every case
        for name in order:
            samples[name].append(cpu_of(todo[name]))
    load_after = os.getloadavg()
    return {"date": datetime.now(UTC).isoformat(timespec="seconds"), "runs": runs, "cpus": os.cpu_count(),
            "python": platform.python_version(), "loadavg_before": load_before, "loadavg_after": load_after,
            "goal_cpu_s": GOAL_CPU_S, "statistic": "median of per-run process CPU (user+sys)",
            "cases": {name: {"median_s": statistics.median(v), "min_s": min(v), "max_s": max(v)}
                      for name, v in samples.items()}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--record", default=str(REPO / ".work" / "bench" / "check.jsonl"))
    args = parser.parse_args(argv)
    result = measure(args.runs)
    print(f"upgrade-gate check, CPU per process (median, min-max of {args.runs} runs; "
          f"load {result['loadavg_before'][0]:.2f} -> {result['loadavg_after'][0]:.2f}):")
    for name, c in result["cases"].items():  # type: ignore[union-attr]
        print(f"  {name:32s} {c['median_s']:.3f} s   ({c['min_s']:.3f}-{c['max_s']:.3f})")
    worst = max(c["median_s"] for n, c in result["cases"].items() if n.startswith("check"))  # type: ignore[union-attr]
    print(f"goal: every check <= {GOAL_CPU_S} CPU-s: {'met' if worst <= GOAL_CPU_S else 'NOT met'} "
          f"(slowest format {worst:.3f} s)")
    record(result, Path(args.record))
    return 0


if __name__ == "__main__":
    sys.exit(main())

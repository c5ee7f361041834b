"""Comparisons with Flink's own JVM code that cannot flatter us (issue 34).

Why this module exists: the old benchmarks warmed the JVM up and timed it by wall clock, in another minute than
ours. On a loaded machine the JVM then got too few iterations to JIT-compile, its rate came out 3-4x too low, and
one benchmark divided by our best time but by Flink's mean. Every comparison with Flink now goes through
`compare`, which

* times both sides by the CPU time of the thread doing the work: ours with `time.thread_time_ns()`, the JVM's
  with `ThreadMXBean.getCurrentThreadCpuTime()` (both read CLOCK_THREAD_CPUTIME_ID on Linux), so load from other
  processes changes neither side's figure much and both the same way;
* keeps Flink's side in one long-lived JVM (`ugate.fair.FairServer`, a line protocol on stdin/stdout) and
  alternates the two sides round by round in one process tree (ours, Flink, Flink, ours, ...), so a change in the
  machine's speed hits both;
* warms both sides up by CPU time with the same rule: rounds until at least `warm_min_cpu` CPU-seconds are spent
  and the rates of the last `window` rounds lie within `tolerance` of their median (the JIT has finished), or
  until `warm_max_cpu` (then the result says it never became stable);
* uses the same statistic on both sides: the median of the per-round rates (items per CPU-second); the ratio is
  the quotient of the two medians, and its spread is the interquartile range and the min-max of the per-round
  paired ratios (round i of ours over round i of Flink's);
* records the load average before and after, the CPUs, the date and the command, and also what thread CPU leaves
  out: each side's process CPU over the same units (the JVM's GC and JIT threads), and the JVM's GC and JIT
  milliseconds during the timed rounds.

Each benchmark builds an `Ours` (a function doing one unit of work and returning the items it processed) and a
`FlinkServer` (a Java class with `public static LongSupplier fairWorkload(String[] args)`), calls `compare`, and
prints the result with `print_result`; `record` appends it to a JSON-lines file.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import queue
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from flink_bridge.dist import WORK_DIR, release_of
from flink_bridge.jvm import (
    JvmError,
    _die_with_parent,  # the same child hygiene as every other JVM we start
    _kill_group,
    compile_tool,
    flink_conf_dir,
    java_command,
)

RESULTS = WORK_DIR / "bench" / "fair-results.jsonl"
STATISTIC = ("median of per-round rates (items per thread-CPU second), the same on both sides; "
             "ratio = median(ours) / median(Flink); spread = interquartile range and min-max of the per-round "
             "paired ratios")
OUR_CLOCK = "thread CPU: time.thread_time_ns() (CLOCK_THREAD_CPUTIME_ID)"
FLINK_CLOCK = "JVM thread CPU: ThreadMXBean.getCurrentThreadCpuTime() (CLOCK_THREAD_CPUTIME_ID)"
PREFIX = "fair "


@dataclass(frozen=True)
class Settings:
    """How long and how carefully to measure; `tiny` is the test's version (same rules, fewer rounds)."""

    rounds: int = 20
    round_cpu: float = 0.25
    warm_min_cpu: float = 3.0
    warm_max_cpu: float = 40.0
    window: int = 5
    tolerance: float = 0.05

    @classmethod
    def tiny(cls) -> Settings:
        return cls(rounds=4, round_cpu=0.02, warm_min_cpu=0.1, warm_max_cpu=1.0, window=3, tolerance=0.5)


def add_arguments(parser: argparse.ArgumentParser, defaults: Settings | None = None) -> None:
    """The options every fair benchmark takes, so they are spelled and defaulted the same everywhere."""
    d = defaults or Settings()
    g = parser.add_argument_group("fair comparison with Flink (bench/fair.py)")
    g.add_argument("--rounds", type=int, default=d.rounds,
                   help=f"timed rounds per side, alternated (default {d.rounds})")
    g.add_argument("--round-cpu", type=float, default=d.round_cpu,
                   help=f"CPU-seconds per round per side (default {d.round_cpu})")
    g.add_argument("--warm-cpu", type=float, default=d.warm_min_cpu,
                   help=f"minimum warm-up per side, CPU-seconds (default {d.warm_min_cpu})")
    g.add_argument("--warm-max-cpu", type=float, default=d.warm_max_cpu,
                   help=f"warm-up limit per side if the rate never becomes stable (default {d.warm_max_cpu})")
    g.add_argument("--stable-within", type=float, default=d.tolerance,
                   help=f"warm-up ends when the last {d.window} rounds' rates lie within this fraction of their "
                        f"median (default {d.tolerance})")
    g.add_argument("--tiny", action="store_true", help="the test's configuration: a few short rounds")
    g.add_argument("--json", type=Path, default=RESULTS, help=f"append each result here (default {RESULTS})")


def settings_from(args: argparse.Namespace) -> Settings:
    if args.tiny:
        return Settings.tiny()
    return Settings(rounds=args.rounds, round_cpu=args.round_cpu, warm_min_cpu=args.warm_cpu,
                    warm_max_cpu=args.warm_max_cpu, tolerance=args.stable_within)


@dataclass
class Round:
    """One side's timed round: CPU of the working thread (what the figures use), wall and process CPU (context)."""

    cpu_ns: int
    user_ns: int
    wall_ns: int
    process_cpu_ns: int
    items: int
    units: int
    gc_ms: int | None = None
    jit_ms: int | None = None

    @property
    def rate(self) -> float:
        return self.items / (self.cpu_ns / 1e9)

    @property
    def process_rate(self) -> float | None:
        return self.items / (self.process_cpu_ns / 1e9) if self.process_cpu_ns > 0 else None


def _thread_user_ns() -> int:
    """This thread's user CPU (getrusage RUSAGE_THREAD); thread CPU minus it is system time (page faults, I/O)."""
    return int(resource.getrusage(resource.RUSAGE_THREAD).ru_utime * 1e9)


def spread(rates: list[float]) -> float:
    """(max - min) / median: the warm-up's stability test, the same as FairServer.spread."""
    return (max(rates) - min(rates)) / statistics.median(rates)


class Ours:
    """Our side: `unit()` does one unit of work and returns the items it processed; `before()`, if given, runs
    before each unit outside the timed CPU (the JVM side's Runnable hook, for symmetry)."""

    clock = OUR_CLOCK

    def __init__(self, unit: Callable[[], int], before: Callable[[], None] | None = None) -> None:
        self.unit = unit
        self.before = before

    def round(self, seconds: float) -> Round:
        """Units until this thread has spent `seconds` of CPU in them (at least one): FairServer.round's rule."""
        budget = int(seconds * 1e9)
        thread_cpu, wall = time.thread_time_ns, time.perf_counter_ns
        cpu = user = walls = hook = items = units = 0
        p0 = time.process_time_ns()
        while True:
            if self.before is not None:
                h0 = thread_cpu()
                self.before()
                hook += thread_cpu() - h0
            u0 = _thread_user_ns()
            w0, c0 = wall(), thread_cpu()
            items += self.unit()
            cpu += thread_cpu() - c0
            walls += wall() - w0
            user += _thread_user_ns() - u0
            units += 1
            if cpu >= budget:
                return Round(cpu, user, walls, time.process_time_ns() - p0 - hook, items, units)

    def warm(self, s: Settings) -> dict[str, Any]:
        """FairServer.warm's rule on our side (Python has no JIT, but caches, allocator and page cache warm up)."""
        rates: list[float] = []
        spent = 0
        stable, last = False, float("nan")
        while True:
            r = self.round(s.round_cpu)
            rates.append(r.rate)
            spent += r.cpu_ns
            if len(rates) >= s.window:
                last = spread(rates[-s.window:])
                stable = last <= s.tolerance
            if (stable and spent >= s.warm_min_cpu * 1e9) or spent >= s.warm_max_cpu * 1e9:
                return {"warm_rounds": len(rates), "warm_cpu_ns": spent, "stable": stable,
                        "spread": None if last != last else last, "last_rates": rates[-s.window:],
                        "min_cpu_s": s.warm_min_cpu, "recheck": False}


class FlinkServer:
    """Flink's side: one long-lived JVM running `ugate.fair.FairServer` over a workload class of bridge tool `tool`.

    Started in its own process group that dies with us (as every JVM of flink_bridge.jvm); stderr goes to a file
    whose tail is shown if the JVM fails.
    """

    clock = FLINK_CLOCK

    def __init__(self, tool: str, version: str, workload: str, args: list[str], *, heap: str = "1g",
                 prepare_timeout: float = 900) -> None:
        self.version = release_of(version)
        self.workload = workload
        self.warmed = False
        conf = flink_conf_dir("fairbench-conf", "WARN")
        cmd = java_command(tool, version, "ugate.fair.FairServer", [workload, *args],
                           extra_classpath=[compile_tool("fairbench", version)], heap=heap)
        cmd.insert(1, f"-Dlog4j.configurationFile={conf / 'log4j.properties'}")
        self.command = cmd
        self._stderr: IO[str] = tempfile.TemporaryFile("w+", prefix="fairbench-")  # noqa: SIM115 (closed in close)
        self._proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
                                      text=True, bufsize=1, env=dict(os.environ, FLINK_CONF_DIR=str(conf)),
                                      start_new_session=True, preexec_fn=_die_with_parent)
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        try:
            self.info = self._answer(prepare_timeout)
        except BaseException:
            self.close()
            raise

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            if line.startswith(PREFIX):
                self._lines.put(line[len(PREFIX):])
        self._lines.put(None)

    def _answer(self, timeout: float) -> dict[str, Any]:
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise JvmError(f"{self.workload}: no answer within {timeout:g} s{self._tail()}") from None
        if line is None:
            self._proc.wait(timeout=10)
            raise JvmError(f"{self.workload} (Flink {self.version}) exited {self._proc.returncode}{self._tail()}")
        answer: dict[str, Any] = json.loads(line)
        if "error" in answer:
            raise JvmError(f"{self.workload}: {answer['error']}")
        return answer

    def _tail(self) -> str:
        self._stderr.seek(0)
        return ":\n" + self._stderr.read()[-4000:]

    def _ask(self, command: str, timeout: float) -> dict[str, Any]:
        assert self._proc.stdin is not None
        self._proc.stdin.write(command + "\n")
        self._proc.stdin.flush()
        return self._answer(timeout)

    def warm(self, s: Settings) -> dict[str, Any]:
        """A JVM already warmed by an earlier comparison only re-checks that its rate is stable."""
        minimum = 0.0 if self.warmed else s.warm_min_cpu
        # CPU-seconds under load can take far longer in wall time: the limit is generous, never the measure.
        answer = self._ask(f"warm {minimum} {s.warm_max_cpu} {s.round_cpu} {s.window} {s.tolerance}",
                           timeout=600 + 30 * s.warm_max_cpu)
        answer.update(min_cpu_s=minimum, recheck=self.warmed)
        self.warmed = True
        return answer

    def round(self, seconds: float) -> Round:
        a = self._ask(f"round {seconds}", timeout=600 + 60 * seconds)
        return Round(a["cpu_ns"], a["user_ns"], a["wall_ns"], a["process_cpu_ns"], a["items"], a["units"],
                     a["gc_ms"], a["jit_ms"])

    def close(self) -> None:
        with contextlib.suppress(Exception):
            if self._proc.poll() is None and self._proc.stdin is not None:
                self._proc.stdin.write("quit\n")
                self._proc.stdin.flush()
                self._proc.wait(timeout=10)
        _kill_group(self._proc)  # type: ignore[arg-type]
        self._stderr.close()

    def __enter__(self) -> FlinkServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class Comparison:
    """What is compared: a short name for tables, and what each side runs, for the printed title and the record."""

    benchmark: str
    name: str
    unit: str
    ours: str
    flink: str
    details: dict[str, Any] = field(default_factory=dict)


def _quartiles(values: list[float]) -> tuple[float, float]:
    if len(values) < 2:
        return values[0], values[0]
    q = statistics.quantiles(values, n=4, method="inclusive")
    return q[0], q[2]


def _side(rounds: list[Round], warm: dict[str, Any], clock: str) -> dict[str, Any]:
    rates = [r.rate for r in rounds]
    process = [p for p in (r.process_rate for r in rounds) if p is not None]
    out: dict[str, Any] = {
        "rate": statistics.median(rates), "rates": rates, "timed_by": "thread_cpu", "clock": clock,
        "rounds": len(rounds), "units": sum(r.units for r in rounds), "items": sum(r.items for r in rounds),
        "cpu_s": sum(r.cpu_ns for r in rounds) / 1e9, "wall_s": sum(r.wall_ns for r in rounds) / 1e9,
        "system_share": max(0.0, 1 - sum(r.user_ns for r in rounds) / max(sum(r.cpu_ns for r in rounds), 1)),
        "process_rate": statistics.median(process) if len(process) == len(rounds) else None,
        "warm_up": warm,
    }
    if rounds and rounds[0].gc_ms is not None:
        out["gc_ms"] = sum(r.gc_ms or 0 for r in rounds)
        out["jit_ms"] = sum(max(r.jit_ms or 0, 0) for r in rounds)
    return out


def compare(what: Comparison, ours: Ours, flink: FlinkServer, s: Settings) -> dict[str, Any]:
    """Warm both sides, then `s.rounds` rounds each, alternated ABBA (ours, Flink, Flink, ours, ...)."""
    started = datetime.now(UTC)
    load_before = os.getloadavg()
    warm_ours = ours.warm(s)
    warm_flink = flink.warm(s)
    timed: dict[str, list[Round]] = {"ours": [], "flink": []}
    order: list[str] = []
    for i in range(s.rounds):
        for side in (("ours", "flink") if i % 2 == 0 else ("flink", "ours")):
            timed[side].append(ours.round(s.round_cpu) if side == "ours" else flink.round(s.round_cpu))
            order.append(side)
    load_after = os.getloadavg()
    o, f = _side(timed["ours"], warm_ours, ours.clock), _side(timed["flink"], warm_flink, flink.clock)
    paired = [a.rate / b.rate for a, b in zip(timed["ours"], timed["flink"], strict=True)]
    q1, q3 = _quartiles(paired)
    return {
        "benchmark": what.benchmark, "comparison": what.name, "unit": what.unit, "ours_code": what.ours,
        "flink_code": what.flink, **what.details,
        "statistic": STATISTIC, "ours": o, "flink": f,
        "ratio": o["rate"] / f["rate"], "ratio_iqr": [q1, q3], "ratio_range": [min(paired), max(paired)],
        "paired_ratios": paired,
        "ratio_by_process_cpu": (o["process_rate"] / f["process_rate"]
                                 if o["process_rate"] and f["process_rate"] else None),
        "rounds": s.rounds, "order": order, "alternated": "ABBA",
        "settings": {"rounds": s.rounds, "round_cpu": s.round_cpu, "warm_min_cpu": s.warm_min_cpu,
                     "warm_max_cpu": s.warm_max_cpu, "window": s.window, "tolerance": s.tolerance},
        "load_before": list(load_before), "load_after": list(load_after), "cpus": os.cpu_count(),
        "date": started.strftime("%Y-%m-%d %H:%M UTC"),
        "seconds": (datetime.now(UTC) - started).total_seconds(),
        "flink_version": flink.version, "jvm": flink.info.get("java"),
        "python": platform.python_version(), "command": command_line(),
    }


def command_line() -> str:
    """The command that produced a result, as it can be typed again."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    args = sys.argv[1:] if spec is not None and spec.name.startswith("bench.") else []
    head = f"python -m {spec.name}" if spec is not None and spec.name.startswith("bench.") else "python (in-process)"
    return " ".join([head, *map(shlex.quote, args)])


def _warm_text(w: dict[str, Any]) -> str:
    state = "stable" if w["stable"] else "NOT stable"
    within = f" within {w['spread']:.1%}" if w.get("spread") is not None else ""
    what = "warm JVM re-checked" if w.get("recheck") else "warm-up"
    return f"{what} {w['warm_cpu_ns'] / 1e9:.1f} CPU-s in {w['warm_rounds']} rounds, {state}{within}"


def fmt_rate(x: float) -> str:
    return f"{x / 1e6:,.2f} M" if x >= 1e6 else f"{x:,.1f}"


def print_result(r: dict[str, Any], out: IO[str] | None = None) -> None:
    """The one way every benchmark prints a comparison: both rates, the ratio with its spread, the load."""
    w = out or sys.stdout
    o, f = r["ours"], r["flink"]
    unit = r["unit"]
    print(f"\n== {r['benchmark']}: {r['comparison']}\n   ours {r['ours_code']}  vs  Flink {r['flink_code']}", file=w)
    print(f"   ours : {fmt_rate(o['rate'])} {unit}/CPU-s, median of {o['rounds']} rounds "
          f"({o['system_share']:.0%} of it system time); {_warm_text(o['warm_up'])}", file=w)
    jit = f"; JIT {f['jit_ms']} ms, GC {f['gc_ms']} ms in the timed rounds" if "jit_ms" in f else ""
    print(f"   Flink: {fmt_rate(f['rate'])} {unit}/CPU-s, median of {f['rounds']} rounds "
          f"({f['system_share']:.0%} of it system time); {_warm_text(f['warm_up'])}{jit}", file=w)
    q1, q3 = r["ratio_iqr"]
    lo, hi = r["ratio_range"]
    verdict = ("not distinguishable from Flink: the IQR spans 1" if q1 <= 1 <= q3
               else "faster than Flink" if r["ratio"] > 1 else "SLOWER than Flink")
    by_process = (f"; by process CPU (the JVM's GC and JIT threads counted) {r['ratio_by_process_cpu']:.3f}"
                  if r.get("ratio_by_process_cpu") is not None else "")
    print(f"   ratio ours/Flink {r['ratio']:.3f} ({verdict}); per-round paired ratios IQR {q1:.2f}-{q3:.2f}, "
          f"min-max {lo:.2f}-{hi:.2f}{by_process}", file=w)
    b, a = r["load_before"], r["load_after"]
    print(f"   {r['rounds']} rounds per side alternated ABBA; load average {b[0]:.2f} -> {a[0]:.2f} (1 min) on "
          f"{r['cpus']} CPUs; {r['date']}; Flink {r['flink_version']}, Java {r['jvm']}, Python {r['python']}", file=w)
    print(f"   timed by: ours {o['clock']}; Flink {f['clock']}", file=w)
    print(f"   statistic: {r['statistic']}", file=w)


def print_summary(results: list[dict[str, Any]], out: IO[str] | None = None) -> None:
    """One line per comparison, for `make bench`'s log and docs/performance.md."""
    w = out or sys.stdout
    if not results:
        return
    print("\nsummary (ratio = median ours / median Flink, per thread-CPU second; spread: IQR and min-max of "
          "per-round paired ratios)", file=w)
    for r in results:
        q1, q3 = r["ratio_iqr"]
        lo, hi = r["ratio_range"]
        name = f"{r['benchmark']}: {r['comparison']}"
        print(f"  {name:<58} {r['ratio']:>6.3f}  IQR {q1:.2f}-{q3:.2f}  min-max {lo:.2f}-{hi:.2f}  "
              f"{r['rounds']} rounds  load {r['load_before'][0]:.1f}->{r['load_after'][0]:.1f}", file=w)


def record(result: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as f:
        f.write(json.dumps(result) + "\n")


def run_and_report(what: Comparison, ours: Ours, flink: FlinkServer, s: Settings, json_path: Path,
                   results: list[dict[str, Any]]) -> dict[str, Any]:
    """compare + print_result + record: what every benchmark does per comparison."""
    r = compare(what, ours, flink, s)
    print_result(r)
    record(r, json_path)
    results.append(r)
    sys.stdout.flush()
    return r



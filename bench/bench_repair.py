"""Benchmark: `upgrade-gate repair` against a plain copy of the same files, and its max-parallelism rewrite against
Flink's own reading of the same key-group streams (issue 29).

Goal: repairing a savepoint with 1 GiB of state files runs at >= 50 % of a plain copy of the same files on the same
disk; the max-parallelism rewrite's MB/s is recorded against Flink's own reading of the same state.

Inputs, written by real Flink 2.3 (a MiniCluster job, `ugate.savepoints.RepairBench generate`, whose operators have
the uids of the repair scenarios' job: `numbers` (FLIP-27 source), `throttle`, `counts` (keyed), `sink`), created
once under `.work/bench/repair/`:
* copy: a canonical RocksDB savepoint, parallelism 4, max parallelism 128, about 1 GiB of state files (945,000
  Long keys, each with a count, 1,024 pseudo-random bytes, one map entry and one event-time timer). The new job is
  the committed `uid-renamed` scenario's job B (tests/fixtures/repairs/2.3.0/uid-renamed/graph-b.json, `counts`
  renamed `counts-v2`) at parallelism 4, so the repair moves `counts`' state (all of the keyed state) to a new
  operator ID; it copies every state file byte for byte and writes a new `_metadata`.
* rescale: a canonical HashMap savepoint, parallelism 2, max parallelism 128, 300,000 Long keys, each with a
  ValueState<Long>, a 64-byte ValueState<byte[]>, two MapState<Integer, String> entries and an event-time timer
  (1.5 M keyed entries, 64 MB of state files), rewritten for max parallelism 256.

1. Copy speed. Rounds of (a) a plain copy of exactly the source savepoint's files (state files, then `_metadata`)
   to a fresh directory on the same disk, and (b) the repair to a fresh directory, alternated ABBA (copy, repair,
   repair, copy, ...) after one untimed warm-up unit each (the source files are then in the page cache for both);
   before every unit, untimed, the previous output is deleted and `os.sync()` flushes what is pending, so no unit
   pays for another's write-back. `--how in-process` runs the repair as `upgrade_gate.cli.main.main(["repair",
   ...])` in this process (everything the command does but the interpreter's start and imports) and the copy as
   `shutil.copyfile` per file; `--how cli` runs each side as a child process of the same interpreter
   (`python -m upgrade_gate repair ...` against `python -c <the same copy>`), start-up included. Durability, the
   same on both sides: `--sync metadata` does what the repair does (state files copied with `shutil.copyfile`, no
   fsync; `_metadata` fsynced: the repair fsyncs its `_metadata`, the copy fsyncs its copy of it); `--sync all`
   fsyncs every file written on both sides (the repair's state files after it returns, inside the timed unit).
   Both sides are timed by wall clock and by CPU: in-process the thread's CPU (`time.thread_time_ns()`), for child
   processes their CPU (`RUSAGE_CHILDREN`). The statistic: the median of per-round rates (MB of the source
   savepoint's files per second, MB = 10^6 bytes) on both sides; ratio = median(repair) / median(copy), by wall
   (the goal) and by CPU, with the interquartile range and min-max of the per-round paired ratios.
2. Max-parallelism rewrite. `upgrade_gate.repair.max_parallelism.rescale` (read every keyed stream, decode and hash
   every key, spill, sort, write the new streams; its scratch directory emptied before each unit, untimed) against
   Flink's own reading of the same files in a JVM (RepairBench.fairWorkload): `entries`, Flink's
   `FullSnapshotRestoreOperation` iterated over every entry (the reading both backends' restores of a canonical
   savepoint run), reading the state files as Flink opens them (locally an unbuffered stream); `entries-in-memory`,
   the same over each file's bytes read into memory first (as our side reads them); `heap`, the HashMap backend's
   whole restore (`HeapKeyedStateBackendBuilder#build`: every key, value and timer deserialized into its state
   table). Rate: MB of keyed state files per thread-CPU second, timed by bench/fair.py (thread CPU on both sides,
   rounds alternated, the JVM warmed up by CPU time until stable, the same statistic, load recorded; the warm-up
   limit is 100 CPU-s instead of 40, because one pass of ours takes about 10 CPU-s and the 5-round stability
   window must fit in it). Before timing, our rewrite's entry, timer and byte counts must equal Flink's reading of
   the input, and Flink's reading of the rewritten savepoint (written by `repair_savepoint`) must find every entry
   in the key group Flink assigns its key to at the new max parallelism.

Usage: python -m bench.bench_repair [--parts copy,rescale] [--how in-process,cli] [--sync metadata,all]
       [--copy-rounds 20] [--copy-keys 945000] [--copy-input DIR --copy-graph G] [--rescale-keys 300000]
       [--rescale-input DIR --rescale-graph G] [--rescale-max 256] [--flink-modes entries,entries-in-memory,heap]
       [--profile] [--copy-json PATH] [fair options: --rounds, --tiny, --json, ...]
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import dataclasses
import io
import json
import os
import platform
import pstats
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import fair  # noqa: E402
from flink_bridge.generate_savepoints import BENCH_DIR, run_java  # noqa: E402
from upgrade_gate.cli.main import main as cli_main  # noqa: E402
from upgrade_gate.repair.max_parallelism import rescale  # noqa: E402
from upgrade_gate.repair.run import repair_savepoint  # noqa: E402
from upgrade_gate.storage.savepoints import load_savepoint  # noqa: E402
from upgrade_gate.storage.state_files import state_stream_opener  # noqa: E402

VERSION = "2.3"
OUT = BENCH_DIR / "repair"
COPY_RESULTS = BENCH_DIR / "repair-copy-results.jsonl"
GOAL = 0.5
SCENARIOS = REPO / "tests" / "fixtures" / "repairs" / "2.3.0"
TINY_COPY = SCENARIOS / "uid-renamed"  # job A's savepoint as Flink wrote it; graph-b.json moves `counts`
TINY_RESCALE = SCENARIOS / "max-parallelism-128-to-256-long-keys-hashmap"
METADATA = "_metadata"

COPY_STATISTIC = ("median of per-round rates (MB of the source savepoint's files per second; MB = 10^6 bytes), the "
                  "same on both sides; ratio = median(repair) / median(copy); spread = interquartile range and "
                  "min-max of the per-round paired ratios")
TIMED_BY = {
    "in-process": "wall time.perf_counter_ns() and thread CPU time.thread_time_ns(), around the unit in this process",
    "cli": "wall time.perf_counter_ns() around the child process and its CPU (getrusage RUSAGE_CHILDREN, user + "
           "system), start-up included",
}
DURABILITY = {
    "metadata": "as the repair does it: state files copied by shutil.copyfile without fsync, _metadata fsynced "
                "(the repair fsyncs the _metadata it writes; the copy fsyncs its copy of _metadata)",
    "all": "every file fsynced on both sides (the copy after each file; the repair's state files after it returns, "
           "inside the timed unit; its _metadata fsynced by the repair)",
}
FLINK_CODE = {
    "entries": "FullSnapshotRestoreOperation: every entry of every key group read from the state files",
    "entries-in-memory": "FullSnapshotRestoreOperation over each state file's bytes read into memory first",
    "heap": "HeapKeyedStateBackendBuilder#build: the HashMap backend's whole restore (every entry deserialized)",
}
# fair.py's rules with a higher warm-up limit: one pass of our rewrite over the 64 MB input is about 10 CPU-s, so
# the stability window (the last 5 rounds within 5 %) needs about 50 CPU-s before it can be judged at all.
DEFAULTS = dataclasses.replace(fair.Settings(), warm_max_cpu=100.0)
FLINK_SHORT = {"entries": "Flink reading every entry from the files",
               "entries-in-memory": "Flink reading every entry, file bytes in memory",
               "heap": "Flink's HashMap-backend restore"}


# ---- inputs ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Input:
    name: str
    savepoint: Path
    graph: Path  # the new job (copy: the operator moved; rescale: the new max parallelism)
    made_by: str


@dataclass(frozen=True)
class JobShape:
    """What `RepairBench generate` writes: one canonical savepoint of the repair scenarios' job."""

    backend: str
    parallelism: int
    max_parallelism: int
    keys: int
    value_bytes: int
    map_entries: int
    timers: bool

    @property
    def name(self) -> str:
        return (f"{self.backend}-p{self.parallelism}-maxp{self.max_parallelism}-k{self.keys}-v{self.value_bytes}"
                f"-m{self.map_entries}-t{int(self.timers)}")

    def args(self) -> list[str]:
        return [self.backend, str(self.parallelism), str(self.max_parallelism), str(self.keys),
                str(self.value_bytes), str(self.map_entries), "1" if self.timers else "0"]


def work_dir(name: str) -> Path:
    """Where this process writes its outputs (its own, so a test run beside `make bench` touches none of its files)."""
    return OUT / f"work-{os.getpid()}" / name


def _local(pointer: str) -> Path:
    return Path(pointer.removeprefix("file://").removeprefix("file:"))


def _graph(template: Path, parallelism: int, max_parallelism: int | None) -> dict[str, Any]:
    """A committed scenario graph at another parallelism (and max parallelism): the same uids, so the same IDs."""
    g = json.loads(template.read_text())
    for node in g["nodes"]:
        node["parallelism"] = parallelism
        if max_parallelism is not None:
            node["max_parallelism"] = max_parallelism
    if max_parallelism is not None:
        g["max_parallelism"] = max_parallelism
    return g


def generate(shape: JobShape) -> Path:
    """The savepoint of `shape`, written by real Flink once and kept under `OUT/<name>/savepoint`."""
    d = OUT / shape.name
    if (d / "savepoint" / METADATA).is_file() and (d / "input.json").is_file():
        return d
    shutil.rmtree(d, ignore_errors=True)
    stage = d / "stage"
    stage.mkdir(parents=True)
    print(f"generating {d.name} with Flink {VERSION} (once) ...", flush=True)
    started = time.perf_counter()
    out = run_java(VERSION, "ugate.savepoints.RepairBench", ["generate", str(stage), *shape.args()], timeout=3600)
    pointer = next(line.split("\t", 1)[1] for line in out.splitlines() if line.startswith("savepoint\t"))
    _local(pointer).rename(d / "savepoint")  # its state files are relative to its directory: it moves
    shutil.rmtree(stage)
    (d / "input.json").write_text(json.dumps({**dataclasses.asdict(shape), "flink": VERSION,
                                              "seconds": round(time.perf_counter() - started, 1)}) + "\n")
    return d


def copy_input(args: argparse.Namespace) -> Input:
    if args.copy_input:
        return Input(Path(args.copy_input).name, Path(args.copy_input).resolve(), Path(args.copy_graph).resolve(),
                     "given")
    if args.tiny:
        return Input("uid-renamed (committed scenario)", TINY_COPY / "savepoint", TINY_COPY / "graph-b.json",
                     "real Flink 2.3.0, tests/fixtures/repairs/2.3.0/uid-renamed")
    shape = JobShape("rocksdb", args.copy_parallelism, 128, args.copy_keys, 1024, 1, True)
    d = generate(shape)
    graph = d / "graph-b.json"
    if not graph.is_file():
        graph.write_text(json.dumps(_graph(TINY_COPY / "graph-b.json", shape.parallelism, None), indent=1) + "\n")
    return Input(shape.name, d / "savepoint", graph, f"real Flink {VERSION}, ugate.savepoints.RepairBench generate")


def rescale_input(args: argparse.Namespace) -> Input:
    if args.rescale_input:
        return Input(Path(args.rescale_input).name, Path(args.rescale_input).resolve(),
                     Path(args.rescale_graph).resolve(), "given")
    if args.tiny:
        return Input("max-parallelism-128-to-256-long-keys-hashmap (committed scenario)", TINY_RESCALE / "savepoint",
                     TINY_RESCALE / "graph-b.json", "real Flink 2.3.0, tests/fixtures/repairs/2.3.0")
    shape = JobShape("hashmap", 2, 128, args.rescale_keys, 64, 2, True)
    d = generate(shape)
    graph = d / f"graph-maxp{args.rescale_max}.json"
    if not graph.is_file():
        graph.write_text(json.dumps(_graph(TINY_COPY / "graph-a.json", shape.parallelism, args.rescale_max),
                                    indent=1) + "\n")
    return Input(shape.name, d / "savepoint", graph, f"real Flink {VERSION}, ugate.savepoints.RepairBench generate")


# ---- part 1: the repair against a plain copy --------------------------------------------------------------
def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _source_files(savepoint: Path) -> list[Path]:
    """State files first, `_metadata` last (the order the repair writes them)."""
    files = sorted(p for p in savepoint.iterdir() if p.is_file() and p.name != METADATA)
    return [*files, savepoint / METADATA]


def plain_copy(files: list[Path], dest: Path, sync: str) -> None:
    os.mkdir(dest)
    for f in files:
        target = dest / f.name
        shutil.copyfile(f, target)
        if sync == "all" or f.name == METADATA:
            _fsync(target)


# The same copy in a child process, for `--how cli` (argv: dest, sync, files...).
COPY_SCRIPT = """import os, shutil, sys
dest, sync, files = sys.argv[1], sys.argv[2], sys.argv[3:]
os.mkdir(dest)
for f in files:
    target = os.path.join(dest, os.path.basename(f))
    shutil.copyfile(f, target)
    if sync == "all" or os.path.basename(f) == "_metadata":
        fd = os.open(target, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)
"""


def _repair_argv(inp: Input, dest: Path) -> list[str]:
    return ["repair", "--savepoint", str(inp.savepoint), "--graph", str(inp.graph), "--flink-version", VERSION,
            "--format", "json", "--output", str(dest)]


def repair_in_process(inp: Input, dest: Path, sync: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = cli_main(_repair_argv(inp, dest))
    if sync == "all":
        for f in dest.iterdir():
            if f.name != METADATA:
                _fsync(f)
    return code, out.getvalue()


@dataclass
class Unit:
    wall_ns: int
    cpu_ns: int
    process_cpu_ns: int  # in-process: the whole process's CPU over the unit (a cross-check of the thread's)


def _timed_in_process(fn: Callable[[], Any]) -> tuple[Unit, Any]:
    p0, w0, c0 = time.process_time_ns(), time.perf_counter_ns(), time.thread_time_ns()
    result = fn()
    c1, w1, p1 = time.thread_time_ns(), time.perf_counter_ns(), time.process_time_ns()
    return Unit(w1 - w0, c1 - c0, p1 - p0), result


def _children_cpu_ns() -> int:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return int((r.ru_utime + r.ru_stime) * 1e9)


def _timed_child(cmd: list[str]) -> tuple[Unit, tuple[int, str, str]]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    c0, w0 = _children_cpu_ns(), time.perf_counter_ns()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
    w1, c1 = time.perf_counter_ns(), _children_cpu_ns()
    return Unit(w1 - w0, c1 - c0, c1 - c0), (proc.returncode, proc.stdout, proc.stderr)


class CopySides:
    """The two units of part 1, run the same way (`how`), each into a fresh directory under `work`."""

    def __init__(self, inp: Input, how: str, sync: str, work: Path) -> None:
        self.inp, self.how, self.sync, self.work = inp, how, sync, work
        self.files = _source_files(inp.savepoint)
        self.count = 0

    def _fresh(self, side: str) -> Path:
        """Remove what the previous unit wrote and flush pending writes (untimed), then name a new directory."""
        shutil.rmtree(self.work, ignore_errors=True)
        self.work.mkdir(parents=True)
        os.sync()
        self.count += 1
        return self.work / f"{side}-{self.count}"

    def copy(self) -> Unit:
        dest = self._fresh("copy")
        if self.how == "in-process":
            unit, _ = _timed_in_process(lambda: plain_copy(self.files, dest, self.sync))
        else:
            unit, (code, _, err) = _timed_child([sys.executable, "-c", COPY_SCRIPT, str(dest), self.sync,
                                                 *map(str, self.files)])
            if code != 0:
                raise SystemExit(f"the copy failed: {err[-2000:]}")
        return unit

    def repair(self) -> tuple[Unit, dict[str, Any], Path]:
        dest = self._fresh("repair")
        if self.how == "in-process":
            unit, (code, out) = _timed_in_process(lambda: repair_in_process(self.inp, dest, self.sync))
            err = ""
        else:
            unit, (code, out, err) = _timed_child([sys.executable, "-m", "upgrade_gate",
                                                   *_repair_argv(self.inp, dest)])
            if code == 0 and self.sync == "all":  # outside the child: timed here like the in-process side's fsyncs
                extra, _ = _timed_in_process(lambda: [_fsync(f) for f in dest.iterdir() if f.name != METADATA])
                unit = Unit(unit.wall_ns + extra.wall_ns, unit.cpu_ns + extra.cpu_ns,
                            unit.process_cpu_ns + extra.process_cpu_ns)
        if code != 0:
            raise SystemExit(f"the repair exited {code}: {err[-2000:]}{out[-2000:]}")
        return unit, json.loads(out), dest

    def clean(self) -> None:
        shutil.rmtree(self.work, ignore_errors=True)


def _check_repair(inp: Input, doc: dict[str, Any], dest: Path, files: list[Path]) -> dict[str, Any]:
    """What the timed repair does, checked once before timing: one move at least, written, read back SAFE, every
    state file copied with its size."""
    written = doc.get("written") or {}
    state = [f for f in files if f.name != METADATA]
    problems = []
    if not doc.get("repairable") or doc.get("verified_verdict") != "SAFE" or not doc.get("moves"):
        problems.append(f"not a verified repair with moves: repairable={doc.get('repairable')}, "
                        f"verified={doc.get('verified_verdict')}, moves={len(doc.get('moves') or [])}")
    if written.get("state_files") != len(state):
        problems.append(f"{written.get('state_files')} state files written, the source has {len(state)}")
    for f in state:
        if not (dest / f.name).is_file() or (dest / f.name).stat().st_size != f.stat().st_size:
            problems.append(f"{f.name} not copied with its size")
    if problems:
        raise SystemExit(f"{inp.savepoint}: {'; '.join(problems)}")
    return {"moves": [{"from": m["operator_id"], "to": m["new_operator_id"], "name": m["name"],
                       "matched_by": m["matched_by"], "bytes": m["bytes"]} for m in doc["moves"]],
            "metadata_bytes_written": written.get("metadata_bytes"),
            "state_file_bytes": written.get("state_file_bytes")}


def _median_rates(units: list[Unit], nbytes: int) -> dict[str, Any]:
    wall = [nbytes / (u.wall_ns / 1e9) for u in units]
    cpu = [nbytes / (u.cpu_ns / 1e9) for u in units]
    return {"rate_wall": statistics.median(wall), "rate_cpu": statistics.median(cpu), "rates_wall": wall,
            "rates_cpu": cpu, "wall_s": [u.wall_ns / 1e9 for u in units], "cpu_s": [u.cpu_ns / 1e9 for u in units],
            "process_cpu_s": [u.process_cpu_ns / 1e9 for u in units], "rounds": len(units)}


def _paired(a: list[float], b: list[float]) -> tuple[list[float], list[float], list[float]]:
    paired = [x / y for x, y in zip(a, b, strict=True)]
    q1, q3 = fair._quartiles(paired)
    return paired, [q1, q3], [min(paired), max(paired)]


def copy_vs_repair(inp: Input, how: str, sync: str, rounds: int) -> dict[str, Any]:
    sides = CopySides(inp, how, sync, work_dir("runs"))
    files = sides.files
    nbytes = sum(f.stat().st_size for f in files)
    started = datetime.now(UTC)
    load_before = os.getloadavg()
    try:
        # untimed warm-up, one unit each (the source files into the page cache, imports, caches); the repair's
        # output is checked here, once
        sides.copy()
        _, doc, dest = sides.repair()
        checked = _check_repair(inp, doc, dest, files)
        timed: dict[str, list[Unit]] = {"copy": [], "repair": []}
        order: list[str] = []
        for i in range(rounds):
            for side in (("copy", "repair") if i % 2 == 0 else ("repair", "copy")):
                timed[side].append(sides.copy() if side == "copy" else sides.repair()[0])
                order.append(side)
    finally:
        sides.clean()
    load_after = os.getloadavg()
    c, r = _median_rates(timed["copy"], nbytes), _median_rates(timed["repair"], nbytes)
    c["timed_by"] = r["timed_by"] = TIMED_BY[how]
    paired_wall, iqr_wall, range_wall = _paired(r["rates_wall"], c["rates_wall"])
    paired_cpu, iqr_cpu, range_cpu = _paired(r["rates_cpu"], c["rates_cpu"])
    ratio_wall = r["rate_wall"] / c["rate_wall"]
    return {
        "benchmark": "repair", "comparison": "repair vs plain copy", "input": inp.name,
        "savepoint": str(inp.savepoint), "graph": str(inp.graph), "made_by": inp.made_by,
        "bytes": nbytes, "files": len(files), "state_files": len(files) - 1, **checked,
        "how": how, "repair_code": ("upgrade_gate.cli.main.main(['repair', ...]) in this process" if how == "in-process"
                                    else "python -m upgrade_gate repair ... (child process)"),
        "copy_code": ("shutil.copyfile per file in this process" if how == "in-process"
                      else "python -c <shutil.copyfile per file> (child process)"),
        "sync": sync, "durability": DURABILITY[sync], "statistic": COPY_STATISTIC, "copy": c, "repair": r,
        "ratio_wall": ratio_wall, "ratio_wall_iqr": iqr_wall, "ratio_wall_range": range_wall,
        "paired_wall": paired_wall, "ratio_cpu": r["rate_cpu"] / c["rate_cpu"], "ratio_cpu_iqr": iqr_cpu,
        "ratio_cpu_range": range_cpu, "paired_cpu": paired_cpu, "goal": GOAL, "goal_met": ratio_wall >= GOAL,
        "rounds": rounds, "order": order, "alternated": "ABBA", "warm_up": "one untimed unit per side",
        "load_before": list(load_before), "load_after": list(load_after), "cpus": os.cpu_count(),
        "date": started.strftime("%Y-%m-%d %H:%M UTC"), "seconds": (datetime.now(UTC) - started).total_seconds(),
        "python": platform.python_version(), "command": fair.command_line(),
    }


def _mb(x: float) -> str:
    """MB (10^6 bytes) with at least 4 significant digits, so a printed ratio can be checked against the rates."""
    v = x / 1e6
    return f"{v:,.1f}" if v >= 1000 else f"{v:.4g}"


def _size(n: int) -> str:
    return f"{n / 1e6:,.1f} MB" if n >= 1e6 else f"{n / 1e3:,.1f} kB"


def print_copy(res: dict[str, Any], out: TextIO | None = None) -> None:
    w = out or sys.stdout
    c, r = res["copy"], res["repair"]
    print(f"\n== repair vs plain copy: {res['input']} ({_size(res['bytes'])} in {res['files']} files: "
          f"{res['state_files']} state files + _metadata); --how {res['how']}, --sync {res['sync']}", file=w)
    print(f"   repair: {res['repair_code']}  vs  copy: {res['copy_code']}", file=w)
    for name, s in (("copy  ", c), ("repair", r)):
        print(f"   {name}: {_mb(s['rate_wall'])} MB/s by wall, {_mb(s['rate_cpu'])} MB/CPU-s, median of {s['rounds']} "
              f"rounds ({statistics.median(s['wall_s']):.3f} s wall, {statistics.median(s['cpu_s']):.3f} CPU-s a "
              f"round)", file=w)
    verdict = "met" if res["goal_met"] else "NOT met"
    for by in ("wall", "cpu"):
        q1, q3 = res[f"ratio_{by}_iqr"]
        lo, hi = res[f"ratio_{by}_range"]
        goal = f" (goal >= {res['goal']}: {verdict})" if by == "wall" else ""
        clock = "wall" if by == "wall" else "CPU"
        print(f"   ratio repair/copy by {clock} {res[f'ratio_{by}']:.3f}{goal}; per-round paired ratios IQR "
              f"{q1:.2f}-{q3:.2f}, min-max {lo:.2f}-{hi:.2f}", file=w)
    b, a = res["load_before"], res["load_after"]
    print(f"   {res['rounds']} rounds per side alternated ABBA after {res['warm_up']}; load average {b[0]:.2f} -> "
          f"{a[0]:.2f} (1 min) on {res['cpus']} CPUs; {res['date']}; Python {res['python']}", file=w)
    print(f"   timed by: copy {c['timed_by']}; repair {r['timed_by']}", file=w)
    print(f"   durability: {res['durability']}", file=w)
    print(f"   statistic: {res['statistic']}", file=w)
    w.flush()


def profile_repair(inp: Input, sync: str, top: int = 12) -> None:
    """Where the repair's time goes beyond the copy: cProfile of one in-process unit (untimed, printed)."""
    sides = CopySides(inp, "in-process", sync, work_dir("runs"))
    try:
        sides.copy()  # warm
        dest = sides._fresh("repair")
        prof = cProfile.Profile()
        prof.runcall(repair_in_process, inp, dest, sync)
    finally:
        sides.clean()
    print(f"\n   profile of one repair (cProfile, in-process, --sync {sync}), top {top} by own time:")
    stats = io.StringIO()
    pstats.Stats(prof, stream=stats).sort_stats("tottime").print_stats(top)
    print("\n".join("     " + line for line in stats.getvalue().splitlines() if line.strip()))


# ---- part 2: the max-parallelism rewrite against Flink's reading ------------------------------------------
def _flink_count(savepoint: Path) -> dict[str, Any]:
    out = run_java(VERSION, "ugate.savepoints.RepairBench", ["count", str(savepoint)], timeout=1800)
    return json.loads(next(line for line in reversed(out.splitlines()) if line.startswith("{")))


def _fresh_dir(d: Path) -> None:
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)


def check_rescale(inp: Input, new_max: int) -> dict[str, Any]:
    """Before timing: our rewrite reads what Flink reads, and Flink finds the rewritten savepoint's entries where
    it assigns their keys."""
    metadata = load_savepoint(str(inp.savepoint))
    scratch = work_dir("scratch")
    _fresh_dir(scratch)
    done = rescale(metadata, new_max, scratch, state_stream_opener())
    ours = {"entries": sum(o.entries for o in done.operators), "timers": sum(o.timers for o in done.operators),
            "bytes": sum(o.bytes_read for o in done.operators),
            "bytes_written": sum(o.bytes_written for o in done.operators)}
    flink = _flink_count(inp.savepoint)
    if (ours["entries"], ours["timers"], ours["bytes"]) != (flink["entries"], flink["timers"], flink["bytes"]):
        raise SystemExit(f"{inp.savepoint}: our rewrite read {ours}, Flink's reading found {flink}")
    rewritten = work_dir("rewritten")
    shutil.rmtree(rewritten, ignore_errors=True)
    from upgrade_gate.storage.check_inputs import read_side

    outcome = repair_savepoint(metadata, read_side(str(inp.graph)), destination=str(rewritten),
                               flink_version=VERSION, max_parallelism=new_max)
    if outcome.verified is None or outcome.verified.verdict != "SAFE":
        raise SystemExit(f"{inp.savepoint}: the repair with --max-parallelism {new_max} was not written and verified")
    after = _flink_count(rewritten)
    shutil.rmtree(rewritten, ignore_errors=True)
    shutil.rmtree(scratch, ignore_errors=True)
    if (after["entries"], after["timers"], after["misplaced"], after["max_parallelism"]) != (
            flink["entries"], flink["timers"], 0, new_max):
        raise SystemExit(f"{inp.savepoint}: Flink's reading of the rewritten savepoint: {after} (before: {flink})")
    return {"ours_counts": ours, "flink_counts": flink, "flink_counts_rewritten": after, "same_as_flink": True}


def rescale_unit(inp: Input, new_max: int, scratch: Path) -> tuple[Callable[[], int], Callable[[], None]]:
    metadata = load_savepoint(str(inp.savepoint))
    opener = state_stream_opener()

    def unit() -> int:
        done = rescale(metadata, new_max, scratch, opener)
        return sum(o.bytes_read for o in done.operators)

    return unit, lambda: _fresh_dir(scratch)


def profile_rescale(inp: Input, new_max: int, top: int = 14) -> None:
    unit, before = rescale_unit(inp, new_max, work_dir("scratch"))
    before()
    prof = cProfile.Profile()
    prof.runcall(unit)
    shutil.rmtree(work_dir("scratch"), ignore_errors=True)
    print(f"\n   profile of one rewrite (cProfile), top {top} by own time:")
    stats = io.StringIO()
    pstats.Stats(prof, stream=stats).sort_stats("tottime").print_stats(top)
    print("\n".join("     " + line for line in stats.getvalue().splitlines() if line.strip()))


def rescale_vs_flink(inp: Input, new_max: int, modes: list[str], settings: fair.Settings, json_path: Path,
                     results: list[dict[str, Any]], heap: str) -> None:
    checked = check_rescale(inp, new_max)
    f = checked["flink_counts"]
    print(f"\ninput {inp.name}: {inp.savepoint} ({_size(f['bytes'])} of keyed state in {f['handles']} files, "
          f"{f['entries']:,} entries of which {f['timers']:,} timers, {f['key_groups']} key groups, max parallelism "
          f"{f['max_parallelism']}); made by {inp.made_by}")
    print(f"   our rewrite to max parallelism {new_max} reads what Flink's FullSnapshotRestoreOperation reads "
          f"(entries, timers, bytes): yes; Flink's reading of the rewritten savepoint: "
          f"{checked['flink_counts_rewritten']['entries']:,} entries, every one in the key group Flink assigns its "
          f"key to at {new_max}: yes", flush=True)
    scratch = work_dir("scratch")
    unit, before = rescale_unit(inp, new_max, scratch)
    try:
        for mode in modes:
            with fair.FlinkServer("savepoints", VERSION, "ugate.savepoints.RepairBench", [mode, str(inp.savepoint)],
                                  heap=heap) as flink:
                what = fair.Comparison(
                    "repair --max-parallelism", f"{inp.name} to {new_max} vs {FLINK_SHORT[mode]}", "bytes",
                    f"rescale(metadata, {new_max}, ...): every keyed entry and timer into its new key group",
                    FLINK_CODE[mode],
                    {"input": str(inp.savepoint), "new_max_parallelism": new_max, "flink_mode": mode,
                     "made_by": inp.made_by, **checked})
                r = fair.run_and_report(what, fair.Ours(unit, before), flink, settings, json_path, results)
            print(f"   ours {r['ours']['rate'] / 1e6:.2f} MB/CPU-s ({f['bytes'] / r['ours']['rate']:.2f} CPU-s a "
                  f"pass), Flink {r['flink']['rate'] / 1e6:.2f} MB/CPU-s ({f['bytes'] / r['flink']['rate']:.2f} "
                  f"CPU-s a pass)", flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


# ---- main ---------------------------------------------------------------------------------------------------
def _split(text: str, allowed: tuple[str, ...], what: str) -> list[str]:
    items = [x.strip() for x in text.split(",") if x.strip()]
    bad = [x for x in items if x not in allowed]
    if bad or not items:
        raise SystemExit(f"{what}: expected some of {', '.join(allowed)}, got {text!r}")
    return items


def _run(args: argparse.Namespace, parts: list[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    copies: list[dict[str, Any]] = []
    if "copy" in parts:
        inp = copy_input(args)
        rounds = 2 if args.tiny else args.copy_rounds
        for how in _split(args.how, tuple(TIMED_BY), "--how"):
            for sync in _split(args.sync, tuple(DURABILITY), "--sync"):
                res = copy_vs_repair(inp, how, sync, rounds)
                print_copy(res)
                fair.record(res, args.copy_json)
                copies.append(res)
        if args.profile:
            profile_repair(inp, "metadata")
    results: list[dict[str, Any]] = []
    if "rescale" in parts:
        settings = dataclasses.replace(fair.settings_from(args), rounds=2) if args.tiny else fair.settings_from(args)
        inp = rescale_input(args)
        modes = _split(args.flink_modes, tuple(FLINK_CODE), "--flink-modes")
        rescale_vs_flink(inp, args.rescale_max, modes, settings, args.json, results, args.heap)
        if args.profile:
            profile_rescale(inp, args.rescale_max)
    return copies, results


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--parts", default="copy,rescale", help="copy, rescale or both (default)")
    g = ap.add_argument_group("part 1: the repair against a plain copy")
    g.add_argument("--how", default="in-process,cli",
                   help="in-process (the CLI's main in this process), cli (child processes), or both (default)")
    g.add_argument("--sync", default="metadata,all", help="metadata (as the repair does), all (fsync every file) "
                                                          "or both (default)")
    g.add_argument("--copy-rounds", type=int, default=20, help="timed rounds per side (default 20; --tiny: 2)")
    g.add_argument("--copy-keys", type=int, default=945_000, help="keys of the generated input (about 1 GiB)")
    g.add_argument("--copy-parallelism", type=int, default=4, help="parallelism of the generated input (default 4)")
    g.add_argument("--copy-input", help="time this savepoint directory instead (with --copy-graph, the new job)")
    g.add_argument("--copy-graph", help="the new job's graph for --copy-input")
    g.add_argument("--copy-json", type=Path, default=COPY_RESULTS, help=f"append results here (default {COPY_RESULTS})")
    g = ap.add_argument_group("part 2: the max-parallelism rewrite against Flink's reading")
    g.add_argument("--rescale-keys", type=int, default=300_000, help="keys of the generated input (about 64 MB)")
    g.add_argument("--rescale-max", type=int, default=256, help="the new max parallelism (default 256)")
    g.add_argument("--rescale-input", help="time this canonical savepoint instead (with --rescale-graph: the new "
                                           "job at --rescale-max, for the check of the rewritten savepoint)")
    g.add_argument("--rescale-graph", help="the new job's graph for --rescale-input")
    g.add_argument("--flink-modes", default="entries,entries-in-memory,heap",
                   help="Flink's side: entries, entries-in-memory, heap (default all three)")
    g.add_argument("--heap", default="1g", help="the Flink JVM's heap (default 1g)")
    ap.add_argument("--profile", action="store_true", help="also print a cProfile of one repair and one rewrite")
    fair.add_arguments(ap, DEFAULTS)
    args = ap.parse_args(argv)
    parts = _split(args.parts, ("copy", "rescale"), "--parts")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    try:
        copies, results = _run(args, parts)
    finally:
        shutil.rmtree(work_dir("runs").parent, ignore_errors=True)
    if copies:
        print("\nsummary, repair vs plain copy (ratio = median repair / median copy, MB/s; goal >= 0.5 by wall)")
        for res in copies:
            print(f"  --how {res['how']:<10} --sync {res['sync']:<8} by wall {res['ratio_wall']:.3f} (IQR "
                  f"{res['ratio_wall_iqr'][0]:.2f}-{res['ratio_wall_iqr'][1]:.2f}), by CPU {res['ratio_cpu']:.3f} "
                  f"(IQR {res['ratio_cpu_iqr'][0]:.2f}-{res['ratio_cpu_iqr'][1]:.2f}), goal "
                  f"{'met' if res['goal_met'] else 'NOT met'}, {res['rounds']} rounds, load "
                  f"{res['load_before'][0]:.1f}->{res['load_after'][0]:.1f}")
    fair.print_summary(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())

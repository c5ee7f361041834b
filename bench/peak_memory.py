"""Peak memory of a Spark run's processes, sampled from /proc (benchmark tooling, Linux only).

A driver's peak is the kernel's high-water mark of its resident set (`VmHWM` in
/proc/<pid>/status), which only grows, so sampling it every half second and keeping the last value
read before the process exits loses at most the last half second. The process tree below a root
pid (a benchmark worker, or a `spark-submit`) is walked on every sample and each process is named
by its command line: the driver's Python, the driver's JVM (`SparkSubmit`), and the Python
workers of a local master (`pyspark.daemon` and its forks), whose resident sets are summed per sample.
The same samples add up each process' CPU time (utime + stime from /proc/<pid>/stat, the last value
seen per process), so a run's cost can be stated in CPU-seconds, which other load on the machine
does not inflate the way it inflates wall time.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path


def _children() -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        out.setdefault(ppid, []).append(int(entry.name))
    return out


_TICKS = os.sysconf("SC_CLK_TCK")


def _cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime (fields 14 and 15 of stat)


def _status_kb(pid: int) -> tuple[int, int]:
    """(VmHWM, VmRSS) in KiB, (0, 0) if the process is gone."""
    hwm = rss = 0
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                hwm = int(line.split()[1])
            elif line.startswith("VmRSS:"):
                rss = int(line.split()[1])
    except OSError:
        pass
    return hwm, rss


def _kind(pid: int, root: int) -> str | None:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return None
    if "pyspark.daemon" in cmd or "pyspark.worker" in cmd:
        return "python_workers"
    if "java" in cmd.split(" ", 1)[0] or "org.apache.spark.deploy.SparkSubmit" in cmd:
        if "CoarseGrainedExecutorBackend" in cmd:
            return "executor_jvm"
        return "driver_jvm" if "SparkSubmit" in cmd else None
    if "python" in cmd.split(" ", 1)[0] and (pid == root or "spark_jobs/" in cmd or "bench.bench_spark" in cmd):
        return "driver_python"
    return None


class PeakMemory:
    """Samples the trees below `root` (and `more` roots, e.g. a cluster's workers) every `interval` s in a
    thread; `peaks_mb()` and `cpu_seconds()` after `stop()`."""

    def __init__(self, root: int, interval: float = 0.5, more: tuple[int, ...] = ()) -> None:
        self.root = root
        self.more = more
        self.interval = interval
        self.peaks: dict[str, int] = {}  # kind -> KiB
        self.cpu: dict[int, tuple[str, float]] = {}  # pid -> (kind, CPU-seconds, last seen)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def sample(self) -> None:
        tree = _children()
        todo, seen = [self.root, *self.more], []
        while todo:
            pid = todo.pop()
            seen.append(pid)
            todo.extend(tree.get(pid, ()))
        workers = 0
        for pid in seen:
            kind = _kind(pid, self.root)
            if kind is None:
                continue
            hwm, rss = _status_kb(pid)
            self.cpu[pid] = (kind, max(self.cpu.get(pid, (kind, 0.0))[1], _cpu_seconds(pid)))
            if kind == "python_workers":
                workers += rss
            else:
                self.peaks[kind] = max(self.peaks.get(kind, 0), hwm)
        if workers:
            self.peaks["python_workers"] = max(self.peaks.get("python_workers", 0), workers)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def stop(self) -> dict[str, float]:
        self._stop.set()
        self._thread.join()
        return self.peaks_mb()

    def peaks_mb(self) -> dict[str, float]:
        return {k: round(v / 1024, 1) for k, v in sorted(self.peaks.items())}

    def cpu_seconds(self) -> dict[str, float]:
        """CPU-seconds per kind of process, summed over the processes seen."""
        out: dict[str, float] = {}
        for kind, seconds in self.cpu.values():
            out[kind] = out.get(kind, 0.0) + seconds
        return {k: round(v, 1) for k, v in sorted(out.items())}


def own_peak_mb() -> float:
    """This process' own VmHWM in MiB."""
    return round(_status_kb(os.getpid())[0] / 1024, 1)

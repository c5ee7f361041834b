"""Build the real-upgrade test jobs (tests/jobs/upgrade/) into one jar per variant.

The sources are compiled with `javac` against the Flink release the cluster runs (the jars of
`flink_bridge.dist`), and each variant becomes its own jar whose manifest names its main class,
as a team ships them: the DAG uploads the jar, the exporter finds the entry point in the
manifest. Built once per source digest into `.work/upgrade-jobs/<release>/`.

Also: reading what the jobs printed (the TaskManager's .out file) back into per-job state.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flink_bridge.dist import WORK_DIR, classpath, release_of, work_lock

SOURCES = Path(__file__).resolve().parent / "jobs" / "upgrade"
PACKAGE = "ugate.jobs"
JOB_NAME = "ugate-counter"
VARIANTS = {
    "v1": "V1",
    "v2-compatible": "V2Compatible",
    "v2-broken": "V2Broken",
    "v2-lossy": "V2Lossy",
    "v2-fails": "V2Fails",
    "v2-restore-crash": "V2RestoreCrash",
    "v2-rekeyed": "V2Rekeyed",
    "v2-stateless-rekeyed": "V2StatelessRekeyed",
}


def main_class(variant: str) -> str:
    return f"{PACKAGE}.{VARIANTS[variant]}"


def build_jobs(version: str = "2.3") -> dict[str, Path]:
    """Compile the jobs and package one jar per variant; returns {variant: jar path}."""
    release = release_of(version)
    files = sorted(SOURCES.rglob("*.java"))
    digest = hashlib.sha256()
    for f in files:
        digest.update(str(f.relative_to(SOURCES)).encode())
        digest.update(f.read_bytes())
    out = WORK_DIR / "upgrade-jobs" / release
    jars = {v: out / f"ugate-counter-{v}.jar" for v in VARIANTS}
    with work_lock(f"upgrade-jobs-{release}"):  # the other test tier may be building them right now
        return _build(files, out, jars, release, digest.hexdigest())


def _build(files: list[Path], out: Path, jars: dict[str, Path], release: str, digest: str) -> dict[str, Path]:
    stamp = out / ".digest"
    if stamp.is_file() and stamp.read_text() == digest and all(j.is_file() for j in jars.values()):
        return jars
    shutil.rmtree(out, ignore_errors=True)
    classes = out / "classes"
    classes.mkdir(parents=True)
    proc = subprocess.run(["javac", "-nowarn", "-encoding", "UTF-8", "--release", "17", "-cp", classpath(release),
                           "-d", str(classes), *map(str, files)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"javac failed for the upgrade test jobs:\n{proc.stderr[-4000:]}")
    for variant, jar in jars.items():
        proc = subprocess.run(["jar", "--create", "--file", str(jar), "--main-class", main_class(variant),
                               "-C", str(classes), "."], capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"jar failed for {variant}:\n{proc.stderr[-2000:]}")
    stamp.write_text(digest)
    return jars


def job_graphs(jars: dict[str, Path], variants: tuple[str, ...] | None = None) -> dict[str, Path]:
    """Each variant's job-graph spec, built from its jar by real Flink (`export_spec`), cached next
    to the jars: rebuilt only when the jobs' sources change (the jars are rebuilt then too)."""
    import json

    from flink_bridge.exporter import export_spec

    out: dict[str, Path] = {}
    for variant in variants or tuple(jars):
        jar = jars[variant]
        graph = jar.parent / "graphs" / f"{variant}.json"
        stamp = graph.with_suffix(".source")
        key = f"{jar.stat().st_size}:{jar.stat().st_mtime_ns}"
        with work_lock(f"upgrade-graph-{jar.parent.name}-{variant}"):
            if not (graph.is_file() and stamp.is_file() and stamp.read_text() == key):
                graph.parent.mkdir(parents=True, exist_ok=True)
                graph.write_text(json.dumps(export_spec("jar", jar)))
                stamp.write_text(key)
        out[variant] = graph
    return out


def savepoint_of_v1(dest: Path, *, parallelism: int = 2, workdir_name: str = "v1-savepoint") -> Path:
    """Run v1 on a real Flink 2.3 standalone cluster at `parallelism` until every key has counted (state in every
    subtask), take one savepoint under `<savepoints>/ugate-counter/`, stop the cluster and copy the savepoint
    folder to `dest/savepoints` (returned). The gate reads only files, so nothing needs the cluster afterwards.

    Runs in the Airflow environment: it drives the cluster through the plugin's `FlinkRestHook`."""
    import json
    import os
    import time

    from flink_gate.hooks.flink_rest import FlinkRestHook

    from flink_bridge.cluster import FlinkCluster, default_workdir

    jars = build_jobs("2.3")
    workdir = default_workdir(workdir_name)
    shutil.rmtree(workdir, ignore_errors=True)
    cluster = FlinkCluster(workdir).start()
    host, port = cluster.rest_url.removeprefix("http://").split(":")
    conn = "AIRFLOW_CONN_FLINK_V1_SAVEPOINT"
    os.environ[conn] = json.dumps({"conn_type": "http", "host": host, "port": int(port), "schema": "http"})
    try:
        hook = FlinkRestHook("flink_v1_savepoint", retries=2)
        job_id = hook.run_jar(hook.upload_jar(jars["v1"]), parallelism=parallelism)
        hook.wait_until_restored(job_id, timeout=120)
        deadline = time.monotonic() + 90
        while len(getattr(parse_output(cluster.read_taskmanager_out()).get(job_id), "counts", {})) < 8:
            if time.monotonic() > deadline:  # every key counted: state in every subtask
                raise RuntimeError(f"v1 did not count every key in 90 s:\n{cluster.log_tail(2000)}")
            time.sleep(0.5)
        trigger = hook.trigger_savepoint(job_id, f"{cluster.savepoint_uri}/{JOB_NAME}")
        hook.wait_for_savepoint(job_id, trigger, timeout=120)
        hook.cancel(job_id)
        shutil.copytree(cluster.savepoint_dir, dest / "savepoints")
    finally:
        os.environ.pop(conn, None)
        cluster.stop()
    return dest / "savepoints"


_COUNT = re.compile(r"UGATE variant=(?P<variant>\S+) job=(?P<job>[0-9a-f]{32}) key=(?P<key>\S+) count=(?P<count>\d+)")
_INIT = re.compile(r"UGATE-INIT variant=(?P<variant>\S+) job=(?P<job>[0-9a-f]{32}) op=(?P<op>\S+) "
                   r"subtask=(?P<subtask>\d+) restored=(?P<restored>true|false) seen=(?P<seen>\d+)")
_SNAP = re.compile(r"UGATE-SNAP variant=(?P<variant>\S+) job=(?P<job>[0-9a-f]{32}) op=(?P<op>\S+) "
                   r"subtask=(?P<subtask>\d+) checkpoint=(?P<checkpoint>\d+) seen=(?P<seen>\d+)")


@dataclass
class JobOutput:
    """What one job run printed: its counter per key, in order, and its tagger's operator state."""

    job_id: str
    variant: str = ""
    counts: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    inits: list[dict[str, str]] = field(default_factory=list)
    snapshots: list[dict[str, str]] = field(default_factory=list)

    def first(self) -> dict[str, int]:
        return {k: v[0] for k, v in self.counts.items() if v}

    def last(self) -> dict[str, int]:
        return {k: max(v) for k, v in self.counts.items() if v}

    def restored_seen(self) -> int | None:
        """Total "seen" the tagger's subtasks restored (None: it did not restore)."""
        restored = [int(i["seen"]) for i in self.inits if i["restored"] == "true"]
        return sum(restored) if restored else None

    def snapshot_seen(self) -> int | None:
        """Total "seen" in the tagger's last snapshot (the savepoint)."""
        if not self.snapshots:
            return None
        last = max(int(s["checkpoint"]) for s in self.snapshots)
        return sum(int(s["seen"]) for s in self.snapshots if int(s["checkpoint"]) == last)


def parse_output(text: str) -> dict[str, JobOutput]:
    """Every job's output in the TaskManager's stdout, keyed by Flink job id."""
    jobs: dict[str, JobOutput] = {}

    def job(m: re.Match[str]) -> JobOutput:
        out = jobs.setdefault(m["job"], JobOutput(m["job"]))
        out.variant = m["variant"]
        return out

    for line in text.splitlines():
        if m := _COUNT.search(line):
            # With parallelism > 1 a key's lines come from one subtask, so per-key order is preserved.
            job(m).counts[m["key"]].append(int(m["count"]))
        elif m := _INIT.search(line):
            job(m).inits.append(m.groupdict())
        elif m := _SNAP.search(line):
            job(m).snapshots.append(m.groupdict())
    return jobs


KEYS = frozenset(f"k{i}" for i in range(8))  # the keys every upgrade job counts (Pipeline.java)


def wait_for_counts(cluster: Any, job_id: str, timeout: float = 60) -> JobOutput:
    """Until the job has printed a counter for every key (it restored and processes): its output so far. On time
    out, the keys it never counted and the cluster's log tail say why."""
    deadline = time.monotonic() + timeout
    while True:
        out = parse_output(cluster.read_taskmanager_out()).get(job_id)
        if out is not None and set(out.counts) >= KEYS:
            return out
        if time.monotonic() > deadline:
            missing = sorted(KEYS - set(out.counts if out else {}))
            raise AssertionError(f"job {job_id} printed no counter for {missing} in {timeout:.0f}s:\n"
                                 f"{cluster.log_tail(2000)}")
        time.sleep(0.5)

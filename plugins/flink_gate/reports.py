"""Where gate reports are published, and how the UI view finds them again.

A report is a pair (the check JSON and its HTML rendering) plus meta. Each publish writes a new,
never-modified version directory, and one manifest names the current version:

    <root>/<job>/<run>/manifest.json           {"version": "v-<uuid>", "meta": {...}}: the only
                                               file that ever changes, always by os.replace
    <root>/<job>/<run>/v-<uuid>/check.json     the core's CheckResult.to_json()
    <root>/<job>/<run>/v-<uuid>/report.html    the core's HTML report (upgrade_gate.report.html)
    <root>/<job>/<run>/.lock                   flock'ed while the manifest is switched or updated

Readers (`entries`, `get`, the view) go through the manifest only, so they read a check and an
HTML of the same version even while a retry publishes again: no reader ever sees a mixed pair.
Concurrent publishers never fail: each writes its own version, and the last manifest switch
wins. A version the manifest no longer names is deleted only after `gc_grace_s` seconds, so a
reader that has just read the manifest can still open its files.

Meta (job, dag, run, verdict, savepoint, graph, time, alert sent?) lives in the manifest, so
publishing switches check, HTML and meta in one step, and `update_meta` rewrites it under the
lock: concurrent updates of different fields all survive.

`<root>` is `UPGRADE_GATE_REPORTS_DIR`, else `$AIRFLOW_HOME/gate-reports`: the workers write it
and the API server's view reads it, so in a multi-host deployment it must be a shared volume
(with working `flock`, as on any local or NFSv4 mount). Reports published by earlier releases
(check.json, report.html and meta.json directly in the run directory) are still listed and shown.
No Airflow import: the view, the tasks and the tests share this module.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

_SAFE = re.compile(r"[^A-Za-z0-9._-]+")
_VERSION = re.compile(r"^v-[0-9a-f]{32}$")
MANIFEST = "manifest.json"
GC_GRACE_S = 600.0  # far longer than any reader holds a version between the manifest and its files


def reports_root() -> Path:
    env = os.environ.get("UPGRADE_GATE_REPORTS_DIR")
    if env:
        return Path(env)
    home = os.environ.get("AIRFLOW_HOME") or str(Path.home() / "airflow")
    return Path(home) / "gate-reports"


def job_key(job_name: str) -> str:
    """A collision-free, readable path or object-key segment for the exact job name."""
    digest = hashlib.sha256(job_name.encode("utf-8")).hexdigest()[:16]
    return f"{safe_name(job_name)[:48]}-{digest}"


def report_name(job_name: str) -> str:
    """The job's folder for reports, work files and links: the name itself when it is already a safe path
    segment (existing report links keep working), else its collision-free key, so `orders`, `orders_` and
    `orders.` (which all sanitise alike) never share a folder, under one run id or any."""
    return job_name if safe_name(job_name) == job_name else job_key(job_name)


def safe_name(name: str) -> str:
    """A job or run id as one path segment (run ids hold ':' and '+'); never '.' or '..'."""
    cleaned = _SAFE.sub("_", name).strip("._") or "_"
    return cleaned[:200]


@dataclass(frozen=True)
class ReportEntry:
    """One published report as a reader saw it: `path` is the directory holding check.json and
    report.html of exactly the version the manifest named (immutable, so both files match)."""

    job: str
    run: str
    path: Path
    meta: dict[str, Any]
    version: str = ""

    @property
    def verdict(self) -> str:
        return str(self.meta.get("verdict", "?"))


def _write_atomic(path: Path, data: bytes) -> None:
    """Write a sibling temp file, fsync it, os.replace it over `path`: readers see old or new."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def _write_file(path: Path, data: bytes) -> None:
    with open(path, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def _json_bytes(doc: Any) -> bytes:
    return (json.dumps(doc, indent=2) + "\n").encode()


class ReportStore:
    def __init__(self, root: Path | str | None = None, *, gc_grace_s: float = GC_GRACE_S) -> None:
        self.root = Path(root) if root else reports_root()
        self.gc_grace_s = gc_grace_s

    def run_dir(self, job: str, run: str) -> Path:
        return self.root / safe_name(job) / safe_name(run)

    @contextlib.contextmanager
    def _locked(self, rdir: Path) -> Iterator[None]:
        """The run's lock: serialises manifest switches and meta updates (not the readers)."""
        rdir.mkdir(parents=True, exist_ok=True)
        fd = os.open(rdir / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the flock

    def publish(self, job: str, run: str, check: dict[str, Any], html: str, meta: dict[str, Any]) -> Path:
        """Write a new version, then switch the manifest to it; returns the version's directory."""
        rdir = self.run_dir(job, run)
        rdir.mkdir(parents=True, exist_ok=True)
        version = f"v-{uuid.uuid4().hex}"
        # written under a dot name, so neither a reader nor another publisher's GC ever looks at it
        staging = rdir / f".{version}.tmp"
        staging.mkdir()
        try:
            _write_file(staging / "check.json", _json_bytes(check))
            _write_file(staging / "report.html", html.encode())
            meta = {**meta, "job": job, "run": run, "verdict": check.get("verdict"), "version": version,
                    "published_at": datetime.now(UTC).isoformat(timespec="seconds")}
            with self._locked(rdir):
                previous = self._current_version(rdir)
                os.replace(staging, rdir / version)
                _write_atomic(rdir / MANIFEST, _json_bytes({"format": 1, "version": version, "meta": meta}))
                if previous:  # its grace period starts now, when readers stop being sent to it
                    with contextlib.suppress(OSError):
                        os.utime(rdir / previous)
                self._collect(rdir, keep=version)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return rdir / version

    @staticmethod
    def _current_version(rdir: Path) -> str | None:
        try:
            version = str(json.loads((rdir / MANIFEST).read_text()).get("version", ""))
        except (OSError, ValueError):
            return None
        return version if _VERSION.match(version) else None

    def _collect(self, rdir: Path, keep: str) -> None:
        """Best effort: drop versions the manifest stopped naming more than `gc_grace_s` ago, what a
        killed publisher left behind (as old), and the files of the layout before manifests. Called
        under the lock, after the switch."""
        now = time.time()
        for child in rdir.iterdir():
            name = child.name
            try:
                leftover = name.startswith(".") and name.endswith(".tmp")
                if ((_VERSION.match(name) and name != keep) or leftover) \
                        and now - child.stat().st_mtime > self.gc_grace_s:
                    if child.is_dir():
                        shutil.rmtree(child, ignore_errors=True)
                    else:
                        child.unlink()
                elif name in ("check.json", "report.html", "meta.json"):  # the old layout's pair
                    child.unlink()
            except OSError:
                continue

    def update_meta(self, job: str, run: str, **fields: Any) -> None:
        """Merge `fields` into the current report's meta (atomic; concurrent updates are serialised)."""
        rdir = self.run_dir(job, run)
        if not (rdir / MANIFEST).is_file() and not (rdir / "meta.json").is_file():
            raise FileNotFoundError(f"no report published for job {job!r}, run {run!r} in {self.root}")
        with self._locked(rdir):
            manifest_path = rdir / MANIFEST
            if manifest_path.is_file():
                manifest = json.loads(manifest_path.read_text())
                manifest["meta"] = {**manifest.get("meta", {}), **fields}
                _write_atomic(manifest_path, _json_bytes(manifest))
            else:  # a report from before manifests: its meta.json is the only thing to update
                legacy = rdir / "meta.json"
                _write_atomic(legacy, _json_bytes({**json.loads(legacy.read_text()), **fields}))

    def _read(self, rdir: Path, version: str | None = None) -> ReportEntry | None:
        """The entry of one run directory: through its manifest (or a named, still existing version)."""
        job, run = rdir.parent.name, rdir.name
        try:
            manifest = json.loads((rdir / MANIFEST).read_text())
        except FileNotFoundError:
            manifest = None
        except (OSError, ValueError):
            return None
        if manifest is None:
            legacy = rdir / "meta.json"
            try:
                return ReportEntry(job, run, rdir, json.loads(legacy.read_text()))
            except (OSError, ValueError):
                return None
        current = str(manifest.get("version", ""))
        meta = dict(manifest.get("meta") or {})
        if version and version != current:
            # an older version a page linked to (its HTML frame): served while it exists, with its
            # own verdict, so the page and the frame show the same report
            if not _VERSION.match(version) or not (rdir / version).is_dir():
                return None
            try:
                check = json.loads((rdir / version / "check.json").read_text())
            except (OSError, ValueError):
                return None
            meta = {**meta, "verdict": check.get("verdict"), "version": version, "superseded_by": current}
            return ReportEntry(job, run, rdir / version, meta, version)
        if not _VERSION.match(current):
            return None
        return ReportEntry(job, run, rdir / current, meta, current)

    def entries(self) -> list[ReportEntry]:
        """Every published report, newest first."""
        out: list[ReportEntry] = []
        if not self.root.is_dir():
            return out
        runs = {p.parent for pattern in (f"*/*/{MANIFEST}", "*/*/meta.json") for p in self.root.glob(pattern)}
        for rdir in runs:
            if rdir.name.startswith(".") or rdir.parent.name.startswith("."):
                continue
            entry = self._read(rdir)
            if entry is not None:
                out.append(entry)
        return sorted(out, key=lambda e: str(e.meta.get("published_at", "")), reverse=True)

    def get(self, job: str, run: str, version: str | None = None) -> ReportEntry | None:
        """The current report of `job`/`run` (names as `entries` gives them), or the named version."""
        if safe_name(job) != job or safe_name(run) != run:
            return None
        return self._read(self.root / job / run, version)

"""Where gate reports are published, and how the UI view finds them again.

Layout (one directory per job and DAG run, written once per run, replaced atomically on retry):

    <root>/<job>/<run>/check.json    the core's CheckResult.to_json()
    <root>/<job>/<run>/report.html   the core's HTML report (upgrade_gate.cli.report_html)
    <root>/<job>/<run>/meta.json     job, dag, run, verdict, savepoint, graph, time, alert sent?

`<root>` is `UPGRADE_GATE_REPORTS_DIR`, else `$AIRFLOW_HOME/gate-reports`: the workers write it
and the API server's view reads it, so in a multi-host deployment it must be a shared volume.
No Airflow import: the view, the tasks and the tests share this module.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def reports_root() -> Path:
    env = os.environ.get("UPGRADE_GATE_REPORTS_DIR")
    if env:
        return Path(env)
    home = os.environ.get("AIRFLOW_HOME") or str(Path.home() / "airflow")
    return Path(home) / "gate-reports"


def safe_name(name: str) -> str:
    """A job or run id as one path segment (run ids hold ':' and '+'); never '.' or '..'."""
    cleaned = _SAFE.sub("_", name).strip("._") or "_"
    return cleaned[:200]


@dataclass(frozen=True)
class ReportEntry:
    job: str
    run: str
    path: Path
    meta: dict[str, Any]

    @property
    def verdict(self) -> str:
        return str(self.meta.get("verdict", "?"))


class ReportStore:
    def __init__(self, root: Path | str | None = None) -> None:
        self.root = Path(root) if root else reports_root()

    def run_dir(self, job: str, run: str) -> Path:
        return self.root / safe_name(job) / safe_name(run)

    def publish(self, job: str, run: str, check: dict[str, Any], html: str, meta: dict[str, Any]) -> Path:
        """Write the three files into a temporary directory and swap it in: a reader never sees half."""
        final = self.run_dir(job, run)
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = final.parent / f".{final.name}.tmp-{uuid.uuid4().hex[:8]}"
        tmp.mkdir()
        meta = {**meta, "job": job, "run": run, "verdict": check.get("verdict"),
                "published_at": datetime.now(UTC).isoformat(timespec="seconds")}
        (tmp / "check.json").write_text(json.dumps(check, indent=2) + "\n")
        (tmp / "report.html").write_text(html)
        (tmp / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
        if final.exists():
            old = final.parent / f".{final.name}.old-{uuid.uuid4().hex[:8]}"
            os.replace(final, old)
            os.replace(tmp, final)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, final)
        return final

    def update_meta(self, job: str, run: str, **fields: Any) -> None:
        path = self.run_dir(job, run) / "meta.json"
        meta = json.loads(path.read_text())
        meta.update(fields)
        tmp = path.with_name(".meta.json.tmp")
        tmp.write_text(json.dumps(meta, indent=2) + "\n")
        tmp.replace(path)

    def entries(self) -> list[ReportEntry]:
        """Every published report, newest first."""
        out = []
        if not self.root.is_dir():
            return out
        for meta_path in self.root.glob("*/*/meta.json"):
            if meta_path.parent.name.startswith("."):
                continue
            try:
                meta = json.loads(meta_path.read_text())
            except (OSError, ValueError):
                continue
            out.append(ReportEntry(meta_path.parent.parent.name, meta_path.parent.name, meta_path.parent, meta))
        return sorted(out, key=lambda e: str(e.meta.get("published_at", "")), reverse=True)

    def get(self, job: str, run: str) -> ReportEntry | None:
        if safe_name(job) != job or safe_name(run) != run:
            return None
        path = self.root / job / run
        if not (path / "meta.json").is_file():
            return None
        return ReportEntry(job, run, path, json.loads((path / "meta.json").read_text()))

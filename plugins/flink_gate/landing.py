"""Which job a newly landed object belongs to, by the bucket layout the gate already reads (docs/guide.md).

The asset-driven gate (`dags/flink_gate_on_landing.py`) is told "s3://…/<key> landed"; this turns that into the
params of one gate run, the same params a person gives the manual gate (`flink_upgrade_gate`):

* a graph spec in the fleet catalogue (the Airflow Variable `upgrade_gate_catalogue`, one `<job>.json` per
  job, the folder `flink_fleet_scan` reads): that job, checked with the landed spec against its newest complete
  savepoint (`savepoint = latest`);
* a savepoint's `_metadata` under the savepoint root (the Variable `upgrade_gate_savepoint_root`,
  `<root>/<job>/<savepoint-…>/_metadata`): that job, checked from exactly that savepoint against its spec in
  the catalogue (`graph = catalogue`).

Several objects can land before the scheduler makes a run (Airflow folds the asset events it has queued into
one run), so the events are grouped per job: a job whose spec and savepoint both landed is checked once, with both.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from typing import Any

from flink_gate.gate import FROM_CATALOGUE, LATEST

log = logging.getLogger(__name__)  # the task's log (Airflow 3 routes standard logging into it)
SPEC_SUFFIXES = (".json", ".yaml", ".yml")
METADATA = "_metadata"
JOB_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")  # the gate form's `job_name` pattern


def _under(uri: str, root: str) -> str | None:
    root = root.strip().rstrip("/")
    return uri[len(root) + 1:] if root and uri.startswith(root + "/") else None


def gate_params(uri: str, catalogue: str, savepoint_root: str) -> dict[str, Any] | None:
    """The gate params of one landed object, or None if the layout names no job (logged by the caller)."""
    rel = _under(uri, catalogue)
    if rel is not None and "/" not in rel and rel.lower().endswith(SPEC_SUFFIXES):
        job = rel.rsplit(".", 1)[0]
        return {"job_name": job, "graph": uri, "savepoint": LATEST} if JOB_NAME.match(job) else None
    rel = _under(uri, savepoint_root)
    parts = rel.split("/") if rel is not None else []
    if len(parts) >= 3 and parts[-1] == METADATA and JOB_NAME.match(parts[0]):
        return {"job_name": parts[0], "graph": FROM_CATALOGUE, "savepoint": uri.removesuffix("/" + METADATA)}
    return None


def jobs_landed(uris: Iterable[str], catalogue: str, savepoint_root: str) -> tuple[list[dict[str, Any]], list[str]]:
    """One set of gate params per job (in job order), and the landed URIs that name no job."""
    jobs: dict[str, dict[str, Any]] = {}
    unknown: list[str] = []
    for uri in uris:
        params = gate_params(uri, catalogue, savepoint_root)
        if params is None:
            unknown.append(uri)
            continue
        merged = jobs.setdefault(params["job_name"], {**params, "landed": []})
        if params["graph"] != FROM_CATALOGUE:  # a landed spec wins over the catalogue default ...
            merged["graph"] = params["graph"]
        if params["savepoint"] != LATEST:  # ... and a landed savepoint over "latest"
            merged["savepoint"] = params["savepoint"]
        if uri not in merged["landed"]:
            merged["landed"].append(uri)
    return [jobs[j] for j in sorted(jobs)], unknown

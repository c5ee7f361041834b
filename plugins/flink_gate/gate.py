"""The gate's steps as plain functions over the core, so DAG tasks stay one-liners.

Each function is a pure function of its inputs (plus reads of storage), so a retried task gives
the same answer (docs/guarantees.md). The verdict itself is always the core's `upgrade_gate.gate.check`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hashing.operator_ids import compute_operator_ids
from hashing.readers import load_graph
from upgrade_gate.cli import report_html
from upgrade_gate.gate.check import check_upgrade

LATEST = "latest"


def savepoint_location(savepoint: str, job: str, savepoint_root: str) -> str:
    """The URI to read: the one given, or for "latest" the job's prefix under the savepoint root
    (the core then picks the newest complete savepoint below it)."""
    savepoint = (savepoint or "").strip()
    if savepoint and savepoint.lower() != LATEST:
        return savepoint
    if not savepoint_root:
        raise ValueError("savepoint is 'latest' but no savepoint root is configured "
                         "(param savepoint_root or the Airflow Variable upgrade_gate_savepoint_root)")
    return f"{savepoint_root.rstrip('/')}/{job}/"


def savepoint_summary(metadata: Any, source: str) -> dict[str, Any]:
    """What the fetch task hands on (small, JSON): which `_metadata`, and how much state it holds."""
    ops = metadata.operator_states
    return {
        "metadata_uri": source,
        "checkpoint_id": int(metadata.checkpoint_id),
        "version": int(metadata.version),
        "operators": len(ops),
        "state_bytes": int(sum(o.state_size for o in ops)),
    }


def run_check(metadata: Any, graph_path: str, *, hasher: str, matching: str, allow_non_restored_state: bool,
              flink_version: str | None) -> Any:
    """Simulate the restore with the core and return its `CheckResult` (the same call the CLI makes)."""
    return check_upgrade(metadata, load_graph(graph_path), hasher=hasher, matching=matching,
                         allow_non_restored_state=allow_non_restored_state, flink_version=flink_version or None)


def render_html(result: Any) -> str:
    """The core's HTML report, the same page `upgrade-gate check --format html` writes."""
    return report_html.render_html(result)


def graph_node_ids(graph_path: str, hasher: str, flink_version: str | None) -> dict[str, Any]:
    """Operator IDs of the new graph straight from the core (what the Spark job must agree with)."""
    return compute_operator_ids(load_graph(graph_path).graph, hasher, flink_version or None).to_json()


def write_json(path: Path, doc: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(doc, indent=2) + "\n")
    tmp.replace(path)

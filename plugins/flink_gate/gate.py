"""The gate's steps as plain functions over the core, so DAG tasks stay one-liners.

Each function is a pure function of its inputs (plus reads of storage), so a retried task gives
the same answer (design §9). The verdict itself is always the core's `upgrade_gate.gate.check`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hashing.readers import load_graph

HASHERS = ("v2", "v3")
MATCHING_MODES = ("fixed", "naive")
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
    """Simulate the restore with the core and return its `CheckResult`."""
    from upgrade_gate.gate.check import check_upgrade

    return check_upgrade(metadata, graph_path, hasher=hasher, matching=matching,
                         allow_non_restored_state=allow_non_restored_state, flink_version=flink_version or None)


def render_html(result: Any) -> str:
    """The core's HTML report (upgrade_gate.cli.report_html); a minimal page if the renderer is absent."""
    try:
        from upgrade_gate.cli import report_html
    except ImportError:
        report_html = None
    if report_html is not None:
        for name in ("render_html", "render", "render_report"):
            fn = getattr(report_html, name, None)
            if callable(fn):
                return str(fn(result))
    doc = result.to_json() if hasattr(result, "to_json") else result
    import html as _html

    return (f"<html><body><h1>Verdict: {_html.escape(str(doc.get('verdict')))}</h1>"
            f"<pre>{_html.escape(json.dumps(doc, indent=2))}</pre></body></html>")


def graph_node_ids(graph_path: str, hasher: str, flink_version: str | None) -> dict[str, Any]:
    """Operator IDs of the new graph straight from the core (what the Spark job must agree with)."""
    from hashing.operator_ids import compute_operator_ids

    loaded = load_graph(graph_path)
    graph = getattr(loaded, "graph", loaded)
    return compute_operator_ids(graph, hasher, flink_version or None).to_json()


def write_json(path: Path, doc: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(doc, indent=2) + "\n")
    tmp.replace(path)

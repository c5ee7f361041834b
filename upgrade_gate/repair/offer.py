"""What `check` says of a repair: would `upgrade-gate repair` make this blocked upgrade SAFE, and the command.

One definition for every caller of the gate (the CLI's table, JSON and HTML report, the Airflow gate's report
and alerts, the Spark fleet check), so a blocked upgrade says the same thing wherever it is read. Planned in
memory (`plan.plan_repair` without a scratch directory): only serialization proxies are read, nothing is written.
"""

from __future__ import annotations

import shlex
from typing import Any

from upgrade_gate.flink.metadata.model import CheckpointMetadata
from upgrade_gate.flink.state_meta.streams import Opener, local_opener
from upgrade_gate.gate.check import CheckResult
from upgrade_gate.gate.misrouting import GraphSide
from upgrade_gate.repair.plan import plan_repair
from upgrade_gate.vocabulary import Verdict

__all__ = ["repair_offer"]


def repair_offer(result: CheckResult, metadata: CheckpointMetadata, new: GraphSide, *, old: GraphSide | None = None,
                 hasher: str = "v2", matching: str = "fixed", flink_version: str | None = None,
                 opener: Opener = local_opener, savepoint: str | None = None, graph: str | None = None,
                 old_graph: str | None = None) -> dict[str, Any] | None:
    """The `repair` field of a check: None when SAFE or when no state needs another place; else whether a repair
    would make it SAFE (`repairable`), what it keeps, what it needs first, and the command with the given names."""
    if result.verdict is Verdict.SAFE or result.simulation is None:
        return None
    plan = plan_repair(metadata, new, old=old, hasher=hasher, matching=matching, flink_version=flink_version,
                       opener=opener, before=result, verdict_only=True)  # the offer reads the re-check's verdict
    if not plan.needed and not plan.unresolved:
        return None
    offer = plan.offer()
    parts = ["upgrade-gate", "repair", "--savepoint", savepoint or "SAVEPOINT", "--graph", graph or "GRAPH"]
    if old_graph:
        parts += ["--old-graph", old_graph]
    if flink_version:
        parts += ["--flink-version", str(flink_version)]
    parts += [*offer["options"], "--output", "NEW_SAVEPOINT_DIR"]
    return {**offer, "command": " ".join(shlex.quote(p) for p in parts)}

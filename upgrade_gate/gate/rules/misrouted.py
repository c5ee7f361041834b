"""The rule that traces every restored state to its writer (`upgrade_gate.gate.misrouting`): with the old job's
graph, or with the names a v5+ savepoint records. It reads the assignment the user would see (`ctx.shown`: the
hypothetical one when Flink refuses), so it comes after the restore rules."""

from __future__ import annotations

from collections.abc import Iterator

from hashing.operator_ids import compute_operator_ids
from upgrade_gate.gate import misrouting
from upgrade_gate.gate.findings import Finding, Note
from upgrade_gate.gate.rules import RuleContext

__all__ = ["traced_to_writers"]


def traced_to_writers(ctx: RuleContext) -> Iterator[Finding]:
    if ctx.shown.assignment is None:
        return
    old, options = ctx.inputs.old_graph, ctx.inputs.options
    old_ids = []
    if old is not None:
        old_version = options.flink_version.or_older_writer_of(ctx.metadata.version)
        old_ids = [compute_operator_ids(old.graph, h, old_version) for h in dict.fromkeys(("v2", options.hasher))]
    wrong, notes = misrouting.find(ctx.metadata, ctx.shown.assignment, ctx.side, old, old_ids)
    yield from wrong
    yield from (Note(n) for n in notes)

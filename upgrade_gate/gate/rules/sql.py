"""The rules on SQL state: a kept operator whose state row changed (Flink refuses it: `sql_state_rules`), and one
whose state Flink restores under another meaning (`sql_meaning`). Graphs without SQL operators pay nothing."""

from __future__ import annotations

from collections.abc import Iterator

from upgrade_gate.gate import sql_meaning
from upgrade_gate.gate.findings import Finding, Loss, Refused
from upgrade_gate.gate.rules import RuleContext
from upgrade_gate.gate.rules.state_schema import savepoint_schemas
from upgrade_gate.gate.sql_state_rules import sql_state_errors

__all__ = ["SQL_STATE", "sql_meaning_changed", "sql_state_refused"]

SQL_STATE = "SQL state"  # the `Refused.rule` of this module's refusals, which `sql_meaning_changed` skips


def sql_state_refused(ctx: RuleContext) -> Iterator[Finding]:
    """The exported graph's `sql_state` (carried by the `GraphSide`) against the state the simulation restores:
    each refused state blocks, with Flink's error and what is lost."""
    sim = ctx.sim
    if sim.failure is not None or sim.assignment is None or not ctx.side.sql_state:
        return
    errors = sql_state_errors(ctx.metadata, sim.assignment.operators.values(), ctx.side.sql_state,
                              schemas=lambda: savepoint_schemas(ctx.facts, ctx))
    sizes = {op.operator_id_hex: op.state_size for op in ctx.metadata.operator_states}
    for e in errors:
        yield Refused(e.message, SQL_STATE, e.operator_id)
        yield Loss(e.operator_id, e.operator, None, sizes.get(e.operator_id, 0),
                   f"the restore fails: the {'key' if e.state == 'key' else 'state ' + e.state} of this SQL operator "
                   f"was {e.old} and the new query makes it {e.new}; Flink cannot migrate RowData state ({e.message})",
                   (e.state,), orphaned=False)


def sql_meaning_changed(ctx: RuleContext) -> Iterator[Finding]:
    """SQL state restored under another meaning (group key, aggregate, window, top-N); not for a state whose
    restore Flink already refuses."""
    refused = {r.operator_id for r in ctx.found.refusals if r.rule == SQL_STATE and r.operator_id}
    o = ctx.inputs.options
    yield from sql_meaning.check(ctx.facts, ctx.sim, ctx.side, ctx.inputs.old_graph, o.hasher, o.flink_version,
                                 refused)

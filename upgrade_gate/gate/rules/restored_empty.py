"""The restored-but-empty hazard (issue #33): a stateful operator that gets nothing back in a restored job.

Flink tells every operator of a job restored from a snapshot that it was restored, whether or not the snapshot held
state for it: `StreamTaskStateInitializerImpl` builds its `StreamOperatorStateContext` from a
`PrioritizedOperatorSubtaskState` whose `isRestored()` is true as soon as the job restores from a checkpoint or
savepoint (it carries the restored checkpoint id), so `FunctionInitializationContext#isRestored()` and
`StateInitializationContext#isRestored()` say true to an operator that receives no state at all. Code that takes
restored state for granted when told it was restored (a source enumerator, a sink committer, a function that reads
what it restored) then finds none and may fail after the restore, which the restore itself does not show.

Measured on Flink 2.3.0 (tests/flink/test_restored_but_empty.py): a `CheckpointedFunction` whose uid changed
initialises with `isRestored() == true` and an empty list state.

The rule warns for every operator of the new job that receives no state although it is stateful: what the graph
alone shows (`upgrade_gate.gate.declared_state.stateful_reason`), or it is the counterpart of a savepoint state
no operator takes (`rekeyed`: the state was re-keyed away from it, found by the uid or name the savepoint recorded
as the remedies find counterparts, `upgrade_gate.gate.remedies.find_counterpart`). Only when the restore succeeds
(or would with allowNonRestoredState) and some operator does get state back (a job restored into nothing at all, or
`upgradeMode: stateless`, is not warned), and not for an operator Flink restores as finished (FLIP-147,
`TaskStateAssignment`'s fully finished operators): it never runs again.
"""

from __future__ import annotations

from collections.abc import Iterator

from hashing.graph import StreamGraph
from upgrade_gate.flink.metadata.model import OperatorState
from upgrade_gate.flink.simulation import Simulation
from upgrade_gate.gate.declared_state import stateful_reason
from upgrade_gate.gate.findings import Finding, Note
from upgrade_gate.gate.remedies import find_counterpart
from upgrade_gate.gate.rules import RuleContext
from upgrade_gate.gate.state_roles import restored_empty
from upgrade_gate.gate.upgrade_modes import RestorePath

__all__ = ["receivers", "rekeyed", "starts_empty"]


def receivers(sim: Simulation) -> frozenset[int]:
    """The new job's nodes that get state back from the snapshot (`Simulation.receivers`, worked out once)."""
    return sim.receivers


def rekeyed(lost: tuple[OperatorState, ...] | list[OperatorState], sim: Simulation,
            graph: StreamGraph) -> dict[str, int]:
    """Lost savepoint state (hex id) -> the node of the new job it was re-keyed away from: its unique counterpart
    among the nodes that get no state by the uid or name the savepoint recorded (the remedies' matching, so the
    warning and the pin name the same node). A counterpart by position only is no evidence that the node is
    stateful (the only free node of a job whose stateful map was removed is its stateless sink): not counted."""
    got = receivers(sim)
    free = [n for n in graph.nodes if n.id not in got]
    out: dict[str, int] = {}
    for op in lost:
        node, how, _ = find_counterpart(op, free, graph)
        if node is not None and how in ("uid", "name"):
            out[op.operator_id_hex] = node.id
            free.remove(node)
    return out


def starts_empty(ctx: RuleContext) -> Iterator[Finding]:
    """A warning per stateful operator of the new job that receives no state in a restore that restores some."""
    if ctx.inputs.options.restore_path is RestorePath.EMPTY:
        return
    got = receivers(ctx.shown)
    if not got:  # the restore fails either way, or restores nothing at all
        return
    moved = set(rekeyed(ctx.found.lost_states, ctx.shown, ctx.graph).values())
    operators = ctx.shown.assignment.operators if ctx.shown.assignment is not None else {}
    for node in ctx.graph.nodes:
        if node.id in got or (node.id not in moved and stateful_reason(ctx.side, node.id) is None):
            continue
        r = operators.get(node.id)
        if r is not None and r.finished_on_restore:  # restored as finished (FLIP-147): it never runs again
            continue
        yield Note(restored_empty(node.name))

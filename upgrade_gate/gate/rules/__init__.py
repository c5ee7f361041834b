"""The judgements of a check, as one chain of rules over one context.

A rule is `Callable[[RuleContext], Iterable[Finding]]`: it reads the context (the inputs, the simulated
restore, the findings of the rules before it) and yields typed findings (`upgrade_gate.gate.findings`). `run`
folds them, in chain order, into one `Findings`; `upgrade_gate.gate.verdict.decide` alone turns findings into a
verdict. As Flink's `StateAssignmentOperation` makes passes over one assignment and structlog's processors are the
only path, this chain is the only way a judgement reaches a check (docs/design.md, "The check pipeline").

Two chains, because one part of a check is asked again: `RESTORE_RULES` depend on the graph (ids, the
simulation) and run once per graph, for the new job and again for its remedied graph (`verdict_with_remedies`);
`CHECK_RULES` read what no remedy changes (configuration, a second savepoint, SQL state and meaning) and run once.
A new judgement is a function appended to one of them; one that needs its own input reads it from
`ctx.inputs` (a field of `CheckInputs`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from hashing.frozen import fast_init
from hashing.graph import StreamGraph
from hashing.operator_ids import OperatorIds
from upgrade_gate.flink.metadata.model import CheckpointMetadata
from upgrade_gate.flink.simulation import Simulation
from upgrade_gate.gate.findings import Finding, Findings, SavepointFacts
from upgrade_gate.gate.inputs import CheckInputs, GraphSide

__all__ = ["Rule", "RuleContext", "run"]


@fast_init
@dataclass(frozen=True)
class RuleContext:
    """One pass of the chain: `sim` is the restore as it would happen; `shown` what matches if Flink fails and
    the user adds --allowNonRestoredState (the same as `sim` otherwise), so losses and misrouting are still
    named. `found`: the findings of the rules before this one."""

    inputs: CheckInputs
    side: GraphSide
    sim: Simulation
    shown: Simulation
    ids: OperatorIds
    facts: SavepointFacts  # shared by every pass over this savepoint
    claimants: dict[bytes, list[int]] = field(default_factory=dict)  # every id -> nodes that list it
    found: Findings = field(default_factory=Findings)

    @property
    def metadata(self) -> CheckpointMetadata:
        return self.facts.metadata

    @property
    def graph(self) -> StreamGraph:
        return self.side.graph

    @property
    def present(self) -> frozenset[bytes]:
        """Savepoint operator ids that hold state."""
        return self.facts.present

    @classmethod
    def of(cls, inputs: CheckInputs, side: GraphSide, sim: Simulation, shown: Simulation, ids: OperatorIds,
           facts: SavepointFacts) -> RuleContext:
        claimants: dict[bytes, list[int]] = {}
        for pair in ids.pairs.values():
            for i in (pair.generated, *pair.alternatives):
                claimants.setdefault(i, []).append(pair.node_id)
        return cls(inputs, side, sim, shown, ids, facts, claimants)


Rule = Callable[[RuleContext], Iterable[Finding]]


def run(ctx: RuleContext, rules: Iterable[Rule]) -> Findings:
    """Every rule in order, each seeing the findings of those before it; returns them all (`ctx.found` first)."""
    found = ctx.found
    for rule in rules:
        # most rules find nothing in most jobs: the next rule then sees the same context, not a copy of it
        if ctx.found is not found:  # built directly: `dataclasses.replace` costs several times more
            ctx = RuleContext(ctx.inputs, ctx.side, ctx.sim, ctx.shown, ctx.ids, ctx.facts, ctx.claimants, found)
        found = found.with_(rule(ctx))
    return found

"""The rules over one simulated restore: what Flink refuses, drops, hands to nobody or to several operators.

Each rule looks at the simulation (Flink's rules, `upgrade_gate.flink`) and yields findings. They run only
when Flink's restore gets as far as the assignment, except `restore_refused` and `restore_fails_losses`, which
name what Flink refuses. `OPERATOR_RULES` run per operator of the new job (so findings read in job order).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from hashing.job_graph import OperatorIDPair
from upgrade_gate.flink.assignment import channel_state, finished_state
from upgrade_gate.flink.assignment.load_validation import has_state
from upgrade_gate.flink.assignment.task_state_assignment import OperatorRestore
from upgrade_gate.gate.findings import Finding, Loss, Misrouted, Note, Orphan, PositionClaim, Refused, keyed_bytes
from upgrade_gate.gate.rules import Rule, RuleContext
from upgrade_gate.gate.upgrade_modes import RestorePath

__all__ = ["EMPTY_START_RULES", "OPERATOR_RULES", "RULES", "mixed_max_parallelism"]

OperatorRule = Callable[[RuleContext, int, OperatorRestore], Iterable[Finding]]


_loss = Loss.of


# ---- rules: the snapshot as a whole ---------------------------------------------------------------------------
def restore_path_explained(ctx: RuleContext) -> Iterator[Finding]:
    """The Kubernetes operator's upgradeMode changes what Flink does with the snapshot (`gate.upgrade_modes`): said
    where it changes the outcome (a recovered checkpoint that fails, or an allowNonRestoredState that is ignored)."""
    o = ctx.inputs.options
    if o.restore_path is RestorePath.EMPTY or (
            o.restore_path is RestorePath.HA_METADATA and (ctx.sim.failure is not None or o.allow_non_restored_state)):
        yield Note(o.restore_path.explanation)


def started_from_empty_state(ctx: RuleContext) -> Iterator[Finding]:
    """`upgradeMode: stateless`: nothing is restored, so every state of the snapshot is lost."""
    for op in ctx.metadata.operator_states:
        if has_state(op):
            yield _loss(op, op.name, op.state_size, "not restored: upgradeMode stateless starts the new job from "
                                                    "empty state", orphaned=False)


def restore_refused(ctx: RuleContext) -> Iterator[Finding]:
    """Flink refuses the savepoint (`Checkpoints.loadAndValidateCheckpoint`,
    `StateAssignmentOperation.checkParallelismPreconditions`): its own error, the first of the check."""
    if ctx.sim.failure is not None:
        yield Refused(ctx.sim.failure.message, "restore")


def restore_fails_losses(ctx: RuleContext) -> Iterator[Finding]:
    """Flink refuses the savepoint: name the state it refuses for (`Checkpoints.loadAndValidateCheckpoint`)."""
    if ctx.sim.failure is None:
        return
    why = ("not in the new program: the restore fails (allowNonRestoredState does not apply to a checkpoint "
           "recovered through HA metadata)" if ctx.inputs.options.restore_path is RestorePath.HA_METADATA else
           "not in the new program: the restore fails (state would be dropped with --allowNonRestoredState)")
    for op in ctx.metadata.operator_states:
        if op.operator_id not in ctx.claimants and has_state(op):
            yield _loss(op, op.name, op.state_size, why)


def dropped_by_allow_non_restored(ctx: RuleContext) -> Iterator[Finding]:
    if ctx.sim.failure is None and ctx.sim.load is not None:
        for op in ctx.sim.load.dropped:
            yield _loss(op, op.name, op.state_size, "not in the new program: dropped by --allowNonRestoredState")


def taken_by_no_operator(ctx: RuleContext) -> Iterator[Finding]:
    if ctx.sim.failure is None and ctx.sim.assignment is not None:
        for op in ctx.sim.assignment.unconsumed.values():
            if has_state(op):
                yield _loss(op, op.name, op.state_size, "validated but taken by no operator")


def per_operator(ctx: RuleContext) -> Iterator[Finding]:
    """Every `OPERATOR_RULES` rule, operator by operator (so findings read in job order)."""
    if ctx.sim.failure is not None or ctx.sim.assignment is None:
        return
    for nid, r in ctx.sim.assignment.operators.items():
        for rule in OPERATOR_RULES:
            yield from rule(ctx, nid, r)


def _effective_id(pair: OperatorIDPair, present: frozenset[bytes]) -> bytes:
    """A node takes its first alternative the savepoint holds, else its generated id."""
    return next((a for a in pair.alternatives if a in present), pair.generated)


def claimed_by_several(ctx: RuleContext) -> Iterator[Finding]:
    """Two operators whose effective id is the same: Flink visits job vertices in HashSet order, so
    which one gets the state is not deterministic (two setUidHash pins that swap ids back are)."""
    if ctx.sim.failure is not None:
        return
    graph, ids = ctx.graph, ctx.ids
    orphaned = {s.operator_id for s in ctx.found.lost_states}
    lost_ids = ctx.found.lost_ids()
    present = ctx.present
    for sid, listed in ctx.claimants.items():
        if sid not in present or len(listed) < 2:  # a state nobody else can claim: most ids
            continue
        nodes = sorted({n for n in listed if _effective_id(ids.pairs[n], present) == sid})
        if len(nodes) < 2:
            continue
        names = ", ".join(f"'{graph.by_id[n].name}'" for n in nodes)
        yield Note(f"state {sid.hex()} is claimed by several operators ({names}); Flink visits job vertices in "
                   f"HashSet order, so which one gets it is not deterministic")
        op = next(o for o in ctx.metadata.operator_states if o.operator_id == sid)
        for n in nodes:  # a uid-less operator holding the id by position should stop claiming it
            if ids.pairs[n].generated == sid and graph.by_id[n].uid is None:
                yield PositionClaim(sid, n)
        if sid not in lost_ids:
            yield _loss(op, op.name, op.state_size, f"claimed by several operators ({names}); the one Flink picks "
                                                    f"may not be the owner")
        elif sid not in orphaned:
            yield Orphan(op)


# ---- rules: one operator of the new job -------------------------------------------------------------------------
def overwritten_by_next_pair(ctx: RuleContext, nid: int, r: OperatorRestore) -> Iterator[Finding]:
    """FLIP-411 read literally (`naive`): a later OperatorIDPair overwrites what an earlier one found."""
    if r.overwritten is not None:
        yield _loss(r.overwritten, ctx.graph.by_id[nid].name, r.overwritten.state_size,
                    "matched, then overwritten with an empty state by the next OperatorIDPair of the same operator "
                    "(FLIP-411: one pair per legacy hasher)", orphaned=False)


def coordinator_not_restored(ctx: RuleContext, nid: int, r: OperatorRestore) -> Iterator[Finding]:
    """`restoreStateToCoordinators` looks coordinator state up by the generated id only."""
    if r.old is None or r.coordinator_restored is not False or r.old.coordinator_state is None:
        return
    why = ("coordinator state is looked up by the generated id only; this state matched an alternative id"
           if r.matched_by == "alternative" else "the new operator has no source coordinator")
    yield _loss(r.old, ctx.graph.by_id[nid].name, r.old.coordinator_state.state_size, why, ["coordinator"],
                orphaned=False)


def keyed_state_without_keyed_input(ctx: RuleContext, nid: int, r: OperatorRestore) -> Iterator[Finding]:
    """Keyed state restored into an operator with no keyed input: it took the id by position and never
    reads the state. Misrouting, not mere loss."""
    if r.old is None or not keyed_bytes(r.old) or ctx.side.keyed(nid):
        return
    node = ctx.graph.by_id[nid]
    yield _loss(r.old, node.name, keyed_bytes(r.old),
                f"keyed state restored into '{node.name}', which has no keyed input: the operator never reads it (it "
                f"has this id by position)", ["keyed"])
    yield PositionClaim(r.old.operator_id, nid)
    yield Misrouted(
        r.old, nid, None, "none", {"name": r.old.name, "uid": r.old.uid, "keyed_state": True}, "keyed-input",
        [f"the savepoint holds keyed state under {r.old.operator_id_hex}; '{node.name}' has that id by position "
         f"but no keyed input, so it cannot be the operator that wrote it"])


def finished_and_in_flight(ctx: RuleContext) -> Iterator[Finding]:
    """What happens to operators that had finished (FLIP-147) and to an unaligned checkpoint's in-flight
    records, in plain words (`finished_state.explain`, `channel_state.explain`)."""
    a = ctx.sim.assignment
    if a is None:
        return
    for text in (*finished_state.explain(a.operators, ctx.graph),
                 *channel_state.explain(a.operators, a.vertices, ctx.graph)):
        yield Note(text)


def mixed_max_parallelism(ctx: RuleContext) -> Iterator[Finding]:
    for v in ctx.sim.vertices:
        if v.mixed_max_parallelism:
            yield Note(f"job vertex '{v.name}' chains operators whose own max parallelism differs from the vertex's "
                       f"({', '.join(v.mixed_max_parallelism)}): their state is snapshotted with the vertex's max "
                       f"parallelism (FLINK-40113 kind); unchaining them later changes it")


OPERATOR_RULES: tuple[OperatorRule, ...] = (overwritten_by_next_pair, coordinator_not_restored,
                                            keyed_state_without_keyed_input)
EMPTY_START_RULES: tuple[Rule, ...] = (restore_path_explained, started_from_empty_state)
RULES: tuple[Rule, ...] = (restore_path_explained, restore_refused, restore_fails_losses, dropped_by_allow_non_restored,
                           taken_by_no_operator, per_operator, claimed_by_several, finished_and_in_flight)

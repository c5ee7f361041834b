"""What the gate finds in one simulated restore, as a chain of small rules.

Each rule looks at the simulation (Flink's rules, `upgrade_gate.flink`) and yields typed, frozen
findings; `collect` folds them, in rule order, into one `Findings`. Like Flink's one checker per
concern (`StateAssignmentOperation`'s checks) and structlog's processor chain, a new judgement is
a new function appended to `SNAPSHOT_RULES` or `OPERATOR_RULES`, not a branch in a long one.
Findings become JSON only at the edge (`Loss.to_json`, `CheckResult.to_json`).

Rules run only when Flink's restore gets as far as the assignment, except `restore_fails_losses`,
which names what Flink refuses. `misrouting.find` (the old-graph and savepoint-name evidence) is
the last link: it needs the assignment the user would see, which may be the hypothetical one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from hashing.graph import StreamGraph
from hashing.job_graph import OperatorIDPair
from hashing.operator_ids import OperatorIds
from upgrade_gate.flink.assignment import channel_state, finished_state
from upgrade_gate.flink.assignment.keyed_state import has_keyed_input
from upgrade_gate.flink.assignment.load_validation import has_state
from upgrade_gate.flink.assignment.task_state_assignment import OperatorRestore
from upgrade_gate.flink.metadata.model import CheckpointMetadata, OperatorState
from upgrade_gate.flink.simulation import Simulation
from upgrade_gate.gate import misrouting

__all__ = ["OPERATOR_RULES", "SNAPSHOT_RULES", "Findings", "Loss", "Note", "Orphan", "PositionClaim", "RuleContext",
           "SavepointFacts", "collect", "merge_misrouting", "state_names"]


def state_names(op: OperatorState) -> list[str]:
    """The names a person knows a snapshot's state by: declared operator-state names, plus the kinds."""
    names: set[str] = set()
    for s in op.subtask_states.values():
        if s.managed_keyed_state:
            names.add("keyed")
        if s.raw_keyed_state:
            names.add("raw keyed")
        for h in s.managed_operator_state:
            names.update(h.state_name_to_partition_offsets)
        for h in s.raw_operator_state:
            names.update(h.state_name_to_partition_offsets)
        if s.input_channel_state or s.result_subpartition_state:
            names.add("channel state")
    if op.coordinator_state is not None:
        names.add("coordinator")
    return sorted(names)


def keyed_bytes(op: OperatorState) -> int:
    """Bytes of keyed state (managed and raw) over all subtasks; a loop: asked of every restored operator."""
    total = 0
    for s in op.subtask_states.values():
        for h in s.managed_keyed_state:
            total += h.state_size
        for h in s.raw_keyed_state:
            total += h.state_size
    return total


@dataclass(frozen=True, slots=True)
class Loss:
    """State the new job will not have intact. `orphaned`: the whole snapshot of one operator is left
    without an owner, so a pin (`uid`/`setUidHash`) may route it back; partial losses (coordinator, an
    overwritten pair) are named but not routed. `corrupted`: the state is restored, but the new Flink
    reads its bytes wrong (`upgrade_gate.gate.state_schema_rules`)."""

    state: OperatorState
    name: str | None
    nbytes: int
    reason: str
    names: tuple[str, ...]
    orphaned: bool = True
    corrupted: bool = False

    def to_json(self) -> dict[str, Any]:
        doc = {"operator_id": self.state.operator_id_hex, "name": self.name, "uid": self.state.uid,
               "bytes": self.nbytes, "state_names": list(self.names), "reason": self.reason}
        return {**doc, "corrupted": True} if self.corrupted else doc


@dataclass(frozen=True, slots=True)
class Note:
    """A warning: something the evidence cannot settle, for a person to look at."""

    text: str


@dataclass(frozen=True, slots=True)
class Orphan:
    """A snapshot left without an owner that an earlier, partial loss already named."""

    state: OperatorState


@dataclass(frozen=True, slots=True)
class PositionClaim:
    """A uid-less operator holds a savepoint id by position only and should stop claiming it (a remedy
    gives it a uid). The first claim on a state wins."""

    state_id: bytes
    node_id: int


Finding = Loss | Note | Orphan | PositionClaim | misrouting.Misrouted


@dataclass(frozen=True)
class Findings:
    losses: tuple[Loss, ...] = ()
    warnings: tuple[str, ...] = ()
    claims: tuple[PositionClaim, ...] = ()
    wrong_receiver: tuple[misrouting.Misrouted, ...] = ()
    lost_states: tuple[OperatorState, ...] = ()  # orphaned snapshots, once each, in the order found

    @property
    def position_claims(self) -> dict[bytes, int]:
        out: dict[bytes, int] = {}
        for c in self.claims:
            out.setdefault(c.state_id, c.node_id)
        return out

    def lost_ids(self) -> set[bytes]:
        return {loss.state.operator_id for loss in self.losses}

    def with_(self, found: Iterable[Finding]) -> Findings:
        losses, notes, claims = list(self.losses), list(self.warnings), list(self.claims)
        wrong, orphans = list(self.wrong_receiver), list(self.lost_states)
        for f in found:
            if isinstance(f, Loss | Orphan) and (isinstance(f, Orphan) or f.orphaned) and f.state not in orphans:
                orphans.append(f.state)
            if isinstance(f, Loss):
                losses.append(f)
            elif isinstance(f, Orphan):
                pass
            elif isinstance(f, Note):
                notes.append(f.text)
            elif isinstance(f, PositionClaim):
                claims.append(f)
            else:
                wrong.append(f)
        return Findings(tuple(losses), tuple(notes), tuple(claims), tuple(wrong), tuple(orphans))


class SavepointFacts:
    """What the rules ask of one parsed savepoint, worked out once per `check_upgrade` call.

    `check_upgrade` runs the rule chain once per graph (the new one, then the remedied one for
    `verdict_with_remedies`) against the same savepoint, and every pass asks which operators hold state
    (`present`); a fleet check asks it for thousands of jobs. `state_schemas` is the state-schema rules'
    slot for the proxies they read (`state_schema_rules.savepoint_schemas`: I/O, so read only when a rule
    needs them, and once for all passes and rules)."""

    __slots__ = ("metadata", "present", "state_schemas")

    def __init__(self, metadata: CheckpointMetadata) -> None:
        self.metadata = metadata
        # savepoint operator ids that hold state
        self.present = frozenset(op.operator_id for op in metadata.operator_states if has_state(op))
        self.state_schemas: tuple[Any, ...] | None = None


@dataclass(frozen=True)
class RuleContext:
    metadata: CheckpointMetadata
    graph: StreamGraph
    sim: Simulation
    ids: OperatorIds
    facts: SavepointFacts  # shared by every pass over this savepoint
    claimants: dict[bytes, list[int]] = field(default_factory=dict)  # every id -> nodes that list it

    @property
    def present(self) -> frozenset[bytes]:
        """Savepoint operator ids that hold state."""
        return self.facts.present

    @classmethod
    def of(cls, metadata: CheckpointMetadata, graph: StreamGraph, sim: Simulation, ids: OperatorIds,
           facts: SavepointFacts | None = None) -> RuleContext:
        """The context of one pass; `facts` (of `metadata`) carries what an earlier pass already worked out."""
        claimants: dict[bytes, list[int]] = {}
        for pair in ids.pairs.values():
            for i in (pair.generated, *pair.alternatives):
                claimants.setdefault(i, []).append(pair.node_id)
        return cls(metadata, graph, sim, ids, facts if facts is not None else SavepointFacts(metadata), claimants)


SnapshotRule = Callable[[RuleContext, Findings], Iterable[Finding]]
OperatorRule = Callable[[RuleContext, int, OperatorRestore], Iterable[Finding]]


def _loss(op: OperatorState, name: str | None, nbytes: int, reason: str, names: list[str] | None = None, *,
          orphaned: bool = True) -> Loss:
    return Loss(op, name, nbytes, reason, tuple(names if names is not None else state_names(op)), orphaned)


# ---- rules: the snapshot as a whole ---------------------------------------------------------------------------
def restore_fails_losses(ctx: RuleContext, _: Findings) -> Iterator[Finding]:
    """Flink refuses the savepoint: name the state it refuses for (`Checkpoints.loadAndValidateCheckpoint`)."""
    if ctx.sim.failure is None:
        return
    for op in ctx.metadata.operator_states:
        if op.operator_id not in ctx.claimants and has_state(op):
            yield _loss(op, op.name, op.state_size, "not in the new program: the restore fails (state would be "
                                                    "dropped with --allowNonRestoredState)")


def dropped_by_allow_non_restored(ctx: RuleContext, _: Findings) -> Iterator[Finding]:
    if ctx.sim.failure is None and ctx.sim.load is not None:
        for op in ctx.sim.load.dropped:
            yield _loss(op, op.name, op.state_size, "not in the new program: dropped by --allowNonRestoredState")


def taken_by_no_operator(ctx: RuleContext, _: Findings) -> Iterator[Finding]:
    if ctx.sim.failure is None and ctx.sim.assignment is not None:
        for op in ctx.sim.assignment.unconsumed.values():
            if has_state(op):
                yield _loss(op, op.name, op.state_size, "validated but taken by no operator")


def per_operator(ctx: RuleContext, _: Findings) -> Iterator[Finding]:
    """Every `OPERATOR_RULES` rule, operator by operator (so findings read in job order)."""
    if ctx.sim.failure is not None or ctx.sim.assignment is None:
        return
    for nid, r in ctx.sim.assignment.operators.items():
        for rule in OPERATOR_RULES:
            yield from rule(ctx, nid, r)


def _effective_id(pair: OperatorIDPair, present: frozenset[bytes]) -> bytes:
    """A node takes its first alternative the savepoint holds, else its generated id."""
    return next((a for a in pair.alternatives if a in present), pair.generated)


def claimed_by_several(ctx: RuleContext, so_far: Findings) -> Iterator[Finding]:
    """Two operators whose effective id is the same: Flink visits job vertices in HashSet order, so
    which one gets the state is not deterministic (two setUidHash pins that swap ids back are)."""
    if ctx.sim.failure is not None:
        return
    graph, ids = ctx.graph, ctx.ids
    orphaned = {s.operator_id for s in so_far.lost_states}
    lost_ids = so_far.lost_ids()
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
    if r.old is None or not keyed_bytes(r.old) or has_keyed_input(ctx.graph, nid):
        return
    node = ctx.graph.by_id[nid]
    yield _loss(r.old, node.name, keyed_bytes(r.old),
                f"keyed state restored into '{node.name}', which has no keyed input: the operator never reads it (it "
                f"has this id by position)", ["keyed"])
    yield PositionClaim(r.old.operator_id, nid)
    yield misrouting.Misrouted(
        r.old, nid, None, "none", {"name": r.old.name, "uid": r.old.uid, "keyed_state": True}, "keyed-input",
        [f"the savepoint holds keyed state under {r.old.operator_id_hex}; '{node.name}' has that id by position "
         f"but no keyed input, so it cannot be the operator that wrote it"])


def finished_and_in_flight(ctx: RuleContext, _: Findings) -> Iterator[Finding]:
    """What happens to operators that had finished (FLIP-147) and to an unaligned checkpoint's in-flight
    records, in plain words (`finished_state.explain`, `channel_state.explain`)."""
    a = ctx.sim.assignment
    if a is None:
        return
    for text in (*finished_state.explain(a.operators, ctx.graph),
                 *channel_state.explain(a.operators, a.vertices, ctx.graph)):
        yield Note(text)


def mixed_max_parallelism(ctx: RuleContext, _: Findings) -> Iterator[Finding]:
    for v in ctx.sim.vertices:
        if v.mixed_max_parallelism:
            yield Note(f"job vertex '{v.name}' chains operators whose own max parallelism differs from the vertex's "
                       f"({', '.join(v.mixed_max_parallelism)}): their state is snapshotted with the vertex's max "
                       f"parallelism (FLINK-40113 kind); unchaining them later changes it")


OPERATOR_RULES: tuple[OperatorRule, ...] = (overwritten_by_next_pair, coordinator_not_restored,
                                            keyed_state_without_keyed_input)
SNAPSHOT_RULES: tuple[SnapshotRule, ...] = (restore_fails_losses, dropped_by_allow_non_restored,
                                            taken_by_no_operator, per_operator, claimed_by_several,
                                            finished_and_in_flight)


def collect(ctx: RuleContext, rules: Iterable[SnapshotRule] = SNAPSHOT_RULES) -> Findings:
    found = Findings()
    for rule in rules:
        found = found.with_(rule(ctx, found))
    return found


def merge_misrouting(found: Findings, wrong: list[misrouting.Misrouted], notes: list[str]) -> Findings:
    """Add the old-graph / savepoint-name evidence. A state the keyed-input rule also caught stays one
    entry carrying all the evidence and the better-informed writer and counterpart."""
    by_id = {m.state.operator_id: i for i, m in enumerate(found.wrong_receiver)}
    merged = list(found.wrong_receiver)
    extra: list[misrouting.Misrouted] = []
    for m in wrong:
        i = by_id.get(m.state.operator_id)
        if i is None:
            extra.append(m)
            continue
        k = merged[i]
        merged[i] = misrouting.Misrouted(k.state, k.receiver, m.counterpart, m.counterpart_by, m.writer,
                                         m.detected_by, [*m.evidence, *k.evidence])
    return Findings(found.losses, (*found.warnings, *notes), found.claims, (*merged, *extra), found.lost_states)

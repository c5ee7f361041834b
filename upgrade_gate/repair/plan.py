"""Which savepoint state goes to which operator of the new job, and why: the repair plan.

The evidence is what the gate already uses to propose `uid`/`setUidHash` pins (`upgrade_gate.gate.remedies`,
`upgrade_gate.gate.misrouting`), read the other way round: instead of pinning the new operator to the old ID
(a code change and a redeploy), the savepoint's operator takes the new operator's generated ID. In order of
strength:

1. `--map OLD=NEW`: the user's word.
2. The old job graph (`--old-graph`): each savepoint operator is traced to the old node that wrote it, and old
   nodes are paired with new ones by uid, a name unique on both sides, or a unique signature
   (`misrouting.counterparts`).
3. Misrouted state: the writer's counterpart the misrouting check found.
4. What the savepoint records (uid and name, metadata v5+) or, failing that, position: the only operator of
   the new job that starts empty and can hold this kind of state (keyed state needs a keyed input,
   coordinator state a FLIP-27 source; `remedies.find_counterpart`).

It refuses to guess: a state with several candidates, or whose counterpart declares other state (in the
spec's `state`, `key_type`, `kind` or `factory_class`), is `Unresolved` and needs `--map`. Keyed state is
never moved into an operator without keyed input, nor coordinator state into one that is not a FLIP-27
source: Flink would restore it and the operator would never read it (misrouting).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hashing.errors import InputError
from hashing.graph import StreamGraph, StreamNode
from hashing.operator_ids import OperatorIds, compute_operator_ids
from hashing.versions import FlinkVersion
from upgrade_gate.flink.assignment.keyed_state import has_keyed_input, has_keyed_state
from upgrade_gate.flink.assignment.load_validation import has_state
from upgrade_gate.flink.metadata.model import CheckpointMetadata, OperatorState
from upgrade_gate.flink.state_meta.streams import Opener, local_opener
from upgrade_gate.gate import misrouting, remedies, sql_explain, sql_meaning
from upgrade_gate.gate.check import CheckResult, check, restore_pass, savepoint_pointer
from upgrade_gate.gate.findings import SavepointFacts, keyed_bytes, state_names
from upgrade_gate.gate.inputs import CheckInputs, CheckOptions, GraphSide
from upgrade_gate.gate.rules.state_schema import renamed_schemas
from upgrade_gate.repair.drop_state import drop_named_states, state_names_of
from upgrade_gate.repair.max_parallelism import Rescaled, UnsupportedKey, cannot_rescale, rescale
from upgrade_gate.repair.rewrite import apply_plan
from upgrade_gate.storage.check_inputs import check_upgrade, read_check_inputs
from upgrade_gate.vocabulary import Verdict

__all__ = ["DROPPABLE_PARTS", "Drop", "Move", "RepairPlan", "Unresolved", "plan_repair"]

_HEX_ID = re.compile(r"[0-9a-fA-F]{32}")
# what `--drop OPERATOR/PART` can take without rewriting state files
DROPPABLE_PARTS = ("coordinator", "keyed")
# descriptive spec fields that must agree between a writer and its counterpart (when both graphs say)
_DECLARED = ("state", "key_type", "kind", "factory_class")


@dataclass(frozen=True, slots=True)
class Move:
    """One savepoint operator's state, moved to the ID of its counterpart in the new job."""

    state: OperatorState
    node_id: int
    node_name: str
    node_uid: str | None
    new_id: bytes
    how: str  # explicit | old graph: uid|name|signature | misrouting: ... | uid | name | position
    evidence: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"operator_id": self.state.operator_id_hex, "name": self.state.name, "uid": self.state.uid,
                "new_operator_id": self.new_id.hex(), "node_id": self.node_id, "node_name": self.node_name,
                "node_uid": self.node_uid, "bytes": self.state.state_size, "state_names": state_names(self.state),
                "matched_by": self.how, "evidence": list(self.evidence)}


@dataclass(frozen=True, slots=True)
class Drop:
    """State the user gives up by name (`--drop`): the whole operator, or its coordinator or keyed state."""

    state: OperatorState
    part: str | None  # None = the whole operator; one of DROPPABLE_PARTS; else the name of one state
    nbytes: int

    def to_json(self) -> dict[str, Any]:
        return {"operator_id": self.state.operator_id_hex, "name": self.state.name, "part": self.part or "operator",
                "bytes": self.nbytes}


@dataclass(frozen=True, slots=True)
class Unresolved:
    """A state the plan cannot place without the user: why, and the operators it could go to."""

    state: OperatorState
    name: str | None
    reason: str
    candidates: tuple[tuple[int, str], ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"operator_id": self.state.operator_id_hex, "name": self.name, "bytes": self.state.state_size,
                "state_names": state_names(self.state), "reason": self.reason,
                "candidates": [{"node_id": n, "name": name} for n, name in self.candidates]}


@dataclass(frozen=True)
class RepairPlan:
    before: CheckResult
    moves: tuple[Move, ...]
    drops: tuple[Drop, ...]
    unresolved: tuple[Unresolved, ...]
    repaired: CheckpointMetadata | None  # the metadata with the plan applied (None: nothing to change)
    after: CheckResult | None  # the gate's verdict on `repaired`, checked in memory before anything is written
    warnings: tuple[str, ...] = ()
    collisions: tuple[str, ...] = field(default=())
    rescaled: Rescaled | None = None  # --max-parallelism: the keyed state rewritten into new key groups
    max_parallelism: int | None = None
    refused: tuple[str, ...] = ()  # why the max-parallelism rewrite cannot be done
    # options the repair needs and the user did not give (`--max-parallelism N` when the new job's changed)
    suggested: tuple[str, ...] = ()

    @property
    def needed(self) -> bool:
        return bool(self.moves or self.drops or self.max_parallelism is not None or self.suggested)

    @property
    def repairable(self) -> bool:
        """Everything placed, and the repaired savepoint restores into the new job with nothing lost."""
        return (self.needed and not self.unresolved and not self.refused and not self.suggested
                and self.after is not None and self.after.verdict is Verdict.SAFE)

    @property
    def repairable_with_suggested(self) -> bool:
        """Repairable once the suggested options are given (`check` offers the command with them)."""
        return (bool(self.suggested) and not self.unresolved and not self.refused and self.after is not None
                and self.after.verdict is Verdict.SAFE)

    @property
    def kept_bytes(self) -> int:
        return sum(m.state.state_size for m in self.moves)

    @property
    def dropped_bytes(self) -> int:
        return sum(d.nbytes for d in self.drops)

    def offer(self) -> dict[str, Any]:
        """What `check` says of a repair (its `repair` field): whether one would make the upgrade SAFE."""
        return {"repairable": self.repairable or self.repairable_with_suggested,
                "verdict_after": self.after.verdict if self.after else None,
                "keeps_bytes": self.kept_bytes or self.before_bytes, "moves": len(self.moves),
                "unresolved": len(self.unresolved), "options": list(self.suggested),
                "needs": [*(u.reason for u in self.unresolved), *self.refused][:3]}

    @property
    def before_bytes(self) -> int:
        """All state of the savepoint: what a max-parallelism rewrite keeps."""
        return sum(op.state_size for op in (self.repaired.operator_states if self.repaired else ()))

    def to_json(self) -> dict[str, Any]:
        return {"verdict_before": self.before.verdict,
                "verdict_after": self.after.verdict if self.after is not None else None,
                "repairable": self.repairable, "moves": [m.to_json() for m in self.moves],
                "drops": [d.to_json() for d in self.drops], "unresolved": [u.to_json() for u in self.unresolved],
                "kept_bytes": self.kept_bytes, "dropped_bytes": self.dropped_bytes,
                "max_parallelism": None if self.max_parallelism is None else {
                    "to": self.max_parallelism, "refused": list(self.refused),
                    "operators": [dataclasses.asdict(o) for o in self.rescaled.operators] if self.rescaled else []},
                "warnings": [*self.warnings, *self.collisions],
                "after": self.after.to_json() if self.after is not None and not self.repairable else None}


# ---- naming operators on the command line ------------------------------------------------------------------
def _savepoint_op(metadata: CheckpointMetadata, spec: str, old: GraphSide | None,
                  old_ids: OperatorIds | None, flag: str) -> OperatorState:
    """A savepoint operator by its ID (32 hex), or by uid / name (recorded in v5+, else via --old-graph)."""
    ops = metadata.operator_states
    if _HEX_ID.fullmatch(spec):
        found = [o for o in ops if o.operator_id_hex == spec.lower()]
        if found:
            return found[0]
        raise InputError(f"{flag} {spec}: the savepoint holds no operator with this ID")
    for attr in ("uid", "name"):
        found = [o for o in ops if getattr(o, attr) == spec]
        if len(found) == 1:
            return found[0]
    if old is not None and old_ids is not None:
        present = {o.operator_id: o for o in ops}
        for attr in ("uid", "name"):
            nodes = [n for n in old.graph.nodes if getattr(n, attr) == spec]
            if len(nodes) == 1:
                pair = old_ids.pairs[nodes[0].id]
                for i in (*pair.alternatives, pair.generated):
                    if i in present:
                        return present[i]
                raise InputError(f"{flag} {spec}: old operator '{nodes[0].name}' wrote no state to this savepoint")
    hint = "" if old is not None else " (a savepoint of Flink 1.x records no names: give --old-graph or the ID)"
    raise InputError(f"{flag} {spec}: no savepoint operator with this ID, uid or name{hint}")


def _new_node(graph: StreamGraph, ids: OperatorIds, spec: str, flag: str) -> StreamNode:
    """A new-job node by its operator ID (32 hex), stream-node id, uid or unique name."""
    if _HEX_ID.fullmatch(spec):
        want = bytes.fromhex(spec)
        found = [graph.by_id[p.node_id] for p in ids.pairs.values() if want in (p.generated, *p.alternatives)]
    elif spec.isdigit() and int(spec) in graph.by_id:
        found = [graph.by_id[int(spec)]]
    else:
        found = [n for n in graph.nodes if n.uid == spec] or [n for n in graph.nodes if n.name == spec]
    if len(found) == 1:
        return found[0]
    if not found:
        raise InputError(f"{flag} {spec}: the new job has no operator with this ID, node id, uid or name")
    raise InputError(f"{flag} {spec}: several operators of the new job are named so "
                     f"({', '.join(str(n.id) for n in found)}); give its node id or operator ID")


def _parse_map(value: str) -> tuple[str, str]:
    old, sep, new = value.partition("=")
    if not sep or not old or not new:
        raise InputError(f"--map {value!r}: expected OLD=NEW (a savepoint operator's ID, uid or name = a new "
                         f"operator's ID, node id, uid or name)")
    return old.strip(), new.strip()


def _parse_drop(value: str) -> tuple[str, str | None]:
    """OPERATOR, OPERATOR/coordinator, OPERATOR/keyed, or OPERATOR/STATE (one named state)."""
    if _HEX_ID.fullmatch(value):
        return value, None
    op, sep, part = value.rpartition("/")
    if not sep:
        return value, None
    if not op or not part:
        raise InputError(f"--drop {value!r}: expected OPERATOR or OPERATOR/STATE (or OPERATOR/coordinator, "
                         f"OPERATOR/keyed)")
    return op, part


# ---- evidence ------------------------------------------------------------------------------------------------
def _declared_state_conflict(op: OperatorState, side: GraphSide, nid: int) -> str | None:
    """The new node declares operator-state names (spec `state`) and the savepoint's are not among them."""
    declared = misrouting.profile(side, nid)["state"]
    if declared is None:
        return None
    names = {d.split(":", 1)[0] for d in declared}
    held = [s for s in state_names(op) if s not in ("keyed", "raw keyed", "coordinator", "channel state")]
    missing = [s for s in held if s not in names]
    if missing:
        return f"'{side.graph.by_id[nid].name}' declares state {sorted(names)}, not {missing}"
    return None


def _fit_problem(op: OperatorState, node: StreamNode, graph: StreamGraph) -> str | None:
    """Why `node` cannot hold `op`'s state, or None (`remedies.fits`, in words)."""
    if remedies.fits(op, node, graph):
        return None
    if has_keyed_state(op) and not has_keyed_input(graph, node.id):
        return f"'{node.name}' has no keyed input: it would never read this keyed state (misrouting)"
    return f"'{node.name}' is not a FLIP-27 source: it would never read this coordinator state"


def _old_ids(old: GraphSide, metadata: CheckpointMetadata, hasher: str,
             version: FlinkVersion) -> list[OperatorIds]:
    """The old graph's IDs as `check.evaluate` traces writers: under the release that wrote the savepoint."""
    old_version = version.or_older_writer_of(metadata.version)
    return [compute_operator_ids(old.graph, h, old_version) for h in dict.fromkeys(("v2", hasher))]


class _Placer:
    """Finds each homeless state its counterpart among the new job's free operators, evidence first."""

    def __init__(self, new: GraphSide, ids: OperatorIds, free: dict[int, StreamNode],
                 old: GraphSide | None, writers: dict[bytes, int],
                 pairs: dict[int, tuple[int, str]]) -> None:
        self.new, self.graph, self.ids, self.free = new, new.graph, ids, free
        self.old, self.writers, self.pairs = old, writers, pairs
        # SQL operators are paired as the SQL explanations pair them (planner counters never count)
        self.sql_pairs = sql_explain.pair(old, new) if old is not None and old.sql_state and new.sql_state else {}

    def _sql(self, op: OperatorState, w: int, nid: int) -> Move | Unresolved:
        old, new = self.old, self.new
        assert old is not None
        before = str((old.sql_state or {}).get(str(w), {}).get("description") or old.graph.by_id[w].name)
        after = str((new.sql_state or {}).get(str(nid), {}).get("description") or new.graph.by_id[nid].name)
        node = self.graph.by_id[nid]
        if nid not in self.free:
            return Unresolved(op, old.graph.by_id[w].name,
                              f"its counterpart '{node.name}' already restores other state")
        changed = sql_meaning.compare(before, after)
        if changed:
            what = "; ".join(f"{aspect}: {a} -> {b}" for aspect, a, b in changed)
            return Unresolved(op, old.graph.by_id[w].name, f"the SQL operator's counterpart '{node.name}' means "
                                                           f"something else by its state ({what}): moving it would "
                                                           f"continue from values of the old meaning",
                              ((node.id, node.name),))
        del self.free[nid]
        where = ", ".join(sql_explain.statements(new, nid)) or "its sink"
        return Move(op, nid, node.name, node.uid, self.ids.pairs[nid].generated, "old graph: SQL position",
                    (f"written by old '{sql_meaning.strip_counters(before)}' (node {w}); the same kind of operator "
                     f"at the same place before {where} in the new job is '{node.name}' (node {nid})",))

    def place(self, op: OperatorState, misrouted: misrouting.Misrouted | None) -> Move | Unresolved:
        graph = self.graph
        if self.old is not None and op.operator_id in self.writers:
            w = self.writers[op.operator_id]
            wp = misrouting.profile(self.old, w)
            if w in self.sql_pairs:  # a planner's operator: paired by kind and position before the sink
                return self._sql(op, w, self.sql_pairs[w])
            cp = self.pairs.get(w)
            if cp is None:
                return Unresolved(op, wp["name"], f"old '{wp['name']}' (node {w}) has no counterpart in the new job: "
                                                  f"drop its state (--drop) or name its new owner (--map)")
            if cp[0] not in self.free:
                return Unresolved(op, wp["name"], f"its counterpart '{graph.by_id[cp[0]].name}' already restores "
                                                  f"other state")
            node = graph.by_id[cp[0]]
            declared = [d for d in misrouting.differences(wp, misrouting.profile(self.new, node.id))
                        if d.split(":", 1)[0] in _DECLARED]
            if declared:
                return Unresolved(op, wp["name"], f"old '{wp['name']}' and its counterpart '{node.name}' declare "
                                                  f"different state ({'; '.join(declared)}): map it with --map if "
                                                  f"this is intended", ((node.id, node.name),))
            how = f"old graph: {cp[1]}"
            evidence = (f"written by old '{wp['name']}' (node {w}); its counterpart in the new job is '{node.name}' "
                        f"(node {node.id}), paired by {cp[1]}",)
        elif misrouted is not None and misrouted.counterpart is not None and misrouted.counterpart in self.free:
            node = graph.by_id[misrouted.counterpart]
            how = f"misrouting: {misrouted.counterpart_by}"
            evidence = (misrouted.evidence[0],) if misrouted.evidence else ()
        else:
            found, by, candidates = remedies.find_counterpart(op, list(self.free.values()), graph)
            if found is None:
                why = (f"{len(candidates)} operators of the new job could hold it" if candidates
                       else "no operator of the new job that starts without state can hold it")
                return Unresolved(op, op.name, f"no unique counterpart ({why}): name its new owner with --map or "
                                               f"drop it with --drop", tuple((n.id, n.name) for n in candidates))
            node, how = found, by
            evidence = ({"uid": f"the savepoint records uid '{op.uid}', as '{node.name}' has",
                         "name": f"the savepoint records the name '{op.name}', unique in the new job",
                         "position": f"'{node.name}' is the only operator of the new job that starts without state "
                                     f"and can hold this state"}[by],)
        problem = _fit_problem(op, node, graph) or _declared_state_conflict(op, self.new, node.id)
        if problem is not None:
            return Unresolved(op, op.name, problem, ((node.id, node.name),))
        del self.free[node.id]
        return Move(op, node.id, node.name, node.uid, self.ids.pairs[node.id].generated, how, evidence)


def _coordinator_moves(assignment: Any, graph: StreamGraph, ids: OperatorIds) -> list[Move]:
    """State matched by a `setUidHash` alternative keeps its subtask state but not its coordinator state
    (`restoreStateToCoordinators` looks up the generated ID only): moving it to the generated ID keeps both."""
    out = []
    for nid, r in assignment.operators.items():
        if r.old is not None and r.old.coordinator_state is not None and r.coordinator_restored is False \
                and r.matched_by == "alternative":
            node = graph.by_id[nid]
            out.append(Move(r.old, nid, node.name, node.uid, ids.pairs[nid].generated, "alternative id",
                            (f"'{node.name}' takes this state by its setUidHash alternative; its coordinator state "
                             f"is looked up by the generated ID only",)))
    return out


def plan_repair(metadata: CheckpointMetadata, new: GraphSide, *, old: GraphSide | None = None,
                hasher: str = "v2", matching: str = "fixed", flink_version: str | FlinkVersion | None = None,
                pointer: str | None = None, maps: tuple[str, ...] = (), drops: tuple[str, ...] = (),
                max_parallelism: int | None = None, workdir: Path | None = None,
                opener: Opener = local_opener, before: CheckResult | None = None,
                rescale_progress: Callable[[str], None] | None = None, verdict_only: bool = False) -> RepairPlan:
    """Plan the repair and check its result in memory. Nothing is written but, with `max_parallelism`, the
    rewritten keyed state files under `workdir` (the caller's scratch directory, required then). `before`: the
    caller's own `check_upgrade` of the same savepoint and graph (a fleet check has it already).
    `rescale_progress`: one line per operator a max-parallelism rewrite finished (the slow part: ~10 CPU-s per
    64 MB of keyed state, docs/performance.md). `verdict_only`: `after` is the re-check's verdict and findings
    without its per-operator rows (`check(verdict_only=True)`): enough for `offer`, not for `to_json`."""
    version = flink_version if isinstance(flink_version, FlinkVersion) else FlinkVersion.parse(flink_version)
    pointer = pointer or savepoint_pointer(metadata)
    options = {"hasher": hasher, "matching": matching, "flink_version": version, "pointer": pointer,
               "with_remedies": False, "rescale_detail": False, "with_migration": False}
    before = before if before is not None else check_upgrade(metadata, new, old_graph=old, **options)
    changed = before.simulation.failure.max_parallelism if before.simulation and before.simulation.failure else None
    suggested: tuple[str, ...] = ()
    if max_parallelism is None and changed is not None:  # the plan shows what the repair needs, never does it unasked
        suggested = ("--max-parallelism", str(changed[1]))
    target = max_parallelism if max_parallelism is not None else (changed[1] if changed else None)
    planning = metadata if target is None else _at_max_parallelism(metadata, target)  # the numbers Flink compares
    inputs = CheckInputs(planning, new, CheckOptions(hasher, matching, version), old, pointer, open_state=opener)
    # the check's own facts when it judged this very metadata: its passes and simulations are not made again
    facts = before.facts if before.facts is not None and before.facts.metadata is planning else None
    ctx = restore_pass(inputs, new, facts or SavepointFacts(planning), pointer, before.passes if facts else None)
    shown, found = ctx.shown, ctx.found
    graph, ids = new.graph, ctx.ids
    old_ids = _old_ids(old, metadata, hasher, version) if old is not None else []

    dropped: list[Drop] = []
    for value in drops:
        spec, part = _parse_drop(value)
        op = _savepoint_op(planning, spec, old, old_ids[0] if old_ids else None, "--drop")
        if part is not None and part not in DROPPABLE_PARTS:  # one named state: it must be there
            operator_names, keyed_names = state_names_of(planning, op, opener)
            if part not in operator_names | keyed_names:
                held = ", ".join(sorted(operator_names | keyed_names)) or "none readable"
                raise InputError(f"--drop {value}: operator {op.name or op.operator_id_hex} holds no state named "
                                 f"{part!r} (it holds: {held}; or drop its coordinator or keyed state, or the "
                                 f"operator)")
            size = 0  # its bytes are among the other states' in the same streams
        else:
            size = {None: op.state_size, "keyed": keyed_bytes(op),
                    "coordinator": op.coordinator_state.state_size if op.coordinator_state is not None else 0}[part]
        dropped.append(Drop(op, part, size))
    gone = {d.state.operator_id for d in dropped if d.part is None}

    moves: list[Move] = []
    for value in maps:
        o, n = _parse_map(value)
        op = _savepoint_op(planning, o, old, old_ids[0] if old_ids else None, "--map")
        node = _new_node(graph, ids, n, "--map")
        problem = _fit_problem(op, node, graph)
        if problem is not None:
            raise InputError(f"--map {value}: {problem}")
        moves.append(Move(op, node.id, node.name, node.uid, ids.pairs[node.id].generated, "explicit",
                          (f"--map {value}",)))
    mapped = {m.state.operator_id for m in moves}
    unresolved: list[Unresolved] = []
    if shown.assignment is None:  # Flink fails before it assigns state: moving IDs cannot help
        reason = f"the restore fails before state is assigned: {before.flink_error}"
        unresolved = [Unresolved(op, op.name, reason) for op in found.lost_states if op.operator_id not in gone]
    else:
        misrouted = {m.state.operator_id: m for m in found.wrong_receiver}
        homeless = [op for op in (*found.lost_states, *(m.state for m in found.wrong_receiver))
                    if op.operator_id not in gone and op.operator_id not in mapped and has_state(op)]
        taken = {nid for nid, r in shown.assignment.operators.items()
                 if r.old is not None and has_state(r.old) and r.old.operator_id not in misrouted
                 and r.old.operator_id not in mapped}
        targets = {m.node_id for m in moves}
        free = {n.id: n for n in graph.nodes if n.id not in taken and n.id not in targets}
        placer = _Placer(new, ids, free, old, misrouting.old_writers(planning, old_ids) if old else {},
                         misrouting.counterparts(old, new) if old is not None else {})
        seen: set[bytes] = set()
        for op in homeless:
            if op.operator_id in seen:
                continue
            seen.add(op.operator_id)
            placed = placer.place(op, misrouted.get(op.operator_id))
            (moves if isinstance(placed, Move) else unresolved).append(placed)  # type: ignore[arg-type]
        moves += [m for m in _coordinator_moves(shown.assignment, graph, ids)
                  if m.state.operator_id not in mapped and m.state.operator_id not in gone]
    moves, collisions = _without_collisions(planning, moves, gone, unresolved)
    if not moves and not dropped and target is None:
        return RepairPlan(before, (), (), tuple(unresolved), None, None)
    renames = [(m.state.operator_id, m.new_id, m.node_name, m.node_uid) for m in moves]
    drops_by_id = [(d.state.operator_id, d.part) for d in dropped if d.part is None or d.part in DROPPABLE_PARTS]
    moved_to = {m.state.operator_id: m.new_id for m in moves}
    named: dict[bytes, set[str]] = {}
    for d in dropped:
        if d.part is not None and d.part not in DROPPABLE_PARTS:
            named.setdefault(moved_to.get(d.state.operator_id, d.state.operator_id), set()).add(d.part)
    rescaled: Rescaled | None = None
    refused: tuple[str, ...] = ()
    if target is not None and (max_parallelism is None or workdir is None):
        # plan only: judge from the serialization proxies; the numbers alone decide Flink's checks
        repaired = apply_plan(planning, renames, drops_by_id)
        refused = tuple(cannot_rescale(metadata, opener))
    else:
        repaired = apply_plan(metadata, renames, drops_by_id)
        if named:
            if workdir is None:
                raise ValueError("dropping a named state needs a scratch directory for the new state streams")
            try:
                repaired = drop_named_states(repaired, named, workdir, opener)
            except UnsupportedKey as exc:
                refused = (str(exc),)
        if target is not None and not refused:
            assert workdir is not None
            try:
                rescaled = rescale(repaired, target, workdir, opener, rescale_progress)
                repaired = rescaled.metadata
            except UnsupportedKey as exc:
                refused = (str(exc),)
    after = _check_repaired(repaired, new, ctx.facts, options, verdict_only) if not refused else None
    return RepairPlan(before, tuple(moves), tuple(dropped), tuple(unresolved), repaired, after,
                      collisions=tuple(collisions), rescaled=rescaled, max_parallelism=max_parallelism,
                      refused=refused, suggested=suggested)


def _check_repaired(repaired: CheckpointMetadata, new: GraphSide, known: SavepointFacts,
                    options: dict[str, Any], verdict_only: bool = False) -> CheckResult:
    """`check_upgrade` of the repaired metadata (nothing written yet), given the serialization proxies the plan's
    own pass already read of the same state handles (`state_schema.renamed_schemas`)."""
    facts = SavepointFacts(repaired)
    facts.state_schemas = renamed_schemas(known, repaired)
    facts.connector_versions = known.connector_versions  # keyed by the state handles, which the repair keeps
    o = {k: v for k, v in options.items() if k != "pointer"}
    return check(read_check_inputs(repaired, new, options=CheckOptions(**o), pointer=options["pointer"]), facts,
                 verdict_only=verdict_only)


def _at_max_parallelism(metadata: CheckpointMetadata, max_parallelism: int) -> CheckpointMetadata:
    """The metadata with every operator's max parallelism set: what Flink's checks compare (the keyed state
    itself is rewritten by `max_parallelism.rescale`)."""
    return dataclasses.replace(metadata, operator_states=tuple(
        op if op.max_parallelism == max_parallelism or op.fully_finished
        else dataclasses.replace(op, max_parallelism=max_parallelism) for op in metadata.operator_states))


def _without_collisions(metadata: CheckpointMetadata, moves: list[Move], gone: set[bytes],
                        unresolved: list[Unresolved]) -> tuple[list[Move], list[str]]:
    """A move whose new ID another savepoint state keeps (not moved, not dropped) would give two states one ID:
    it becomes unresolved. Stateless entries under a target ID are noted; the rewrite removes them."""
    leaving = {m.state.operator_id for m in moves} | gone
    staying = {o.operator_id: o for o in metadata.operator_states if o.operator_id not in leaving}
    kept, notes = [], []
    for m in moves:
        other = staying.get(m.new_id)
        if other is not None and has_state(other):
            unresolved.append(Unresolved(m.state, m.state.name, f"its counterpart '{m.node_name}' has the ID "
                                                                f"{m.new_id.hex()}, under which the savepoint keeps "
                                                                f"other state"))
            continue
        if other is not None:
            notes.append(f"the savepoint's stateless entry {m.new_id.hex()} is replaced by the state moved to "
                         f"'{m.node_name}'")
        kept.append(m)
    return kept, notes

"""Silent misrouting: savepoint state that Flink restores into an operator that is not its writer's counterpart.

Flink matches state to operators by id only. A uid-less operator's id is its *position* in the
stream graph (traverse order, chainable out-edges, inputs' ids), so a change that swaps two
uid-less sources, reorders two identical branches or inserts a stateless map can hand one
operator another operator's state, and Flink restores "successfully" (verified with real Flink
1.20.5 and 2.3.0: tests/fixtures/restores/*/misroute-*). Ids cannot tell, so this module compares
*who wrote* each state with *who receives* it:

* With the old job graph (`--old-graph`): every savepoint operator is traced to the old node whose
  id (generated or `setUidHash`) it carries, old nodes are paired with new ones (uid, else a unique
  name, else a unique signature: factory, declared kind/state/key type, neighbours' names), and
  state received by a node other than its writer's counterpart is misrouted. The evidence lists
  what differs between writer and receiver.
* Without it: what the savepoint knows. Metadata v5+ (Flink 2.x) records each operator's name and
  uid; state restored by position into a uid-less node of another name is misrouted when a node
  of the writer's name exists in the new job, ambiguous (a warning) otherwise. v4 savepoints
  record neither, so uid-less restores are reported as unverifiable (a warning), never silently
  SAFE. (The "keyed state into a node without keyed input" rule lives in `upgrade_gate.gate.check`.)

An explicit `setUidHash` pin (matched by the alternative id) is the user's routing and is trusted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from hashing.graph import StreamGraph, StreamNode
from hashing.operator_ids import OperatorIds
from upgrade_gate.flink.assignment.load_validation import has_state
from upgrade_gate.flink.assignment.state_assignment import Assignment
from upgrade_gate.flink.metadata.model import CheckpointMetadata, OperatorState
from upgrade_gate.gate.annotations import SqlContext, StateRoles
from upgrade_gate.gate.inputs import GraphSide
from upgrade_gate.vocabulary import Verdict

_PLANNER_COUNTER = re.compile(r"\[\d+\]")


def declared_state_names(value: Any) -> tuple[str, ...] | None:
    """`state` of a spec node: ["name", ...], [{"name": .., "kind": ..}, ...] or {"name": "kind"}."""
    if value is None:
        return None
    if isinstance(value, dict):
        return tuple(sorted(f"{k}:{v}" if v else str(k) for k, v in value.items()))
    if isinstance(value, list):
        out = []
        for s in value:
            if isinstance(s, dict):
                out.append(f"{s.get('name')}:{s['kind']}" if s.get("kind") else str(s.get("name")))
            else:
                out.append(str(s))
        return tuple(sorted(out))
    return (str(value),)


def profile(side: GraphSide, nid: int) -> dict[str, Any]:
    """What identifies an operator beyond its id: compared between writer and receiver."""
    g, n = side.graph, side.graph.by_id[nid]
    ex = side.extras.get(nid, {})
    return {"name": n.name, "uid": n.uid, "factory": str(n.factory), "factory_class": ex.get("factory_class"),
            "kind": ex.get("kind"), "state": declared_state_names(ex.get("state")), "key_type": ex.get("key_type"),
            "keyed_input": side.keyed(nid),
            "inputs": tuple(sorted(f"{g.by_id[e.source].name} ({e.partitioner})" for e in g.in_edges[nid])),
            "outputs": tuple(sorted(f"{g.by_id[e.target].name} ({e.partitioner})" for e in g.out_edges[nid]))}


def differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """Fields both sides know and that differ (None = the graph does not say)."""
    out = []
    for k in ("name", "uid", "factory", "factory_class", "kind", "state", "key_type", "keyed_input", "inputs",
              "outputs"):
        if a[k] != b[k] and (k in ("name", "uid", "keyed_input") or (a[k] is not None and b[k] is not None)):
            out.append(f"{k}: {a[k]!r} -> {b[k]!r}")
    return out


def _signature(side: GraphSide, nid: int) -> tuple[Any, ...]:
    p = profile(side, nid)
    return (p["factory"], p["factory_class"], p["kind"], p["state"], p["key_type"], p["keyed_input"], p["inputs"],
            p["outputs"])


def counterparts(old: GraphSide, new: GraphSide) -> dict[int, tuple[int, str]]:
    """Old node -> (new node, how): by uid, else a name unique on both sides, else a unique signature."""
    out: dict[int, tuple[int, str]] = {}
    free_new = {n.id: n for n in new.graph.nodes}

    def match(key: Any, how: str) -> None:
        olds: dict[Any, list[int]] = {}
        news: dict[Any, list[int]] = {}
        for n in old.graph.nodes:
            if n.id not in out and (k := key(old, n)) is not None:
                olds.setdefault(k, []).append(n.id)
        for n in free_new.values():
            if (k := key(new, n)) is not None:
                news.setdefault(k, []).append(n.id)
        for k, ids in olds.items():
            if len(ids) == 1 and len(news.get(k, [])) == 1:
                out[ids[0]] = (news[k][0], how)
                free_new.pop(news[k][0])

    def by_uid(_: GraphSide, n: StreamNode) -> Any:
        return n.uid

    def by_name(side: GraphSide, n: StreamNode) -> Any:
        # SQL operator names carry planner counters (`GroupAggregate[78]`) that differ between two translations
        # of the same query: compared without them (upgrade_gate/gate/sql_explain.py)
        return _PLANNER_COUNTER.sub("", n.name) if side.sql_state else n.name

    def by_signature(side: GraphSide, n: StreamNode) -> Any:
        return _signature(side, n.id)

    match(by_uid, "uid")
    match(by_name, "name")
    match(by_signature, "signature")
    return out


@dataclass
class Misrouted:
    """One savepoint state that lands on the wrong operator."""

    verdict = Verdict.STATE_MISROUTED

    state: OperatorState
    receiver: int  # new node id
    counterpart: int | None  # new node that should get it (None: unknown)
    counterpart_by: str  # uid | name | signature | savepoint name | none
    writer: dict[str, Any] | None  # old node profile (with --old-graph) or what the savepoint says
    detected_by: str  # old-graph | savepoint | keyed-input
    evidence: list[str]
    sql: SqlContext | None = None  # `upgrade_gate.gate.annotations`, attached after the rule chain
    roles: StateRoles | None = None

    def to_json(self, graph: StreamGraph, names: list[str]) -> dict[str, Any]:
        def node(nid: int | None) -> dict[str, Any] | None:
            if nid is None:
                return None
            n = graph.by_id[nid]
            return {"node_id": n.id, "name": n.name, "uid": n.uid}

        cp = node(self.counterpart)
        if cp is not None:
            cp["matched_by"] = self.counterpart_by
        return {"operator_id": self.state.operator_id_hex, "name": self.state.name, "uid": self.state.uid,
                "bytes": self.state.state_size, "state_names": names, "writer": self.writer,
                "receiver": node(self.receiver), "counterpart": cp, "detected_by": self.detected_by,
                "evidence": list(self.evidence), **({"sql": self.sql.to_json()} if self.sql is not None else {}),
                **({"role": self.roles.role, "state_roles": dict(self.roles.states)} if self.roles is not None else {})}


def old_writers(metadata: CheckpointMetadata, old_ids: list[OperatorIds]) -> dict[bytes, int]:
    """Savepoint operator id -> old node that wrote it (generated id, or its `setUidHash`)."""
    out: dict[bytes, int] = {}
    for ids in old_ids:
        for nid, pair in ids.pairs.items():
            for i in (*pair.alternatives, pair.generated):
                out.setdefault(i, nid)
    present = {op.operator_id for op in metadata.operator_states}
    return {k: v for k, v in out.items() if k in present}


def find(metadata: CheckpointMetadata, assignment: Assignment, new: GraphSide, old: GraphSide | None,
         old_ids: list[OperatorIds]) -> tuple[list[Misrouted], list[str]]:
    """Misrouted states and the warnings for cases the evidence cannot settle."""
    found: list[Misrouted] = []
    warnings: list[str] = []
    unverified: list[str] = []
    graph = new.graph
    writers = old_writers(metadata, old_ids) if old is not None else {}
    pairs = counterparts(old, new) if old is not None else {}
    reverse = {v[0]: k for k, v in pairs.items()}
    for nid, r in sorted(assignment.operators.items()):
        op = r.old
        if op is None or not has_state(op):
            continue
        recv = graph.by_id[nid]
        if old is not None:
            w = writers.get(op.operator_id)
            if w is None:
                warnings.append(f"savepoint state {op.operator_id_hex} ('{op.name or '?'}', restored into "
                                f"'{recv.name}') was written by no operator of the old graph: is --old-graph the job "
                                f"that took this savepoint?")
                continue
            wp = profile(old, w)
            cp = pairs.get(w)
            if cp is not None and cp[0] == nid:
                continue
            diffs = differences(wp, profile(new, nid))
            if cp is None:
                mine = reverse.get(nid)
                if mine is not None and mine != w:
                    why = (f"'{wp['name']}' (old node {w}) has no counterpart in the new job, and '{recv.name}' is "
                           f"the counterpart of old '{old.graph.by_id[mine].name}' (node {mine})")
                    found.append(Misrouted(op, nid, None, "none", {"node_id": w, **wp}, "old-graph", [why, *diffs]))
                elif diffs:
                    warnings.append(f"state of old '{wp['name']}' (node {w}) restores into '{recv.name}' by id, but "
                                    f"the gate found no counterpart of the writer in the new job and they differ "
                                    f"({'; '.join(diffs)}): a changed operator or misrouted state, check by hand")
                continue
            c = graph.by_id[cp[0]]
            why = (f"state written by old '{wp['name']}' (node {w}) restores into '{recv.name}' (node {nid}) because "
                   f"that node now has the id {op.operator_id_hex} by position; the writer's counterpart is "
                   f"'{c.name}' (node {c.id}, matched by {cp[1]})")
            found.append(Misrouted(op, nid, cp[0], cp[1], {"node_id": w, **wp}, "old-graph", [why, *diffs]))
            continue
        if r.matched_by == "alternative" or recv.uid is not None:
            continue  # a setUidHash pin, or the hash of the receiver's own uid: routed by the user
        writer = {"name": op.name, "uid": op.uid}
        if op.name is None:
            unverified.append(recv.name)
            continue
        if op.name == recv.name:
            continue
        same = [n for n in graph.nodes if n.name == op.name]
        if len(same) == 1:
            why = (f"the savepoint says this state was written by '{op.name}'; it restores by position into the "
                   f"uid-less '{recv.name}', and the new job has its own '{op.name}' (node {same[0].id})")
            found.append(Misrouted(op, nid, same[0].id, "savepoint name", writer, "savepoint", [why]))
        else:
            warnings.append(f"state written by '{op.name}' ({op.operator_id_hex}) restores by position into the "
                            f"uid-less '{recv.name}' and the new job has {len(same)} operators named '{op.name}': a "
                            f"renamed operator or misrouted state; pass --old-graph to decide")
    if unverified:
        warnings.append(f"{len(unverified)} uid-less operator(s) take savepoint state by position "
                        f"({', '.join(unverified)}); this savepoint (metadata v{metadata.version}) records no operator "
                        f"names, so the gate cannot tell whether each gets its own writer's state: pass --old-graph "
                        f"(the job that took the savepoint) to verify, or set uids")
    return found, warnings



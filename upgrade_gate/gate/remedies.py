"""The smallest change to the new job that keeps a state Flink would drop.

For savepoint state no new operator takes, find its counterpart among the new operators that get
no state: by uid (2.x savepoints record it), by name (likewise), else by position (the only free
operator of the right kind: keyed state needs a keyBy input, coordinator state a FLIP-27 source;
same parallelism breaks ties). Propose `setUidHash("<old id>")` on it (the alternative id wins
when the savepoint holds state under it), or `uid("<old uid>")` when the old uid is known and the
node has none (that also brings back coordinator state, which Flink looks up by generated id
only). A stateless operator that took someone else's keyed state gets a `uid(...)` so it stops
claiming the old id. When no unique counterpart exists, say so: a person must decide.

Misrouted state (`route_back`): pin each state on its writer's counterpart with `setUidHash("<old
id>")` (a pin does not change the node's generated id, so nothing downstream is re-keyed), and give
a uid to every uid-less receiver that would otherwise keep claiming the id by position. The caller
re-simulates the pinned graph, misrouting check included, so the remedy is verified, not hoped for.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from hashing.graph import Factory, StreamGraph, StreamNode
from hashing.job_graph import share_chaining
from upgrade_gate.flink.assignment.keyed_state import has_keyed_input, has_keyed_state
from upgrade_gate.flink.assignment.state_assignment import Assignment
from upgrade_gate.flink.metadata.model import OperatorState
from upgrade_gate.gate.misrouting import Misrouted


@dataclass(frozen=True)
class Remedy:
    operator_id: str  # the savepoint operator whose state it keeps
    node_id: int | None
    node_name: str | None
    action: str | None  # e.g. setUidHash("…") / uid("…"); None: no counterpart found
    matched_by: str  # uid | name | position | none
    reason: str
    uid_hash: str | None = None  # what to set on the node (applied when re-simulating)
    uid: str | None = None

    def to_json(self) -> dict[str, object]:
        return {"operator_id": self.operator_id, "node_id": self.node_id, "node_name": self.node_name,
                "action": self.action, "matched_by": self.matched_by, "reason": self.reason}


def fits(op: OperatorState, node: StreamNode, graph: StreamGraph) -> bool:
    if has_keyed_state(op) and not has_keyed_input(graph, node.id):
        return False
    return op.coordinator_state is None or node.factory is Factory.SOURCE


def find_counterpart(op: OperatorState, free: list[StreamNode], graph: StreamGraph) -> tuple[StreamNode | None, str,
                                                                                              list[StreamNode]]:
    if op.uid:
        by_uid = [n for n in free if n.uid == op.uid]
        if len(by_uid) == 1:
            return by_uid[0], "uid", by_uid
    if op.name:
        by_name = [n for n in free if n.name == op.name]
        if len(by_name) == 1:
            return by_name[0], "name", by_name
    kind = [n for n in free if fits(op, n, graph)]
    if op.subtask_states and not has_keyed_state(op) and op.coordinator_state is None:
        kind = [n for n in kind if n.factory is not Factory.SOURCE or n.uid is None]
    if len(kind) > 1:
        same_p = [n for n in kind if n.parallelism == op.parallelism]
        kind = same_p or kind
    if len(kind) == 1:
        return kind[0], "position", kind
    return None, "none", kind


def propose(lost: list[OperatorState], assignment: Assignment | None, graph: StreamGraph,
            misrouted: dict[bytes, int]) -> list[Remedy]:
    """`lost`: savepoint states no operator keeps; `misrouted`: state id -> node that took it but ignores it."""
    taken = {nid for nid, r in (assignment.operators.items() if assignment else ()) if r.old is not None}
    taken -= set(misrouted.values())
    free = [n for n in graph.nodes if n.id not in taken and n.id not in misrouted.values()]
    out: list[Remedy] = []
    for op in lost:
        hexid = op.operator_id_hex
        node, how, candidates = find_counterpart(op, free, graph)
        if node is None:
            names = ", ".join(n.name for n in candidates) or "none"
            out.append(Remedy(hexid, None, None, None, "none",
                              f"no unique counterpart in the new job (candidates: {names}); pin the operator that "
                              f"should own this state with setUidHash(\"{hexid}\"), or accept the loss"))
            continue
        free.remove(node)
        if op.uid and node.uid is None and (op.coordinator_state is not None or how == "uid"):
            out.append(Remedy(hexid, node.id, node.name, f'uid("{op.uid}")', how,
                              "restores the old uid, so the generated id (and coordinator state) match again",
                              uid=op.uid))
            continue
        note = ""
        if op.coordinator_state is not None:
            note = "; coordinator state is looked up by the generated id only and stays lost: restore the old uid"
        out.append(Remedy(hexid, node.id, node.name, f'setUidHash("{hexid}")', how,
                          f"the uid hash is an alternative id that wins when the savepoint holds state under it{note}",
                          uid_hash=hexid))
        if op.operator_id in misrouted:
            m = graph.by_id[misrouted[op.operator_id]]
            out.append(Remedy(hexid, m.id, m.name, f'uid("{m.name}")', "position",
                              f"'{m.name}' has this id by position but no keyed input, so it would take the keyed "
                              f"state and ignore it; a uid gives it an id of its own", uid=m.name))
    for sid, nid in misrouted.items():
        if not any(r.operator_id == sid.hex() for r in out):
            m = graph.by_id[nid]
            out.append(Remedy(sid.hex(), m.id, m.name, f'uid("{m.name}")', "position",
                              f"'{m.name}' takes this keyed state by position but has no keyed input", uid=m.name))
    return out


def route_back(wrong: list[Misrouted], graph: StreamGraph, already: list[Remedy]) -> list[Remedy]:
    """Pins that send misrouted state back to its writer's counterpart (skipping states `already` handles)."""
    done = {r.operator_id for r in already if r.action}
    pinned = {r.node_id for r in already if r.uid_hash}
    out: list[Remedy] = []
    for m in wrong:
        hexid = m.state.operator_id_hex
        if hexid in done:
            continue
        if m.counterpart is None:
            out.append(Remedy(hexid, None, None, None, "none",
                              f"the writer's counterpart in the new job is unknown; pin the operator that should "
                              f"own this state with setUidHash(\"{hexid}\"), and give "
                              f"'{graph.by_id[m.receiver].name}' a uid"))
            continue
        c = graph.by_id[m.counterpart]
        out.append(Remedy(hexid, c.id, c.name, f'setUidHash("{hexid}")', m.counterpart_by,
                          f"routes the state its writer left under {hexid} back to '{c.name}' (the alternative id wins "
                          f"when the savepoint holds state under it)", uid_hash=hexid))
        pinned.add(c.id)
    for m in wrong:
        recv = graph.by_id[m.receiver]
        if m.counterpart is None or recv.id in pinned or recv.uid is not None or m.state.operator_id_hex in done:
            continue
        pinned.add(recv.id)  # once per receiver
        out.append(Remedy(m.state.operator_id_hex, recv.id, recv.name, f'uid("{recv.name}")', "position",
                          f"'{recv.name}' has this id by position only; a uid gives it an id of its own, so it stops "
                          f"taking state that is not its own", uid=recv.name))
    return out


def apply(graph: StreamGraph, remedies: list[Remedy]) -> StreamGraph:
    """The graph with the remedies applied (for the "with remedies" verdict)."""
    by_id = dict(graph.by_id)
    for r in remedies:
        if r.node_id is None:
            continue
        n = by_id[r.node_id]
        if r.uid_hash:
            n = dataclasses.replace(n, uid_hash=r.uid_hash)
        if r.uid:
            n = dataclasses.replace(n, uid=r.uid)
        by_id[r.node_id] = n
    fixed = StreamGraph.of(graph.name, list(by_id.values()), list(graph.edges), chaining_enabled=graph.chaining_enabled,
                           max_parallelism=graph.max_parallelism,
                           chain_operators_with_different_max_parallelism=graph.chain_operators_with_different_max_parallelism)
    share_chaining(graph, fixed)  # only uids and uid hashes changed
    return fixed

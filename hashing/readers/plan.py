"""Flink's execution-plan JSON (`env.getExecutionPlan()`, `flink info`) -> `StreamGraph`.

The plan lacks uids, uid hashes, chaining strategies, slot sharing groups, max parallelism,
exchange modes and the out-edge order, all of which can change IDs. We fill them with
Flink's defaults and return the list of assumptions so the CLI can print them: an ID computed
from a plan is only as right as those defaults.
"""

from __future__ import annotations

from typing import Any

from hashing.errors import InputError, describe
from hashing.graph import (
    JAVA_INT_MAX,
    JAVA_INT_MIN,
    ChainingStrategy,
    ExchangeMode,
    Factory,
    Partitioner,
    StreamEdge,
    StreamGraph,
    StreamNode,
)
from hashing.readers.spec import MAX_NODES, UPPER_BOUND_MAX_PARALLELISM, find_cycle

_SHIP = {p.value: p for p in Partitioner}


def is_execution_plan(doc: Any) -> bool:
    return (isinstance(doc, dict) and isinstance(doc.get("nodes"), list) and "edges" not in doc
            and any(isinstance(n, dict) and "pact" in n for n in doc["nodes"]))


def parse_execution_plan(doc: dict[str, Any], origin: str) -> tuple[StreamGraph, list[str]]:
    assumptions = [
        "no operator has a uid or uid hash (the plan does not record them)",
        "every operator uses chaining strategy ALWAYS and slot sharing group 'default'",
        "max parallelism is not set anywhere; chaining is enabled",
        "exchange mode UNDEFINED on every edge; a node's out-edges are ordered by target id",
        "sources ('Data Source') are FLIP-27 sources",
    ]
    raw_nodes = doc["nodes"]
    if len(raw_nodes) > MAX_NODES:
        raise InputError(f"{origin}: {len(raw_nodes)} plan nodes is more than the {MAX_NODES} supported")
    nodes: list[StreamNode] = []
    preds: list[tuple[int, list[Any]]] = []
    default_p = False
    for i, raw in enumerate(raw_nodes):
        nid = raw.get("id") if isinstance(raw, dict) else None
        if type(nid) is not int:
            raise InputError(f"{origin}: plan node #{i} has no integer 'id' (got {describe(nid)})")
        if not JAVA_INT_MIN <= nid <= JAVA_INT_MAX:
            raise InputError(f"{origin}: plan node #{i}: id {describe(nid)} is outside Java's int range")
        p = raw.get("parallelism", 1)
        if type(p) is not int or not (p == -1 or 1 <= p <= UPPER_BOUND_MAX_PARALLELISM):
            raise InputError(f"{origin}: plan node {nid}: parallelism {describe(p)} is not -1 or an integer "
                             f"in [1, {UPPER_BOUND_MAX_PARALLELISM}]")
        if p == -1:
            default_p, p = True, 1
        pact = raw.get("pact", "Operator")
        name = raw.get("type", f"node-{nid}")
        if not isinstance(name, str):
            raise InputError(f"{origin}: plan node {nid}: 'type' must be a string, got {describe(name)}")
        nodes.append(StreamNode(id=nid, name=name, parallelism=p, chaining_strategy=ChainingStrategy.ALWAYS,
                                factory=Factory.SOURCE if pact == "Data Source" else Factory.OPERATOR))
        pl = raw.get("predecessors") or []
        if not isinstance(pl, list):
            raise InputError(f"{origin}: plan node {nid}: 'predecessors' must be a list")
        preds.append((nid, pl))
    if default_p:
        assumptions.append("parallelism -1 (the job default) is taken as 1 for every such node")
    ids: set[int] = set()
    for n in nodes:
        if n.id in ids:
            raise InputError(f"{origin}: plan node {n.id}: the plan lists this node id twice")
        ids.add(n.id)
    edges: list[tuple[int, int, StreamEdge]] = []
    for nid, pl in preds:
        for k, pred in enumerate(pl):
            src = pred.get("id") if isinstance(pred, dict) else None
            if type(src) is not int or src not in ids:
                raise InputError(f"{origin}: plan node {nid}: predecessor #{k} ({describe(src)}) is not a node "
                                 "of the plan")
            if src == nid:
                raise InputError(f"{origin}: plan node {nid} is its own predecessor; a Flink job graph has no "
                                 "cycles")
            ship = pred.get("ship_strategy", "FORWARD")
            member = _SHIP.get(ship.upper()) if isinstance(ship, str) else None
            if member is None:
                raise InputError(f"{origin}: plan node {nid}: unknown ship_strategy {describe(ship)}")
            edges.append((src, nid, StreamEdge(src, nid, member, ExchangeMode.UNDEFINED, 0)))
    # in-edge order = predecessor order (kept by the stable sort); out-edge order = target id
    edges.sort(key=lambda t: t[1])
    stream_edges = [e for _, _, e in edges]
    cycle = find_cycle(nodes, stream_edges)
    if cycle:
        raise InputError(f"{origin}: the plan has a cycle: {' -> '.join(map(str, cycle))}; a Flink job graph "
                         "has none")
    name = doc.get("name")
    if name is not None and not isinstance(name, str):
        raise InputError(f"{origin}: the plan's 'name' must be a string, got {describe(name)}")
    return StreamGraph.of(name or origin, nodes, stream_edges), assumptions

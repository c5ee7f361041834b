"""Flink's execution-plan JSON (`env.getExecutionPlan()`, `flink info`) -> `StreamGraph`.

The plan lacks uids, uid hashes, chaining strategies, slot sharing groups, max parallelism,
exchange modes and the out-edge order, all of which can change IDs. We fill them with
Flink's defaults and return the list of assumptions so the CLI can print them: an ID computed
from a plan is only as right as those defaults.
"""

from __future__ import annotations

from typing import Any

from hashing.errors import InputError
from hashing.graph import ChainingStrategy, ExchangeMode, Factory, Partitioner, StreamEdge, StreamGraph, StreamNode

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
    nodes: list[StreamNode] = []
    preds: list[tuple[int, list[dict[str, Any]]]] = []
    default_p = False
    for i, raw in enumerate(doc["nodes"]):
        if not isinstance(raw, dict) or not isinstance(raw.get("id"), int):
            raise InputError(f"{origin}: plan node #{i} has no integer 'id'")
        nid = raw["id"]
        p = raw.get("parallelism", 1)
        if not isinstance(p, int) or p == 0 or p < -1:
            raise InputError(f"{origin}: plan node {nid}: parallelism {p!r} is not a positive integer or -1")
        if p == -1:
            default_p, p = True, 1
        pact = raw.get("pact", "Operator")
        nodes.append(StreamNode(id=nid, name=str(raw.get("type", f"node-{nid}")), parallelism=p,
                                chaining_strategy=ChainingStrategy.ALWAYS,
                                factory=Factory.SOURCE if pact == "Data Source" else Factory.OPERATOR))
        pl = raw.get("predecessors") or []
        if not isinstance(pl, list):
            raise InputError(f"{origin}: plan node {nid}: 'predecessors' must be a list")
        preds.append((nid, pl))
    if default_p:
        assumptions.append("parallelism -1 (the job default) is taken as 1 for every such node")
    ids = {n.id for n in nodes}
    if len(ids) != len(nodes):
        raise InputError(f"{origin}: the plan lists a node id twice")
    edges: list[tuple[int, int, StreamEdge]] = []
    for nid, pl in preds:
        for k, pred in enumerate(pl):
            if not isinstance(pred, dict) or pred.get("id") not in ids:
                raise InputError(f"{origin}: plan node {nid}: predecessor #{k} is not a node of the plan")
            ship = str(pred.get("ship_strategy", "FORWARD")).upper()
            if ship not in _SHIP:
                raise InputError(f"{origin}: plan node {nid}: unknown ship_strategy {ship!r}")
            edges.append((pred["id"], nid, StreamEdge(pred["id"], nid, _SHIP[ship], ExchangeMode.UNDEFINED, 0)))
    # in-edge order = predecessor order (kept by the stable sort); out-edge order = target id
    edges.sort(key=lambda t: t[1])
    name = str(doc.get("name") or origin)
    return StreamGraph.of(name, nodes, [e for _, _, e in edges]), assumptions

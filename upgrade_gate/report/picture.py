"""The picture of an upgrade: the old job (or the savepoint's operators) and the new job side by side, chains as
groups, edges as lines, and a line from the operator that wrote each piece of state to the one it restores into,
at-risk ones in the verdict's colour. Plain data with coordinates; the report's templates draw it as inline SVG."""

from __future__ import annotations

from typing import Any

from upgrade_gate.report.colours import colour
from upgrade_gate.report.sizes import human_bytes

__all__ = ["graph_layout", "graph_picture"]


def graph_layout(loaded: Any, hasher: str = "v2", flink_version: str | None = None) -> dict[str, Any]:
    """A stream graph (or a `LoadedGraph`) as plain data for the picture: nodes in Flink's job-vertex
    order grouped by chain (hashing.job_graph.chains), edges, and each node's operator ids, so the
    savepoint's state can be attached to the node that wrote it."""
    from hashing.job_graph import chains
    from hashing.operator_ids import compute_operator_ids

    graph = getattr(loaded, "graph", loaded)
    try:
        ids = compute_operator_ids(graph, hasher, flink_version)
        op_ids = {n: [p.generated.hex(), *(a.hex() for a in p.alternatives)] for n, p in ids.pairs.items()}
    except Exception:  # a graph Flink would refuse still gets drawn; the check says why it fails
        op_ids = {}
    by_id = graph.by_id
    rank = _topological_rank(graph)
    ordered = sorted(chains(graph), key=lambda c: min(rank[m] for m in c[1]))  # sources at the top
    nodes = []
    for chain_no, (_head, members) in enumerate(ordered):
        for node_id in sorted(members, key=rank.__getitem__):  # head first
            n = by_id[node_id]
            nodes.append({"id": n.id, "name": n.name, "uid": n.uid, "chain": chain_no,
                          "operator_ids": op_ids.get(n.id, [])})
    return {"name": graph.name, "nodes": nodes,
            "edges": [{"source": e.source, "target": e.target, "partitioner": str(getattr(e.partitioner, "name",
                                                                                        e.partitioner))}
                      for e in graph.edges]}


def _topological_rank(graph: Any) -> dict[int, int]:
    """Nodes in data-flow order (Kahn's algorithm, ties by node id), so each column reads top-down."""
    indegree = {n.id: len(graph.in_edges.get(n.id, [])) for n in graph.nodes}
    ready = sorted(n for n, d in indegree.items() if d == 0)
    rank: dict[int, int] = {}
    while ready:
        node = ready.pop(0)
        rank[node] = len(rank)
        for e in graph.out_edges.get(node, []):
            indegree[e.target] -= 1
            if indegree[e.target] == 0:
                ready.append(e.target)
                ready.sort()
    for n in graph.nodes:  # a cycle (Flink refuses it) still gets a place
        rank.setdefault(n.id, len(rank))
    return rank


_BOX_W, _BOX_H, _GAP, _CHAIN_GAP, _TOP = 230, 26, 6, 14, 34
_LEFT_X, _RIGHT_X, _WIDTH = 70, 480, 780


def _column(nodes: list[dict[str, Any]], x: int) -> tuple[dict[Any, dict[str, Any]], list[dict[str, Any]], int]:
    """Place boxes top to bottom; a chain's members share a group frame. Returns (boxes by key, chain
    frames, height)."""
    boxes: dict[Any, dict[str, Any]] = {}
    frames: list[dict[str, Any]] = []
    y = _TOP
    last_chain: Any = object()
    frame: dict[str, Any] | None = None
    for n in nodes:
        if n.get("chain") != last_chain or n.get("chain") is None:
            if frame is not None:
                y += _CHAIN_GAP
            frame = {"x": x - 5, "y": y - 5, "w": _BOX_W + 10, "h": 0, "members": 0}
            frames.append(frame)
            last_chain = n.get("chain")
        assert frame is not None
        box = {**n, "x": x, "y": y, "w": _BOX_W, "h": _BOX_H,
               "label": n["name"] if len(n["name"]) <= 30 else n["name"][:29] + "…"}
        boxes[n["key"]] = box
        frame["members"] += 1
        frame["h"] = y + _BOX_H + 5 - frame["y"]
        y += _BOX_H + _GAP
    return boxes, [f for f in frames if f["members"] > 1], y + 10


def _curve(a: dict[str, Any], b: dict[str, Any], side: int) -> str:
    """An edge inside one column, bowed out on the column's outer side (side -1 left, +1 right)."""
    x = a["x"] if side < 0 else a["x"] + a["w"]
    ya, yb = a["y"] + a["h"] / 2, b["y"] + b["h"] / 2
    bow = x + side * (18 + min(60.0, abs(yb - ya) / 4))
    return f"M{x},{ya:.0f} C{bow:.0f},{ya:.0f} {bow:.0f},{yb:.0f} {x},{yb:.0f}"


def graph_picture(check: dict[str, Any], graphs: dict[str, Any]) -> dict[str, Any] | None:
    """Two columns of boxes: where state was written (old graph, or the savepoint's operators) and the
    new job's operators, with a line per stateful operator from writer to receiver."""
    # the savepoint's operators: rows of new operators (no savepoint state, `_operator_rows`' note) are the new
    # job's, drawn in its column, never in the savepoint's
    ops = [o for o in check.get("operators") or [] if o.get("operator_id") and not _is_new_operator(o)]
    new_g, old_g = graphs.get("new"), graphs.get("old")
    risk_ops = {x["operator_id"] for x in check.get("losses") or []} | \
               {m["operator_id"] for m in check.get("misrouted") or []}
    # the new column: the new graph, else the migration table's nodes (every node of the new graph)
    if new_g:
        new_nodes = [{**n, "key": n["id"]} for n in new_g["nodes"]]
    else:
        new_nodes = [{"id": m["node_id"], "name": str(m["name"]), "chain": None, "key": m["node_id"],
                      "operator_ids": [m.get("new_id")]} for m in check.get("migration") or []]
    if not new_nodes:  # old reports or fleet rows: the receivers named by the operator rows
        seen: dict[Any, dict[str, Any]] = {}
        for o in ops:
            if o.get("new_node_id") is not None:
                seen.setdefault(o["new_node_id"], {"id": o["new_node_id"], "name": str(o.get("new_node_name")),
                                                   "chain": None, "key": o["new_node_id"], "operator_ids": []})
        new_nodes = list(seen.values())
    # the old column: the old graph's nodes, else one box per operator in the savepoint
    writer_of: dict[str, Any] = {}
    if old_g:
        old_nodes = [{**n, "key": ("old", n["id"])} for n in old_g["nodes"]]
        for n in old_g["nodes"]:
            for oid in n.get("operator_ids") or []:
                writer_of.setdefault(oid, ("old", n["id"]))
        for m in check.get("misrouted") or []:  # the simulator named the writer: trust it over ids
            if m.get("writer") and m["writer"].get("node_id") is not None:
                writer_of[m["operator_id"]] = ("old", m["writer"]["node_id"])
    else:
        old_nodes = [{"id": o["operator_id"], "name": str(o.get("name") or o["operator_id"][:8]), "chain": None,
                      "key": ("sp", o["operator_id"])} for o in ops]
        writer_of = {o["operator_id"]: ("sp", o["operator_id"]) for o in ops}
        place = {n["id"]: i for i, n in enumerate(new_nodes)}  # beside their receivers: fewer crossings
        by_op = {o["operator_id"]: place.get(o.get("new_node_id"), len(place)) for o in ops}
        old_nodes.sort(key=lambda n: by_op.get(n["id"], len(place)))
    if not new_nodes and not old_nodes:
        return None
    left, left_frames, h1 = _column(old_nodes, _LEFT_X)
    right, right_frames, h2 = _column(new_nodes, _RIGHT_X)
    verdict_colour = colour(check.get("verdict"))
    flows = []
    for o in ops:
        src = left.get(writer_of.get(o["operator_id"]))
        dst = right.get(o.get("new_node_id"))
        at_risk = o["operator_id"] in risk_ops
        if src is None or not (o.get("state_bytes") or at_risk):
            continue
        src["bytes"] = src.get("bytes", 0) + int(o.get("state_bytes") or 0)
        if at_risk:
            src["at_risk"] = True
        if dst is not None:
            dst["bytes"] = dst.get("bytes", 0) + int(o.get("state_bytes") or 0)
            if at_risk:
                dst["at_risk"] = True
        y1 = src["y"] + src["h"] / 2
        if dst is None:  # dropped: no operator takes it and the loss table names it (a receiver a fleet row did not
            # record is no drop, nor is a restore that fails as a whole: its Flink error says what happens)
            src["dropped"] = at_risk and o.get("matched_by") in (None, "none")
            continue
        y2 = dst["y"] + dst["h"] / 2
        flows.append({"d": f"M{src['x'] + src['w']},{y1:.0f} C{(src['x'] + src['w'] + dst['x']) / 2:.0f},{y1:.0f} "
                           f"{(src['x'] + src['w'] + dst['x']) / 2:.0f},{y2:.0f} {dst['x']},{y2:.0f}",
                      "at_risk": at_risk, "title": f"{o.get('name')} -> {o.get('new_node_name')}: "
                                                   f"{human_bytes(o.get('state_bytes'))}"})
    for m in check.get("misrouted") or []:  # where the misrouted state should have gone instead
        src = left.get(writer_of.get(m["operator_id"]))
        dst = right.get((m.get("counterpart") or {}).get("node_id"))
        if src is not None and dst is not None:
            y1, y2 = src["y"] + src["h"] / 2, dst["y"] + dst["h"] / 2
            mid = (src["x"] + src["w"] + dst["x"]) / 2
            flows.append({"d": f"M{src['x'] + src['w']},{y1:.0f} C{mid:.0f},{y1:.0f} {mid:.0f},{y2:.0f} "
                               f"{dst['x']},{y2:.0f}", "at_risk": False, "should": True,
                          "title": f"should go to {dst['name']}"})
    edges = []
    for g, boxes, side, prefix in ((old_g, left, -1, "old"), (new_g, right, 1, None)):
        for e in (g or {}).get("edges") or []:
            a = boxes.get((prefix, e["source"]) if prefix else e["source"])
            b = boxes.get((prefix, e["target"]) if prefix else e["target"])
            if a is not None and b is not None:
                edges.append({"d": _curve(a, b, side), "title": f"{a['name']} -> {b['name']} ({e['partitioner']})"})
    return {"width": _WIDTH, "height": max(h1, h2), "left": list(left.values()), "right": list(right.values()),
            "left_frames": left_frames, "right_frames": right_frames, "flows": flows, "edges": edges,
            "colour": verdict_colour, "left_title": (f"old job: {old_g['name']}" if old_g else "savepoint"),
            "right_title": f"new job: {new_g['name'] if new_g else check.get('graph') or ''}",
            "left_x": _LEFT_X, "right_x": _RIGHT_X, "box_w": _BOX_W, "has_old_graph": bool(old_g)}



def _is_new_operator(o: dict[str, Any]) -> bool:
    return str(o.get("note") or "").startswith("new operator")

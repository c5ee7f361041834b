"""The one renderer of gate reports: Jinja2 templates (autoescaped) shared by the standalone HTML file
`upgrade-gate check --format html` writes and the Airflow "Upgrade gate" view, so both read alike.

A report is rendered from the check JSON (`CheckResult.to_json()`, the `check` contract of
docs/design.md) plus, when the caller has them, the new and old stream graphs: with them the two
job graphs are drawn side by side (chains as groups, edges as lines) and a line runs from the
operator that wrote each piece of state to the one it restores into, at-risk ones in the verdict's
colour. Without graphs (a published check.json alone) the savepoint's operators and the new job's
nodes are drawn without edges. What Flink refuses outside the job graph has its own tables: the state schema
diff (`schema_changes[]`: incompatible states in the RESTORE_FAILS colour with Flink's error, migrations as notes)
and the Flink 2.x configuration check (`config[]`: refused settings first, with the replacement as YAML to
paste). Pages carry no JavaScript and fetch nothing: inline CSS (light and
dark via `prefers-color-scheme`, or `theme=` forced) and inline SVG only.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from jinja2 import BytecodeCache, Environment, FileSystemBytecodeCache, FileSystemLoader, select_autoescape
from jinja2.bccache import Bucket

from upgrade_gate.cli.text_table import human_bytes
from upgrade_gate.gate.check import CheckResult
from upgrade_gate.gate.sql_remedies import text as sql_remedy_text
from upgrade_gate.vocabulary import Verdict

__all__ = ["VERDICT_COLOURS", "colour", "graph_layout", "render_html", "render_page", "render_report",
           "state_map"]

TEMPLATES = Path(__file__).with_name("templates")

# One colour per verdict, used by every badge, bar, graph highlight and the fleet table. The fleet's
# gate words (PASS/BLOCK) and an unchecked job (ERROR) borrow the colour of what they mean.
VERDICT_COLOURS: dict[str, str] = {Verdict.SAFE: "#2e7d32", Verdict.STATE_LOSS: "#e65100",
                                   Verdict.STATE_MISROUTED: "#8e24aa", "STATE_CORRUPTED": "#ad1457",
                                   Verdict.RESTORE_FAILS: "#c62828"}
_ALIASES = {"PASS": Verdict.SAFE, "BLOCK": Verdict.RESTORE_FAILS}
UNKNOWN_COLOUR = "#757575"
FLEET_PAGE = 100  # fleet jobs per page in the view


def colour(verdict: Any) -> str:
    v = str(verdict or "")
    return VERDICT_COLOURS.get(_ALIASES.get(v, v), UNKNOWN_COLOUR)


def meaning(verdict: Any) -> str:
    try:
        return Verdict(str(verdict)).meaning
    except ValueError:
        return {"PASS": "Every job of the fleet passes the gate.",
                "BLOCK": "At least one job of the fleet is blocked (or could not be checked).",
                "ERROR": "The check could not run: see the error below."}.get(str(verdict), "")


class _BestEffortBytecodeCache(FileSystemBytecodeCache):
    """Jinja2's own cache of compiled templates (a private per-user directory it creates and checks): compiling
    the report's templates was about a quarter of an HTML check's CPU time, paid again by every process
    (docs/performance.md, "A check's own cost"). A cache is never a reason to lose a report: one that cannot be
    read or written (a full or read-only disk) is skipped and the templates are compiled as before."""

    def load_bytecode(self, bucket: Bucket) -> None:
        with contextlib.suppress(OSError):
            super().load_bytecode(bucket)

    def dump_bytecode(self, bucket: Bucket) -> None:
        with contextlib.suppress(OSError):
            super().dump_bytecode(bucket)


def _bytecode_cache() -> BytecodeCache | None:
    try:
        return _BestEffortBytecodeCache()
    except (OSError, RuntimeError):  # no private directory could be made: compile every time
        return None


def _env() -> Environment:
    env = Environment(loader=FileSystemLoader(str(TEMPLATES)), autoescape=select_autoescape(["j2", "html"]),
                      trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
                      bytecode_cache=_bytecode_cache())
    env.filters["human_bytes"] = human_bytes
    env.globals.update(colour=colour, meaning=meaning, verdicts=[v.value for v in Verdict.mildest_first()])
    return env


_ENV = _env()


# ---- graphs ------------------------------------------------------------------------------------

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


def _graph_picture(check: dict[str, Any], graphs: dict[str, Any]) -> dict[str, Any] | None:
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


# ---- the other pictures ------------------------------------------------------------------------

def _bars(ops: list[dict[str, Any]]) -> dict[str, Any] | None:
    """State per operator, the lost part in the verdict colour; labels are outside the bars and the
    canvas is wide enough for the longest label (nothing clipped)."""
    ops = [o for o in ops if int(o.get("state_bytes") or 0) > 0]
    if not ops:
        return None
    top = max(int(o["state_bytes"]) for o in ops)
    label_w, bar_w, row = 250, 380, 24
    rows = []
    for i, o in enumerate(ops):
        total, lost = int(o["state_bytes"]), min(int(o.get("lost_bytes") or 0), int(o["state_bytes"]))
        name = str(o.get("name") or o["operator_id"][:8])
        note = f"{human_bytes(total)}" + (f", {human_bytes(lost)} at risk" if lost else "")
        rows.append({"y": i * row, "name": name if len(name) <= 34 else name[:33] + "…", "full": name,
                     "kept": bar_w * (total - lost) / top, "lost": bar_w * lost / top, "note": note})
    return {"rows": rows, "label_w": label_w, "width": label_w + bar_w + 190, "height": len(ops) * row + 4}


def _rescales(ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Operators whose parallelism or max parallelism changes: per-subtask key groups and bytes."""
    out = []
    for o in ops:
        r = o.get("rescale")
        if not r or not r.get("subtasks"):
            continue
        if r.get("old_parallelism") == r.get("new_parallelism") and \
                r.get("old_max_parallelism") == r.get("max_parallelism"):
            continue
        if not any(s.get("bytes") for s in r["subtasks"]):  # stateless: nothing to redistribute
            continue
        maxp = int(r["max_parallelism"])
        old_ranges: dict[int, list[int]] = {}
        for s in r["subtasks"]:
            for p in s.get("keyed_from") or []:
                a, b = p["key_groups"]
                lo, hi = old_ranges.get(p["old_subtask"], [a, b])
                old_ranges[p["old_subtask"]] = [min(lo, a), max(hi, b)]
        scale = 560 / max(1, maxp)
        bars, y = [], 0
        for title, rows in (("old", sorted(old_ranges.items())),
                            ("new", [(s["index"], s["key_groups"]) for s in r["subtasks"]])):
            for idx, (a, b) in rows:
                bars.append({"y": y, "label": f"{title} #{idx}", "x": 80 + a * scale,
                             "w": max(1.0, (b - a + 1) * scale), "old": title == "old", "a": a, "b": b})
                y += 16
            y += 6
        subtasks = [{"index": s["index"], "key_groups": s["key_groups"], "bytes": s.get("bytes"),
                     "from": sorted({p["old_subtask"] for p in s.get("keyed_from") or []}
                                    | {i for e in (s.get("operator_state") or {}).values() for i in e["from"]})}
                    for s in r["subtasks"]]
        out.append({"name": o.get("name") or o["operator_id"], "rescale": r, "subtasks": subtasks,
                    "bars": bars if old_ranges else [], "height": y, "maxp": maxp,
                    "received": sum(int(x.get("bytes") or 0) for x in r["subtasks"]),
                    "holds": int(o.get("state_bytes") or 0), "why": _rescale_sum(o, r)})
    return out


def _is_new_operator(o: dict[str, Any]) -> bool:
    return str(o.get("note") or "").startswith("new operator")


def _rescale_sum(o: dict[str, Any], r: dict[str, Any]) -> list[str]:
    """Why the subtasks' bytes differ from what the operator holds, when they do: list state given whole to every
    subtask (UNION, BROADCAST), and coordinator state (restored by the operator coordinator, no subtask's)."""
    received = sum(int(x.get("bytes") or 0) for x in r["subtasks"])
    holds = int(o.get("state_bytes") or 0)
    whole = sorted({name for x in r["subtasks"] for name, e in (x.get("operator_state") or {}).items()
                    if e.get("mode") in ("UNION", "BROADCAST")})
    out = []
    if whole:
        out.append(f"list state {', '.join(whole)} is given whole to every subtask (UNION / BROADCAST), so it is "
                   f"counted once per subtask")
    if received < holds and "coordinator" in (o.get("state_names") or []):
        out.append(f"{human_bytes(holds - received)} is coordinator state, restored by the source's coordinator, "
                   f"not by a subtask")
    return out


def _remedies(check: dict[str, Any]) -> list[dict[str, Any]]:
    """Each remedy as the line to paste into the job (`.uid("x")` on the named operator)."""
    out = []
    for r in check.get("remedies") or []:
        if isinstance(r, str):
            out.append({"node_name": None, "code": r, "reason": ""})
            continue
        action = r.get("action")
        code = f'// on operator "{r.get("node_name")}"\n.{action}' if action else None
        out.append({**r, "code": code})
    for loss in check.get("losses") or []:  # SQL: the script change a real restore proved (gate/sql_remedies.py)
        r = loss.get("sql_remedy")
        if r:
            sql = loss.get("sql") or {}
            where = sql.get("operator") or loss.get("name") or loss["operator_id"]
            out.append({"node_name": where + (f" of {sql['statement']}" if sql.get("statement") else ""),
                        "matched_by": None, "reason": sql_remedy_text(r), "code": r.get("apply"), "sql": True})
    return out


# ---- states ------------------------------------------------------------------------------------

def state_map(savepoint: Any, opener: Any = None) -> dict[str, list[dict[str, Any]]]:
    """Every operator's states as `upgrade-gate inspect` lists them (`states` of its JSON), by operator id:
    what the report's State section shows. `savepoint`: a parsed `CheckpointMetadata` or any name
    `load_savepoint` reads. Unreadable state files are skipped here (the check already warns about them)."""
    from upgrade_gate.cli.commands.inspect import states_json
    from upgrade_gate.flink.state_meta import read_state_schemas
    from upgrade_gate.storage.savepoints import load_savepoint
    from upgrade_gate.storage.state_files import state_stream_opener

    metadata = load_savepoint(savepoint) if isinstance(savepoint, str) else savepoint
    schemas = read_state_schemas(metadata, opener or state_stream_opener(), tolerant=True)
    return {op.operator_id: states_json(op) for op in schemas if op.states}


def _state_sections(check: dict[str, Any], states: dict[str, list[dict[str, Any]]] | None) -> list[dict[str, Any]]:
    """One block per operator with state: its states, kinds and serializers, and the ones the gate's Kryo
    rule flags (the `corrupted` losses of the check) marked with the rule's reason for that state.

    Without the state meta information (a published check.json alone) the flagged states are still listed,
    from the losses, so the view never hides what blocks the upgrade."""
    from upgrade_gate.cli.commands.inspect import shown_serializer, snapshot_label, state_notes

    states = states if states is not None else check.get("states")
    if states is None:  # per-operator `states`, if a caller put them on the operator rows
        states = {o["operator_id"]: o["states"] for o in check.get("operators") or [] if o.get("states")}
    flagged: dict[str, dict[str, str]] = {}
    for x in check.get("losses") or []:
        if x.get("corrupted"):
            for name in x.get("state_names") or []:
                flagged.setdefault(x["operator_id"], {})[name] = str(x.get("reason") or "")
    names = {o["operator_id"]: o.get("name") or o.get("uid") for o in check.get("operators") or []
             if o.get("operator_id")}
    for x in check.get("losses") or []:
        names.setdefault(x["operator_id"], x.get("name"))
    out = []
    for op_id in dict.fromkeys([*(states or {}), *flagged]):
        rows = []
        for s in (states or {}).get(op_id) or []:
            reason = flagged.get(op_id, {}).get(s["name"])
            if reason is not None:  # the rule's words for this state's own Kryo snapshots, else the loss's
                why = [f"{k['path'] + ': ' if k['path'] else ''}{k['why']}" for k in s.get("kryo") or ()
                       if k["collection_or_custom"]]
                reason = "; ".join(why) or reason
            rows.append({"name": s["name"], "kind": s["kind"], "mode": s.get("distribution_mode"),
                         "serializer": shown_serializer(s), "snapshot": snapshot_label(s),
                         "notes": [n for n in state_notes(s, written_by_1x=False) if reason is None or
                                   not n.startswith(("Kryo", "custom"))],
                         "flagged": reason is not None, "reason": reason})
        listed = {r["name"] for r in rows}
        for name, reason in flagged.get(op_id, {}).items():
            if name not in listed:
                rows.append({"name": name, "kind": "", "mode": None, "serializer": "", "snapshot": "",
                             "notes": [], "flagged": True, "reason": reason})
        key = next((s.get("key_serializer") for s in (states or {}).get(op_id) or [] if s.get("key_serializer")),
                   None)
        out.append({"operator_id": op_id, "name": names.get(op_id), "key_serializer": key, "rows": rows,
                    "flagged": sum(r["flagged"] for r in rows)})
    return out


# ---- state schema changes and configuration ------------------------------------------------------

# the serializer a schema change is about (`StateMetaInfoSnapshot.CommonSerializerKeys`, and the diff's STATE for a
# state whose kind changed); KEY_SERIALIZER on a state is a broadcast state's map key, on "(key)" the backend's key
_ROLES = {"VALUE_SERIALIZER": "value", "NAMESPACE_SERIALIZER": "namespace", "USER_KEY_SERIALIZER": "map key",
          "STATE": "state kind"}
# `TypeSerializerSchemaCompatibility` outcomes (upgrade_gate.gate.state_schema_diff.Compat) as a reader says them
_COMPAT = {"INCOMPATIBLE": "incompatible", "MIGRATION": "compatible after migration",
           "RECONFIGURED": "compatible (reconfigured serializer)", "AS_IS": "compatible"}


def _role(change: dict[str, Any]) -> str:
    role = str(change.get("serializer") or "")
    if role == "KEY_SERIALIZER":
        return "key" if change.get("state") == "(key)" else "map key"
    return _ROLES.get(role, role.lower().replace("_", " "))


def _schema_rows(check: dict[str, Any]) -> list[dict[str, Any]]:
    """`schema_changes[]`, incompatible first: per state, what changed where (old -> new serializer) and what
    Flink's compatibility check makes of it, with Flink's error for the ones it refuses."""
    # a savepoint of Flink 1.x (metadata v3/v4) names no operator: the diff labels it by id, the check's
    # operator rows know what the new job calls it
    names = {o["operator_id"]: o.get("name") or o.get("new_node_name") for o in check.get("operators") or []
             if o.get("operator_id")}
    rows = []
    for d in check.get("schema_changes") or []:
        compat = str(d.get("compatibility") or "")
        op_id = d.get("operator_id")
        label = d.get("operator") or op_id
        rows.append({"operator": (names.get(op_id) or label) if label == op_id else label, "operator_id": op_id,
                     "state": d.get("state"), "kind": d.get("kind"), "role": _role(d),
                     "changes": [{"path": c.get("path") or "", "what": c.get("change") or "",
                                  "old": _absent(c.get("old")), "new": _absent(c.get("new"))}
                                 for c in d.get("changes") or []],
                     "compat": compat, "verdict": _COMPAT.get(compat, compat.lower()),
                     "blocking": compat == "INCOMPATIBLE", "migration": compat == "MIGRATION",
                     "error": d.get("flink_error")})
    return sorted(rows, key=lambda r: (not r["blocking"], not r["migration"]))


def _absent(serializer: Any) -> str:
    """The diff writes `-` for the side a field is missing from."""
    return "(none)" if serializer in (None, "", "-") else str(serializer)


def _yaml_scalar(value: str) -> str:
    """A value as YAML reads it back unchanged: plain when it is plainly a string, else double-quoted (JSON's
    quoting is valid YAML)."""
    plain = bool(re.fullmatch(r"[A-Za-z0-9_./:@%+-][A-Za-z0-9_./:@%+ -]*", value)) and not value.endswith(" ") \
        and value.lower() not in ("true", "false", "yes", "no", "on", "off", "null", "~") and ": " not in value
    return value if plain else json.dumps(value)


def _config_rows(check: dict[str, Any]) -> list[dict[str, Any]]:
    """`config[]` as the report lists it: what Flink refuses first, then removed, renamed and deprecated options;
    each with the replacement as YAML to paste into config.yaml where it is one setting for another.

    A refused state backend (`filesystem`, `jobmanager`) becomes `state.backend.type: hashmap`, the setting real
    Flink 2.3 ran with (tests/fixtures/savepoints/state-schemas/config/); a renamed option keeps its value under
    the new key, as Flink itself reads the deprecated key. Removed options name successors whose values mean
    something else (a heap size is not a process size): those stay prose."""
    from upgrade_gate.gate.config_rules import BACKEND_KEY, REMOVED_BACKENDS, option_changes

    table = option_changes()
    refused = {(c.get("key"), c.get("origin")) for c in check.get("config") or [] if c.get("blocking")}
    rows = []
    for c in check.get("config") or []:
        key, value = str(c.get("key") or ""), str(c.get("value") or "")
        canonical = table["renamed"].get(key, key)
        yaml, kind, covered = None, "refused", (key, c.get("origin")) in refused
        if c.get("blocking"):
            if canonical == BACKEND_KEY and value.strip().lower() in REMOVED_BACKENDS:
                yaml = f"{BACKEND_KEY}: {REMOVED_BACKENDS[value.strip().lower()]}"
        elif key in table["removed"]:
            kind = "removed"
        elif key in table["renamed"]:
            kind = "renamed"
            if not covered:  # else the refused row's replacement is the one to paste
                yaml = f"{canonical}: {_yaml_scalar(value)}"
        else:
            kind = "deprecated"
        rows.append({**c, "kind": kind, "yaml": yaml, "covered": kind == "renamed" and covered})
    order = {"refused": 0, "removed": 1, "renamed": 2, "deprecated": 3}
    return sorted(rows, key=lambda r: order[r["kind"]])


def _shown_warnings(check: dict[str, Any]) -> list[str]:
    """The check's warnings minus the ones the schema and configuration tables already show (the check
    repeats non-blocking findings as warnings for readers of the JSON and the text table)."""
    config = {f"{c.get('text')}; fix: {c.get('remedy')}" for c in check.get("config") or [] if not c.get("blocking")}
    states = tuple(f"operator {d.get('operator')}: state '{d.get('state')}' ("
                   for d in check.get("schema_changes") or [] if d.get("compatibility") != "INCOMPATIBLE")
    return [w for w in check.get("warnings") or [] if w not in config and not (states and str(w).startswith(states))]


def report_context(check: dict[str, Any], graphs: dict[str, Any] | None = None,
                   states: dict[str, list[dict[str, Any]]] | None = None) -> dict[str, Any]:
    """What the templates need; `states` (operator id -> `state_map` entries), else the check's own."""
    ops = list(check.get("operators") or [])
    risk = {x["operator_id"] for x in check.get("losses") or []} | \
           {m["operator_id"] for m in check.get("misrouted") or []}
    total = sum(int(o.get("state_bytes") or 0) for o in ops) or int(check.get("state_bytes") or 0)
    # a misrouted operator is usually also a loss (the receiver ignores it): count its bytes once
    by_op: dict[str, int] = {}
    for x in [*(check.get("losses") or []), *(check.get("misrouted") or [])]:
        by_op[x["operator_id"]] = max(by_op.get(x["operator_id"], 0), int(x.get("bytes") or 0))
    at_risk = sum(by_op.values())
    return {"check": check, "verdict": str(check.get("verdict")), "operators": ops, "risk": risk,
            "state_total": total, "bytes_at_risk": at_risk or int(check.get("lost_bytes") or 0),
            "picture": _graph_picture(check, graphs or {}), "bars": _bars(ops), "rescales": _rescales(ops),
            "remedies": _remedies(check), "state_sections": _state_sections(check, states),
            "schema_rows": _schema_rows(check), "config_rows": _config_rows(check),
            "warnings": _shown_warnings(check),
            "states_read": states is not None or check.get("states") is not None
            or any(o.get("states") for o in ops)}


def render_page(template: str, **context: Any) -> str:
    """Any report template with the shared layout; `nav` (the view's links) and `theme` are optional."""
    context.setdefault("nav", None)
    context.setdefault("theme", None)
    return _ENV.get_template(template).render(**context)


def render_report(check: dict[str, Any], graphs: dict[str, Any] | None = None,
                  states: dict[str, list[dict[str, Any]]] | None = None, **page: Any) -> str:
    """One check (its JSON) as a page: the standalone file, or the view's page with `nav`. `states`
    (`state_map`), else a `states` map in the check JSON, fills the State section."""
    return render_page("report.html.j2", **report_context(check, graphs, states), **page)


def render_html(res: CheckResult | dict[str, Any], new_graph: Any = None, old_graph: Any = None,
                states: dict[str, list[dict[str, Any]]] | None = None, repair: dict[str, Any] | None = None) -> str:
    """The standalone report of a check; pass the graphs (StreamGraph or LoadedGraph) to draw them.

    For a `CheckResult` the State section reads the savepoint's state meta information (`state_map`) unless
    `states` is given; if that cannot be read, the section lists only the states the gate flags."""
    check = res.to_json() if isinstance(res, CheckResult) else res
    if repair is not None:  # `check`'s repair offer (upgrade_gate/cli/commands/check.py, repair_offer)
        check = {**check, "repair": repair}
    if states is None and isinstance(res, CheckResult) and res.savepoint:
        try:
            states = state_map(res.savepoint)
        except Exception:  # the report must still be written: the check itself ran on the metadata
            states = None
    hasher, version = str(check.get("hasher") or "v2"), check.get("flink_version") or None
    graphs = {"new": graph_layout(new_graph, hasher, version) if new_graph is not None else None,
              "old": graph_layout(old_graph, hasher, version) if old_graph is not None else None}
    return render_report(check, graphs, states)


def fleet_rows(rows: Iterable[dict[str, Any]], *, sort: str = "severity", order: str = "desc",
               verdict: str | None = None, q: str | None = None) -> list[dict[str, Any]]:
    """The fleet summary's rows, filtered (verdict, a substring of the job name) and sorted: what the
    view's query parameters ask for."""
    out = [r for r in rows if (not verdict or str(r.get("verdict")) == verdict)
           and (not q or q.lower() in str(r.get("job", "")).lower())]

    def key(r: dict[str, Any]) -> Any:
        if sort == "job":
            return str(r.get("job", "")).lower()
        if sort in ("bytes_at_risk", "state_bytes"):
            return int(r.get(sort) or 0)
        try:
            sev = Verdict(str(r.get("verdict"))).severity
        except ValueError:
            sev = 9  # unchecked jobs first: nobody knows what they would lose
        return (sev, int(r.get("bytes_at_risk") or 0))

    return sorted(out, key=key, reverse=order != "asc")


def render_fleet(summary: dict[str, Any], rows: list[dict[str, Any]], *, links: dict[str, str] | None = None,
                 sort: str = "severity", order: str = "desc", verdict: str | None = None, q: str | None = None,
                 base_url: str | None = None, page_no: int = 1, per_page: int = FLEET_PAGE,
                 link_for: Callable[[str], str | None] | None = None, **page: Any) -> str:
    """The fleet summary table (job x verdict x bytes at risk). `base_url` (the view) turns the headers
    and verdict chips into sort/filter links, adds a search form and pages the rows (`page_no`, `per_page`:
    a 10,000-job scan is 100 pages, not one 60,000-pixel table); `link_for` names each shown job's report
    (asked only for the rows on the page). The standalone file lists every row, worst first."""
    matching = fleet_rows(rows, sort=sort, order=order, verdict=verdict, q=q)
    pages = max(1, -(-len(matching) // per_page)) if base_url else 1
    page_no = min(max(1, page_no), pages)
    shown = matching[(page_no - 1) * per_page: page_no * per_page] if base_url else matching
    links = dict(links or {})
    if link_for is not None:
        for r in shown:
            job = str(r.get("job", ""))
            if job not in links and (href := link_for(job)):
                links[job] = href
    current = {"sort": sort, "order": order, "verdict": verdict, "q": q}

    def q_url(**changes: Any) -> str:
        """This page's URL with some parameters changed (None drops one), keys in a stable order; a change of
        sort, filter or search starts again at page 1."""
        args = {k: v for k, v in sorted({**current, **changes}.items()) if v not in (None, "") and k != "page"}
        if changes.get("page", 1) != 1:
            args["page"] = changes["page"]
        return f"{base_url}?{urlencode(args)}"

    return render_page("fleet.html.j2", summary=summary, rows=shown, total=len(rows), matching=len(matching),
                       first=(page_no - 1) * per_page + 1, page_no=page_no, pages=pages, links=links,
                       sort=sort, order=order, verdict_filter=verdict, q=q, base_url=base_url, q_url=q_url,
                       gate=str(summary.get("gate") or "BLOCK"), **page)


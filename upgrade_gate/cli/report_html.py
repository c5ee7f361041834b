"""A single self-contained HTML file a person would forward: verdict first, then the operators,
the state at risk and its fixes, and inline SVG plots (old vs new key-group ranges per subtask,
bytes per operator). No JavaScript, no CDN, nothing fetched.
"""

from __future__ import annotations

from html import escape
from typing import Any

from upgrade_gate.cli.text_table import human_bytes
from upgrade_gate.gate.check import CheckResult
from upgrade_gate.vocabulary import Verdict

_COLORS = {Verdict.SAFE: "#1a7f37", Verdict.STATE_LOSS: "#b35900", Verdict.STATE_MISROUTED: "#8e24aa",
           Verdict.RESTORE_FAILS: "#c62828"}


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{escape('' if v is None else str(v))}</td>" for v in r) + "</tr>"
                   for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _bytes_plot(ops: list[dict[str, Any]]) -> str:
    ops = [o for o in ops if o["state_bytes"]]
    if not ops:
        return "<p>No operator holds state.</p>"
    top = max(o["state_bytes"] for o in ops)
    w, bar_h, label_w = 720, 18, 260
    parts = []
    for i, o in enumerate(ops):
        y = i * (bar_h + 6)
        kept = (o["state_bytes"] - o["lost_bytes"]) * (w - label_w - 80) / top
        lost = o["lost_bytes"] * (w - label_w - 80) / top
        label = escape(f"{o['name'] or o['operator_id'][:8]}")
        note = f" ({human_bytes(o['lost_bytes'])} lost)" if o["lost_bytes"] else ""
        parts.append(f'<text x="0" y="{y + 13}" font-size="12">{label}</text>'
                     f'<rect x="{label_w}" y="{y}" width="{kept:.1f}" height="{bar_h}" fill="#4a7bd0"/>'
                     f'<rect x="{label_w + kept:.1f}" y="{y}" width="{lost:.1f}" height="{bar_h}" fill="#c62828"/>'
                     f'<text x="{label_w + kept + lost + 4:.1f}" y="{y + 13}" font-size="11">'
                     f'{human_bytes(o["state_bytes"])}{note}</text>')
    h = len(ops) * (bar_h + 6)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" role="img" '
            f'aria-label="bytes per operator">{"".join(parts)}</svg>')


def _key_group_plot(o: dict[str, Any]) -> str:
    r = o["rescale"]
    maxp = r["max_parallelism"]
    w, row_h, label_w = 720, 16, 90
    scale = (w - label_w - 10) / maxp
    old_ranges: dict[int, tuple[int, int]] = {}
    for s in r["subtasks"]:
        for p in s["keyed_from"]:
            a, b = p["key_groups"]
            lo, hi = old_ranges.get(p["old_subtask"], (a, b))
            old_ranges[p["old_subtask"]] = (min(lo, a), max(hi, b))
    parts, y = [], 0
    for title, rows in (("old", sorted(old_ranges.items())), ("new", [(s["index"], tuple(s["key_groups"]))
                                                                      for s in r["subtasks"]])):
        for idx, (a, b) in rows:
            fill = "#9e9e9e" if title == "old" else "#4a7bd0"
            parts.append(f'<text x="0" y="{y + 12}" font-size="11">{title} #{idx}</text>'
                         f'<rect x="{label_w + a * scale:.1f}" y="{y}" width="{max(1.0, (b - a + 1) * scale):.1f}" '
                         f'height="{row_h - 3}" fill="{fill}"><title>{title} subtask {idx}: key groups {a}..{b}'
                         f'</title></rect>')
            y += row_h
        y += 6
    return (f'<figure><figcaption>{escape(o["name"] or o["operator_id"])}: key groups 0..{maxp - 1}, '
            f'{r["old_parallelism"]} -> {r["new_parallelism"]} subtasks</figcaption>'
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{y}" role="img">{"".join(parts)}</svg>'
            f'</figure>')


def render_html(res: CheckResult) -> str:
    color = _COLORS.get(res.verdict, "#333")
    summary = Verdict(res.verdict).meaning
    out = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{escape(res.verdict)}: "
           f"{escape(res.graph_name)} restore check</title><style>body{{font-family:sans-serif;margin:2em;"
           f"max-width:1100px}}table{{border-collapse:collapse;font-size:13px}}td,th{{border:1px solid #ccc;"
           f"padding:3px 6px;text-align:left}}.verdict{{font-size:2em;font-weight:bold;color:{color}}}"
           f"code{{background:#f4f4f4}}</style></head><body>",
           f"<div class='verdict' id='verdict'>{escape(res.verdict)}</div><p>{escape(summary)}</p>"]
    if res.flink_error:
        out.append(f"<p><b>Flink would fail with:</b> <code>{escape(res.flink_error)}</code></p>")
    if res.verdict_with_remedies:
        out.append(f"<p><b>With the remedies below applied:</b> {escape(res.verdict_with_remedies)}</p>")
    out.append(f"<p>Savepoint <code>{escape(res.savepoint)}</code> into job <code>{escape(res.graph_name)}</code> "
               f"(hasher {escape(res.hasher)}, matching {escape(res.matching)}, Flink {escape(res.flink_version)})</p>")
    out.append("<h2>Operators</h2>" + _table(
        ["operator id", "name", "matched by", "restores into", "state", "lost", "state names"],
        [[o["operator_id"], o["name"], o["matched_by"], o["new_node_name"], human_bytes(o["state_bytes"]),
          human_bytes(o["lost_bytes"]),
          ", ".join(o["state_names"])] for o in res.operators]))
    if res.misrouted:
        out.append("<h2>Misrouted state</h2>" + _table(
            ["operator id", "written by", "restored into", "should go to", "state", "evidence"],
            [[m["operator_id"], (m["writer"] or {}).get("name"), m["receiver"]["name"],
              (m["counterpart"] or {}).get("name"), ", ".join(m["state_names"]), " | ".join(m["evidence"])]
             for m in res.misrouted]))
    if res.losses:
        out.append("<h2>State at risk</h2>" + _table(
            ["operator id", "name", "size", "state", "why"],
            [[x["operator_id"], x["name"], human_bytes(x["bytes"]), ", ".join(x["state_names"]), x["reason"]]
             for x in res.losses]))
    if res.remedies:
        out.append("<h2>Remedies</h2>" + _table(
            ["for state", "on node", "do", "found by", "why"],
            [[x["operator_id"], x["node_name"], x["action"] or "(no counterpart)", x["matched_by"], x["reason"]]
             for x in res.remedies]))
    for w in res.warnings:
        out.append(f"<p><b>Warning:</b> {escape(w)}</p>")
    out.append("<h2>Bytes per operator</h2>" + _bytes_plot(list(res.operators)))
    keyed = [o for o in res.operators if o["rescale"] and any(s["keyed_from"] for s in o["rescale"]["subtasks"])]
    if keyed:
        out.append("<h2>Key groups per subtask (old vs new)</h2>" + "".join(_key_group_plot(o) for o in keyed))
    out.append("<h2>Operator ids (migration table)</h2>" + _table(
        ["node", "name", "uid", "new id", "alternative ids", "V2 id", "savepoint id", "matched by"],
        [[m["node_id"], m["name"], m["uid"], m["new_id"], " ".join(m["alternative_ids"]), m["v2_id"],
          m["savepoint_id"], m["matched_by"]] for m in res.migration]))
    out.append("</body></html>\n")
    return "".join(out)

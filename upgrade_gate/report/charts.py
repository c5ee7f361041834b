"""The report's two charts: state per operator (the part at risk in the verdict's colour) and, for an operator
whose parallelism or max parallelism changes, which key groups each new subtask takes from the old ones."""

from __future__ import annotations

from typing import Any

from upgrade_gate.report.sizes import human_bytes

__all__ = ["bars", "rescales"]


def bars(ops: list[dict[str, Any]]) -> dict[str, Any] | None:
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


def rescales(ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
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

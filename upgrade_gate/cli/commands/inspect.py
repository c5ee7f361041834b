"""`upgrade-gate inspect SAVEPOINT`: what a savepoint holds, read exactly as Flink reads it."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from upgrade_gate.flink.metadata import to_json
from upgrade_gate.storage.savepoints import load_savepoint

NAME = "inspect"
HELP = ("Read a savepoint's _metadata (a directory, a _metadata file, file:// or s3://bucket/prefix) and show its "
        "operators, state kinds, sizes and key-group ranges.")
ORDER = 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("savepoint", metavar="SAVEPOINT",
                        help="savepoint directory, _metadata file, file:// URI, or s3://bucket/prefix (a job prefix "
                             "selects its newest complete savepoint)")
    parser.add_argument("--format", choices=("json", "table"), default="json")
    parser.add_argument("--detail", action="store_true", help="JSON: include every state handle and master states")


def _kinds(sub: dict[str, Any]) -> list[str]:
    out = []
    if sub["managed_keyed"]:
        out.append("keyed")
    if sub["raw_keyed"]:
        out.append("raw-keyed")
    for key, label in (("managed_operator", ""), ("raw_operator", "raw:")):
        for h in sub[key]:
            out.extend(f"{label}{name}({s['mode'].lower()})" for name, s in h["states"].items())
    if sub["channel_state_bytes"]:
        out.append("channel")
    if sub["finished"]:
        out.append("FINISHED")
    return out


def render_table(doc: dict[str, Any]) -> str:
    props = doc.get("properties") or {}
    head = f"_metadata v{doc['version']}, checkpoint {doc['checkpoint_id']}"
    if props:
        head += f", {props.get('name') or props.get('type')}" + (f" ({props['format']})" if props.get("format") else "")
    lines = [head, ""]
    cols = ("operator id", "name / uid", "par", "max par", "bytes", "state")
    rows = []
    for op in doc["operators"]:
        names = sorted({k for s in op["subtasks"] for k in _kinds(s)})
        if op["fully_finished"]:
            names.insert(0, "FULLY FINISHED")
        if op["coordinator_state_bytes"] is not None:
            names.append(f"coordinator({op['coordinator_state_bytes']} B)")
        label = " / ".join(x for x in (op["name"], op["uid"]) if x) or "-"
        rows.append((op["operator_id"], label, str(op["parallelism"]), str(op["max_parallelism"]),
                     str(op["state_bytes"]), ", ".join(names) or "-"))
    widths = [max(len(c), *(len(r[i]) for r in rows)) if rows else len(c) for i, c in enumerate(cols)]
    fmt = "  ".join(f"{{:{'>' if i in (2, 3, 4) else '<'}{w}}}" for i, w in enumerate(widths))
    lines.append(fmt.format(*cols).rstrip())
    lines.append("  ".join("-" * w for w in widths))
    for op, row in zip(doc["operators"], rows, strict=True):
        lines.append(fmt.format(*row).rstrip())
        for s in op["subtasks"]:
            ranges = ", ".join(f"[{h['key_groups'][0]}..{h['key_groups'][1]}]"
                               for h in s["managed_keyed"] + s["raw_keyed"])
            size = sum(h["bytes"] for k in ("managed_keyed", "raw_keyed", "managed_operator", "raw_operator")
                       for h in s[k]) + s["channel_state_bytes"]
            state = "finished" if s["finished"] else f"{size} B"
            lines.append(f"    subtask {s['index']:>4}: {state}" + (f", key groups {ranges}" if ranges else ""))
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    doc = to_json(load_savepoint(args.savepoint), detail=args.detail)
    if args.format == "json":
        json.dump(doc, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render_table(doc))
    return 0

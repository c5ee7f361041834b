"""`upgrade-gate inspect SAVEPOINT`: what a savepoint holds, read exactly as Flink reads it.

Besides the `_metadata` (operators, handles, sizes), every operator lists its states as the state handles'
serialization proxies name them (`states`: name, kind, TTL, serializers with their nested snapshots; see
upgrade_gate/flink/state_meta/)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from upgrade_gate.cli.text_table import human_bytes, paragraph, render
from upgrade_gate.flink.metadata import to_json
from upgrade_gate.flink.state_meta import OperatorSchemas, read_state_schemas
from upgrade_gate.storage import discovery
from upgrade_gate.storage.savepoints import load_savepoint
from upgrade_gate.storage.state_files import state_stream_opener

NAME = "inspect"
HELP = ("Read a savepoint's _metadata (a directory, a _metadata file, file:// or s3://bucket/prefix) and show its "
        "operators, state kinds, sizes and key-group ranges.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("savepoint", metavar="SAVEPOINT",
                        help="savepoint directory, _metadata file, file:// URI, or s3://bucket/prefix (a job prefix "
                             "selects its newest complete savepoint); or where Flink keeps it: "
                             "latest:DIR?job-id=JOBID, flink-rest://HOST:PORT/JOB, k8s:FILE.yaml")
    parser.add_argument("--format", choices=("table", "json"), default=None,
                        help="default: a table on a terminal, JSON when piped (scripts keep getting JSON)")
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


def states_json(op: OperatorSchemas) -> list[dict[str, Any]]:
    """One entry per state of the operator: what it is and how it is serialized (additive to the doc)."""
    out = []
    for s in op.states:
        value = s.serializer("VALUE_SERIALIZER")
        user_key = s.serializer("USER_KEY_SERIALIZER") or (s.serializer("KEY_SERIALIZER")
                                                           if s.backend_type == "BROADCAST" else None)
        entry: dict[str, Any] = {"name": s.name, "kind": s.kind, "backend_type": s.backend_type, "ttl": s.ttl,
                                 "serializer": value.describe() if value else None}
        if user_key is not None:
            entry["map_key_serializer"] = user_key.describe()
        if s.backend_type in ("KEY_VALUE", "KEY_VALUE_V2", "PRIORITY_QUEUE") and op.key_serializer is not None:
            entry["key_serializer"] = op.key_serializer.describe()
        entry["serializers"] = {role: snap.view() for role, snap in sorted(s.serializers)}
        out.append(entry)
    return out


def add_states(doc: dict[str, Any], schemas: tuple[OperatorSchemas, ...]) -> dict[str, Any]:
    """Put each operator's `states` (and, if some handle could not be read, `states_incomplete`) into `doc`."""
    by_id = {op.operator_id: op for op in schemas}
    for op in doc["operators"]:
        schema = by_id.get(op["operator_id"])
        op["states"] = states_json(schema) if schema is not None else []
        if schema is not None and schema.incomplete:
            op["states_incomplete"] = list(schema.incomplete)
    return doc


def render_table(doc: dict[str, Any]) -> str:
    props = doc.get("properties") or {}
    head = f"_metadata v{doc['version']}, checkpoint {doc['checkpoint_id']}"
    if props:
        head += f", {props.get('name') or props.get('type')}" + (f" ({props['format']})" if props.get("format") else "")
    rows, subtasks = [], []
    for op in doc["operators"]:
        names = sorted({k for s in op["subtasks"] for k in _kinds(s)})
        if op["fully_finished"]:
            names.insert(0, "FULLY FINISHED")
        if op["coordinator_state_bytes"] is not None:
            names.append(f"coordinator({human_bytes(op['coordinator_state_bytes'])})")
        label = " / ".join(x for x in (op["name"], op["uid"]) if x) or "-"
        rows.append((op["operator_id"], label, op["parallelism"], op["max_parallelism"],
                     human_bytes(op["state_bytes"]), ", ".join(names) or "-"))
        for s in op["subtasks"]:
            keyed = s["managed_keyed"] + s["raw_keyed"]
            ranges = ", ".join(f"{h['key_groups'][0]}-{h['key_groups'][1]}" for h in keyed)
            size = sum(h["bytes"] for k in ("managed_keyed", "raw_keyed", "managed_operator", "raw_operator")
                       for h in s[k]) + s["channel_state_bytes"]
            subtasks.append((op["name"] or op["uid"] or op["operator_id"], s["index"],
                             "finished" if s["finished"] else human_bytes(size), ranges))
    out = [head, "", render(("operator id", "name / uid", "par", "max par", "state", "state names"), rows,
                            wrap={"name / uid", "state names"}, right={"par", "max par", "state"})]
    if subtasks:
        out += ["", render(("operator", "subtask", "state", "key groups"), subtasks, title="Subtasks",
                           wrap={"operator", "key groups"}, right={"subtask", "state"})]
    states, notes = [], []
    for op in doc["operators"]:
        label = op["name"] or op["uid"] or op["operator_id"]
        for s in op.get("states", ()):
            serializer = s["serializer"] or "-"
            if s.get("map_key_serializer"):
                serializer = f"{s['map_key_serializer']} -> {serializer}"
            flags = ", ".join(x for x in ("TTL" if s["ttl"] else "",
                                          f"key {s['key_serializer']}" if s.get("key_serializer") else "") if x)
            states.append((label, s["name"], s["kind"], serializer, flags or "-"))
        unread = op.get("states_incomplete", ())
        if unread:
            more = f" (and {len(unread) - 1} more handles)" if len(unread) > 1 else ""
            notes.append(f"{label}: {unread[0]}{more}")
    if states:
        out += ["", render(("operator", "state", "kind", "serializer", "notes"), states, title="States",
                           wrap={"operator", "state", "serializer", "notes"})]
    if notes:
        out += ["", "State meta information not read:", *(paragraph(f"  {n}", indent="    ") for n in notes)]
    return "\n".join(out) + "\n"


def run(args: argparse.Namespace) -> int:
    if discovery.is_discovery(args.savepoint):  # latest:DIR?job-id=, flink-rest://, k8s:FILE
        metadata, found = discovery.load(args.savepoint)
        print(f"savepoint: {metadata.source} ({found.how})", file=sys.stderr)
    else:
        metadata = load_savepoint(args.savepoint)
    doc = add_states(to_json(metadata, detail=args.detail), read_state_schemas(metadata, state_stream_opener()))
    if (args.format or ("table" if sys.stdout.isatty() else "json")) == "json":
        json.dump(doc, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render_table(doc))
    return 0

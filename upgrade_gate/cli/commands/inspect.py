"""`upgrade-gate inspect SAVEPOINT`: what a savepoint holds, read exactly as Flink reads it.

Besides the `_metadata` (operators, handles, sizes), every operator lists its states as the state handles'
serialization proxies name them (`states`: name, kind, TTL, serializers with their nested snapshots; see
upgrade_gate/flink/state_meta/)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from upgrade_gate.flink.metadata import to_json
from upgrade_gate.flink.state_meta import OperatorSchemas, read_state_schemas
from upgrade_gate.gate.state_schema_rules import LAST_1X_METADATA_VERSION
from upgrade_gate.report.sizes import human_bytes
from upgrade_gate.report.states import shown_serializer, snapshot_label, state_notes, states_json
from upgrade_gate.report.text_table import paragraph, render
from upgrade_gate.storage import discovery
from upgrade_gate.storage.savepoints import load_newest_complete
from upgrade_gate.storage.state_files import external_files_json, state_stream_opener

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


def add_states(doc: dict[str, Any], schemas: tuple[OperatorSchemas, ...]) -> dict[str, Any]:
    """Put each operator's `states` (and, if some handle could not be read, `states_incomplete`) into `doc`."""
    by_id = {op.operator_id: op for op in schemas}
    for op in doc["operators"]:
        schema = by_id.get(op["operator_id"])
        op["states"] = states_json(schema) if schema is not None else []
        if schema is not None and schema.incomplete:
            op["states_incomplete"] = list(schema.incomplete)
    return doc


def _states_tables(doc: dict[str, Any]) -> list[str]:
    """One small table per operator with states, under a line naming the operator and its key serializer."""
    out: list[str] = []
    written_by_1x = int(doc["version"]) <= LAST_1X_METADATA_VERSION
    for op in doc["operators"]:
        states = op.get("states") or ()
        if not states:
            continue
        label = " / ".join(x for x in (op["name"], op["uid"]) if x) or "(no name in _metadata)"
        title = f"{label} ({op['operator_id']})"
        key = next((s["key_serializer"] for s in states if s.get("key_serializer")), None)
        if key:
            title += f", key serializer {key}"
        rows = []
        for s in states:
            mode = (s.get("distribution_mode") or "").lower().replace("_", "-")
            kind = s["kind"] + (f" ({mode})" if mode and mode != s["kind"] else "")
            rows.append((s["name"], kind, shown_serializer(s), snapshot_label(s),
                         "; ".join(state_notes(s, written_by_1x)) or "-"))
        out += ["", render(("state", "kind", "serializer", "snapshot", "notes"), rows, title=title,
                           wrap={"state", "serializer", "notes"})]
    return out


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
    notes = []
    for op in doc["operators"]:
        unread = op.get("states_incomplete", ())
        if unread:
            more = f" (and {len(unread) - 1} more handles)" if len(unread) > 1 else ""
            notes.append(f"{op['name'] or op['uid'] or op['operator_id']}: {unread[0]}{more}")
    tables = _states_tables(doc)
    if tables:
        out += ["", paragraph("States (from each state handle's serialization proxy; snapshot: the serializer "
                              "snapshot class and version)", indent=""), *tables]
    if notes:
        out += ["", "State meta information not read:", *(paragraph(f"  {n}", indent="    ") for n in notes)]
    out += external_files_lines(doc.get("external_files") or {})
    return "\n".join(out) + "\n"


def external_files_lines(ext: dict[str, Any]) -> list[str]:
    """The files a retained checkpoint needs outside its own directory (shared SSTs, task-owned files)."""
    if not ext.get("count"):
        return []
    rows = [(f["relative"] or f["path"], human_bytes(f["bytes"]),
             "moved (beside this copy)" if f["found"].startswith("moved") else f["found"]) for f in ext["files"]]
    folders = sorted({f["path"][:len(f["path"]) - len(f["relative"])] for f in ext["files"] if f["relative"]})
    missing = f"; {ext['missing']} of them missing" if ext.get("missing") else ""
    title = (f"Files outside {ext['snapshot_dir']}: {ext['count']} ({human_bytes(ext['bytes'])}){missing}. "
             f"They must not be deleted before the upgrade has restored from this snapshot"
             + (f" (recorded under {', '.join(folders)})" if folders else ""))
    return ["", render(("file", "size", "found"), rows, title=title, wrap={"file"}, right={"size"})]


def run(args: argparse.Namespace) -> int:
    if discovery.is_discovery(args.savepoint):  # latest:DIR?job-id=, flink-rest://, k8s:FILE
        metadata, found = discovery.load(args.savepoint)
        print(f"savepoint: {metadata.source} ({found.how})", file=sys.stderr)
        for warning in found.warnings():
            print(f"warning: {warning}", file=sys.stderr)
    else:
        loaded = load_newest_complete(args.savepoint)
        for skipped in loaded.skipped:
            print(f"warning: {skipped}; read {loaded.source}", file=sys.stderr)
        metadata = loaded.metadata
    doc = add_states(to_json(metadata, detail=args.detail), read_state_schemas(metadata, state_stream_opener()))
    doc["external_files"] = external_files_json(metadata, metadata.source.rsplit("/", 1)[0])
    if (args.format or ("table" if sys.stdout.isatty() else "json")) == "json":
        json.dump(doc, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render_table(doc))
    return 0

"""A savepoint's states as every report shows them: `states` entries per operator (what `upgrade-gate inspect`
prints and the check's HTML report and Airflow's published check.json carry), the words a reader sees for a
serializer, and the HTML report's State section.

Reading the state files is the caller's (`upgrade_gate.storage.state_files.read_savepoint_states`): these functions
get the state meta information already read, so a report renders the same wherever its states came from."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from upgrade_gate.flink.state_meta import OperatorSchemas
from upgrade_gate.flink.state_meta.model import short_name
from upgrade_gate.gate.state_schema_rules import kryo_misreads

__all__ = ["shown_serializer", "snapshot_label", "state_map", "state_notes", "state_sections", "states_json"]


def _kryo_findings(op: OperatorSchemas) -> dict[str, list[dict[str, Any]]]:
    """Per state name, every Kryo snapshot in its serializers as the gate's Kryo rule judges it
    (`upgrade_gate.gate.state_schema_rules.kryo_misreads`: one implementation, never re-derived here).
    `collection_or_custom`: what Flink 2.x (Kryo 5) misreads when Flink 1.x (Kryo 2) wrote it."""
    out: dict[str, list[dict[str, Any]]] = {}
    for m in kryo_misreads((op,)):
        out.setdefault(m.state.name, []).append({"path": m.path, "role": m.role, "type": m.snapshot.type_name,
                                                 "collection_or_custom": m.blocking, "why": m.why})
    return out


def states_json(op: OperatorSchemas) -> list[dict[str, Any]]:
    """One entry per state of the operator: what it is and how it is serialized (additive to `inspect`'s doc).

    `serializer` is the compact type (`SerializerSnapshot.describe`), `serializer_class`/`serializer_version`
    the state's own `TypeSerializerSnapshot` and the version it was written with, `distribution_mode` the
    operator state's `OperatorStateHandle.Mode`, `kryo` the Kryo snapshots found anywhere in its serializers."""
    kryo = _kryo_findings(op)
    out = []
    for s in op.states:
        value = s.serializer("VALUE_SERIALIZER")
        user_key = s.serializer("USER_KEY_SERIALIZER") or (s.serializer("KEY_SERIALIZER")
                                                           if s.backend_type == "BROADCAST" else None)
        entry: dict[str, Any] = {"name": s.name, "kind": s.kind, "backend_type": s.backend_type, "ttl": s.ttl,
                                 "serializer": value.describe() if value else None,
                                 "serializer_class": value.class_name if value else None,
                                 "serializer_version": value.version if value else None}
        mode = s.option("OPERATOR_STATE_DISTRIBUTION_MODE")
        if mode:
            entry["distribution_mode"] = mode
        if user_key is not None:
            entry["map_key_serializer"] = user_key.describe()
        if s.backend_type in ("KEY_VALUE", "KEY_VALUE_V2", "PRIORITY_QUEUE") and op.key_serializer is not None:
            entry["key_serializer"] = op.key_serializer.describe()
        entry["kryo"] = kryo.get(s.name, [])
        entry["serializers"] = {role: snap.view() for role, snap in sorted(s.serializers)}
        out.append(entry)
    return out


def state_map(schemas: Iterable[OperatorSchemas]) -> dict[str, list[dict[str, Any]]]:
    """Every operator's states (`states_json`), by operator id: what the report's State section shows. Operators
    without states are left out."""
    return {op.operator_id: states_json(op) for op in schemas if op.states}


def shown_serializer(state: dict[str, Any]) -> str:
    """The serializer as a reader wants it: the user's type (a TTL wrapper shows what it wraps; TTL is a
    note), a map state's and broadcast state's key type before the value's."""
    text = state["serializer"] or "-"
    if state["ttl"] and text.startswith("Ttl<") and text.endswith(">"):
        # TtlSerializer nests (timestamp Long, the user's serializer): show the user's
        inner = text[4:-1]
        text = inner.split(", ", 1)[1] if inner.startswith("Long, ") else inner
    if state.get("map_key_serializer") and not text.startswith("Map<"):
        text = f"{state['map_key_serializer']} -> {text}"
    return text


def state_notes(state: dict[str, Any], written_by_1x: bool) -> list[str]:
    """Short notes on one state: TTL, and what the Kryo rule says of the Kryo snapshots in its serializers
    (the serializer column shows where they are).

    A collection or a custom serializer under Kryo is "CORRUPTED on Flink 2.x" in a savepoint Flink 1.x wrote
    (what the gate's STATE_CORRUPTED verdict is about); in a 2.x savepoint it is only named."""
    notes = ["TTL"] if state["ttl"] else []
    kryo = state.get("kryo") or ()
    custom = any(k["collection_or_custom"] and k["why"].startswith("custom Kryo serializer") for k in kryo)
    collection = any(k["collection_or_custom"] and not k["why"].startswith("custom Kryo serializer") for k in kryo)
    what = ", ".join(x for x in ("Kryo collection" if collection else "",
                                 "custom Kryo serializer" if custom else "") if x)
    if what:
        notes.append(f"CORRUPTED on Flink 2.x ({what})" if written_by_1x else what)
    elif kryo:
        notes.append("Kryo")
    return notes


def snapshot_label(state: dict[str, Any]) -> str:
    """`Pojo v2`: the state's own serializer snapshot class (short) and the version it was written with."""
    if not state.get("serializer_class"):
        return "-"
    return f"{short_name(state['serializer_class'])} v{state['serializer_version']}"


def state_sections(check: dict[str, Any], states: dict[str, list[dict[str, Any]]] | None) -> list[dict[str, Any]]:
    """One block per operator with state: its states, kinds and serializers, and the ones the gate's Kryo
    rule flags (the `corrupted` losses of the check) marked with the rule's reason for that state.

    Without the state meta information (a published check.json alone) the flagged states are still listed,
    from the losses, so the view never hides what blocks the upgrade."""
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

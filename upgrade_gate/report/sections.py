"""The report's tables beside its pictures: the remedies as lines to paste, the state schema diff (what Flink
refuses first), the Flink 2.x configuration check with the replacement as YAML, and the warnings those tables do
not already show."""

from __future__ import annotations

import json
import re
from typing import Any

from upgrade_gate.gate.sql_remedies import text as sql_remedy_text

__all__ = ["config_rows", "remedies", "schema_rows", "shown_warnings"]


def remedies(check: dict[str, Any]) -> list[dict[str, Any]]:
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


def schema_rows(check: dict[str, Any]) -> list[dict[str, Any]]:
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


def config_rows(check: dict[str, Any]) -> list[dict[str, Any]]:
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


def shown_warnings(check: dict[str, Any]) -> list[str]:
    """The check's warnings minus the ones the schema and configuration tables already show (the check
    repeats non-blocking findings as warnings for readers of the JSON and the text table)."""
    config = {f"{c.get('text')}; fix: {c.get('remedy')}" for c in check.get("config") or [] if not c.get("blocking")}
    states = tuple(f"operator {d.get('operator')}: state '{d.get('state')}' ("
                   for d in check.get("schema_changes") or [] if d.get("compatibility") != "INCOMPATIBLE")
    return [w for w in check.get("warnings") or [] if w not in config and not (states and str(w).startswith(states))]

"""A check's findings as one flat list for the pull-request formats (Markdown, GitHub annotations, JUnit, SARIF),
and the one-line summary they all print.

Read from the check's JSON document (`CheckResult.to_json()` plus `repair`), as every renderer is (docs/design.md,
"JSON at the edge"): the Airflow steps hand that document on, so a CI annotation and a gate run's alert say the same.
Each entry carries a stable rule id (`RULES`), one per kind of finding of `upgrade_gate/gate/findings.py` as the
JSON shows it; code scanning and CI tools key their history on these ids, so they are never renamed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from upgrade_gate.report.sizes import human_bytes
from upgrade_gate.vocabulary import Verdict

__all__ = ["RULES", "Risk", "RuleInfo", "at_risk_bytes", "by_operator", "caveat", "operator_changes", "risks",
           "summary_line"]

TYPES_NOT_COMPARED = "state types not compared"


@dataclass(frozen=True, slots=True)
class RuleInfo:
    """A kind of finding: its short title, what it means, and the level a CI tool shows it at."""

    title: str
    description: str
    level: str  # error | warning | note (SARIF's `level`, GitHub's ::error / ::warning / ::notice)


RULES: dict[str, RuleInfo] = {
    "restore-refused": RuleInfo("Flink refuses the restore",
                                "Flink will refuse to start the new job from this savepoint (Refused).", "error"),
    "state-loss": RuleInfo("State lost", "The restore succeeds, but this state is dropped or reset (Loss).", "error"),
    "state-corrupted": RuleInfo("State restored corrupted",
                                "The new Flink reads this state back wrong (Loss, corrupted: the Kryo rule).",
                                "error"),
    "state-misrouted": RuleInfo("State restored into the wrong operator",
                                "The state lands on an operator that did not write it (Misrouted).", "error"),
    "sql-meaning-changed": RuleInfo("SQL state restored under another meaning",
                                    "A SQL operator kept its ID, but the new query means something else by its state "
                                    "(MeaningChanged).", "error"),
    "schema-incompatible": RuleInfo("State schema change Flink cannot migrate",
                                    "A state's serializer changed incompatibly: the restore fails (SchemaCompared).",
                                    "error"),
    "schema-migrated": RuleInfo("State schema migrated on restore",
                                "A state's serializer changed; the backend rewrites the state on restore "
                                "(SchemaCompared).", "note"),
    "config-refused": RuleInfo("Configuration the new Flink refuses",
                               "A setting of the new job that the new Flink refuses: the job will not start "
                               "(ConfigChecked).", "error"),
    "config-changed": RuleInfo("Configuration removed or renamed",
                               "A setting the new Flink removed or renamed (ConfigChecked).", "warning"),
    "state-types-not-compared": RuleInfo("State types not compared",
                                         "Restored states' serializers were compared with nothing: pass "
                                         "--new-job-savepoint (TypesNotCompared).", "note"),
    "gate-warning": RuleInfo("Needs a look", "Something the evidence cannot settle (Note).", "warning"),
}


@dataclass(frozen=True, slots=True)
class Risk:
    """One finding as a CI tool shows it: `rule` a `RULES` id; `operator_id` None for the restore or the job."""

    rule: str
    verdict: Verdict
    operator_id: str | None
    name: str | None
    state_names: tuple[str, ...]
    nbytes: int
    role: str | None
    consequence: str | None
    message: str
    details: str

    @property
    def level(self) -> str:
        return RULES[self.rule].level

    @property
    def label(self) -> str:
        """How a person knows the operator: its name, else its ID."""
        return self.name or self.operator_id or "the job"


def risks(doc: Mapping[str, Any]) -> list[Risk]:
    """Every finding of a check: the restore's refusal, then losses, misrouting, schema and configuration findings,
    then the warnings. Errors come before warnings and notes within each kind's order of appearance."""
    out: list[Risk] = []
    if not doc["restore_succeeds"]:
        out.append(Risk("restore-refused", Verdict.RESTORE_FAILS, None, None, (), 0, None, None,
                        f"Flink would fail with: {doc['flink_error']}", ""))
    for x in doc["losses"]:
        corrupted = bool(x.get("corrupted"))
        consequence = x.get("consequence") or None
        out.append(Risk("state-corrupted" if corrupted else "state-loss",
                        Verdict.STATE_CORRUPTED if corrupted else Verdict.STATE_LOSS, x["operator_id"], x["name"],
                        tuple(x["state_names"]), int(x["bytes"]), x.get("role"), consequence,
                        consequence or x["reason"], _details(x["reason"], x)))
    for m in doc["misrouted"]:
        writer = (m.get("writer") or {}).get("name") or "?"
        receiver = (m.get("receiver") or {}).get("name") or "?"
        meaning = m["detected_by"] == "sql-meaning"
        said = (f"restored into '{receiver}' under another meaning" if meaning
                else f"restored into the wrong operator (written by '{writer}', restored into '{receiver}')")
        out.append(Risk("sql-meaning-changed" if meaning else "state-misrouted", Verdict.STATE_MISROUTED,
                        m["operator_id"], m["name"] or writer, tuple(m["state_names"]), int(m["bytes"]),
                        m.get("role"), said, said, _details("\n".join(m["evidence"]), m)))
    for d in doc["schema_changes"]:
        changes = "; ".join(f"{c['path'] + ': ' if c['path'] else ''}{c['change']} ({c['old']} -> {c['new']})"
                            for c in d["changes"])
        blocking = d["compatibility"] == "INCOMPATIBLE"
        out.append(Risk("schema-incompatible" if blocking else "schema-migrated",
                        Verdict.RESTORE_FAILS if blocking else Verdict.SAFE, d["operator_id"], d["operator"],
                        (d["state"],), 0, None, None,
                        f"state '{d['state']}' ({d['kind']}): {changes}",
                        f"{changes}\nFlink: {d['flink_error']}" if d["flink_error"] else changes))
    for c in doc["config"]:
        out.append(Risk("config-refused" if c["blocking"] else "config-changed",
                        Verdict.RESTORE_FAILS if c["blocking"] else Verdict.SAFE, None, c["key"], (), 0, None, None,
                        c["text"], f"{c['text']}\nFix: {c['remedy']}" + (f"\nFlink: {c['flink_error']}"
                                                                          if c["flink_error"] else "")))
    for w in doc["warnings"]:
        rule = "state-types-not-compared" if w.startswith(TYPES_NOT_COMPARED) else "gate-warning"
        out.append(Risk(rule, Verdict.SAFE, None, None, (), 0, None, None, w, w))
    return out


def _details(first: str, entry: Mapping[str, Any]) -> str:
    """The reason, the states with their roles, and a SQL finding in query terms."""
    lines = [first]
    roles = entry.get("state_roles") or {}
    if entry.get("state_names"):
        lines.append("states: " + ", ".join(f"{n} ({roles[n]})" if n in roles else n for n in entry["state_names"]))
    sql = entry.get("sql")
    if sql:
        lines.append(f"SQL: {sql['statement']}: {sql['operator']} ({sql['state']})")
    remedy = entry.get("sql_remedy")
    if remedy:
        lines.append(f"SQL remedy: {remedy['text']}")
    return "\n".join(lines)


def by_operator(found: list[Risk]) -> list[list[Risk]]:
    """The blocking findings grouped by the operator they are about, the worst first in each group: one annotation
    or test case per operator at risk (a misrouted state is usually a loss of its writer's counterpart too)."""
    groups: dict[str, list[Risk]] = {}
    for r in found:
        if r.verdict.blocks and r.operator_id is not None:
            groups.setdefault(r.operator_id, []).append(r)
    return [sorted(g, key=lambda r: -r.verdict.severity) for g in groups.values()]


def at_risk_bytes(doc: Mapping[str, Any]) -> dict[str, int]:
    """Bytes at risk per savepoint operator; a misrouted state usually is a loss too: its bytes count once (as the
    table's plan line counts them, `check_table.plan_line`)."""
    out: dict[str, int] = {}
    for x in (*doc["losses"], *doc["misrouted"]):
        out[x["operator_id"]] = max(out.get(x["operator_id"], 0), int(x.get("bytes") or 0))
    return out


def operator_changes(doc: Mapping[str, Any]) -> tuple[int, int, int] | None:
    """(added, removed, changed) operators, as a plan counts resources: added = new operators without savepoint
    state; removed = savepoint operators no operator of the new job takes; changed = savepoint operators restored
    with a difference (matched through an alternative ID, another parallelism or max parallelism, or state at
    risk). None when Flink refuses the savepoint before it maps any operator (a `_metadata` version the release
    cannot read): nothing was compared, so nothing counts as removed."""
    if not doc["restore_succeeds"] and all(o["new_node_id"] is None for o in doc["operators"]):
        return None
    risky = at_risk_bytes(doc)
    added = removed = changed = 0
    for o in doc["operators"]:
        if o.get("note", "").startswith("new operator"):
            added += 1
        elif o["matched_by"] == "none":
            removed += 1
        else:
            r = o.get("rescale") or {}
            rescaled = (r.get("old_parallelism") not in (None, r.get("new_parallelism"))
                        or r.get("old_max_parallelism") not in (None, r.get("max_parallelism")))
            changed += o["matched_by"] == "alternative" or rescaled or o["operator_id"] in risky
    return added, removed, changed


def caveat(doc: Mapping[str, Any]) -> str | None:
    """On a SAFE that compared no state types, the warning that says so; None otherwise (a blocked upgrade is
    blocked whatever the types)."""
    if doc["verdict"] != Verdict.SAFE or doc.get("state_types_compared", True):
        return None
    return next((w for w in doc["warnings"] if w.startswith(TYPES_NOT_COMPARED)), TYPES_NOT_COMPARED)


def summary_line(doc: Mapping[str, Any]) -> str:
    """`operators +2 −1 ~3 · state at risk 12.3 MiB in 2 operators · BLOCKED (STATE_MISROUTED)`, in the spirit of
    `terraform plan` comment bots: what changes, what is at risk, and whether the upgrade may go ahead (the gate's
    decision when the document carries one: a waived loss passes) (`operators not mapped` when Flink refuses the
    savepoint before mapping any operator)."""
    changes = operator_changes(doc)
    risky = at_risk_bytes(doc)
    verdict = Verdict(doc["verdict"])
    gate = doc.get("gate") or {}
    if verdict.blocks and gate.get("passes"):  # waived, or below --fail-on: the exit code is 0
        why = "waived" if gate.get("waived") else f"below --fail-on {gate.get('fail_on')}"
        outcome = f"PASSES ({verdict}: {why})"
    elif verdict.blocks:
        outcome = f"BLOCKED ({verdict})"
    else:
        outcome = "SAFE" + ("" if doc.get("state_types_compared", True) else f" ({TYPES_NOT_COMPARED})")
    risk = (f"state at risk {human_bytes(sum(risky.values()))} in {len(risky)} operator"
            f"{'' if len(risky) == 1 else 's'}" if risky else "no state at risk")
    if changes is None:
        counted = "operators not mapped"
    else:
        added, removed, changed = changes
        counted = f"operators +{added} \u2212{removed} ~{changed}"
    return f"{counted} \u00b7 {risk} \u00b7 {outcome}"

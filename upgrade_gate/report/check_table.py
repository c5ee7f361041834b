"""A check as text, what `upgrade-gate check` prints by default: tables that fit the terminal, ending with one
plan line (as `terraform plan` ends). Built from a `CheckResult` alone, so any caller (the CLI, a task log) prints
the same words."""

from __future__ import annotations

from typing import Any

from upgrade_gate.gate.check import CheckResult
from upgrade_gate.gate.sql_explain import text as sql_text
from upgrade_gate.gate.sql_remedies import text as sql_remedy_text
from upgrade_gate.report.sizes import human_bytes
from upgrade_gate.report.text_table import paragraph, render

__all__ = ["plan_line", "render_table"]


def _in_query_terms(entry: dict[str, Any], text: str) -> str:
    """A SQL finding says which statement and operator it is about (`sql`, upgrade_gate/gate/sql_explain.py):
    planner names like `GroupAggregate[78]` mean nothing to the query's author."""
    return f"{text} [{sql_text(entry['sql'])}]" if entry.get("sql") else text


def render_table(res: CheckResult, offer: dict[str, Any] | None = None) -> str:
    """`upgrade-gate check`'s default output: the verdict (and the repair offer, `offer`), the operator table, what
    is misrouted or lost, the remedies, what Flink refuses outright, the warnings, and the plan line."""
    lines = [f"VERDICT: {res.verdict_text}" + (f"   (with the remedies below: {res.verdict_with_remedies})"
                                          if res.verdict_with_remedies else "")]
    if offer and offer["repairable"]:
        lines.append(paragraph(f"repairable without changing the job: {offer['command']} keeps all "
                               f"{human_bytes(offer['keeps_bytes'])} (a new savepoint; this one is not modified)"))
    elif offer:
        lines.append(paragraph(f"a repair of the savepoint needs your decision first: {offer['needs'][0]}"
                               if offer["needs"] else "a repair of the savepoint would not make this upgrade SAFE"))
    if res.flink_error:
        lines.append(paragraph(f"Flink would fail with: {res.flink_error}"))
    lines.append("")
    rows = [(o["operator_id"], o["name"] or "", o["matched_by"], o["new_node_name"] or "",
             human_bytes(o["state_bytes"]), human_bytes(o["lost_bytes"])) for o in res.operators]
    lines.append(render(("operator id", "name", "matched by", "restores into", "state", "lost"), rows,
                        title=f"{res.graph_name} <- {res.savepoint} (hasher {res.hasher}, Flink {res.flink_version})",
                        wrap={"name", "restores into"}, right={"state", "lost"}))
    if res.misrouted:
        lines += ["", render(("operator id", "written by", "restored into", "should go to", "evidence"),
                             [(m["operator_id"], (m["writer"] or {}).get("name") or "?", m["receiver"]["name"],
                               (m["counterpart"] or {}).get("name") or "?", _in_query_terms(m, m["evidence"][0]))
                              for m in res.misrouted],
                             title="Misrouted state (restores into an operator that did not write it)",
                             wrap={"written by", "restored into", "should go to", "evidence"})]
    if res.losses:
        lines += ["", render(("operator id", "name", "size", "state", "why"),
                             [(x["operator_id"], x["name"] or "", human_bytes(x["bytes"]), ", ".join(x["state_names"]),
                               _in_query_terms(x, x["reason"])) for x in res.losses], title="State at risk",
                             wrap={"name", "state", "why"}, right={"size"})]
        said = [x for x in res.losses if x.get("consequence")]
        if said:  # what a person who owns the data needs to know (upgrade_gate.gate.state_roles)
            lines += ["", "What the data goes through"]
            lines += [paragraph(f"- {x['name'] or x['operator_id']} ({x['role']}): {x['consequence']}", indent="  ")
                      for x in said]
    if res.remedies:  # a list, not a table: the action is code to copy whole, the reason a sentence
        lines += ["", "Remedies"]
        for x in res.remedies:
            where = f"on '{x['node_name']}' (found by {x['matched_by']})" if x["node_name"] else "no counterpart found"
            lines += [paragraph(f"- state {x['operator_id']}: {where}"),
                      f"    {x['action']}" if x["action"] else "    (nothing to pin)",
                      paragraph(f"    why: {x['reason']}", indent="    ")]
    sql_remedies = [x for x in res.losses if x.get("sql_remedy")]
    if sql_remedies:  # SQL has no uid(): what the script can change, only where a real restore proved it
        lines += ["", "SQL remedies"]
        for x in sql_remedies:
            r = x["sql_remedy"]
            lines.append(paragraph(f"- state {x['operator_id']}: {sql_remedy_text(r)}"))
            lines += [f"    {line}" for line in (r["apply"] or "").splitlines()]
    refused = []
    names = {o["operator_id"]: o["name"] or o["new_node_name"] for o in res.operators}
    for d in res.schema_changes:  # state schema changes Flink cannot migrate (state_schema_diff); the rest are warnings
        if d["compatibility"] == "INCOMPATIBLE":
            what = "; ".join(f"{c['path'] + ': ' if c['path'] else ''}{c['change']} ({c['old']} -> {c['new']})"
                             for c in d["changes"])
            # a 1.x savepoint names no operator (the diff labels it by id): the new job's name then
            op = (names.get(d["operator_id"]) or d["operator"]) if d["operator"] == d["operator_id"] else d["operator"]
            refused.append(paragraph(f"schema change (the restore fails): operator {op}: state '{d['state']}' "
                                     f"({d['kind']}): {what}. Flink: {d['flink_error']}"))
    for c in res.config:  # refused settings of the new job on Flink 2.x (config_rules); the rest are warnings
        if c["blocking"]:
            refused.append(paragraph(f"config (the job will not start): {c['text']}. Fix: {c['remedy']}"))
    if refused:
        lines += ["", *refused]
    if res.serializer_versions:  # connector state headers against the new connector (rules.connector_versions)
        lines += ["", "Connector serializer versions"]
        lines += [paragraph(f"- {serializer_version_line(v)}", indent="  ") for v in res.serializer_versions]
    for w in res.warnings:
        lines.append(paragraph(f"warning: {w}"))
    lines += ["", paragraph(plan_line(res))]
    return "\n".join(lines) + "\n"


def serializer_version_line(v: dict[str, Any]) -> str:
    """One `serializer_versions[]` row: `Source: numbers: SourceReaderState (splits) written v1, new connector reads
    v2 (export, MyConnector): reader newer`."""
    written = ", ".join(f"v{x}" for x in v["written"]) or "no element"
    reader = f"v{v['reader']} ({v['reader_from']}" if v["reader"] is not None else "unknown ("
    reader += f"{', ' if v['reader'] is not None else ''}{v['connector'] or 'connector class unknown'})"
    return (f"{v['name'] or v['uid'] or v['operator_id']}: {v['state_name']} ({v['state']}) written {written}, "
            f"new connector reads {reader}: {v['outcome']}")


def operators_at_risk(losses: list[dict[str, Any]], misrouted: list[dict[str, Any]]) -> dict[str, int]:
    """Operator ID -> bytes at risk, from a check's `losses[]` and `misrouted[]` JSON rows: a misrouted state
    usually is a loss too, so its bytes count once (the plan line and `check --manifest`'s summary agree)."""
    at_risk: dict[str, int] = {}
    for x in (*losses, *misrouted):
        at_risk[x["operator_id"]] = max(at_risk.get(x["operator_id"], 0), int(x.get("bytes") or 0))
    return at_risk


def plan_line(res: CheckResult) -> str:
    """The last line, as `terraform plan` ends: what happens to every operator's state, the bytes at risk, and
    whether the upgrade may go ahead. A misrouted state usually is a loss too: its bytes count once."""
    at_risk = operators_at_risk(res.losses, res.misrouted)
    kept = sum(1 for o in res.operators if o["state_bytes"] and o["matched_by"] != "none"
               and o["operator_id"] not in at_risk)
    new = sum(1 for o in res.operators if o.get("note", "").startswith("new operator"))
    total = sum(o["state_bytes"] for o in res.operators)
    risk = sum(at_risk.values())
    outcome = (f"BLOCKED ({res.verdict})" if res.verdict.blocks else "SAFE: the upgrade may proceed"
               + ("" if res.state_types_compared else " (state types not compared)"))
    return (f"Plan: {kept} operator(s) keep their state, {new} new start empty, {len(at_risk)} at risk "
            f"({human_bytes(risk)} of {human_bytes(total)}); {outcome}.")

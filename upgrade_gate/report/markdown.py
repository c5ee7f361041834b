"""A check as a pull-request comment (GitHub-flavoured Markdown): `check --format markdown`, and what `--format github`
appends to the job summary ($GITHUB_STEP_SUMMARY).

The first line is the plan-style summary (`risks.summary_line`), then the verdict and its meaning, the state at risk
by operator with its role and consequence, the repair command or the remedies, and on a SAFE that compared no state
types the caveat. Built by string joining rather than a template: every line is data, and a check that asks for
Markdown loads no Jinja2 (tests/cli/test_check_imports.py). GitHub refuses a comment over 65,536 characters
(`MAX_CHARS`), so long tables are cut with a line saying how many rows were left out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from upgrade_gate.report.risks import at_risk_bytes, caveat, summary_line
from upgrade_gate.report.sizes import human_bytes
from upgrade_gate.vocabulary import Verdict

__all__ = ["MARKER", "MAX_CHARS", "render_markdown", "render_markdown_jobs"]

MAX_CHARS = 65_536  # GitHub's limit on an issue or pull-request comment body
MARKER = "<!-- upgrade-gate check -->"  # lets a CI step find its earlier comment and edit it instead of adding one
_RESERVE = 4_000  # room kept for the sections after the tables


def _cell(text: Any) -> str:
    """A table cell: no line breaks, no column separators."""
    return " ".join(str(text if text is not None else "").split()).replace("|", "\\|")


def _code(text: str) -> str:
    """Inline code that survives backticks inside it."""
    fence = "``" if "`" in text else "`"
    return f"{fence}{text}{fence}" if text else ""


def _table(head: tuple[str, ...], rows: list[tuple[Any, ...]], budget: int) -> tuple[list[str], int]:
    """A Markdown table cut to `budget` characters: (its lines, how many rows were left out)."""
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    used = sum(len(x) + 1 for x in lines)
    for i, row in enumerate(rows):
        line = "| " + " | ".join(_cell(c) for c in row) + " |"
        if used + len(line) + 1 > budget:
            return lines, len(rows) - i
        lines.append(line)
        used += len(line) + 1
    return lines, 0


def _at_risk_rows(doc: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    """One row per operator at risk, worst first: lost and misrouted state with names, role and consequence."""
    risky = at_risk_bytes(doc)
    rows: dict[str, tuple[Any, ...]] = {}
    for m in doc["misrouted"]:
        writer = (m.get("writer") or {}).get("name") or "?"
        why = m["evidence"][0] if m["evidence"] else m["detected_by"]
        what = ("restored under another meaning" if m["detected_by"] == "sql-meaning"
                else f"misrouted: restored into '{(m.get('receiver') or {}).get('name') or '?'}'")
        rows[m["operator_id"]] = (m["name"] or writer, _code(m["operator_id"]), ", ".join(m["state_names"]),
                                  m.get("role") or "", human_bytes(risky[m["operator_id"]]), f"{what} ({why})")
    for x in doc["losses"]:
        if x["operator_id"] not in rows:
            rows[x["operator_id"]] = (x["name"] or "", _code(x["operator_id"]), ", ".join(x["state_names"]),
                                      x.get("role") or "", human_bytes(risky[x["operator_id"]]),
                                      x.get("consequence") or x["reason"])
    return [rows[oid] for oid in sorted(rows, key=lambda o: -risky[o])]


def _refused(doc: Mapping[str, Any]) -> list[str]:
    """What Flink refuses outright besides state placement: incompatible state schemas and refused settings."""
    out = []
    for d in doc["schema_changes"]:
        if d["compatibility"] == "INCOMPATIBLE":
            what = "; ".join(f"{c['path'] + ': ' if c['path'] else ''}{c['change']} ({c['old']} -> {c['new']})"
                             for c in d["changes"])
            out.append(f"- schema change: operator {_code(d['operator'])}, state {_code(d['state'])} ({d['kind']}): "
                       f"{_cell(what)}")
    for c in doc["config"]:
        if c["blocking"]:
            out.append(f"- configuration: {_cell(c['text'])}. Fix: {_cell(c['remedy'])}")
    return out


def _remedies(doc: Mapping[str, Any], offer: Mapping[str, Any] | None) -> list[str]:
    """The repair command when a repair keeps every state, else the uid / setUidHash pins and SQL remedies."""
    if offer and offer.get("repairable"):
        return ["### Repair", "",
                f"Repairable without changing the job: this keeps all {human_bytes(offer['keeps_bytes'])} "
                f"(a new savepoint; the savepoint checked is not modified):", "", "```sh", offer["command"], "```"]
    out: list[str] = []
    if offer and offer.get("needs"):
        out += [f"A repair of the savepoint needs your decision first: {_cell(offer['needs'][0])}", ""]
    pins = [x for x in doc["remedies"] if x["action"]]
    sql = [x for x in doc["losses"] if x.get("sql_remedy")]
    if pins or sql:
        with_them = doc.get("verdict_with_remedies")
        out += ["### Remedies", ""] + ([f"With these: **{with_them}**", ""] if with_them else [])
        for x in pins:
            out.append(f"- state {_code(x['operator_id'])} on '{_cell(x['node_name'])}': {_code(x['action'])} "
                       f"— {_cell(x['reason'])}")
        for x in sql:
            r = x["sql_remedy"]
            out.append(f"- state {_code(x['operator_id'])}: {_cell(r['text'])}")
            if r["apply"]:
                out += ["", "  ```sql", *(f"  {line}" for line in r["apply"].splitlines()), "  ```"]
    return out


def render_markdown(doc: Mapping[str, Any], offer: Mapping[str, Any] | None = None) -> str:
    """The comment for a check's JSON document `doc` (`CheckResult.to_json()`) and its repair offer."""
    verdict = Verdict(doc["verdict"])
    head = [MARKER, f"**{summary_line(doc)}**", "",
            f"### {'✅' if not verdict.blocks else '⛔'} {verdict}", "", f"> {verdict.meaning}", "",
            f"{_code(doc['graph'])} ← {_code(doc['savepoint'])} (hasher {doc['hasher']}, "
            f"Flink {doc['flink_version']})", ""]
    if doc["flink_error"]:
        head += ["Flink would fail with:", "", "```", doc["flink_error"], "```", ""]
    said = caveat(doc)
    if said:
        head += [f"> [!WARNING]\n> {_cell(said)}", ""]
    tail = _refused(doc)
    tail = ["### Refused by Flink", "", *tail, ""] if tail else []
    tail += _remedies(doc, offer)
    warnings = [w for w in doc["warnings"] if w != said]
    budget = MAX_CHARS - _RESERVE - sum(len(x) + 1 for x in (*head, *tail))
    body: list[str] = []
    rows = _at_risk_rows(doc)
    if rows:
        table, left = _table(("operator", "id", "states", "role", "at risk", "consequence"), rows, budget)
        body += ["### State at risk", "", *table]
        if left:
            body.append(f"\n*{left} more operator(s) at risk not shown: GitHub's comment limit; run "
                        f"`upgrade-gate check --format json` for all.*")
        body.append("")
        budget -= sum(len(x) + 1 for x in body)
    if warnings:
        shown = []
        for w in warnings:
            line = f"- {_cell(w)}"
            if len(line) + 1 > budget:
                break
            shown.append(line)
            budget -= len(line) + 1
        tail += [*([""] if tail and tail[-1] else []), "### Warnings", "", *shown]
        if len(shown) < len(warnings):
            tail.append(f"- *{len(warnings) - len(shown)} more warning(s) not shown*")
    text = "\n".join((*head, *body, *tail)).rstrip() + "\n"
    return text if len(text) <= MAX_CHARS else text[:MAX_CHARS - 40].rsplit("\n", 1)[0] + "\n\n*(cut at the limit)*\n"


def render_markdown_jobs(jobs: list[tuple[str, Mapping[str, Any] | None, str | None]], worst: Verdict | None) -> str:
    """`check --manifest --format markdown`: one comment for many jobs. A table of every job's verdict and summary
    line, then each job that is not SAFE (or could not be checked) folded in a `<details>` block with its own
    report, while they fit in GitHub's limit."""
    blocked = [j for j in jobs if j[1] is None or Verdict(j[1]["verdict"]).blocks]
    head = [MARKER, f"**{len(jobs)} job(s) · {len(blocked)} not SAFE · worst: {worst or 'none checked'}**", ""]
    rows = [(name, doc["verdict"] if doc else "bad input", summary_line(doc) if doc else error)
            for name, doc, error in jobs]
    table, left = _table(("job", "verdict", "summary"), rows, MAX_CHARS - _RESERVE)
    lines = [*head, *table, *([f"\n*{left} more job(s) not shown*"] if left else []), ""]
    used = sum(len(x) + 1 for x in lines)
    folded = 0
    for name, doc, error in blocked:
        inner = render_markdown(doc, doc.get("repair")).replace(MARKER + "\n", "", 1) if doc else f"`{_cell(error)}`"
        said = doc["verdict"] if doc else "bad input"
        block = f"<details><summary>{_cell(name)}: {said}</summary>\n\n{inner}\n</details>\n"
        if used + len(block) > MAX_CHARS - 200:
            break
        lines.append(block)
        used += len(block) + 1
        folded += 1
    if folded < len(blocked):
        lines.append(f"*{len(blocked) - folded} more job report(s) not shown: GitHub's comment limit; run "
                     f"`upgrade-gate check --manifest ... --format json` for all.*")
    return "\n".join(lines).rstrip() + "\n"

"""`upgrade-gate check --manifest`'s summary: one row per job, read from each job's `check` JSON.

It reads the same JSON a user scripting `--format json` reads (docs/design.md, "JSON at the edge"), so the
table and the document never disagree; the state at risk is counted as the single check's plan line counts it
(`check_table.operators_at_risk`).
"""

from __future__ import annotations

from typing import Any

from upgrade_gate.report.check_table import operators_at_risk
from upgrade_gate.report.sizes import human_bytes
from upgrade_gate.report.text_table import paragraph, render

# (name, the job's check JSON or None, the bad-input message or None)
JobRow = tuple[str, dict[str, Any] | None, str | None]


def _row(name: str, result: dict[str, Any] | None, error: str | None) -> tuple[str, str, str, str]:
    if result is None:
        return name, "BAD INPUT", "-", "-"
    at_risk = operators_at_risk(result["losses"], result["misrouted"])
    names = {o["operator_id"]: o["name"] or o["new_node_name"] or o["operator_id"] for o in result["operators"]}
    for x in (*result["losses"], *result["misrouted"]):
        names.setdefault(x["operator_id"], x.get("name") or x["operator_id"])
    return (name, result["verdict"], human_bytes(sum(at_risk.values())),
            ", ".join(names[op] for op in at_risk) or "-")


def render_jobs_table(jobs: list[JobRow], verdict: str | None) -> str:
    """The worst verdict first (coloured on a terminal as a single check's), then the table and a count."""
    bad = sum(1 for _, result, _ in jobs if result is None)
    head = f"VERDICT: {verdict}" if verdict else "VERDICT: none (no job could be checked)"
    rows = [_row(*job) for job in jobs]
    table = render(("job", "verdict", "state at risk", "operators at risk"), rows,
                   title=f"{len(jobs)} job(s)", wrap={"job", "operators at risk"}, right={"state at risk"})
    blocked = sum(1 for _, result, _ in jobs if result is not None and result["verdict"] != "SAFE")
    tail = f"{len(jobs) - bad - blocked} SAFE, {blocked} not SAFE, {bad} with bad input"
    errors = [paragraph(f"error: job {name}: {error}") for name, result, error in jobs if result is None]
    return "\n".join([head, "", table, *errors, "", paragraph(tail)]) + "\n"

"""A check as GitHub Actions workflow commands: `check --format github`.

One `::error` per operator at risk (and one for a refused restore or a refused setting), one `::warning` per warning,
and on a SAFE one `::notice`; `file=` is the file the user changed (the graph spec or the FlinkDeployment), so the
annotation lands on it in the pull request. The last line is the plain summary (`risks.summary_line`) for the log.
Escaping is the Actions toolkit's (`escapeData` / `escapeProperty` of @actions/core's command.ts): a message or title
holding a newline, `%`, or in a property `:` or `,`, would otherwise end or split the command.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from upgrade_gate.report.risks import RULES, Risk, by_operator, caveat, risks, summary_line
from upgrade_gate.report.sizes import human_bytes

__all__ = ["command", "escape_data", "escape_property", "render_github"]


def escape_data(text: str) -> str:
    """A message as the toolkit's `escapeData` writes it."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A property value as the toolkit's `escapeProperty` writes it."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def command(name: str, message: str, **properties: str | None) -> str:
    """`::name key=value,key=value::message`, empty properties left out."""
    props = ",".join(f"{k}={escape_property(v)}" for k, v in properties.items() if v)
    return f"::{name}{' ' + props if props else ''}::{escape_data(message)}"


def _operator_message(group: list[Risk]) -> tuple[str, str]:
    """(title, message) of one operator at risk: the worst finding first, the others as further lines."""
    worst = group[0]
    states = ", ".join(worst.state_names)
    size = f", {human_bytes(worst.nbytes)}" if worst.nbytes else ""
    title = f"{RULES[worst.rule].title}: {worst.label}"
    lines = [f"{worst.verdict}: {worst.message} (state {states or '-'}{size}"
             f"{', ' + worst.role if worst.role else ''}; operator {worst.operator_id})", worst.details]
    lines += [f"also {r.verdict}: {r.message}" for r in group[1:]]
    return title, "\n".join(lines)


def render_github(doc: Mapping[str, Any], file: str | None) -> str:
    """The workflow commands for a check's JSON document `doc`; `file`: the path the annotations point at."""
    found = risks(doc)
    lines = []
    for r in found:
        if r.verdict.blocks and r.operator_id is None:  # the restore itself, a refused setting
            lines.append(command("error", f"{r.message}\n{r.details}" if r.details else r.message,
                                 file=file, title=RULES[r.rule].title))
    for group in by_operator(found):
        title, message = _operator_message(group)
        lines.append(command("error", message, file=file, title=title))
    for r in found:
        if r.level == "warning":
            lines.append(command("warning", r.message, file=file, title=RULES[r.rule].title))
    summary = summary_line(doc)
    if not any(r.verdict.blocks for r in found):
        said = caveat(doc)
        lines.append(command("notice", summary + (f"\n{said}" if said else ""), file=file,
                             title="Upgrade gate: SAFE"))
    lines.append(summary)
    return "\n".join(lines) + "\n"

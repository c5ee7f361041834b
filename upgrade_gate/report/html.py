"""The one renderer of gate reports: Jinja2 templates (autoescaped) shared by the standalone HTML file
`upgrade-gate check --format html` writes and the Airflow "Upgrade gate" view, so both read alike.

A report is rendered from the check JSON (`CheckResult.to_json()`, the `check` contract of
docs/design.md) plus, when the caller has them, the new and old stream graphs: with them the two
job graphs are drawn side by side (chains as groups, edges as lines) and a line runs from the
operator that wrote each piece of state to the one it restores into, at-risk ones in the verdict's
colour. Without graphs (a published check.json alone) the savepoint's operators and the new job's
nodes are drawn without edges. What Flink refuses outside the job graph has its own tables: the state schema
diff (`schema_changes[]`: incompatible states in the RESTORE_FAILS colour with Flink's error, migrations as notes)
and the Flink 2.x configuration check (`config[]`: refused settings first, with the replacement as YAML to
paste). Pages carry no JavaScript and fetch nothing: inline CSS (light and
dark via `prefers-color-scheme`, or `theme=` forced) and inline SVG only.

This module holds the Jinja2 environment and the context the templates get; what goes into the context is built
by its own modules (`picture`, `charts`, `sections`, `states`), from arguments only: whoever renders reads the
savepoint and the graphs first.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from jinja2 import BytecodeCache, Environment, FileSystemBytecodeCache, FileSystemLoader, select_autoescape
from jinja2.bccache import Bucket

from upgrade_gate.gate.check import CheckResult
from upgrade_gate.report.charts import bars, rescales
from upgrade_gate.report.colours import colour
from upgrade_gate.report.picture import graph_layout, graph_picture
from upgrade_gate.report.sections import config_rows, remedies, schema_rows, shown_warnings
from upgrade_gate.report.sizes import human_bytes
from upgrade_gate.report.states import state_sections
from upgrade_gate.vocabulary import Verdict

__all__ = ["render_html", "render_page", "render_report", "report_context"]

TEMPLATES = Path(__file__).with_name("templates")


def meaning(verdict: Any) -> str:
    try:
        return Verdict(str(verdict)).meaning
    except ValueError:
        return {"PASS": "Every job of the fleet passes the gate.",
                "BLOCK": "At least one job of the fleet is blocked (or could not be checked).",
                "ERROR": "The check could not run: see the error below."}.get(str(verdict), "")


class _BestEffortBytecodeCache(FileSystemBytecodeCache):
    """Jinja2's own cache of compiled templates (a private per-user directory it creates and checks): compiling
    the report's templates was about a quarter of an HTML check's CPU time, paid again by every process
    (docs/performance.md, "A check's own cost"). A cache is never a reason to lose a report: one that cannot be
    read or written (a full or read-only disk) is skipped and the templates are compiled as before."""

    def load_bytecode(self, bucket: Bucket) -> None:
        with contextlib.suppress(OSError):
            super().load_bytecode(bucket)

    def dump_bytecode(self, bucket: Bucket) -> None:
        with contextlib.suppress(OSError):
            super().dump_bytecode(bucket)


def _bytecode_cache() -> BytecodeCache | None:
    try:
        return _BestEffortBytecodeCache()
    except (OSError, RuntimeError):  # no private directory could be made: compile every time
        return None


def _env() -> Environment:
    env = Environment(loader=FileSystemLoader(str(TEMPLATES)), autoescape=select_autoescape(["j2", "html"]),
                      trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
                      bytecode_cache=_bytecode_cache())
    env.filters["human_bytes"] = human_bytes
    env.globals.update(colour=colour, meaning=meaning, verdicts=[v.value for v in Verdict.mildest_first()])
    return env


_ENV = _env()


def report_context(check: dict[str, Any], graphs: dict[str, Any] | None = None,
                   states: dict[str, list[dict[str, Any]]] | None = None) -> dict[str, Any]:
    """What the templates need; `states` (operator id -> `state_map` entries), else the check's own."""
    ops = list(check.get("operators") or [])
    risk = {x["operator_id"] for x in check.get("losses") or []} | \
           {m["operator_id"] for m in check.get("misrouted") or []}
    total = sum(int(o.get("state_bytes") or 0) for o in ops) or int(check.get("state_bytes") or 0)
    # a misrouted operator is usually also a loss (the receiver ignores it): count its bytes once
    by_op: dict[str, int] = {}
    for x in [*(check.get("losses") or []), *(check.get("misrouted") or [])]:
        by_op[x["operator_id"]] = max(by_op.get(x["operator_id"], 0), int(x.get("bytes") or 0))
    at_risk = sum(by_op.values())
    return {"check": check, "verdict": str(check.get("verdict")), "operators": ops, "risk": risk,
            "state_total": total, "bytes_at_risk": at_risk or int(check.get("lost_bytes") or 0),
            "picture": graph_picture(check, graphs or {}), "bars": bars(ops), "rescales": rescales(ops),
            "remedies": remedies(check), "state_sections": state_sections(check, states),
            "schema_rows": schema_rows(check), "config_rows": config_rows(check),
            "warnings": shown_warnings(check),
            "states_read": states is not None or check.get("states") is not None
            or any(o.get("states") for o in ops)}


def render_page(template: str, **context: Any) -> str:
    """Any report template with the shared layout; `nav` (the view's links) and `theme` are optional."""
    context.setdefault("nav", None)
    context.setdefault("theme", None)
    return _ENV.get_template(template).render(**context)


def render_report(check: dict[str, Any], graphs: dict[str, Any] | None = None,
                  states: dict[str, list[dict[str, Any]]] | None = None, **page: Any) -> str:
    """One check (its JSON) as a page: the standalone file, or the view's page with `nav`. `states`
    (`state_map`), else a `states` map in the check JSON, fills the State section."""
    return render_page("report.html.j2", **report_context(check, graphs, states), **page)


def render_html(res: CheckResult | dict[str, Any], new_graph: Any = None, old_graph: Any = None,
                states: dict[str, list[dict[str, Any]]] | None = None, repair: dict[str, Any] | None = None) -> str:
    """The standalone report of a check; pass the graphs (StreamGraph or LoadedGraph) to draw them.

    `states` (`upgrade_gate.report.states.state_map` of the savepoint's state meta information, read by the caller)
    fills the State section; without it (nor a `states` map in a check dict) the section lists only the states
    the gate flags."""
    check = res.to_json() if isinstance(res, CheckResult) else res
    if repair is not None:  # `check`'s repair offer (upgrade_gate/cli/commands/check.py, repair_offer)
        check = {**check, "repair": repair}
    hasher, version = str(check.get("hasher") or "v2"), check.get("flink_version") or None
    graphs = {"new": graph_layout(new_graph, hasher, version) if new_graph is not None else None,
              "old": graph_layout(old_graph, hasher, version) if old_graph is not None else None}
    return render_report(check, graphs, states)

"""`upgrade-gate repair --savepoint S --graph G --output NEW`: a new savepoint the new job restores completely.

When the gate says no, the ways forward used to be a code change and a redeploy (impossible for SQL) or a
hand-written State Processor API job. `repair` writes a NEW savepoint instead (the source is never touched):
each state moves to the operator ID of its counterpart in the new job, with the evidence shown; what the user
gives up is dropped by name (`--drop`), not silently (`--allowNonRestoredState`). Without `--output` it only
plans. Exit codes: 0 written and verified (or nothing to repair), 1 not repairable (nothing written), 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from typing import Any

from upgrade_gate.cli.commands.check import resolve_savepoint
from upgrade_gate.cli.commands.graph_args import graph_named, load_with_notes
from upgrade_gate.repair.plan import DROPPABLE_PARTS, Drop
from upgrade_gate.repair.run import RepairOutcome, repair_savepoint
from upgrade_gate.report.sizes import human_bytes
from upgrade_gate.report.text_table import paragraph, render
from upgrade_gate.storage.check_inputs import read_side
from upgrade_gate.storage.discovery import SYNTAX_HELP
from upgrade_gate.storage.savepoints import load_savepoint
from upgrade_gate.vocabulary import (
    DEFAULT_FLINK_VERSION,
    DEFAULT_HASHER,
    FLINK_VERSIONS,
    HASHERS,
    MATCHING_MODES,
    Verdict,
)

NAME = "repair"
HELP = ("write a NEW savepoint that the new job GRAPH restores completely: state moved to the new operator IDs "
        "(coordinator state included), dropped only by name; the source savepoint is never modified")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--savepoint", required=True, help=SYNTAX_HELP)
    parser.add_argument("--graph", required=True, help="the new job's graph spec (JSON/YAML) or execution plan")
    parser.add_argument("--old-graph", default=None,
                        help="the job graph that wrote the savepoint: pairs every state with its writer's "
                             "counterpart by uid, name or signature (needed for Flink 1.x savepoints, which record "
                             "no operator names, when several operators could take a state)")
    parser.add_argument("--output", "-o", default=None, metavar="NEW",
                        help="where to write the repaired savepoint (a path, file:// or s3://); must not exist and "
                             "must not be inside the source. Without it the plan is shown and nothing is written")
    parser.add_argument("--map", dest="maps", action="append", default=[], metavar="OLD=NEW",
                        help="move a savepoint operator's state (its ID, uid or name) to a new operator (its ID, "
                             "node id, uid or name); repeatable. Needed where the evidence is ambiguous")
    parser.add_argument("--drop", dest="drops", action="append", default=[], metavar="OPERATOR[/STATE]",
                        help=f"give up an operator's state by name (ID, uid or name), one part of it "
                             f"({', '.join(DROPPABLE_PARTS)}), or one of its states by the state's name; "
                             f"repeatable. The auditable alternative to --allowNonRestoredState")
    parser.add_argument("--max-parallelism", type=int, default=None, metavar="N",
                        help="rewrite every keyed state entry and timer into the key groups of max parallelism N "
                             "(the new job's), for canonical savepoints whose keys are boxed primitives, Strings, "
                             "tuples of those or SQL rows")
    parser.add_argument("--hasher", choices=HASHERS, default=DEFAULT_HASHER, help="v2 = Flink's; v3 = FLIP-411")
    parser.add_argument("--matching", choices=MATCHING_MODES, default=MATCHING_MODES[0],
                        help="V3 alternative-id matching (as for check)")
    parser.add_argument("--flink-version", default=None, metavar="X.Y",
                        help=f"Flink version that will run the new job ({', '.join(FLINK_VERSIONS)}; "
                             f"default {DEFAULT_FLINK_VERSION})")
    parser.add_argument("--format", choices=("table", "json"), default="table")


def _progress(files: int, total_files: int, done: int, total: int) -> None:
    print(f"repair: copied {files}/{total_files} state files ({human_bytes(done)} of {human_bytes(total)})",
          file=sys.stderr, flush=True)


def _rescale_progress(line: str) -> None:
    print(f"repair: {line}", file=sys.stderr, flush=True)


def command_line(args: argparse.Namespace, suggested: tuple[str, ...] = ()) -> str:
    """The repair command a user runs next: the same inputs, the options the plan found missing, and an output
    to fill in when none was given."""
    parts = ["upgrade-gate", "repair", "--savepoint", args.savepoint, "--graph", args.graph]
    if args.old_graph:
        parts += ["--old-graph", args.old_graph]
    for m in args.maps:
        parts += ["--map", m]
    for d in args.drops:
        parts += ["--drop", d]
    if args.max_parallelism is not None:
        parts += ["--max-parallelism", str(args.max_parallelism)]
    parts += list(suggested)
    if args.flink_version:
        parts += ["--flink-version", args.flink_version]
    parts += ["--output", args.output or "NEW_SAVEPOINT_DIR"]
    return " ".join(shlex.quote(p) for p in parts)


def _dropped(d: Drop) -> tuple[str, str]:
    """(what is dropped, its size): a named state's bytes lie among its operator's other states'."""
    if d.part is None:
        return "whole operator", human_bytes(d.nbytes)
    if d.part in DROPPABLE_PARTS:
        return f"its {d.part} state", human_bytes(d.nbytes)
    return f"state '{d.part}'", ""


def render_table(out: RepairOutcome, args: argparse.Namespace) -> str:
    plan = out.plan
    after = plan.after.verdict if plan.after is not None else plan.before.verdict
    lines = []
    if not plan.needed and not plan.unresolved and plan.before.verdict is Verdict.SAFE:
        lines.append("NOTHING TO REPAIR: the check says SAFE")
    elif not plan.needed and not plan.unresolved:  # the findings are not about where state goes
        lines.append(f"NOT REPAIRABLE: the check says {plan.before.verdict}, and no state needs another operator ID")
        for x in [*plan.before.misrouted, *plan.before.losses][:5]:
            lines.append(paragraph(f"- {x.get('name') or x['operator_id']}: "
                                   f"{(x.get('evidence') or [x.get('reason')])[0]}"))
        ids = sorted({x["operator_id"] for x in [*plan.before.misrouted, *plan.before.losses]})
        lines.append(paragraph("repair moves state to other operator IDs; it cannot change what the new job does "
                               "with it. To start those operators without their state instead, drop it by name: "
                               + " ".join(f"--drop {i}" for i in ids)))
    else:
        state = ("REPAIRABLE" if plan.repairable else
                 f"REPAIRABLE WITH {' '.join(plan.suggested)}" if plan.repairable_with_suggested else "NOT REPAIRABLE")
        what = [f"moves {human_bytes(plan.kept_bytes)} in {len(plan.moves)} operator(s)"] if plan.moves else []
        if plan.rescaled is not None:
            entries = sum(o.entries for o in plan.rescaled.operators)
            what.append(f"rewrites {entries:,} keyed entries and timers for max parallelism {plan.max_parallelism}")
        named = sum(1 for d in plan.drops if d.part is not None and d.part not in DROPPABLE_PARTS)
        if len(plan.drops) > named:
            what.append(f"drops {human_bytes(plan.dropped_bytes)} by name")
        if named:
            what.append(f"drops {named} state(s) by their names")
        lines.append(f"{state}: {plan.before.verdict} -> {after}" + (f"   ({'; '.join(what)})" if what else ""))
    if plan.moves:
        rows = [(m.state.operator_id_hex, m.state.name or "", m.new_id.hex(), m.node_name,
                 human_bytes(m.state.state_size), f"{m.how}: {'; '.join(m.evidence)}") for m in plan.moves]
        lines += ["", render(("savepoint id", "written by", "new id", "moves to", "state", "evidence"), rows,
                             title="State moved to its new operator ID", wrap={"written by", "moves to", "evidence"},
                             right={"state"})]
    if plan.rescaled is not None and plan.rescaled.operators:
        rows = [(o.operator_id, o.name or "", f"{o.old_max_parallelism} -> {plan.max_parallelism}",
                 f"{o.entries - o.timers:,}", f"{o.timers:,}", human_bytes(o.bytes_written))
                for o in plan.rescaled.operators if o.entries]
        if rows:
            lines += ["", render(("savepoint id", "operator", "max parallelism", "keyed entries", "timers",
                                  "rewritten"), rows, title="Keyed state moved into the new key groups",
                                 right={"keyed entries", "timers", "rewritten"})]
    if plan.refused:
        lines += ["", *(paragraph(f"cannot change the max parallelism: {r}") for r in plan.refused)]
    if plan.suggested:
        lines += ["", paragraph(f"the new job's max parallelism differs from the savepoint's: repair with "
                                f"{' '.join(plan.suggested)} to rewrite the keyed state into the new key groups: "
                                f"{command_line(args, plan.suggested)}")]
    if plan.drops:
        rows = [(d.state.operator_id_hex, d.state.name or "", *_dropped(d)) for d in plan.drops]
        lines += ["", render(("savepoint id", "name", "dropped", "state"), rows, title="Dropped on request",
                             right={"state"})]
    if plan.unresolved:
        lines += ["", "Needs your decision (nothing is written until every state has an owner)"]
        for u in plan.unresolved:
            cands = ", ".join(f"{name} (node {nid})" for nid, name in u.candidates)
            lines.append(paragraph(f"- state {u.state.operator_id_hex} ({u.name or 'unnamed'}, "
                                   f"{human_bytes(u.state.state_size)}): {u.reason}"
                                   + (f"; candidates: {cands}" if cands else "")))
    if plan.after is not None and not plan.repairable and plan.after.flink_error:
        lines += ["", paragraph(f"after the repair Flink would still fail with: {plan.after.flink_error}")]
    w = out.written
    if w is not None:
        lines += ["", paragraph(f"written: {w.destination} ({len(w.copies)} state files, "
                                f"{human_bytes(w.copied_bytes)} copied; _metadata {human_bytes(w.metadata_bytes)})")]
        if out.verified is not None:
            lines.append(paragraph(f"read back and checked against {args.graph}: {out.verified.verdict}"))
        if w.external:
            lines.append(paragraph(f"note: the new savepoint still needs {len(w.external)} file(s) outside its "
                                   f"directory (shared state of retained checkpoints), e.g. {w.external[0]}: keep them "
                                   f"until the new job has taken its own savepoint"))
        lines.append(paragraph(f"next: start the new job from it without --allowNonRestoredState: "
                               f"flink run -s {w.destination} ..."))
    elif plan.repairable:
        lines += ["", paragraph(f"to write it: {command_line(args)}")]
    for text in plan.warnings + plan.collisions:
        lines.append(paragraph(f"warning: {text}"))
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    spec = resolve_savepoint(args.savepoint)
    metadata = load_savepoint(spec) if isinstance(spec, str) else spec
    new = read_side(load_with_notes(args.graph))
    old = read_side(load_with_notes(args.old_graph)) if args.old_graph else None
    with graph_named(args.graph):
        out = repair_savepoint(metadata, new, destination=args.output, old=old, hasher=args.hasher,
                               matching=args.matching, flink_version=args.flink_version,
                               maps=tuple(args.maps), drops=tuple(args.drops), max_parallelism=args.max_parallelism,
                               progress=_progress, rescale_progress=_rescale_progress)
    if args.format == "json":
        doc: dict[str, Any] = {"savepoint": metadata.source, "graph": args.graph, **out.to_json(),
                               "command": command_line(args) if out.plan.repairable else None}
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        sys.stdout.write(render_table(out, args))
    if not out.plan.needed and not out.plan.unresolved:
        return 0 if out.plan.before.verdict is Verdict.SAFE else 1
    if not out.plan.repairable:
        return 1
    if args.output is None:
        return 0
    return 0 if out.verified is not None and out.verified.verdict is Verdict.SAFE else 1

"""`upgrade-gate lint GRAPH...`: stateful operators without a uid, before any savepoint exists.

The pre-commit hook (`.pre-commit-hooks.yaml`) runs it on every changed graph spec, so an operator that keeps state
under a positional ID is caught when it is written, not when an upgrade refuses its savepoint
(docs/guide.md, "In CI"). What counts as stateful is `upgrade_gate.gate.declared_state`: only what the graph
itself says. Exit 0: none; 1: some (each named with the ID Flink generates for it today); 2: a graph is bad input
(named on stderr; the other graphs are still linted).
"""

from __future__ import annotations

import argparse
import json
import sys

from hashing.errors import InputError
from hashing.operator_ids import compute_operator_ids
from upgrade_gate.cli.commands.graph_args import graph_named, load_with_notes
from upgrade_gate.gate.declared_state import UnpinnedState, unpinned_stateful
from upgrade_gate.gate.inputs import side_of
from upgrade_gate.vocabulary import DEFAULT_FLINK_VERSION, FLINK_VERSIONS

NAME = "lint"
HELP = ("stateful operators without a uid in job graphs (spec or exporter output), with the operator ID each gets "
        "today; exit 1 if any (the pre-commit hook)")
EXIT_BAD_INPUT = 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("graphs", metavar="GRAPH", nargs="+",
                        help="job graph: spec JSON/YAML (docs/graph-spec.md) or `upgrade-gate export` output")
    parser.add_argument("--flink-version", default=None,
                        help=f"Flink version that will run the job (default {DEFAULT_FLINK_VERSION}; "
                             f"{FLINK_VERSIONS[0]}-{FLINK_VERSIONS[-1]} supported): the IDs shown are its")
    parser.add_argument("--format", choices=("table", "json"), default="table", help="output format (default table)")


def lint_graph(path: str, flink_version: str | None) -> list[UnpinnedState]:
    """The unpinned stateful operators of one graph file (V2 IDs: the ones Flink generates)."""
    loaded = load_with_notes(path)
    with graph_named(path):
        ids = compute_operator_ids(loaded.graph, "v2", flink_version)
    return unpinned_stateful(side_of(loaded), ids)


def run(args: argparse.Namespace) -> int:
    found: dict[str, list[UnpinnedState]] = {}
    bad = 0
    for path in args.graphs:
        try:
            found[path] = lint_graph(path, args.flink_version)
        except InputError as exc:
            print(f"upgrade-gate: error: {exc}", file=sys.stderr)
            bad += 1
    if args.format == "json":
        print(json.dumps({"graphs": [{"graph": p, "unpinned": [u.to_json() for u in us]} for p, us in found.items()]},
                         indent=2))
    else:
        for path, unpinned in found.items():
            for u in unpinned:
                print(f"{path}: node {u.node_id} '{u.name}' keeps state without a uid ({u.why}); "
                      f"operator ID {u.operator_id} today, by position")
        total = sum(len(us) for us in found.values())
        if total:
            print(f"{total} stateful operator(s) without a uid in {sum(1 for us in found.values() if us)} graph(s): "
                  "give each a .uid(...) and run `upgrade-gate check` against the running job's savepoint before "
                  "that upgrade: it says how to keep the state saved under today's ID (setUidHash pins, or "
                  "`upgrade-gate repair`)")
    if bad:
        return EXIT_BAD_INPUT
    return 1 if any(found.values()) else 0

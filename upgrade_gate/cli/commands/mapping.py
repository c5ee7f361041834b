"""`upgrade-gate mapping GRAPH`: what switching the job from the V2 to the V3 hasher does to each id."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

from hashing.migration import v2_to_v3
from upgrade_gate.cli.commands.graph_args import add_graph_arguments, graph_named, load_with_notes
from upgrade_gate.report.text_table import render

NAME = "mapping"
HELP = "V2 -> V3 (FLIP-411) operator-ID mapping of a job graph"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_graph_arguments(parser, "job graph: spec JSON/YAML (docs/graph-spec.md) or Flink execution-plan JSON")


def run(args: argparse.Namespace) -> int:
    loaded = load_with_notes(args.graph)
    with graph_named(args.graph):
        rows = v2_to_v3(loaded.graph, args.flink_version)
    if args.format == "json":
        print(json.dumps({"graph": loaded.graph.name,
                          "operators": [asdict(r) | {"changed": r.changed} for r in rows]}, indent=2))
        return 0
    changed = sum(r.changed for r in rows)
    print(render(("node", "name", "uid", "v2 id", "v3 id", "changed", "v2 state restores by"),
                 [(r.node_id, r.name, r.uid or "", r.v2_id, r.v3_id, "yes" if r.changed else "", r.restores_by)
                  for r in rows],
                 title=f"{loaded.graph.name}: V2 -> V3 mapping ({changed} of {len(rows)} ids change)",
                 wrap={"name", "uid", "v2 state restores by"}, right={"node"}))
    return 0

"""`upgrade-gate ids GRAPH`: the operator IDs Flink gives a job, and its chains."""

from __future__ import annotations

import argparse
import json

from hashing.operator_ids import compute_operator_ids
from upgrade_gate.cli.commands.graph_args import add_graph_arguments, graph_named, load_with_notes
from upgrade_gate.report.text_table import render
from upgrade_gate.vocabulary import DEFAULT_HASHER, HASHERS

NAME = "ids"
HELP = "operator IDs of every node (V2 or V3 hasher), with alternative ids and job vertices"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_graph_arguments(parser, "job graph: spec JSON/YAML (docs/graph-spec.md) or Flink execution-plan JSON")
    parser.add_argument("--hasher", choices=HASHERS, default=DEFAULT_HASHER, help="v2 = Flink's; v3 = FLIP-411")


def run(args: argparse.Namespace) -> int:
    loaded = load_with_notes(args.graph)
    with graph_named(args.graph):
        ids = compute_operator_ids(loaded.graph, args.hasher, args.flink_version)
    if args.format == "json":
        print(json.dumps(ids.to_json(), indent=2))
        return 0
    vertex_of = {op.node_id: v.id.hex()[:8] for v in ids.job_vertices for op in v.operators}
    rows = [(p.node_id, p.name, p.uid or "", p.generated.hex(), "\n".join(a.hex() for a in p.alternatives),
             vertex_of[p.node_id]) for p in ids.pairs.values()]
    print(render(("node", "name", "uid", "operator id", "alternative ids", "vertex"), rows,
                 title=f"{loaded.graph.name}: {args.hasher.upper()} operator IDs (Flink {ids.flink_version})",
                 wrap={"name", "uid"}, right={"node"}))
    print()
    chains = [(v.id.hex(), v.parallelism, " -> ".join(ids.pairs[n].name for n in v.node_ids_head_first))
              for v in ids.job_vertices]
    print(render(("job vertex id", "parallelism", "chain (head -> tail)"), chains, wrap={"chain (head -> tail)"},
                 right={"parallelism"}))
    return 0

"""Hashing throughput: our V2/V3 hashers against Flink's own JVM `StreamGraphHasherV2`, compared fairly.

One command (`make bench` or `python -m bench.bench_hashing`). Flink builds the job graphs with the DataStream API
(chains, keyBy, rebalance with a parallelism change, fan-out + union, a uid on every fourth operator; HashBench.java)
and writes their specs and its V2 hash of every node; our hashers run on exactly those graphs, and before anything
is timed every one of our V2 hashes must equal Flink's. Flink's graph objects exist before its hasher runs, so ours
are timed on built `StreamGraph`s with their per-graph cache emptied before every pass (the chainability analysis
is redone every time, as Flink's `isChainable` calls are). Three comparisons per workload, each against Flink's V2
hasher (the only hasher Flink ships):

* V2 alone: `StreamGraphHasherV2` (compiled `hashing._fastids` when it was built);
* V2 + V3 in one pass: `stream_graph_hashes(v2=True, v3=True)`, what `compute_operator_ids(graph, "v3")` runs;
* `compute_operator_ids` V3 whole: the above plus user hashes, one `OperatorIDPair` per node and the job vertices,
  i.e. more work than Flink's side does (a floor for what the product pays per node, not a like-for-like race).

Both sides are timed by bench/fair.py: thread CPU on both sides, rounds alternated in one process tree, the JVM
warmed up by CPU time until its rate is stable, the median of per-round rates on both sides, the ratio with its
spread and the load average.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import fair
from hashing.graph import StreamGraph
from hashing.hashers import COMPILED, StreamGraphHasherV2, stream_graph_hashes
from hashing.operator_ids import compute_operator_ids
from hashing.readers.spec import parse_spec
from hashing.versions import DEFAULT

WORKLOADS = {"fleet: 200 jobs x 50 operators": (200, 50), "one large job: 2 x 5,000 operators": (2, 5000)}
FLINK_CODE = "StreamGraphHasherV2.traverseStreamGraphAndGenerateHashes"


def _on_built(graphs: list[StreamGraph], hash_one: Callable[[StreamGraph], object]) -> Callable[[], int]:
    """One unit of our side: every graph hashed once with its cache emptied first; the nodes hashed."""
    total = sum(len(g.nodes) for g in graphs)

    def unit() -> int:
        for g in graphs:
            g.cache.clear()  # no memo: chainability and hashes are computed again, as in Flink
            hash_one(g)
        return total
    return unit


def same_v2_as_flink(graphs: list[StreamGraph], flink_hashes: list[dict[str, str]]) -> bool:
    hasher = StreamGraphHasherV2()
    return all({str(k): v.hex() for k, v in hasher.traverse_stream_graph_and_generate_hashes(g).items()} == theirs
               for g, theirs in zip(graphs, flink_hashes, strict=True))


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    settings = fair.settings_from(args)
    results: list[dict[str, Any]] = []
    workloads = WORKLOADS if args.graphs is None else {
        f"{args.graphs} jobs x {args.operators} operators": (args.graphs, args.operators)}
    implementation = "compiled (hashing._fastids)" if COMPILED else "pure Python (hashing._fastids not built)"
    for label, (graphs, operators) in workloads.items():
        with tempfile.TemporaryDirectory(prefix="bench-hashing-") as tmp:
            specs, hashes = Path(tmp) / "specs.jsonl", Path(tmp) / "hashes.jsonl"
            print(f"[bench] {label}: Flink {args.flink_version} builds the graphs ...", flush=True)
            with fair.FlinkServer("streamgraph", args.flink_version, "upgradegate.bridge.HashBench",
                                  [str(specs), str(hashes), str(graphs), str(operators)]) as flink:
                built = [StreamGraph.of(g.name, g.nodes, g.edges)
                         for g in (parse_spec(json.loads(line), "bench") for line in specs.read_text().splitlines())]
                if not same_v2_as_flink(built, [json.loads(x) for x in hashes.read_text().splitlines()]):
                    raise SystemExit(f"{label}: our V2 hashes differ from Flink's StreamGraphHasherV2")
                nodes = sum(len(g.nodes) for g in built)
                details = {"workload": label, "nodes": nodes, "graphs": graphs, "same_v2_as_flink": True,
                           "implementation": implementation}
                v2 = StreamGraphHasherV2().traverse_stream_graph_and_generate_hashes
                ours = {
                    "V2 alone": (f"StreamGraphHasherV2, {implementation}", _on_built(built, v2)),
                    "V2 + V3 in one pass": (f"stream_graph_hashes(v2=True, v3=True), {implementation}",
                                            _on_built(built, lambda g: stream_graph_hashes(g, v2=True, v3=True))),
                    "compute_operator_ids V3 whole (more work than Flink's side)": (
                        "compute_operator_ids(graph, 'v3'): V2 + V3, user hashes, pairs, job vertices",
                        _on_built(built, lambda g: compute_operator_ids(g, "v3", args.flink_version))),
                }
                for name, (code, unit) in ours.items():
                    what = fair.Comparison("operator IDs", f"{label}, {name}", "nodes", code, FLINK_CODE,
                                           {**details, "ours_kind": name})
                    fair.run_and_report(what, fair.Ours(unit), flink, settings, args.json, results)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flink-version", default=DEFAULT)
    parser.add_argument("--graphs", type=int, help="one workload of this many graphs (instead of the two standard)")
    parser.add_argument("--operators", type=int, default=50, help="operators per graph with --graphs (default 50)")
    fair.add_arguments(parser)
    args = parser.parse_args(argv)
    fair.print_summary(run(args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

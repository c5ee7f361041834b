"""Hashing throughput: our V2/V3 hashers against Flink's own JVM `StreamGraphHasherV2`.

One command (`make bench` or `python -m bench.bench_hashing`). Flink's hasher is timed in a
JVM on job graphs built with the DataStream API (after a warm-up of the same length); their
specs are written out and our hashers are timed on exactly those graphs, in this process,
so the ratio compares like with like: Flink's graph object already exists when its hasher runs,
so ours are timed on built `StreamGraph`s with their per-graph cache emptied before every pass
(the chainability analysis is redone every time, as Flink's `isChainable` calls are). Also
printed: the same including building the indexed graph from its nodes and edges, the whole
`compute_operator_ids` (V3: V2 + V3 + user hashes + chains, graph building included), and the
pure-Python rules (the fallback when `hashing._fastids` could not be compiled).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from flink_bridge.jvm import run_tool
from hashing.graph import StreamGraph
from hashing.hashers import COMPILED, StreamGraphHasherV2, StreamGraphHasherV3, traverse_python
from hashing.operator_ids import compute_operator_ids
from hashing.readers.spec import parse_spec

WORKLOADS = {"fleet: 200 jobs x 50 operators": (200, 50), "one large job: 2 x 5,000 operators": (2, 5000)}


def _time(fn: Callable[[], int], seconds: float) -> tuple[float, float]:
    """Nodes per wall second and per CPU second of this process, of `fn` (which returns nodes processed),
    over at least `seconds`. On a shared machine the CPU-second rate is the steadier of the two."""
    fn()  # warm caches the same way the JVM side warms up
    done, start, cpu = 0, time.perf_counter(), time.process_time()
    while time.perf_counter() - start < seconds:
        done += fn()
    return done / (time.perf_counter() - start), done / max(time.process_time() - cpu, 1e-9)


def _measure_python(raw: list, seconds: float, flink_version: str) -> dict[str, tuple[float, float]]:
    total = sum(len(nodes) for _, nodes, _ in raw)
    built = [StreamGraph.of(name, nodes, edges) for name, nodes, edges in raw]

    def fresh() -> list[StreamGraph]:
        return [StreamGraph.of(name, nodes, edges) for name, nodes, edges in raw]

    def on_built(hash_one: Callable[[StreamGraph], object]) -> int:
        for g in built:
            g.cache.clear()  # no memo: chainability and hashes are computed again, as in Flink
            hash_one(g)
        return total

    def with_building(hash_one: Callable[[StreamGraph], object]) -> int:
        for g in fresh():
            hash_one(g)
        return total

    def full(kind: str) -> int:
        for g in fresh():
            compute_operator_ids(g, kind, flink_version)
        return total

    v2, v3 = StreamGraphHasherV2().traverse_stream_graph_and_generate_hashes, \
        StreamGraphHasherV3().traverse_stream_graph_and_generate_hashes
    return {"v2": _time(lambda: on_built(v2), seconds), "v3": _time(lambda: on_built(v3), seconds),
            "v2_building": _time(lambda: with_building(v2), seconds),
            "python_v2": _time(lambda: on_built(lambda g: traverse_python(g, chained_output_terms=True)), seconds),
            "ids_v3": _time(lambda: full("v3"), seconds)}


def run(seconds: float, flink_version: str) -> list[dict[str, object]]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for label, (graphs, operators) in WORKLOADS.items():
            specs = Path(tmp) / "specs.jsonl"
            print(f"[bench] {label}: Flink {flink_version} JVM hasher ...", flush=True)
            flink = json.loads(run_tool("streamgraph", flink_version, "upgradegate.bridge.HashBench",
                                        [str(specs), str(graphs), str(operators), str(seconds)]).strip())
            parsed = [parse_spec(json.loads(line), "bench") for line in specs.read_text().splitlines()]
            print(f"[bench] {label}: Python hashers ...", flush=True)
            ours = _measure_python([(g.name, g.nodes, g.edges) for g in parsed], seconds, flink_version)
            total = sum(len(g.nodes) for g in parsed)
            jvm = float(flink["nodes_per_second"])
            rows.append({"workload": label, "nodes": total, "flink_jvm_v2": jvm,
                         **{f"ours_{k}": wall for k, (wall, _) in ours.items()},
                         **{f"ours_{k}_cpu": cpu for k, (_, cpu) in ours.items()},
                         **{f"ratio_{k}": wall / jvm for k, (wall, _) in ours.items()}})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="measuring time per number (default 3)")
    parser.add_argument("--flink-version", default="2.3")
    args = parser.parse_args(argv)
    rows = run(args.seconds, args.flink_version)
    print(f"\nnodes hashed per second, one core; ours {'compiled (hashing._fastids)' if COMPILED else 'pure Python'}"
          " (ratio: to Flink's JVM V2, both per wall second; last column: ours per CPU second of this process)")
    cols = [("Flink JVM V2", "flink_jvm_v2", None), ("ours V2", "ours_v2", "ratio_v2"),
            ("ours V3", "ours_v3", "ratio_v3"), ("V2 + building graph", "ours_v2_building", "ratio_v2_building"),
            ("pure-Python V2", "ours_python_v2", "ratio_python_v2"), ("ids+chains V3", "ours_ids_v3", "ratio_ids_v3")]
    for r in rows:
        print(f"\n{r['workload']} ({r['nodes']:,} nodes)")
        for title, key, ratio in cols:
            tail = f"  {r[ratio]:>5.2f}x  {r[key + '_cpu']:>12,.0f}" if ratio else ""
            print(f"  {title:22} {r[key]:>12,.0f}{tail}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Hashing throughput: our V2/V3 hashers against Flink's own JVM `StreamGraphHasherV2`.

One command (`make bench` or `python -m bench.bench_hashing`). Flink's hasher is timed in a
JVM on job graphs built with the DataStream API (after a warm-up of the same length); their
specs are written out and our hashers are timed on exactly those graphs, in this process,
so the ratio compares like with like. Our timing includes building the indexed graph and
the chainability analysis, because a fresh job needs both; Flink's graph object already
exists when its hasher runs.
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
from hashing.hashers import StreamGraphHasherV2, StreamGraphHasherV3
from hashing.operator_ids import compute_operator_ids
from hashing.readers.spec import parse_spec

WORKLOADS = {"fleet: 200 jobs x 50 operators": (200, 50), "one large job: 2 x 5,000 operators": (2, 5000)}


def _time(fn: Callable[[], int], seconds: float) -> float:
    """Nodes per second of `fn` (which returns nodes processed) over at least `seconds`."""
    fn()  # warm caches the same way the JVM side warms up
    done, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        done += fn()
    return done / (time.perf_counter() - start)


def _measure_python(raw: list, seconds: float, flink_version: str) -> tuple[float, float, float]:
    total = sum(len(nodes) for _, nodes, _ in raw)

    def fresh() -> list[StreamGraph]:
        return [StreamGraph.of(name, nodes, edges) for name, nodes, edges in raw]

    def hash_all(hasher: StreamGraphHasherV2 | StreamGraphHasherV3) -> int:
        for g in fresh():
            hasher.traverse_stream_graph_and_generate_hashes(g)
        return total

    def full(kind: str) -> int:
        for g in fresh():
            compute_operator_ids(g, kind, flink_version)
        return total

    return (_time(lambda: hash_all(StreamGraphHasherV2()), seconds),
            _time(lambda: hash_all(StreamGraphHasherV3()), seconds), _time(lambda: full("v3"), seconds))


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
            v2, v3, ids_v3 = _measure_python([(g.name, g.nodes, g.edges) for g in parsed], seconds, flink_version)
            total = sum(len(g.nodes) for g in parsed)
            jvm = float(flink["nodes_per_second"])
            rows.append({"workload": label, "nodes": total, "flink_jvm_v2": jvm, "ours_v2": v2, "ours_v3": v3,
                         "ours_ids_v3": ids_v3, "ratio_v2": v2 / jvm, "ratio_v3": v3 / jvm})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="measuring time per number (default 3)")
    parser.add_argument("--flink-version", default="2.3")
    args = parser.parse_args(argv)
    rows = run(args.seconds, args.flink_version)
    head = (f"{'workload':38} {'Flink JVM V2':>13} {'ours V2':>10} {'ratio':>6} {'ours V3':>10} {'ratio':>6} "
            f"{'ids+chains V3':>14}")
    print("\nnodes hashed per second, one core\n" + head + "\n" + "-" * len(head))
    for r in rows:
        print(f"{r['workload']:38} {r['flink_jvm_v2']:>13,.0f} {r['ours_v2']:>10,.0f} {r['ratio_v2']:>6.2f} "
              f"{r['ours_v3']:>10,.0f} {r['ratio_v3']:>6.2f} {r['ours_ids_v3']:>14,.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

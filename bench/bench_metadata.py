"""Benchmark: `_metadata` parsing, ours vs Flink's own loader, on two files Flink's code wrote.

1. Throughput (goal, docs/performance.md: >= 200 MB/s). The input is a parallelism-128 savepoint (hashmap
   backend, keyed + operator list/union state, inline state handles) written by a real Flink 2.3 job
   in a MiniCluster via `python -m flink_bridge.generate_savepoints --large`.
2. A 1,000-subtask job (goal: its metadata in under 1 s). The input is a canonical savepoint of
   8 operators at parallelism 1,000 (8,000 subtask states; source reader splits + coordinator
   state, keyed state in key-group handles, one operator in relative files and one inline, split
   and union list state). A MiniCluster cannot run 1,000 subtasks on this machine, so the Java tool
   builds the `CheckpointMetadata` from Flink's own state-handle classes and Flink's
   `Checkpoints.storeCheckpointMetadata` serializes it (`--wide`; see
   flink_bridge/java/savepoints/common/ugate/savepoints/Wide.java): the bytes are what Flink writes.
   Before timing, our reading of it is compared with Flink's (`flink-view.json`, written by Flink's
   loader when the file was generated).

Both files are created on first use under `.work/bench/<release>/`. Flink's
`Checkpoints.loadCheckpointMetadata` is timed in a JVM in the same run (warmed up for half the
budget, -Xmx1g), our reader in this process (best of as many rounds as fit in the budget).

Usage: python bench/bench_metadata.py [--seconds 10] [--version 2.3]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from flink_bridge.dist import release_of  # noqa: E402
from flink_bridge.generate_savepoints import BENCH_DIR, WIDE_CASE, generate_large, generate_wide, run_java  # noqa: E402
from upgrade_gate.flink.metadata import parse_metadata  # noqa: E402
from upgrade_gate.flink.metadata.json_view import to_json  # noqa: E402
from upgrade_gate.flink.metadata.model import CheckpointMetadata  # noqa: E402

WIDE_GOAL_SECONDS = 1.0


def ours(path: Path, seconds: float) -> dict[str, float]:
    data = path.read_bytes()
    base = str(path.parent)
    parse_metadata(data, str(path), base)  # warm-up
    best = float("inf")
    n = 0
    start = time.perf_counter()
    deadline = start + seconds
    while time.perf_counter() < deadline or n < 3:
        t = time.perf_counter()
        parse_metadata(data, str(path), base)
        best = min(best, time.perf_counter() - t)
        n += 1
    return {"bytes": len(data), "iterations": n, "best_seconds": best, "mb_per_s": len(data) / best / 1e6,
            "mean_seconds": (time.perf_counter() - start) / n}


def flink(path: Path, seconds: float, version: str) -> dict[str, float]:
    out = run_java(version, "ugate.savepoints.FlinkView", ["bench", str(path), str(seconds)])
    return json.loads(out.strip().splitlines()[-1])


def handle_count(m: CheckpointMetadata) -> int:
    return sum(len(s.managed_keyed_state) + len(s.managed_operator_state) + len(s.raw_keyed_state)
               + len(s.raw_operator_state) for o in m.operator_states for s in o.subtask_states.values())


def describe(path: Path, m: CheckpointMetadata) -> str:
    subtasks = sum(len(o.subtask_states) for o in m.operator_states)
    return (f"{path} ({path.stat().st_size / 1e6:.1f} MB, v{m.version}, {len(m.operator_states)} operators at "
            f"parallelism {max(o.parallelism for o in m.operator_states):,}, {subtasks:,} subtask states, "
            f"{handle_count(m):,} state handles)")


def _template(obj: Any, base: str) -> Any:
    """Snapshot directory -> ${SAVEPOINT} in resolved paths, as FlinkView writes them."""
    if isinstance(obj, dict):
        return {k: _template(v, base) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_template(v, base) for v in obj]
    if isinstance(obj, str) and obj.startswith(base):
        return "${SAVEPOINT}" + obj[len(base):]
    return obj


def same_as_flink(path: Path, m: CheckpointMetadata) -> bool:
    """Our detailed reading equals Flink's loader's (flink-view.json beside the file)."""
    view = path.parent / "flink-view.json"
    base = os.path.abspath(path.parent)
    return view.is_file() and _template(to_json(m, detail=True), base) == json.loads(view.read_text())


def throughput(args: argparse.Namespace) -> None:
    path = BENCH_DIR / release_of(args.version) / "large-p128" / "_metadata"
    if not path.is_file():
        generate_large(args.version)
    m = parse_metadata(path.read_bytes(), str(path), str(path.parent))
    print(f"input: {describe(path, m)}")
    py = ours(path, args.seconds)
    jv = flink(path, args.seconds, args.version)
    print(f"{'reader':<44} {'MB/s':>10} {'ms/file':>10}")
    ours_label = "ours (Python, upgrade_gate.flink.metadata)"
    print(f"{ours_label:<44} {py['mb_per_s']:>10.1f} {py['best_seconds'] * 1e3:>10.2f}")
    flink_ms = jv["seconds"] / jv["iterations"] * 1e3
    print(f"{'Flink Checkpoints.loadCheckpointMetadata':<44} {jv['mb_per_s']:>10.1f} {flink_ms:>10.2f}")
    print(f"ratio ours/Flink: {py['mb_per_s'] / jv['mb_per_s']:.2f}; goal >= 200 MB/s: "
          f"{'met' if py['mb_per_s'] >= 200 else 'NOT met'}")


def wide(args: argparse.Namespace) -> None:
    path = BENCH_DIR / release_of(args.version) / WIDE_CASE / "_metadata"
    if not path.is_file():
        generate_wide(args.version)
    path = path.resolve()
    m = parse_metadata(path.read_bytes(), str(path), str(path.parent))
    print(f"\ninput: {describe(path, m)}")
    print(f"our reading == Flink's reading (every handle): {'yes' if same_as_flink(path, m) else 'NO'}")
    py = ours(path, args.seconds)
    jv = flink(path, args.seconds, args.version)
    flink_best = jv.get("best_seconds", jv["seconds"] / jv["iterations"])
    print(f"{'reader':<44} {'best ms':>10} {'mean ms':>10} {'runs':>6} {'< 1 s':>6}")
    rows = [("ours (Python, upgrade_gate.flink.metadata)", py["best_seconds"], py["mean_seconds"], py["iterations"]),
            ("Flink Checkpoints.loadCheckpointMetadata", flink_best, jv["seconds"] / jv["iterations"],
             jv["iterations"])]
    for label, best, mean, n in rows:
        print(f"{label:<44} {best * 1e3:>10.1f} {mean * 1e3:>10.1f} {n:>6} "
              f"{'yes' if best < WIDE_GOAL_SECONDS else 'no':>6}")
    print(f"ratio ours/Flink time (best): {py['best_seconds'] / flink_best:.2f}; goal < 1 s for a "
          f"1,000-subtask job: {'met' if py['best_seconds'] < WIDE_GOAL_SECONDS else 'NOT met'} "
          f"({py['best_seconds'] * 1e3:.0f} ms)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=10.0, help="measuring time per reader and file (default 10)")
    ap.add_argument("--version", default="2.3")
    args = ap.parse_args(argv)
    throughput(args)
    wide(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())

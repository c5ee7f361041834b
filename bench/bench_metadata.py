"""Benchmark: MB/s parsing a large `_metadata` written by real Flink, ours vs Flink's own loader.

The input is a parallelism-128 savepoint (hashmap backend, keyed + operator list/union state,
inline state handles) written by Flink 2.3 via `python -m flink_bridge.generate_savepoints --large`;
it is created on first use under `.work/bench/`. Flink's `Checkpoints.loadCheckpointMetadata` is timed
in a JVM in the same run (warmed up, -Xmx1g), our reader in this process (best of several rounds).
Goal (design §8): >= 200 MB/s.

Usage: python bench/bench_metadata.py [--seconds 10] [--version 2.3]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from flink_bridge.dist import release_of  # noqa: E402
from flink_bridge.generate_savepoints import BENCH_DIR, generate_large, run_java  # noqa: E402
from restore.metadata import parse_metadata  # noqa: E402


def ours(path: Path, seconds: float) -> dict[str, float]:
    data = path.read_bytes()
    base = str(path.parent)
    parse_metadata(data, str(path), base)  # warm-up
    best = float("inf")
    n = 0
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline or n < 3:
        t = time.perf_counter()
        parse_metadata(data, str(path), base)
        best = min(best, time.perf_counter() - t)
        n += 1
    return {"bytes": len(data), "iterations": n, "best_seconds": best, "mb_per_s": len(data) / best / 1e6}


def flink(path: Path, seconds: float, version: str) -> dict[str, float]:
    out = run_java(version, "ugate.savepoints.FlinkView", ["bench", str(path), str(seconds)])
    return json.loads(out.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--version", default="2.3")
    args = ap.parse_args(argv)
    path = BENCH_DIR / release_of(args.version) / "large-p128" / "_metadata"
    if not path.is_file():
        generate_large(args.version)
    m = parse_metadata(path.read_bytes(), str(path), str(path.parent))
    handles = sum(len(s.managed_keyed_state) + len(s.managed_operator_state) + len(s.raw_keyed_state)
                  + len(s.raw_operator_state) for o in m.operator_states for s in o.subtask_states.values())
    print(f"input: {path} ({path.stat().st_size / 1e6:.1f} MB, v{m.version}, {len(m.operator_states)} operators, "
          f"{handles} state handles)")
    py = ours(path, args.seconds)
    jv = flink(path, args.seconds, args.version)
    print(f"{'reader':<44} {'MB/s':>10} {'ms/file':>10}")
    print(f"{'ours (Python, restore.metadata)':<44} {py['mb_per_s']:>10.1f} {py['best_seconds'] * 1e3:>10.2f}")
    flink_ms = jv["seconds"] / jv["iterations"] * 1e3
    print(f"{'Flink Checkpoints.loadCheckpointMetadata':<44} {jv['mb_per_s']:>10.1f} {flink_ms:>10.2f}")
    print(f"ratio ours/Flink: {py['mb_per_s'] / jv['mb_per_s']:.2f}; goal >= 200 MB/s: "
          f"{'met' if py['mb_per_s'] >= 200 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

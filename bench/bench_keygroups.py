"""Benchmark: keys per second through the key-group rules, vectorised vs scalar vs Flink's JVM.

Goal (docs/performance.md): >= 50 M keys per second per core for int/long keys, vectorised. Key alignment
(spark_jobs/key_alignment.py) places millions of sampled keys with the core's NumPy rules
(`hashing/vectorized.py`): Java hashCode -> murmur -> key group -> operator index. That chain is
timed here on one core, from keys already in memory (a NumPy int32/int64 array; strings as the
Arrow string array key_alignment reads from Parquet) to
operator indexes: 10 M random ints, 10 M random longs and 1 M random strings (4-24 chars, mostly
ASCII, some non-ASCII and supplementary characters), fixed seed; best of several rounds. Twice: as
one array per key type (the goal's figure), and in batches of `--batch` keys (200,000 by default,
the Arrow batch size key_alignment asks Spark for), where the temporaries stay in cache.

Baselines measured in the same run, on the same keys:
  * the scalar core (`hashing.keygroups.assign_to_key_group`, which calls `hashing.java_hash`, then
    `compute_operator_index_for_key_group`) on the first `--scalar-keys` keys, one key at a time;
    it must give identical key groups and operator indexes;
  * Flink's own `KeyGroupRangeAssignment.assignKeyToParallelOperator` in a JVM (bridge tool
    `streamgraph`, KeyGroupBench.java) on one thread, on boxed keys (strings rebuilt before every
    pass: Java caches String.hashCode), warmed up for half its budget; its operator indexes must
    equal ours for every key.

One core: NumPy's element-wise ufuncs (all this chain uses) never start threads; BLAS thread pools
are pinned to one thread anyway, and the process CPU time / wall time over the vectorised rounds
is printed as evidence (at most 1.00 with one thread; below 1.00 when the shared machine preempts
us). The JVM's timed loop is single-threaded (its JIT and GC threads are not).

Usage: python -m bench.bench_keygroups [--keys 10000000] [--string-keys 1000000] [--batch 200000]
       [--rounds 5] [--scalar-keys 200000] [--seconds 6] [--flink-version 2.3] [--no-jvm]
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # before NumPy loads: no BLAS thread pool (the chain uses none)

import argparse  # noqa: E402
import json  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402

from flink_bridge.jvm import run_tool  # noqa: E402
from hashing import vectorized  # noqa: E402
from hashing.keygroups import assign_to_key_group, compute_operator_index_for_key_group  # noqa: E402

MAX_PARALLELISM = 4096
PARALLELISM = 1000
GOAL = 50e6
JAVA_TYPES = {"int": "integer", "long": "long", "string": "string"}
# mostly ASCII, like real ids; some Latin-1, CJK and one supplementary character (a UTF-16 pair)
_ALPHABET = [*"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_:./", *"äöüßéñ", *"日本語", "\U0001F600"]
_WEIGHTS = np.array([1.0] * 67 + [0.1] * 6 + [0.1] * 3 + [0.05])


def make_keys(key_type: str, n: int, seed: int) -> np.ndarray | list[str]:
    rng = np.random.default_rng(seed)
    if key_type == "int":
        return rng.integers(-(1 << 31), 1 << 31, size=n, dtype=np.int64).astype(np.int32)
    if key_type == "long":
        return rng.integers(-(1 << 63), (1 << 63) - 1, size=n, dtype=np.int64, endpoint=True)
    lengths = rng.integers(4, 25, size=n)
    points = np.array([ord(c) for c in _ALPHABET], dtype="<u4")
    chars = rng.choice(points, size=int(lengths.sum()), p=_WEIGHTS / _WEIGHTS.sum())
    text = chars.tobytes().decode("utf-32-le")
    ends = np.cumsum(lengths).tolist()
    return [text[e - m:e] for e, m in zip(ends, lengths.tolist(), strict=True)]


def vectorised(keys: np.ndarray | list[str], key_type: str) -> tuple[np.ndarray, np.ndarray]:
    """key_alignment's chain: hash codes -> key groups -> operator indexes."""
    if key_type == "int":
        codes = vectorized.int_hash_codes(keys)
    elif key_type == "long":
        codes = vectorized.long_hash_codes(keys)
    else:
        codes = vectorized.string_hash_codes(keys)
    groups = vectorized.key_groups(codes, MAX_PARALLELISM)
    return groups, vectorized.operator_indexes(groups, MAX_PARALLELISM, PARALLELISM)


def batched(keys: np.ndarray | list[str], key_type: str, batch: int) -> None:
    for i in range(0, len(keys), batch):
        vectorised(keys[i:i + batch], key_type)


def scalar(keys: list[Any], key_type: str) -> tuple[list[int], list[int]]:
    java_type = JAVA_TYPES[key_type]
    groups = [assign_to_key_group(k, MAX_PARALLELISM, java_type) for k in keys]
    return groups, [compute_operator_index_for_key_group(MAX_PARALLELISM, PARALLELISM, g) for g in groups]


def best_of(fn: Callable[[], Any], rounds: int, warm_up: bool = True) -> tuple[float, float, Any]:
    """Best wall seconds of `rounds` calls (after one warm-up call), CPU/wall over them, the last result."""
    result = fn() if warm_up else None
    best, wall, cpu = float("inf"), 0.0, 0.0
    for _ in range(rounds):
        c, t = time.process_time(), time.perf_counter()
        result = fn()
        dt = time.perf_counter() - t
        best, wall, cpu = min(best, dt), wall + dt, cpu + time.process_time() - c
    return best, cpu / wall, result


def write_keys(tmp: Path, key_type: str, keys: np.ndarray | list[str]) -> None:
    if key_type == "string":
        (tmp / "string.txt").write_text("".join(k + "\n" for k in keys), encoding="utf-8")
    else:
        keys.astype("<i4" if key_type == "int" else "<i8").tofile(tmp / f"{key_type}.bin")


def flink(tmp: Path, types: list[str], seconds: float, version: str) -> dict[str, dict[str, Any]]:
    print(f"[bench] Flink {version} KeyGroupRangeAssignment in a JVM ({', '.join(types)}) ...", flush=True)
    out = run_tool("streamgraph", version, "upgradegate.bridge.KeyGroupBench",
                   [str(tmp), str(MAX_PARALLELISM), str(PARALLELISM), str(seconds), *types], heap="1g")
    rows = {}
    for line in out.strip().splitlines():
        r = json.loads(line)
        r["indexes"] = np.fromfile(tmp / f"{r['type']}.out", dtype="<i2")
        rows[r["type"]] = r
    return rows


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    types = ["int", "long", "string"]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-keygroups-") as tmp_name:
        tmp = Path(tmp_name)
        keys = {t: make_keys(t, args.string_keys if t == "string" else args.keys, args.seed + i)
                for i, t in enumerate(types)}
        for t in types:
            n = len(keys[t])
            print(f"[bench] {t}: vectorised on {n:,} keys, {args.rounds} rounds ...", flush=True)
            # strings as key_alignment gets them from Spark/Parquet: an Arrow string array
            arr = pa.array(keys[t], pa.string()) if t == "string" else keys[t]
            best, cpu_ratio, (groups, owners) = best_of(lambda arr=arr, t=t: vectorised(arr, t), args.rounds)
            b_best, b_cpu, _ = best_of(lambda arr=arr, t=t: batched(arr, t, args.batch), args.rounds)
            m = min(args.scalar_keys, n)
            sample = keys[t][:m] if t == "string" else keys[t][:m].tolist()
            print(f"[bench] {t}: scalar core on {m:,} keys ...", flush=True)
            s_best, _, (s_groups, s_owners) = best_of(lambda t=t, sample=sample: scalar(sample, t), 1, warm_up=False)
            same = (np.array_equal(groups[:m], np.array(s_groups, dtype=np.int64))
                    and np.array_equal(owners[:m], np.array(s_owners, dtype=np.int64)))
            rows.append({"type": t, "keys": n, "vec": n / best, "batched": n / b_best,
                         "cpu_ratio": max(cpu_ratio, b_cpu), "scalar_keys": m,
                         "scalar": m / s_best, "same_scalar": same, "owners": owners})
            if not args.no_jvm:
                write_keys(tmp, t, keys[t])
        if not args.no_jvm:
            jvm = flink(tmp, types, args.seconds, args.flink_version)
            for r in rows:
                j = jvm[r["type"]]
                r["flink"] = j["keys"] / (j["best_nanos"] / 1e9)
                r["flink_mean"] = j["keys"] / (j["mean_nanos"] / 1e9)
                r["same_flink"] = np.array_equal(j["indexes"].astype(np.int64), r["owners"])
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=10_000_000, help="int and long keys (default 10 M)")
    ap.add_argument("--string-keys", type=int, default=1_000_000, help="string keys (default 1 M)")
    ap.add_argument("--batch", type=int, default=200_000, help="batch size of the batched run (default 200,000)")
    ap.add_argument("--scalar-keys", type=int, default=200_000, help="scalar baseline sample per type")
    ap.add_argument("--rounds", type=int, default=5, help="vectorised rounds per type, best counts")
    ap.add_argument("--seconds", type=float, default=6.0, help="JVM budget per type, half warm-up (default 6)")
    ap.add_argument("--seed", type=int, default=20240611)
    ap.add_argument("--flink-version", default="2.3")
    ap.add_argument("--no-jvm", action="store_true", help="skip Flink's JVM baseline")
    args = ap.parse_args(argv)
    rows = run(args)
    jvm = not args.no_jvm
    print(f"\nkeys per second on one core: key -> Java hashCode -> murmur -> key group -> operator index "
          f"(max parallelism {MAX_PARALLELISM}, parallelism {PARALLELISM})")
    head = (f"{'key type':9} {'keys':>11} {'vectorised':>12} {'in batches':>12} {'cpu/wall':>8} {'scalar core':>12}"
            f" {'vec/scalar':>10}"
            + (f" {'Flink JVM':>12} {'vec/Flink':>9}" if jvm else "") + f" {'goal >= 50 M/s':>15}")
    print(head + "\n" + "-" * len(head))
    for r in rows:
        goal = ("met" if r["vec"] >= GOAL else "NOT met") if r["type"] != "string" else "(ints/longs only)"
        line = (f"{r['type']:9} {r['keys']:>11,} {r['vec'] / 1e6:>10.1f} M {r['batched'] / 1e6:>10.1f} M "
                f"{r['cpu_ratio']:>8.2f} "
                f"{r['scalar'] / 1e6:>10.2f} M {r['vec'] / r['scalar']:>9.0f}x")
        if jvm:
            line += f" {r['flink'] / 1e6:>10.1f} M {r['vec'] / r['flink']:>9.2f}"
        print(line + f" {goal:>15}")
    print(f"\nvectorised: the keys as one array; in batches: {args.batch:,} keys per call (key_alignment's "
          "Arrow batches); goal column: one array; in batches: "
          + ", ".join(f"{r['type']} {'met' if r['batched'] >= GOAL else 'NOT met'}" for r in rows[:2]))
    print("same key groups and operator indexes as the scalar core (first "
          f"{rows[0]['scalar_keys']:,} keys per type): "
          + ", ".join(f"{r['type']} {'yes' if r['same_scalar'] else 'NO'}" for r in rows))
    if jvm:
        print("same operator index as Flink's assignKeyToParallelOperator (every key): "
              + ", ".join(f"{r['type']} {'yes' if r['same_flink'] else 'NO'}" for r in rows))
        print("Flink JVM column: best pass; mean over timed passes: "
              + ", ".join(f"{r['type']} {r['flink_mean'] / 1e6:.1f} M/s" for r in rows))
    ok = all(r["same_scalar"] and r.get("same_flink", True) for r in rows)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

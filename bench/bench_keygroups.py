"""Benchmark: keys per CPU-second through the key-group rules, our vectorised core vs Flink's own JVM code.

Goals (docs/performance.md): >= 50 M keys per second per core for int/long keys, vectorised; issue 34: >= 1x Flink's
rate per CPU-second for int/long keys, >= 0.5x for strings. Key alignment
(spark_jobs/key_alignment.py) places millions of sampled keys with the core's NumPy rules
(`hashing/vectorized.py`, String.hashCode in `hashing/_javastrings.c` when built): Java hashCode -> murmur -> key
group -> operator index, block by block. That chain is timed from keys
already in memory (a NumPy int32/int64 array; strings as the Arrow string array key_alignment reads from Parquet)
to operator indexes: 10 M random ints, 10 M random longs and 1 M random strings (4-24 chars, mostly ASCII, some
non-ASCII and supplementary characters), fixed seed. Twice per type: as one array (the goal's figure), and in
batches of `--batch` keys (200,000 by default, the Arrow batch size key_alignment asks Spark for).

Flink's side: `KeyGroupRangeAssignment.assignKeyToParallelOperator` in a JVM (bridge tool `streamgraph`,
KeyGroupBench.java) on the same keys, boxed (strings rebuilt before every pass, outside the timed CPU: Java caches
String.hashCode). Both sides are timed by bench/fair.py: thread CPU on both sides, rounds alternated in one process
tree, the JVM warmed up by CPU time until its rate is stable, the median of per-round rates on both sides, the
ratio with its spread and the load average. One JVM per key type, so Flink's call sites stay monomorphic (the most
favourable case for it). Before anything is timed, every operator index must equal Flink's, and the first
`--scalar-keys` keys must give the same key groups and indexes through the scalar core
(`hashing.keygroups.assign_to_key_group`).

One core: NumPy's element-wise ufuncs (all this chain uses) never start threads, and BLAS thread pools are pinned
to one thread anyway; each result also carries our process CPU, which would exceed the thread CPU if a thread were
started behind our back.

Usage: python -m bench.bench_keygroups [--keys 10000000] [--string-keys 1000000] [--batch 200000]
       [--types int,long,string] [--flink-version X.Y] [fair options: --rounds, --round-cpu, --warm-cpu, --tiny...]
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # before NumPy loads: no BLAS thread pool (the chain uses none)

import argparse  # noqa: E402
import tempfile  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402

from bench import fair  # noqa: E402
from hashing import vectorized  # noqa: E402
from hashing.keygroups import assign_to_key_group, compute_operator_index_for_key_group  # noqa: E402
from hashing.versions import DEFAULT  # noqa: E402

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
    if key_type == "long":  # Long.hashCode inside the same blocks, as key_alignment.placements does
        return vectorized.long_key_groups_and_operator_indexes(keys, MAX_PARALLELISM, PARALLELISM)
    codes = vectorized.int_hash_codes(keys) if key_type == "int" else vectorized.string_hash_codes(keys)
    return vectorized.key_groups_and_operator_indexes(codes, MAX_PARALLELISM, PARALLELISM)


def batched(keys: np.ndarray | list[str], key_type: str, batch: int) -> None:
    for i in range(0, len(keys), batch):
        vectorised(keys[i:i + batch], key_type)


def scalar(keys: list[Any], key_type: str) -> tuple[list[int], list[int]]:
    java_type = JAVA_TYPES[key_type]
    groups = [assign_to_key_group(k, MAX_PARALLELISM, java_type) for k in keys]
    return groups, [compute_operator_index_for_key_group(MAX_PARALLELISM, PARALLELISM, g) for g in groups]


def write_keys(tmp: Path, key_type: str, keys: np.ndarray | list[str]) -> None:
    if key_type == "string":
        (tmp / "string.txt").write_text("".join(k + "\n" for k in keys), encoding="utf-8")
    else:
        keys.astype("<i4" if key_type == "int" else "<i8").tofile(tmp / f"{key_type}.bin")


def same_as_scalar(keys: np.ndarray | list[str], key_type: str, groups: np.ndarray, owners: np.ndarray,
                   m: int) -> bool:
    sample = keys[:m] if key_type == "string" else keys[:m].tolist()
    s_groups, s_owners = scalar(sample, key_type)  # type: ignore[arg-type]
    return (np.array_equal(groups[:m], np.array(s_groups, dtype=np.int64))
            and np.array_equal(owners[:m], np.array(s_owners, dtype=np.int64)))


def _unit(keys: np.ndarray | Any, key_type: str, batch: int) -> Callable[[], int]:
    """One unit of our side: every key placed once (as one array, or in batches), its count."""
    n = len(keys)

    def unit() -> int:
        if batch:
            batched(keys, key_type, batch)
        else:
            vectorised(keys, key_type)
        return n
    return unit


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    settings = fair.settings_from(args)
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-keygroups-") as tmp_name:
        tmp = Path(tmp_name)
        for i, t in enumerate(args.types.split(",")):
            keys = make_keys(t, args.string_keys if t == "string" else args.keys, args.seed + i)
            n = len(keys)
            # strings as key_alignment gets them from Spark/Parquet: an Arrow string array
            arr = pa.array(keys, pa.string()) if t == "string" else keys
            groups, owners = vectorised(arr, t)
            m = min(args.scalar_keys, n)
            if not same_as_scalar(keys, t, groups, owners, m):
                raise SystemExit(f"{t}: the vectorised rules disagree with the scalar core")
            write_keys(tmp, t, keys)
            print(f"[bench] {t}: {n:,} keys; Flink {args.flink_version} KeyGroupRangeAssignment in a JVM ...",
                  flush=True)
            with fair.FlinkServer("streamgraph", args.flink_version, "upgradegate.bridge.KeyGroupBench",
                                  [str(tmp), str(MAX_PARALLELISM), str(PARALLELISM), t]) as flink:
                theirs = np.fromfile(tmp / f"{t}.out", dtype="<i2").astype(np.int64)
                if not np.array_equal(theirs, owners):
                    raise SystemExit(f"{t}: our operator indexes differ from Flink's assignKeyToParallelOperator")
                details = {"keys": n, "key_type": t, "same_as_flink": True, "same_as_scalar_core": m,
                           "max_parallelism": MAX_PARALLELISM, "parallelism": PARALLELISM}
                for mode, batch in (("one array", 0), (f"in {args.batch:,}-key batches", args.batch)):
                    unit = _unit(arr, t, batch)
                    what = fair.Comparison("key groups", f"{t} ({n:,} keys), {mode}", "keys",
                                           f"hashing.vectorized (NumPy; String.hashCode {vectorized.STRING_HASH})"
                                           if t == "string" else "hashing.vectorized (NumPy)",
                                           "KeyGroupRangeAssignment.assignKeyToParallelOperator",
                                           {**details, "mode": mode})
                    fair.run_and_report(what, fair.Ours(unit), flink, settings, args.json, results)
    return results


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=10_000_000, help="int and long keys (default 10 M)")
    ap.add_argument("--string-keys", type=int, default=1_000_000, help="string keys (default 1 M)")
    ap.add_argument("--batch", type=int, default=200_000, help="batch size of the batched run (default 200,000)")
    ap.add_argument("--scalar-keys", type=int, default=200_000, help="keys per type checked against the scalar core")
    ap.add_argument("--types", default="int,long,string", help="key types (default int,long,string)")
    ap.add_argument("--seed", type=int, default=20240611)
    ap.add_argument("--flink-version", default=DEFAULT)
    fair.add_arguments(ap)
    args = ap.parse_args(argv)
    results = run(args)
    fair.print_summary(results)
    for r in results:
        if r["key_type"] != "string" and r["mode"] == "one array":
            print(f"goal >= 50 M {r['key_type']} keys per CPU-second, one array: "
                  f"{'met' if r['ours']['rate'] >= GOAL else 'NOT met'} ({r['ours']['rate'] / 1e6:.1f} M)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Key samples with known misplacements, for key_alignment's tests and benchmarks (not product code).

`write_sample(...)` writes Parquet files of (key, split) where every key sits in a split read by
the subtask that owns its key group (reader = split % parallelism), except for planted keys:
`misplaced` keys sit in a split whose reader is another subtask, and `multi_split` keys appear in
a second split (read by the right subtask, so they are only "in several splits"). The owners come
from the core's vectorised key-group rules, so a correct job must report exactly the planted keys.
Keys are 0..n-1 (ints/longs; longs are spread beyond 32 bits) or "user-<i>" strings.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from hashing import vectorized


@dataclass(frozen=True)
class PlantedSample:
    path: Path
    rows: int
    keys: int
    misplaced: frozenset
    multi_split: frozenset


def key_values(start: int, end: int, key_type: str) -> np.ndarray | list[str]:
    idx = np.arange(start, end, dtype=np.int64)
    if key_type == "int":
        return idx.astype(np.int32)
    if key_type == "long":
        return idx * np.int64(4_294_967_311)  # beyond 32 bits, so Long.hashCode's fold matters
    return [f"user-{i}" for i in range(start, end)]


def _codes(values: np.ndarray | list[str], key_type: str) -> np.ndarray:
    if key_type == "int":
        return vectorized.int_hash_codes(values)  # type: ignore[arg-type]
    if key_type == "long":
        return vectorized.long_hash_codes(values)  # type: ignore[arg-type]
    return vectorized.string_hash_codes(values)  # type: ignore[arg-type]


def write_sample(directory: str | Path, n_keys: int, key_type: str, parallelism: int, max_parallelism: int, *,
                 splits_per_reader: int = 4, misplaced: int = 0, multi_split: int = 0, seed: int = 11,
                 chunk: int = 5_000_000) -> PlantedSample:
    """Write `n_keys` keys (one row each, plus one extra row per multi-split key) as Parquet chunks."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    planted = rng.choice(n_keys, size=misplaced + multi_split, replace=False) if misplaced + multi_split else []
    bad_idx = np.asarray(planted[:misplaced], dtype=np.int64)
    multi_idx = np.asarray(planted[misplaced:], dtype=np.int64)
    bad_set: set = set()
    multi_set: set = set()
    rows = 0
    for part, start in enumerate(range(0, n_keys, chunk)):
        end = min(n_keys, start + chunk)
        keys = key_values(start, end, key_type)
        owner = vectorized.operator_indexes(vectorized.key_groups(_codes(keys, key_type), max_parallelism),
                                            max_parallelism, parallelism)
        split = owner + parallelism * rng.integers(0, splits_per_reader, size=end - start)
        local_bad = bad_idx[(bad_idx >= start) & (bad_idx < end)] - start
        if local_bad.size:
            wrong = (owner[local_bad] + rng.integers(1, parallelism, size=local_bad.size)) % parallelism
            split[local_bad] = wrong + parallelism * rng.integers(0, splits_per_reader, size=local_bad.size)
        local_multi = multi_idx[(multi_idx >= start) & (multi_idx < end)] - start
        extra_split = (split[local_multi] + parallelism) % (parallelism * splits_per_reader)
        key_arr = pa.array(keys, type=pa.string() if key_type == "string" else None)
        extra_keys = key_arr.take(pa.array(local_multi))
        table = pa.table({"key": pa.concat_arrays([key_arr, extra_keys]),
                          "split": pa.array(np.concatenate([split, extra_split]).astype(np.int32))})
        pq.write_table(table, directory / f"part-{part:05d}.parquet", compression="snappy")
        rows += table.num_rows
        for i in local_bad:
            bad_set.add(keys[i].item() if key_type != "string" else keys[i])  # type: ignore[union-attr]
        for i in local_multi:
            multi_set.add(keys[i].item() if key_type != "string" else keys[i])  # type: ignore[union-attr]
    if splits_per_reader < 2 and multi_split:
        raise ValueError("multi-split keys need at least two splits per reader")
    return PlantedSample(directory, rows, n_keys, frozenset(bad_set), frozenset(multi_set))

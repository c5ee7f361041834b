"""key_alignment on a local session: planted misplacements are found exactly, and nothing else.

Samples are written by `bench.key_samples`: every key sits in a split read by the subtask owning
its key group, except the planted keys (in a split another subtask reads, or in a second split).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from bench.key_samples import write_sample
from hashing.errors import FlinkError
from hashing.keygroups import assign_to_key_group, compute_operator_index_for_key_group
from spark_jobs import key_alignment
from tests.spark_support import spark, spark_env  # noqa: F401  (fixtures)


def _offenders(spark, out: Path) -> tuple[set, set]:  # noqa: F811
    rows = spark.read.parquet(str(out / "offenders")).collect()
    return ({r["key"] for r in rows if r["misplaced_rows"] > 0}, {r["key"] for r in rows if r["in_several_splits"]})


@pytest.mark.parametrize(("key_type", "n", "parallelism", "max_parallelism"),
                         [("int", 100_000, 4, 128), ("long", 60_000, 3, 256), ("string", 60_000, 5, 128)])
def test_planted_misplacements_are_found_exactly(spark, tmp_path, key_type, n, parallelism,  # noqa: F811
                                                 max_parallelism) -> None:
    sample = write_sample(tmp_path / "sample", n, key_type, parallelism, max_parallelism, misplaced=9, multi_split=6,
                          chunk=n // 3 + 1)
    out = tmp_path / "out"
    doc = key_alignment.run_alignment(spark, str(sample.path), str(out), key_type=key_type, parallelism=parallelism,
                                      max_parallelism=max_parallelism)
    misplaced, multi = _offenders(spark, out)
    assert misplaced == set(sample.misplaced) and multi == set(sample.multi_split)
    assert doc["verdict"] == "NOT_ALIGNED" and doc["rows"] == sample.rows and doc["keys"] == n
    assert doc["misplaced"] == {**doc["misplaced"], "keys": 9, "rows": 9}
    assert doc["keys_in_several_splits"]["keys"] == 6 and doc["keys_in_several_splits"]["rows"] == 12
    for e in doc["keys_in_several_splits"]["examples"]:
        assert len(e["splits"]) == 2 and e["key"] in sample.multi_split
    for e in doc["misplaced"]["examples"]:  # each example agrees with the scalar core
        kg = assign_to_key_group(e["key"], max_parallelism, {"int": "Integer", "long": "Long",
                                                             "string": "String"}[key_type])
        assert e["key_group"] == kg
        assert e["owner_subtask"] == compute_operator_index_for_key_group(max_parallelism, parallelism, kg)
        assert e["reader_subtasks"] != [e["owner_subtask"]]
    assert json.loads((out / "report.json").read_text()) == json.loads(json.dumps(doc))


def test_every_row_matches_the_scalar_core(spark, tmp_path) -> None:  # noqa: F811
    sample = write_sample(tmp_path / "s", 3000, "long", 7, 200, misplaced=40)
    df = key_alignment.load_sample(spark, str(sample.path), "key", "split", "long")
    rows = key_alignment.placements(df, "long", 7, 200).collect()
    assert len(rows) == 3000
    for r in rows:
        kg = assign_to_key_group(r["key"], 200, "Long")
        assert (r["key_group"], r["owner_subtask"]) == (kg, compute_operator_index_for_key_group(200, 7, kg))
        assert r["reader_subtask"] == r["split"] % 7 and r["misplaced"] == (r["owner_subtask"] != r["reader_subtask"])
    assert sum(r["misplaced"] for r in rows) == 40


def test_csv_with_a_reader_column_and_an_aligned_sample(spark, tmp_path) -> None:  # noqa: F811
    """Splits named like Kafka partitions, the reader given per row; a correct layout is ALIGNED."""
    sample = write_sample(tmp_path / "s", 5000, "string", 4, 128)
    rows = spark.read.parquet(str(sample.path)).collect()
    path = tmp_path / "keys.csv"
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["user", "partition", "subtask"])
        for r in rows:
            w.writerow([r["key"], f"orders-{r['split']}", r["split"] % 4])
    doc = key_alignment.run_alignment(spark, str(path), str(tmp_path / "out"), key_type="string", parallelism=4,
                                      max_parallelism=128, key_column="user", split_column="partition",
                                      reader_column="subtask")
    assert doc["aligned"] and doc["verdict"] == "ALIGNED" and doc["keys"] == 5000 and doc["split_owner"] == \
        "column:subtask"
    assert doc["misplaced"]["keys"] == 0 and doc["keys_in_several_splits"]["keys"] == 0


def test_flink_bounds_are_enforced(spark, tmp_path) -> None:  # noqa: F811
    sample = write_sample(tmp_path / "s", 100, "int", 2, 128)
    with pytest.raises(FlinkError, match="Maximum parallelism must not be smaller than parallelism"):
        key_alignment.run_alignment(spark, str(sample.path), str(tmp_path / "out"), key_type="int", parallelism=8,
                                    max_parallelism=4)
    assert not (tmp_path / "out").exists()


# ---- the per-key path against the row-level one and the scalar core ---------------------------------
JAVA_TYPES = {"int": "Integer", "long": "Long", "string": "String"}


def _expected_report(rows: list[tuple], key_type: str, parallelism: int, max_parallelism: int,
                     examples: int) -> dict:
    """What key_alignment must report for (key, split[, split as sampled]) rows, by the scalar core and Python's
    `%` (the reader of split s is s % parallelism, never negative). Rows with a null key only count as null
    keys; the examples of keys in several splits list the splits as sampled, the misplaced ones the split
    range and the lowest and highest reader."""
    from collections import defaultdict

    from hashing.keygroups import assign_key_to_parallel_operator

    per: dict = defaultdict(list)
    raw: dict = defaultdict(set)
    for k, s, *sampled in rows:
        if k is not None:
            per[k].append(s)
            raw[k].add(sampled[0] if sampled else s)
    owner = {k: assign_key_to_parallel_operator(k, max_parallelism, parallelism, JAVA_TYPES[key_type]) for k in per}
    multi = {k: ss for k, ss in per.items() if len(set(ss)) > 1}
    bad = {k: [s for s in ss if s % parallelism != owner[k]] for k, ss in per.items()}
    bad = {k: ss for k, ss in bad.items() if ss}
    top_multi = sorted(multi, key=lambda k: (-len(per[k]), k))[:examples]
    top_bad = sorted(bad, key=lambda k: (-len(bad[k]), k))[:examples]
    readers = {k: {s % parallelism for s in ss} for k, ss in per.items()}
    return {
        "rows": sum(len(ss) for ss in per.values()), "keys": len(per),
        "null_keys": sum(1 for k, *_ in rows if k is None), "offenders": set(multi) | set(bad),
        "multi": (len(multi), sum(len(ss) for ss in multi.values()),
                  [(k, len(per[k]), owner[k], sorted(raw[k])) for k in top_multi]),
        "misplaced": (len(bad), sum(len(ss) for ss in bad.values()),
                      [(k, len(bad[k]), owner[k], sorted({min(readers[k]), max(readers[k])}),
                        sorted({min(per[k]), max(per[k])})) for k in top_bad]),
    }


def _check_report(doc: dict, want: dict) -> None:
    assert (doc["rows"], doc["keys"], doc["null_keys"]) == (want["rows"], want["keys"], want["null_keys"])
    several, misplaced = doc["keys_in_several_splits"], doc["misplaced"]
    assert (several["keys"], several["rows"]) == want["multi"][:2]
    assert [(e["key"], e["rows"], e["owner_subtask"], e["splits"]) for e in several["examples"]] == want["multi"][2]
    assert (misplaced["keys"], misplaced["rows"]) == want["misplaced"][:2]
    assert [(e["key"], e["rows"], e["owner_subtask"], e["reader_subtasks"], e["splits"])
            for e in misplaced["examples"]] == want["misplaced"][2]
    assert doc["aligned"] == (want["multi"][0] == 0 and want["misplaced"][0] == 0)


def test_per_key_agrees_with_the_row_level_placements(spark, tmp_path) -> None:  # noqa: F811
    """Many rows per key, negative and null splits, keys read by several subtasks, and Arrow batches of 7 rows,
    so that most keys straddle batches: every per-key row equals Spark's aggregation of the row-level view."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark.sql import functions as F

    rng = np.random.default_rng(7)
    n = 20_000
    keys = rng.integers(-600, 600, n)
    splits = rng.integers(-40, 40, n)
    (tmp_path / "s").mkdir()
    pq.write_table(pa.table({"key": pa.array(keys, pa.int32()),
                             "split": pa.array(splits, pa.int64(), mask=rng.random(n) < 0.01)}),
                   tmp_path / "s" / "part-0.parquet")
    df = key_alignment.load_sample(spark, str(tmp_path / "s"), "key", "split", "int")
    before = spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch")
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "7")
    try:
        got = {r["key"]: r.asDict() for r in key_alignment.per_key(df, "int", 7, 128).collect()}
        candidates = key_alignment.per_key(df, "int", 7, 128, candidates_only=True).collect()
    finally:
        spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", before)
    want = {r["key"]: r.asDict() for r in key_alignment.placements(df, "int", 7, 128).groupBy("key").agg(
        F.count(F.lit(1)).alias("rows"), F.min("split").alias("split_min"), F.max("split").alias("split_max"),
        F.sum(F.col("misplaced").cast("long")).alias("misplaced_rows"), F.first("key_group").alias("key_group"),
        F.first("owner_subtask").alias("owner_subtask"), F.min("reader_subtask").alias("reader_min"),
        F.max("reader_subtask").alias("reader_max"), F.collect_set("split").alias("splits")).collect()}
    assert got.keys() == want.keys() and len(got) == len(set(keys.tolist()))
    several = 0
    for k, w in want.items():
        g = got[k]
        assert {c: g[c] for c in w if c != "splits"} == {c: w[c] for c in w if c != "splits"}, k
        assert g["key_group"] == assign_to_key_group(k, 128, "Integer")
        if g["split_min"] != g["split_max"]:
            several += 1
            assert sorted(g["splits"]) == sorted(w["splits"]), k
        elif g["splits"] is not None:
            assert sorted(g["splits"]) == sorted(w["splits"]), k
    assert several > 100 and sum(g["reader_min"] != g["reader_max"] for g in got.values()) > 100
    assert any(g["split_min"] is not None and g["split_min"] < 0 for g in got.values())
    # candidates: every key that may offend, and the others only counted
    listed = [r for r in candidates if r["key"] is not None]
    assert {r["key"] for r in listed} >= {k for k, g in got.items()
                                          if g["misplaced_rows"] or g["split_min"] != g["split_max"]}
    assert len(listed) + sum(r["other_keys"] or 0 for r in candidates) == len(got)
    assert sum(r["rows"] for r in listed) + sum(r["other_rows"] or 0 for r in candidates) == n


@pytest.mark.parametrize("key_type", ["int", "string"])
def test_negative_splits_and_keys_read_by_two_readers(spark, tmp_path, key_type) -> None:  # noqa: F811
    """The whole job (counts and examples) against the scalar core, on a sample whose splits are negative for
    some keys and whose keys are mostly read by two or more subtasks."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(3)
    n = 6000
    ints = rng.integers(-400, 400, n).tolist()
    splits = rng.integers(-9, 12, n).tolist()
    keys = ints if key_type == "int" else [f"k{i}" for i in ints]
    rows = list(zip(keys, splits, strict=True))
    (tmp_path / "s").mkdir()
    pq.write_table(pa.table({"key": pa.array(keys, pa.int32() if key_type == "int" else pa.string()),
                             "split": pa.array(splits, pa.int32())}), tmp_path / "s" / "part-0.parquet")
    doc = key_alignment.run_alignment(spark, str(tmp_path / "s"), str(tmp_path / "out"), key_type=key_type,
                                      parallelism=4, max_parallelism=128, examples=7)
    want = _expected_report(rows, key_type, 4, 128, 7)
    _check_report(doc, want)
    offenders = spark.read.parquet(str(tmp_path / "out" / "offenders")).collect()
    assert {r["key"] for r in offenders} == want["offenders"] and len(offenders) == len(want["offenders"])
    assert sum(r["misplaced_rows"] for r in offenders) == doc["misplaced"]["rows"]


def test_csv_unparseable_keys_are_null_keys(spark, tmp_path) -> None:  # noqa: F811
    """CSV cells are text: keys that are not numbers (or empty) count as null keys instead of failing the job
    (Spark 4 casts are ANSI); the rest is checked against the scalar core."""
    import numpy as np

    rng = np.random.default_rng(5)
    rows = []
    path = tmp_path / "keys.csv"
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["account", "partition"])
        for i in range(3000):
            k, s = int(rng.integers(-200, 200)), int(rng.integers(0, 24))
            cell = "n/a" if i % 97 == 0 else "" if i % 101 == 0 else str(k)
            w.writerow([cell, f"{s:02d}" if i % 3 else str(s)])  # "07" and "7": one split, listed as sampled
            rows.append((int(cell) if cell not in ("", "n/a") else None, s, f"{s:02d}" if i % 3 else str(s)))
    doc = key_alignment.run_alignment(spark, str(path), str(tmp_path / "out"), key_type="long", parallelism=3,
                                      max_parallelism=128, key_column="account", split_column="partition")
    assert doc["null_keys"] > 0
    _check_report(doc, _expected_report(rows, "long", 3, 128, key_alignment.DEFAULT_EXAMPLES))


@pytest.mark.parametrize("body", ["key,split\n", "key,split\nacct-1,1\n,2\n"], ids=["empty", "no-int-key"])
def test_a_sample_without_keys_is_an_error_not_aligned(spark, tmp_path, body) -> None:  # noqa: F811
    """Nothing to check must not read as ALIGNED (a wrong --key-type casts every key to null): a clear
    error naming the sample, and no output left behind."""
    from spark_jobs.common import JobError

    path = tmp_path / "keys.csv"
    path.write_text(body)
    with pytest.raises(JobError, match=f"{path}: no key to check .*every key null or not an int"):
        key_alignment.run_alignment(spark, str(path), str(tmp_path / "out"), key_type="int", parallelism=2)
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob(".out*"))


def test_null_splits_have_no_reader(spark, tmp_path) -> None:  # noqa: F811
    """A row whose split is null (modulo mode) has no known reader: it is counted as `rows_without_reader`, never
    as misplaced, and does not widen its key's split range. Before, NumPy turned the null into NaN and the NaN
    into subtask 0, so such rows were reported misplaced whenever subtask 0 did not own the key."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from hashing.keygroups import assign_key_to_parallel_operator

    rows = [(k, None if (k + i) % 3 == 0 else (k * 7 + i) % 5) for k in range(-30, 30) for i in range(4)]
    rows += [(1000, None), (1000, None), (None, None)]  # a key with no split at all; a null key
    (tmp_path / "s").mkdir()
    pq.write_table(pa.table({"key": pa.array([k for k, _ in rows], pa.int32()),
                             "split": pa.array([s for _, s in rows], pa.int64())}), tmp_path / "s" / "part-0.parquet")
    doc = key_alignment.run_alignment(spark, str(tmp_path / "s"), str(tmp_path / "out"), key_type="int",
                                      parallelism=4, max_parallelism=128, examples=1000)
    known: dict[int, list[int]] = {}
    for k, s in rows:
        if k is not None:
            known.setdefault(k, []).extend([] if s is None else [s])
    owner = {k: assign_key_to_parallel_operator(k, 128, 4, "Integer") for k in known}
    bad = {k: sum(1 for s in ss if s % 4 != owner[k]) for k, ss in known.items()}
    bad = {k: n for k, n in bad.items() if n}
    multi = {k for k, ss in known.items() if len(set(ss)) > 1}
    assert doc["rows_without_reader"] == sum(1 for k, s in rows if k is not None and s is None) > 40
    assert (doc["rows"], doc["keys"], doc["null_keys"]) == (len(rows) - 1, 61, 1)
    assert (doc["misplaced"]["keys"], doc["misplaced"]["rows"]) == (len(bad), sum(bad.values()))
    assert {e["key"]: e["rows"] for e in doc["misplaced"]["examples"]} == bad
    assert doc["keys_in_several_splits"]["keys"] == len(multi)
    assert 1000 not in {e["key"] for e in doc["misplaced"]["examples"]}

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

"""key_alignment: is a source that is partitioned outside Flink safe to reinterpret as a keyed stream?

`DataStreamUtils.reinterpretAsKeyedStream` (and the FLIP in `shared/seeds/`) lets a job skip the
keyBy shuffle when the external system already partitions by key. It is only correct if every key
lives in exactly one source split, and if the subtask reading that split is the subtask Flink's
`KeyGroupRangeAssignment` gives the key's key group: otherwise keyed state is written into key
groups the subtask does not own (a runtime error) or is split across subtasks (inconsistent state
after rescaling).

Input: a key sample (Parquet or CSV, a file or a folder) with a key column and a split column
(Kafka partition, file split...), the key's Java type (`int`, `long`, `string`: the hash is Java's
`hashCode`, not Python's), the parallelism and max parallelism of the keyed operator. Which subtask
reads a split is either a column of the sample (`--reader-column`) or `split % parallelism`
(`--split-owner modulo`, the round-robin assignment of numbered splits to readers).

Output (a folder, written atomically): `report.json` (counts and examples: keys seen in more than
one split; keys whose key group is owned by another subtask than the reader of their split) and
`offenders/` (Parquet, one row per offending key). Key groups and owners are computed by the core's
vectorised rules (`hashing.vectorized`: Java hashCode + murmur + key-group ranges, checked
bit-exact against Flink), per Arrow batch in the executors; the per-key checks are one
aggregation, and all counts are observed during the single write, so the sample is read once.

    spark-submit spark_jobs/key_alignment.py --sample s3://b/keys.parquet --key-type long \\
        --parallelism 8 --max-parallelism 128 --output /data/alignment
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if __package__ in (None, ""):  # run as a file by spark-submit: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from spark_jobs import common

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

JOB = "key_alignment"
KEY_TYPES = {"int": "int", "long": "bigint", "string": "string"}
DEFAULT_EXAMPLES = 20


def hash_codes(values: pa.Array, key_type: str) -> np.ndarray:
    """Java `hashCode` of a column of keys, by the core's vectorised rules."""
    from hashing import vectorized

    if key_type == "int":
        return vectorized.int_hash_codes(values.to_numpy(zero_copy_only=False))
    if key_type == "long":
        return vectorized.long_hash_codes(values.to_numpy(zero_copy_only=False))
    return vectorized.string_hash_codes(values.to_pylist())


def placement_partition(batches: Iterator[pa.RecordBatch], key_type: str, parallelism: int, max_parallelism: int,
                        reader_from_split: bool) -> Iterator[pa.RecordBatch]:
    """Executor side: per batch, key group, owning subtask and reading subtask of every row."""
    import numpy as np
    import pyarrow as pa

    from hashing import vectorized

    for batch in batches:
        key = batch.column("key")
        groups = vectorized.key_groups(hash_codes(key, key_type), max_parallelism)
        owner = vectorized.operator_indexes(groups, max_parallelism, parallelism)
        if reader_from_split:
            reader = batch.column("split").to_numpy(zero_copy_only=False).astype(np.int64) % parallelism
        else:
            reader = batch.column("reader").to_numpy(zero_copy_only=False).astype(np.int64)
        yield pa.RecordBatch.from_arrays(
            [key, batch.column("split"), pa.array(reader.astype(np.int32)), pa.array(groups.astype(np.int32)),
             pa.array(owner.astype(np.int32)), pa.array(owner != reader)],
            names=["key", "split", "reader_subtask", "key_group", "owner_subtask", "misplaced"])


def load_sample(spark: SparkSession, path: str, key_column: str, split_column: str, key_type: str,
                reader_column: str | None = None) -> DataFrame:
    """The sample as (key, split[, reader]) with the key cast to its Java type's Spark type."""
    from pyspark.sql import functions as F

    lower = path.lower().rstrip("/")
    if lower.endswith(".csv") or (not lower.endswith(".parquet") and common.parse_location(path).scheme == "file"
                                  and any(Path(common.parse_location(path).path).glob("*.csv"))):
        df = spark.read.option("header", "true").csv(path)
    else:
        df = spark.read.parquet(path)
    needed = [key_column, split_column] + ([reader_column] if reader_column else [])
    missing = [c for c in needed if c not in df.columns]
    if missing:
        raise common.JobError(f"{path}: no column(s) {', '.join(missing)} (columns: {', '.join(df.columns)})")
    cols = [F.col(key_column).cast(KEY_TYPES[key_type]).alias("key"), F.col(split_column).alias("split")]
    if reader_column:
        cols.append(F.col(reader_column).cast("int").alias("reader"))
    return df.select(*cols)


def placements(sample: DataFrame, key_type: str, parallelism: int, max_parallelism: int,
               reader_from_split: bool = True) -> DataFrame:
    """Every sampled row with its key group, owner subtask, reader subtask and whether they differ."""
    from pyspark.sql import types as T

    if reader_from_split and not isinstance(sample.schema["split"].dataType,
                                            (T.IntegerType, T.LongType, T.ShortType, T.ByteType)):
        sample = sample.withColumn("split", sample["split"].cast("long"))
    columns = ["key", "split"] + ([] if reader_from_split else ["reader"])
    out = T.StructType([sample.schema["key"], sample.schema["split"],
                        T.StructField("reader_subtask", T.IntegerType()), T.StructField("key_group", T.IntegerType()),
                        T.StructField("owner_subtask", T.IntegerType()), T.StructField("misplaced", T.BooleanType())])
    return sample.where("key is not null").select(*columns).mapInArrow(
        lambda it: placement_partition(it, key_type, parallelism, max_parallelism, reader_from_split), out)


def per_key(placed: DataFrame) -> DataFrame:
    """One row per key: rows seen, split range, misplaced rows, its key group and owner."""
    from pyspark.sql import functions as F

    return placed.groupBy("key").agg(
        F.count(F.lit(1)).alias("rows"), F.min("split").alias("split_min"), F.max("split").alias("split_max"),
        F.sum(F.col("misplaced").cast("long")).alias("misplaced_rows"), F.first("key_group").alias("key_group"),
        F.first("owner_subtask").alias("owner_subtask"), F.min("reader_subtask").alias("reader_min"),
        F.max("reader_subtask").alias("reader_max"))


def offenders(keys: DataFrame) -> tuple[DataFrame, Any]:
    """Keys in several splits or read by the wrong subtask, plus an Observation of the totals."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    multi = F.col("split_min") != F.col("split_max")
    observation = Observation("key_alignment")
    observed = keys.observe(
        observation,
        F.count(F.lit(1)).alias("keys"), F.coalesce(F.sum("rows"), F.lit(0)).alias("rows"),
        F.count(F.when(multi, 1)).alias("multi_split_keys"),
        F.coalesce(F.sum(F.when(multi, F.col("rows"))), F.lit(0)).alias("multi_split_rows"),
        F.count(F.when(F.col("misplaced_rows") > 0, 1)).alias("misplaced_keys"),
        F.coalesce(F.sum("misplaced_rows"), F.lit(0)).alias("misplaced_rows"))
    flagged = observed.where(multi | (F.col("misplaced_rows") > 0)).withColumn("in_several_splits", multi)
    return flagged, observation


def report(stats: dict[str, Any], offenders_df: DataFrame, sample: DataFrame, args: dict[str, Any],
           examples: int = DEFAULT_EXAMPLES) -> dict[str, Any]:
    """The JSON report: totals, and up to `examples` example keys of each kind (splits listed in full)."""
    from pyspark.sql import functions as F

    multi_examples = [r.asDict() for r in offenders_df.where("in_several_splits").orderBy(F.desc("rows"), "key")
                      .select("key", "rows", "key_group", "owner_subtask").limit(examples).collect()]
    if multi_examples:
        wanted = [e["key"] for e in multi_examples]
        splits = {r["key"]: sorted(r["splits"]) for r in sample.where(F.col("key").isin(wanted)).groupBy("key")
                  .agg(F.collect_set("split").alias("splits")).collect()}
        for e in multi_examples:
            e["splits"] = splits.get(e["key"], [])
    misplaced_examples = [
        {"key": r["key"], "rows": r["misplaced_rows"], "key_group": r["key_group"], "owner_subtask": r["owner_subtask"],
         "reader_subtasks": sorted({r["reader_min"], r["reader_max"]}),
         "splits": sorted({r["split_min"], r["split_max"]})}
        for r in offenders_df.where("misplaced_rows > 0").orderBy(F.desc("misplaced_rows"), "key")
        .limit(examples).collect()]
    aligned = stats["multi_split_keys"] == 0 and stats["misplaced_keys"] == 0
    return {
        **args,
        "rows": stats["rows"], "keys": stats["keys"], "null_keys": stats.get("null_keys", 0),
        "aligned": aligned,
        "keys_in_several_splits": {"keys": stats["multi_split_keys"], "rows": stats["multi_split_rows"],
                                   "examples": multi_examples},
        "misplaced": {"keys": stats["misplaced_keys"], "rows": stats["misplaced_rows"],
                      "examples": misplaced_examples},
        "verdict": "ALIGNED" if aligned else "NOT_ALIGNED",
    }


def run_alignment(spark: SparkSession, sample_path: str, output: str, *, key_type: str, parallelism: int,
                  max_parallelism: int | None = None, key_column: str = "key", split_column: str = "split",
                  reader_column: str | None = None, examples: int = DEFAULT_EXAMPLES,
                  overwrite: bool = False) -> dict[str, Any]:
    """The whole job: read once, write `offenders/` and `report.json` under `output` atomically."""
    from hashing.keygroups import compute_default_max_parallelism, compute_key_group_range_for_operator_index

    if key_type not in KEY_TYPES:
        raise common.JobError(f"--key-type {key_type!r}: expected one of {', '.join(KEY_TYPES)}")
    max_p = max_parallelism or compute_default_max_parallelism(parallelism)
    compute_key_group_range_for_operator_index(max_p, parallelism, 0)  # Flink's bounds checks and messages
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    sample = load_sample(spark, sample_path, key_column, split_column, key_type, reader_column)
    inputs = Observation("key_alignment_input")  # null (or, from CSV, unparseable) keys, counted in the same pass
    observed = sample.observe(inputs, F.count(F.when(F.col("key").isNull(), 1)).alias("null_keys"))
    flagged, observation = offenders(per_key(placements(observed, key_type, parallelism, max_p,
                                                        reader_column is None)))
    args = {"sample": sample_path, "key_type": key_type, "parallelism": parallelism, "max_parallelism": max_p,
            "split_owner": f"column:{reader_column}" if reader_column else "modulo"}
    with common.atomic_output(output, overwrite=overwrite) as tmp:
        target = common.parse_location(tmp)
        flagged.write.mode("overwrite" if target.scheme == "s3" else "error").parquet(target.child("offenders").uri)
        stats = {**observation.get, **inputs.get}
        written = spark.read.parquet(target.child("offenders").uri)
        doc = report(stats, written, sample, args, examples)
        common.write_json(doc, target.child("report.json").uri, overwrite=True)
    return doc


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="spark-submit spark_jobs/key_alignment.py",
        description="Check that an externally partitioned source can be reinterpreted as a keyed stream: keys in "
                    "more than one split, and keys whose key group another subtask owns than the one reading "
                    "their split.")
    p.add_argument("--sample", required=True, help="key sample: Parquet or CSV file/folder (local or s3://)")
    p.add_argument("--key-type", required=True, choices=sorted(KEY_TYPES), help="the key's Java type")
    p.add_argument("--parallelism", required=True, type=int, help="parallelism of the keyed operator")
    p.add_argument("--max-parallelism", type=int, default=None,
                   help="max parallelism (number of key groups); default: what Flink derives from the parallelism")
    p.add_argument("--key-column", default="key")
    p.add_argument("--split-column", default="split", help="source split / partition of each sampled record")
    p.add_argument("--reader-column", default=None,
                   help="subtask that reads the record's split; default: split %% parallelism (--split-owner modulo)")
    p.add_argument("--examples", type=int, default=DEFAULT_EXAMPLES, help="example keys per finding in the report")
    p.add_argument("--output", required=True, help="folder for report.json and offenders/ (atomic)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing output")
    common.add_spark_arguments(p)
    return p


def _run(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    log = common.get_logger(JOB)
    spark = common.build_session(JOB, args.master,
                                 extra_conf={"spark.sql.execution.arrow.maxRecordsPerBatch": "200000"})
    t = time.perf_counter()
    doc = run_alignment(spark, args.sample, args.output, key_type=args.key_type, parallelism=args.parallelism,
                        max_parallelism=args.max_parallelism, key_column=args.key_column,
                        split_column=args.split_column, reader_column=args.reader_column, examples=args.examples,
                        overwrite=args.overwrite)
    log.info("%s: %d rows, %d keys; %d keys in several splits, %d misplaced keys (%d rows); %s in %.1f s",
             args.sample, doc["rows"], doc["keys"], doc["keys_in_several_splits"]["keys"], doc["misplaced"]["keys"],
             doc["misplaced"]["rows"], doc["verdict"], time.perf_counter() - t)
    print(json.dumps({k: doc[k] for k in ("verdict", "rows", "keys")}))
    return 0 if doc["aligned"] else 1


def main(argv: list[str] | None = None) -> int:
    return common.run_main(JOB, _run, argv)


if __name__ == "__main__":
    sys.exit(main())

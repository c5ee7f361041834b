"""key_alignment: is a source that is partitioned outside Flink safe to reinterpret as a keyed stream?

`DataStreamUtils.reinterpretAsKeyedStream` (Flink's documented experimental API) lets a job skip the
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
bit-exact against Flink), in the executors, once per distinct key.

How (`per_key`): the sample is shuffled once on the key, carrying only (key, split[, reader]),
and sorted by (key, split) within partitions in the JVM; an Arrow-batched Python step then sees
each key's rows consecutively and reduces them to one row per key with NumPy (no Spark
aggregation, no second shuffle), passing on only the keys that may offend plus per-partition
counts of the others. The totals and the report's examples are observed during the single
write of `offenders/`, so the sample is read once and nothing is read back.

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
MAX_EXAMPLES = 100_000  # the examples are gathered with Spark's min_by(x, ord, k), which takes k <= 100,000


def hash_codes(values: pa.Array, key_type: str) -> np.ndarray:
    """Java `hashCode` of a column of keys, by the core's vectorised rules."""
    from hashing import vectorized

    if key_type == "int":
        return vectorized.int_hash_codes(values.to_numpy(zero_copy_only=False))
    if key_type == "long":
        return vectorized.long_hash_codes(values.to_numpy(zero_copy_only=False))
    return vectorized.string_hash_codes(values)  # read from the Arrow array's UTF-8 buffers, no Python strings


def key_placements(values: pa.Array, key_type: str, max_parallelism: int,
                   parallelism: int) -> tuple[np.ndarray, np.ndarray]:
    """(key group, owning subtask) of every key, int32, by the core's vectorised rules in one pass per block."""
    from hashing import vectorized

    if key_type == "long":  # Long.hashCode inside the same blocks: no array of hash codes
        return vectorized.long_key_groups_and_operator_indexes(values.to_numpy(zero_copy_only=False),
                                                               max_parallelism, parallelism)
    return vectorized.key_groups_and_operator_indexes(hash_codes(values, key_type), max_parallelism, parallelism)


def _readers(batch: pa.RecordBatch, parallelism: int, reader_from_split: bool) -> np.ndarray:
    """The subtask reading each row (int64): `split % parallelism` (NumPy's, never negative), or the reader column.

    -1 where it is unknown (a null split or reader): such a row is neither misplaced nor placed, and
    the report counts it as `rows_without_reader`. (NumPy would otherwise turn the null into NaN and
    the NaN into an arbitrary subtask.)"""
    import numpy as np

    column = batch.column("split" if reader_from_split else "reader")
    values = column.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    readers = values % parallelism if reader_from_split else values
    if column.null_count:
        readers[column.is_null().to_numpy(zero_copy_only=False)] = -1
    return readers


def _known(values: np.ndarray, unknown: np.ndarray) -> pa.Array:
    import pyarrow as pa

    return pa.array(values, mask=unknown if unknown.any() else None)


def placement_partition(batches: Iterator[pa.RecordBatch], key_type: str, parallelism: int, max_parallelism: int,
                        reader_from_split: bool) -> Iterator[pa.RecordBatch]:
    """Executor side: per batch, key group, owning subtask and reading subtask of every row."""
    import numpy as np
    import pyarrow as pa


    for batch in batches:
        key = batch.column("key")
        groups, owner = key_placements(key, key_type, max_parallelism, parallelism)
        reader = _readers(batch, parallelism, reader_from_split)
        unknown = reader < 0
        yield pa.RecordBatch.from_arrays(
            [key, batch.column("split"), _known(reader.astype(np.int32), unknown), pa.array(groups.astype(np.int32)),
             pa.array(owner.astype(np.int32)), _known(owner != reader, unknown)],
            names=["key", "split", "reader_subtask", "key_group", "owner_subtask", "misplaced"])


def load_sample(spark: SparkSession, path: str, key_column: str, split_column: str, key_type: str,
                reader_column: str | None = None) -> DataFrame:
    """The sample as (key, split[, reader]) with the key cast to its Java type's Spark type."""
    from pyspark.sql import functions as F

    lower = path.lower().rstrip("/")
    needed = [key_column, split_column] + ([reader_column] if reader_column else [])
    if common.parse_location(path).scheme == "s3":
        df = _s3_sample(spark, path, needed)
    elif lower.endswith(".csv") or (not lower.endswith(".parquet")
                                    and any(Path(common.parse_location(path).path).glob("*.csv"))):
        df = spark.read.option("header", "true").csv(path)
    else:
        df = spark.read.parquet(path)
    missing = [c for c in needed if c not in df.columns]
    if missing:
        raise common.JobError(f"{path}: no column(s) {', '.join(missing)} (columns: {', '.join(df.columns)})")
    cols = [F.col(key_column).try_cast(KEY_TYPES[key_type]).alias("key"), F.col(split_column).alias("split")]
    if reader_column:
        cols.append(F.col(reader_column).try_cast("int").alias("reader"))
    return df.select(*cols)


_ARROW_DDL = {"int64": "long", "int32": "int", "int16": "short", "string": "string", "large_string": "string",
              "bool": "boolean", "double": "double"}


def _s3_sample(spark: SparkSession, path: str, needed: list[str]) -> DataFrame:
    """An `s3://` sample read by the executors with pyarrow's S3 filesystem (Spark would need the s3a jars):
    the driver lists the files and reads the first one's schema; each task reads its files' `needed` columns.
    CSV columns are read as strings, as Spark's CSV reader reads them without a schema."""
    import pyarrow.parquet as pq

    from spark_jobs.parquet_output import ArrowRows, s3_filesystem

    loc = common.parse_location(path)
    files = [f for f in common.list_files(loc, (".parquet", ".csv")) if not f.rsplit("/", 1)[-1].startswith(("_", "."))]
    if not files:
        raise common.JobError(f"{path}: no .parquet or .csv files")
    csv = all(f.lower().endswith(".csv") for f in files)
    if csv:
        columns = {c: "string" for c in needed}
    else:
        schema = pq.read_schema(files[0][len("s3://"):], filesystem=s3_filesystem())
        missing = [c for c in needed if c not in schema.names]
        if missing:
            raise common.JobError(f"{path}: no column(s) {', '.join(missing)} (columns: {', '.join(schema.names)})")
        columns = {c: _ARROW_DDL.get(str(schema.field(c).type), "") for c in needed}
        odd = [c for c, kind in columns.items() if not kind]
        if odd:
            raise common.JobError(f"{path}: column(s) {', '.join(odd)} of an unsupported type")
    tasks = common.default_partitions(spark, None, len(files))
    names = common.spread(spark, [(f,) for f in files], tasks, "file string")
    ddl = ", ".join(f"{c} {kind}" for c, kind in columns.items())
    return ArrowRows(names, lambda batches: _read_s3_files(batches, list(columns), csv, ddl), ddl).frame()


def _read_s3_files(batches: Iterator[pa.RecordBatch], columns: list[str], csv: bool, ddl: str
                   ) -> Iterator[pa.RecordBatch]:
    """Executor side: the `columns` of every file named in the batches, as Arrow batches of `ddl`."""
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    from spark_jobs.parquet_output import s3_filesystem

    fs = s3_filesystem()
    schema = common.arrow_schema(ddl)
    for batch in batches:
        for name in batch.column("file").to_pylist():
            key = name[len("s3://"):]
            if csv:
                with fs.open_input_stream(key) as f:
                    table = pacsv.read_csv(f, convert_options=pacsv.ConvertOptions(
                        include_columns=columns, column_types=dict.fromkeys(columns, pa.string())))
            else:
                table = pq.read_table(key, columns=columns, filesystem=fs)
            yield from table.cast(schema).to_batches(max_chunksize=200_000)


def _same(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The rows as they are: lets the workers write a DataFrame's batches themselves (`write_table`)."""
    yield from batches


def _casts_split(sample: DataFrame, reader_from_split: bool) -> bool:
    """With `--split-owner modulo` the split must be a number: is the split column cast to long?"""
    from pyspark.sql import types as T

    return reader_from_split and not isinstance(sample.schema["split"].dataType,
                                                (T.IntegerType, T.LongType, T.ShortType, T.ByteType))


def placements(sample: DataFrame, key_type: str, parallelism: int, max_parallelism: int,
               reader_from_split: bool = True) -> DataFrame:
    """Every sampled row with its key group, owner subtask, reader subtask and whether they differ.

    A row-level view for inspection and tests; the job itself uses `per_key`, which applies the
    same rules once per distinct key."""
    from pyspark.sql import types as T

    if _casts_split(sample, reader_from_split):
        sample = sample.withColumn("split", sample["split"].try_cast("long"))
    columns = ["key", "split"] + ([] if reader_from_split else ["reader"])
    out = T.StructType([sample.schema["key"], sample.schema["split"],
                        T.StructField("reader_subtask", T.IntegerType()), T.StructField("key_group", T.IntegerType()),
                        T.StructField("owner_subtask", T.IntegerType()), T.StructField("misplaced", T.BooleanType())])
    return sample.where("key is not null").select(*columns).mapInArrow(
        lambda it: placement_partition(it, key_type, parallelism, max_parallelism, reader_from_split), out)


PER_KEY_COLUMNS = ("key", "rows", "split_min", "split_max", "misplaced_rows", "key_group", "owner_subtask",
                   "reader_min", "reader_max", "splits")


def _reduce_sorted(batch: pa.RecordBatch, key_type: str, parallelism: int, max_parallelism: int,
                   reader_from_split: bool) -> pa.RecordBatch:
    """One row per key of a batch sorted by (key, split, split_raw), nulls first: see `per_key`.

    Key groups and owners are computed once per distinct key; each row's reader by `_readers`. The
    split range is the first and last non-null split of the key (Spark's min/max, by the sort);
    `splits` lists the distinct raw splits, for keys that may be in several splits and for the
    batch's first and last key (which may continue in the neighbouring batches), else null."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc


    n = batch.num_rows
    key, split = batch.column("key"), batch.column("split")
    raw = batch.column("split_raw") if "split_raw" in batch.schema.names else split
    if key_type == "string":
        changed = pc.not_equal(key.slice(1), key.slice(0, n - 1)).to_numpy(zero_copy_only=False)
    else:
        values = key.to_numpy(zero_copy_only=False)
        changed = values[1:] != values[:-1]
    starts = np.flatnonzero(np.concatenate(([True], changed)))
    ends = np.append(starts[1:], n)
    lengths = ends - starts
    keys = key.take(pa.array(starts))
    groups, owner = key_placements(keys, key_type, max_parallelism, parallelism)
    reader = _readers(batch, parallelism, reader_from_split)
    known = reader >= 0
    misplaced = np.add.reduceat(((np.repeat(owner, lengths) != reader) & known).astype(np.int64), starts)
    reader_min = np.minimum.reduceat(np.where(known, reader, parallelism + (1 << 30)), starts)
    reader_max = np.maximum.reduceat(np.where(known, reader, -1), starts)
    no_reader = reader_max < 0  # every row of the key in this batch has an unknown reader
    if split.null_count:
        nulls = np.add.reduceat(split.is_null().to_numpy(zero_copy_only=False).astype(np.int64), starts)
        all_null = nulls == lengths
        split_min = split.take(pa.array(starts + nulls, mask=all_null))
        split_max = split.take(pa.array(ends - 1, mask=all_null))
    else:
        split_min, split_max = split.take(pa.array(starts)), split.take(pa.array(ends - 1))
    # distinct raw splits: only where the range does not prove a single split (a superset of Spark's
    # `split_min != split_max`; the edge keys always, their rows may continue in another batch)
    listed = ~pc.fill_null(pc.equal(split_min, split_max), False).to_numpy(zero_copy_only=False)
    listed[0] = listed[-1] = True
    first = np.ones(n, dtype=bool)
    if n > 1:
        first[1:] = pc.fill_null(pc.not_equal(raw.slice(1), raw.slice(0, n - 1)), True).to_numpy(
            zero_copy_only=False)
    first[starts] = True
    pick = np.flatnonzero(first & raw.is_valid().to_numpy(zero_copy_only=False) & np.repeat(listed, lengths))
    counts = np.bincount(np.searchsorted(starts, pick, side="right") - 1, minlength=len(starts))
    splits = pa.ListArray.from_arrays(pa.array(np.concatenate(([0], np.cumsum(counts))), pa.int32()),
                                      raw.take(pa.array(pick, pa.int64())), mask=pa.array(~listed))
    return pa.RecordBatch.from_arrays(
        [keys, pa.array(lengths, pa.int64()), split_min, split_max, pa.array(misplaced, pa.int64()),
         pa.array(groups.astype(np.int32)), pa.array(owner.astype(np.int32)),
         _known(reader_min.astype(np.int32), no_reader), _known(reader_max.astype(np.int32), no_reader), splits],
        names=list(PER_KEY_COLUMNS))


def _fold(carry: pa.RecordBatch, part: pa.RecordBatch) -> pa.RecordBatch:
    """`part` with `carry` (the same key's row from the previous batch) folded into its first row."""
    import pyarrow as pa

    a, b = carry.to_pylist()[0], part.slice(0, 1).to_pylist()[0]
    # rows are sorted by split within a key: the first non-null split is the minimum, the last the
    # maximum, and a raw split listed in both halves can only be a's last and b's first
    splits = a["splits"] + b["splits"][1 if a["splits"] and b["splits"] and a["splits"][-1] == b["splits"][0]
                                       else 0:]
    merged = {**b, "rows": a["rows"] + b["rows"], "misplaced_rows": a["misplaced_rows"] + b["misplaced_rows"],
              "split_min": a["split_min"] if a["split_min"] is not None else b["split_min"],
              "split_max": b["split_max"] if b["split_max"] is not None else a["split_max"],
              "reader_min": min((r for r in (a["reader_min"], b["reader_min"]) if r is not None), default=None),
              "reader_max": max((r for r in (a["reader_max"], b["reader_max"]) if r is not None), default=None),
              "splits": splits}
    return pa.concat_batches([pa.RecordBatch.from_pylist([merged], schema=part.schema), part.slice(1)])


def key_partition(batches: Iterator[pa.RecordBatch], key_type: str, parallelism: int, max_parallelism: int,
                  reader_from_split: bool) -> Iterator[pa.RecordBatch]:
    """Executor side: a partition holding all rows of its keys, sorted by key then split -> one row per key.

    A key's rows may straddle Arrow batches: each batch's last key is held back and folded into the
    next batch's first row when the key continues there."""
    carry = None
    for batch in batches:
        if batch.num_rows == 0:
            continue
        part = _reduce_sorted(batch, key_type, parallelism, max_parallelism, reader_from_split)
        if carry is not None:
            if carry.column("key")[0].as_py() == part.column("key")[0].as_py():
                part = _fold(carry, part)
            else:
                yield carry
        if part.num_rows > 1:
            yield part.slice(0, part.num_rows - 1)
        carry = part.slice(part.num_rows - 1)
    if carry is not None:
        yield carry


def candidate_partition(batches: Iterator[pa.RecordBatch], key_type: str, parallelism: int, max_parallelism: int,
                        reader_from_split: bool) -> Iterator[pa.RecordBatch]:
    """`key_partition`, keeping only the keys that may offend: misplaced rows, or a split range that does not
    prove a single split. The others are only counted, into one last row (key null, `rows` 0) holding
    `other_keys` and `other_rows`, so that the JVM does not convert and observe a row per aligned key."""
    import pyarrow as pa
    import pyarrow.compute as pc

    other_keys = other_rows = 0
    schema = None
    for part in key_partition(batches, key_type, parallelism, max_parallelism, reader_from_split):
        fine = ((part.column("misplaced_rows").to_numpy() == 0)
                & pc.fill_null(pc.equal(part.column("split_min"), part.column("split_max")), False).to_numpy(
                    zero_copy_only=False))
        other_keys += int(fine.sum())
        other_rows += int(part.column("rows").to_numpy()[fine].sum())
        kept = part.filter(pa.array(~fine))
        nulls = pa.nulls(kept.num_rows, pa.int64())
        kept = pa.RecordBatch.from_arrays([*kept.columns, nulls, nulls],
                                          names=[*kept.schema.names, "other_keys", "other_rows"])
        schema = kept.schema
        if kept.num_rows:
            yield kept
    if other_keys:
        yield pa.RecordBatch.from_pylist([{"rows": 0, "other_keys": other_keys, "other_rows": other_rows}],
                                         schema=schema)


def per_key(sample: DataFrame, key_type: str, parallelism: int, max_parallelism: int,
            reader_from_split: bool = True, candidates_only: bool = False) -> DataFrame:
    """One row per non-null key: `rows` seen, split range `split_min`/`split_max`, `misplaced_rows`
    (rows whose reader is not the owner of the key's key group), `key_group`, `owner_subtask`, the
    range of its readers `reader_min`/`reader_max`, and `splits` (the distinct splits as sampled, before
    any cast; filled at least for every key with `split_min != split_max`, else null).

    The sample is shuffled once on the key with only the needed columns and sorted within partitions
    in the JVM; Python then sees each key's rows consecutively (`key_partition`) and applies the core's
    rules once per distinct key. No Spark aggregation and no second shuffle.

    `candidates_only`: only the keys that may offend, plus per partition one row with a null key and
    `other_keys`/`other_rows`, the number and rows of the keys left out (see `candidate_partition`)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    cast = _casts_split(sample, reader_from_split)
    split_type = T.LongType() if cast else sample.schema["split"].dataType
    raw_type = sample.schema["split"].dataType
    columns = [F.col("key"), F.col("split").try_cast("long").alias("split") if cast else F.col("split")]
    columns += [] if reader_from_split else [F.col("reader")]
    order = [F.col("key"), F.col("split").asc_nulls_first()]
    if cast:  # list the splits as sampled: carry the raw value beside the number
        columns.append(F.col("split").alias("split_raw"))
        order.append(F.col("split_raw").asc_nulls_first())
    out = T.StructType([sample.schema["key"], T.StructField("rows", T.LongType(), nullable=False),
                        T.StructField("split_min", split_type), T.StructField("split_max", split_type),
                        T.StructField("misplaced_rows", T.LongType()), T.StructField("key_group", T.IntegerType()),
                        T.StructField("owner_subtask", T.IntegerType()), T.StructField("reader_min", T.IntegerType()),
                        T.StructField("reader_max", T.IntegerType()), T.StructField("splits", T.ArrayType(raw_type))])
    partition = key_partition
    if candidates_only:
        out = out.add("other_keys", T.LongType()).add("other_rows", T.LongType())
        partition = candidate_partition
    return (sample.where("key is not null").select(*columns).repartition("key").sortWithinPartitions(*order)
            .mapInArrow(lambda it: partition(it, key_type, parallelism, max_parallelism, reader_from_split), out))


def offenders(keys: DataFrame, examples: int = DEFAULT_EXAMPLES) -> tuple[DataFrame, Any]:
    """Keys in several splits or read by the wrong subtask, plus an Observation of the totals and of the
    top `examples` keys of each kind (most rows first, then by key), gathered during the same pass.

    `keys`: `per_key`'s rows, all keys or (`candidates_only`) the candidates plus the counts of the others."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    multi = F.col("split_min") != F.col("split_max")
    misplaced = F.col("misplaced_rows") > 0
    counted = "other_keys" in keys.columns
    n_keys, n_rows = F.count(F.lit(1)), F.coalesce(F.sum("rows"), F.lit(0))
    if counted:
        n_keys = F.count("key") + F.coalesce(F.sum("other_keys"), F.lit(0))
        n_rows = n_rows + F.coalesce(F.sum("other_rows"), F.lit(0))
    metrics = [
        n_keys.alias("keys"), n_rows.alias("rows"),
        F.count(F.when(multi, 1)).alias("multi_split_keys"),
        F.coalesce(F.sum(F.when(multi, F.col("rows"))), F.lit(0)).alias("multi_split_rows"),
        F.count(F.when(misplaced, 1)).alias("misplaced_keys"),
        F.coalesce(F.sum("misplaced_rows"), F.lit(0)).alias("misplaced_rows")]
    if examples > 0:  # min_by over (-count, key) ignores rows whose ordering is null: only keys of that kind
        metrics += [
            F.min_by(F.struct("key", "rows", "key_group", "owner_subtask", "splits"),
                     F.when(multi, F.struct(-F.col("rows"), F.col("key"))), examples).alias("multi_split_examples"),
            F.min_by(F.struct("key", "misplaced_rows", "key_group", "owner_subtask", "reader_min", "reader_max",
                              "split_min", "split_max"),
                     F.when(misplaced, F.struct(-F.col("misplaced_rows"), F.col("key"))), examples)
            .alias("misplaced_examples")]
    observation = Observation("key_alignment")
    observed = keys.observe(observation, *metrics)
    flagged = (observed.where(multi | misplaced).withColumn("in_several_splits", multi)
               .drop("splits", *(["other_keys", "other_rows"] if counted else [])))
    return flagged, observation


def report(stats: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    """The JSON report: totals, and example keys of each kind (most rows first; splits listed in full).

    `stats`: what `offenders`' Observation gathered (totals and examples) plus `null_keys` and
    `rows_without_reader` (rows with a key but a null split, or reader, that no subtask is known to read)."""
    multi_examples = [{"key": r["key"], "rows": r["rows"], "key_group": r["key_group"],
                       "owner_subtask": r["owner_subtask"], "splits": sorted(r["splits"])}
                      for r in sorted(stats.get("multi_split_examples") or [], key=lambda r: (-r["rows"], r["key"]))]
    misplaced_examples = [
        {"key": r["key"], "rows": r["misplaced_rows"], "key_group": r["key_group"], "owner_subtask": r["owner_subtask"],
         "reader_subtasks": sorted({r["reader_min"], r["reader_max"]}),
         "splits": sorted({r["split_min"], r["split_max"]})}
        for r in sorted(stats.get("misplaced_examples") or [], key=lambda r: (-r["misplaced_rows"], r["key"]))]
    aligned = stats["multi_split_keys"] == 0 and stats["misplaced_keys"] == 0
    return {
        **args,
        "rows": stats["rows"], "keys": stats["keys"], "null_keys": stats.get("null_keys", 0),
        "rows_without_reader": stats.get("rows_without_reader", 0),
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
    if not 0 <= examples <= MAX_EXAMPLES:
        raise common.JobError(f"--examples {examples}: expected 0 to {MAX_EXAMPLES:,}")
    max_p = max_parallelism or compute_default_max_parallelism(parallelism)
    compute_key_group_range_for_operator_index(max_p, parallelism, 0)  # Flink's bounds checks and messages
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    sample = load_sample(spark, sample_path, key_column, split_column, key_type, reader_column)
    inputs = Observation("key_alignment_input")  # null (or, from CSV, unparseable) keys, counted in the same pass
    reader = F.col("reader") if reader_column else (
        F.col("split").try_cast("long") if _casts_split(sample, True) else F.col("split"))
    observed = sample.observe(
        inputs, F.count(F.when(F.col("key").isNull(), 1)).alias("null_keys"),
        F.count(F.when(F.col("key").isNotNull() & reader.isNull(), 1)).alias("rows_without_reader"))
    flagged, observation = offenders(per_key(observed, key_type, parallelism, max_p, reader_column is None,
                                             candidates_only=True), examples)
    args = {"sample": sample_path, "key_type": key_type, "parallelism": parallelism, "max_parallelism": max_p,
            "split_owner": f"column:{reader_column}" if reader_column else "modulo"}
    with common.atomic_output(output, overwrite=overwrite) as tmp:
        target = common.parse_location(tmp)
        if target.scheme == "s3":  # the workers write the parts with pyarrow, the driver commits a manifest
            from spark_jobs.parquet_output import ArrowRows, write_table

            write_table(ArrowRows(flagged, _same, common.ddl_of(flagged.schema)), target.child("offenders").uri,
                        overwrite=True)
        else:
            flagged.write.mode("error").parquet(target.child("offenders").uri)
        try:
            stats = {**observation.get, **inputs.get}
        except Exception:  # Spark drops a plan it proves empty, and the Observation with it
            if sample.where("key is not null").limit(1).count():
                raise
            stats = {"keys": 0}
        if not stats["keys"]:  # nothing to check is not "aligned": most often a wrong --key-type or column
            rows = sample.count()
            article = "an" if key_type == "int" else "a"
            raise common.JobError(f"{sample_path}: no key to check ({rows} rows, every key null or not {article} "
                                  f"{key_type}); check --key-type and --key-column")
        doc = report(stats, args)
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
    p.add_argument("--examples", type=int, default=DEFAULT_EXAMPLES,
                   help=f"example keys per finding in the report (at most {MAX_EXAMPLES:,})")
    common.add_spark_arguments(p, "folder for report.json and offenders/ (atomic)")
    return p


def _run(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    log, spark = common.start(JOB, args.master, {"spark.sql.execution.arrow.maxRecordsPerBatch": "200000"})
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

"""A task's rows held column by column give the same Arrow batch as the rows converted one by one."""

from __future__ import annotations

import pyarrow as pa

from spark_jobs import common
from spark_jobs.columns import ColumnBuffer, count, from_rows, to_rows
from spark_jobs.fleet_ids import SCHEMA_DDL, error_row


def _job(name: str, nodes: int) -> dict[str, list[object]]:
    return {"job": [name] * nodes, "spec": [f"s3://b/{name}.json"] * nodes, "node_id": list(range(nodes)),
            "name": [f"op{k}" for k in range(nodes)], "v2_alternatives": [[f"{k:02x}"] * k for k in range(nodes)],
            "chain_length": [nodes] * nodes, "id_changes": [k % 2 == 0 for k in range(nodes)]}


def test_buffer_equals_rows_converted_one_by_one() -> None:
    schema = common.arrow_schema(SCHEMA_DDL)
    jobs = [_job("team/a", 3), _job("team/b", 1), _job("team/c", 5)]
    buffer = ColumnBuffer(schema)
    rows: list[dict[str, object]] = []
    for cols in jobs:
        buffer.add(cols)
        rows += to_rows(cols)
    buffer.add_row(error_row("team/broken", "s3://b/broken.json", "not a graph spec"))
    rows.append(error_row("team/broken", "s3://b/broken.json", "not a graph spec"))
    assert len(buffer) == 10
    batch = buffer.take()
    assert batch.equals(pa.RecordBatch.from_pylist(rows, schema=schema))
    assert batch.column("error").to_pylist() == [None] * 9 + ["not a graph spec"]  # a column left out is null
    assert len(buffer) == 0 and buffer.take().num_rows == 0  # taken: the next batch starts empty


def test_rows_and_columns_round_trip() -> None:
    rows = [{"job": "a", "error": None, "node_id": 1}, {"job": "b", "node_id": 2}, {"job": "c", "error": "bad"}]
    cols = from_rows(rows)
    assert count(cols) == 3 and count({}) == 0
    assert cols == {"job": ["a", "b", "c"], "error": [None, None, "bad"], "node_id": [1, 2, None]}
    assert to_rows(cols) == [{"job": "a", "error": None, "node_id": 1}, {"job": "b", "error": None, "node_id": 2},
                             {"job": "c", "error": "bad", "node_id": None}]

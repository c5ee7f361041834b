"""Rows of the fleet tables held column by column, on their way into Arrow batches.

A fleet task makes about 100 table rows per job (a node row per stream node, an operator row per operator
state). Built as one dict per row and converted with `pa.RecordBatch.from_pylist`, the dicts and the
conversion cost 1.1 ms a job, a quarter of the whole per-job work; the same values as one list per
column, converted with `from_pydict`, cost 0.5 ms (the conversion alone: a quarter of `from_pylist`'s time;
docs/performance.md, "Rows as columns").
So a job's rows are `Columns`: a dict of equal-length lists keyed by column name, a column the producer
does not know (e.g. `error` of a good job) may be left out and is null.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

Columns = dict[str, list[Any]]


def count(cols: Columns) -> int:
    """How many rows `cols` holds (its columns are of one length)."""
    return len(next(iter(cols.values()))) if cols else 0


def from_rows(rows: Iterable[dict[str, Any]]) -> Columns:
    """Row dicts as `Columns`: every key any row has; a row without it is null there."""
    rows = list(rows)
    names = dict.fromkeys(k for row in rows for k in row)
    return {name: [row.get(name) for row in rows] for name in names}


def to_rows(cols: Columns) -> list[dict[str, Any]]:
    """`Columns` as row dicts, for callers that look at one row at a time."""
    names = list(cols)
    return [dict(zip(names, values, strict=True)) for values in zip(*cols.values(), strict=True)]


class ColumnBuffer:
    """A task's pending rows of one table, column by column, until they leave as one Arrow batch."""

    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema
        self._cols: Columns = {name: [] for name in schema.names}
        self._rows = 0

    def __len__(self) -> int:
        return self._rows

    def add(self, cols: Columns) -> None:
        """Append a job's rows; columns of the schema that `cols` lacks are null, others are ignored."""
        n = count(cols)
        if not n:
            return
        for name, column in self._cols.items():
            values = cols.get(name)
            column.extend([None] * n if values is None else values)
        self._rows += n

    def add_row(self, row: dict[str, Any]) -> None:
        """Append one row given as a dict (an error row, a verdict)."""
        for name, column in self._cols.items():
            column.append(row.get(name))
        self._rows += 1

    def take(self) -> pa.RecordBatch:
        """The pending rows as one batch of the schema; the buffer is empty afterwards."""
        import pyarrow as pa

        batch = pa.RecordBatch.from_pydict(self._cols, schema=self.schema)
        self._cols = {name: [] for name in self.schema.names}
        self._rows = 0
        return batch

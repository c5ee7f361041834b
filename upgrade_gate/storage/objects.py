"""Graphs, plans and jars we read, and reports we publish: small whole objects, bounded in size.

This is the writable side of storage. Savepoints are never written: their reading lives in
`upgrade_gate.storage.savepoints`, which has no write call at all.
"""

from __future__ import annotations

from typing import Any

from hashing.readers import LoadedGraph, parse_graph
from hashing.readers.source import MAX_GRAPH_BYTES, parse_bytes, read_local_file
from upgrade_gate.storage.s3 import StorageError, get_object, is_s3, local_path, s3_client, s3_error, split_s3


def read_object(name: str, *, max_bytes: int, client: Any | None = None, what: str = "this kind of file") -> bytes:
    """A whole small file or S3 object (a graph spec, a plan, a jar), bounded in size.

    Errors are `StorageError`s naming the object, as for `_metadata`: the CLI, the Spark jobs and
    the Airflow hook all read graphs through here, so they fail the same way."""
    if is_s3(name):
        bucket, key = split_s3("s3://" + name.split("://", 1)[1])
        return get_object(client or s3_client(), bucket, key, max_bytes, what)
    # only a regular file is opened: a FIFO would block the worker forever, /dev/zero never ends
    return read_local_file(local_path(name), max_bytes, name=name, what=what, error=StorageError)


def read_graph(name: str, *, client: Any | None = None) -> LoadedGraph:
    """A job graph (spec or execution plan, JSON or YAML) from a path, `file://` or `s3://`, read once and
    bounded like every object: what the CLI's `--graph`/`--old-graph`, the Airflow gate and the Spark
    fleet jobs all call, so the same file fails the same way everywhere."""
    data = read_object(name, max_bytes=MAX_GRAPH_BYTES, client=client, what="a graph file (JSON or YAML)")
    doc = parse_bytes(data, name, yaml_first=name.lower().endswith((".yaml", ".yml")))
    return parse_graph(doc, name)


def write_object(name: str, data: bytes, *, client: Any | None = None,
                 content_type: str = "application/octet-stream") -> None:
    """Publish a report (one PUT on S3; write-then-rename locally, so readers never see half a file)."""
    if is_s3(name):
        bucket, key = split_s3("s3://" + name.split("://", 1)[1])
        try:
            (client or s3_client()).put_object(Bucket=bucket, Key=key, Body=data, ContentType=content_type)
        except Exception as exc:
            raise s3_error(name, exc) from None
        return
    path = local_path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    tmp.replace(path)

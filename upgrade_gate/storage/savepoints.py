"""Where savepoints live (read-only): plain paths, `file://` URIs and `s3://bucket/prefix` (boto3).

A savepoint can be named by its directory, by its `_metadata` file/object, or by a job prefix
holding several snapshot directories: then the newest *complete* one (it has `_metadata`;
newest by the modification time of that file, ties broken by the larger name) is chosen.
Everything here is read-only: only stat/list/get calls, never put, copy or delete, because a
savepoint is the one thing an upgrade must never damage (design §9). Reads are bounded: a
`_metadata` larger than `MAX_METADATA_BYTES` is refused before it is read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from upgrade_gate.flink.metadata import METADATA_FILE_NAME, CheckpointMetadata, parse_metadata
from upgrade_gate.storage.s3 import StorageError, get_object, local_path, s3_client, s3_error, split_s3

MAX_METADATA_BYTES = 512 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class MetadataBlob:
    """The bytes of one `_metadata` plus what the reader needs to describe and resolve it."""

    data: bytes
    source: str  # the file or object, for error messages
    base_dir: str  # the snapshot directory; relative state handles resolve against it


# ---- local files ------------------------------------------------------------------------
def _newest(candidates: list[tuple[float, str, Any]]) -> Any:
    return max(candidates, key=lambda c: (c[0], c[1]))[2]


def _read_local(name: str, max_bytes: int) -> MetadataBlob:
    path = local_path(name)
    if path.is_dir():
        meta = path / METADATA_FILE_NAME
        if not meta.is_file():
            found = [(m.stat().st_mtime, str(m.parent), m) for m in path.glob(f"*/{METADATA_FILE_NAME}") if m.is_file()]
            if not found:
                raise StorageError(f"{name}: no {METADATA_FILE_NAME} in this directory or in any directory below it "
                                   f"(not a savepoint, or no complete savepoint yet)")
            meta = _newest(found)
    elif path.is_file():
        meta = path
    else:
        raise StorageError(f"{name}: no such file or directory")
    try:
        size = meta.stat().st_size
        if size > max_bytes:
            raise StorageError(f"{meta}: {size} bytes is larger than the {max_bytes}-byte limit for metadata files")
        with open(meta, "rb") as f:
            data = f.read(max_bytes + 1)
    except OSError as exc:
        raise StorageError(f"{meta}: cannot read: {exc.strerror or exc}") from None
    if len(data) > max_bytes:
        raise StorageError(f"{meta}: larger than the {max_bytes}-byte limit for metadata files")
    return MetadataBlob(data, str(meta), str(meta.parent.resolve()))


# ---- S3 ---------------------------------------------------------------------------------
def _exists(client: Any, bucket: str, key: str) -> bool:
    from botocore.exceptions import ClientError

    try:
        client.head_object(Bucket=bucket, Key=key)
        return True
    except ClientError as exc:
        if str(exc.response.get("Error", {}).get("Code")) in ("404", "NoSuchKey", "NotFound"):
            return False
        raise s3_error(f"s3://{bucket}/{key}", exc) from None
    except Exception as exc:
        raise s3_error(f"s3://{bucket}/{key}", exc) from None


def newest_metadata_key(client: Any, bucket: str, prefix: str) -> str | None:
    """The `_metadata` key of the newest complete snapshot under `prefix` (all pages are read)."""
    best: tuple[Any, str] | None = None
    try:
        paginator = client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=bucket, Prefix=prefix):
            for obj in page.get("Contents", ()):
                key = obj["Key"]
                if key.rsplit("/", 1)[-1] == METADATA_FILE_NAME:
                    cand = (obj["LastModified"], key)
                    if best is None or cand > best:
                        best = cand
    except Exception as exc:
        raise s3_error(f"s3://{bucket}/{prefix}", exc) from None
    return best[1] if best else None


def _read_s3(uri: str, max_bytes: int, client: Any | None) -> MetadataBlob:
    bucket, key = split_s3(uri)
    client = client or s3_client()
    if key.rsplit("/", 1)[-1] == METADATA_FILE_NAME:
        meta_key = key
    else:
        prefix = key.rstrip("/")
        direct = f"{prefix}/{METADATA_FILE_NAME}" if prefix else METADATA_FILE_NAME
        if _exists(client, bucket, direct):
            meta_key = direct
        else:
            found = newest_metadata_key(client, bucket, f"{prefix}/" if prefix else "")
            if found is None:
                raise StorageError(f"{uri}: no complete savepoint ({METADATA_FILE_NAME}) under this prefix")
            meta_key = found
    data = get_object(client, bucket, meta_key, max_bytes)
    base = meta_key.rsplit("/", 1)[0] if "/" in meta_key else ""
    return MetadataBlob(data, f"s3://{bucket}/{meta_key}", f"s3://{bucket}/{base}".rstrip("/"))


# ---- entry points -----------------------------------------------------------------------
def read_metadata_blob(name: str, *, max_bytes: int = MAX_METADATA_BYTES, client: Any | None = None) -> MetadataBlob:
    """Find and read the `_metadata` a user named (path, file:// or s3:// URI)."""
    if name.startswith("s3://") or name.startswith("s3a://"):
        return _read_s3("s3://" + name.split("://", 1)[1], max_bytes, client)
    if "://" in name and not name.startswith("file:"):
        raise StorageError(f"{name}: unsupported scheme (use a path, file:// or s3://)")
    return _read_local(name, max_bytes)


def load_savepoint(name: str, *, max_bytes: int = MAX_METADATA_BYTES, client: Any | None = None) -> CheckpointMetadata:
    """Read and parse a savepoint's metadata; relative handles resolve against its directory."""
    blob = read_metadata_blob(name, max_bytes=max_bytes, client=client)
    return parse_metadata(blob.data, blob.source, blob.base_dir)

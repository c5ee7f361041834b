"""Where savepoints live: plain paths, `file://` URIs and `s3://bucket/prefix` (boto3).

A savepoint can be named by its directory, by its `_metadata` file/object, or by a job prefix
holding several snapshot directories: then the newest *complete* one (it has `_metadata`;
newest by the modification time of that file, ties broken by the larger name) is chosen.
Everything here is read-only: only stat/list/get calls, never put, copy or delete, because a
savepoint is the one thing an upgrade must never damage (design §9). Reads are bounded: a
`_metadata` larger than `MAX_METADATA_BYTES` is refused before it is read.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from hashing.errors import InputError
from restore.metadata import METADATA_FILE_NAME, CheckpointMetadata, parse_metadata

MAX_METADATA_BYTES = 512 * 1024 * 1024


class StorageError(InputError):
    """A savepoint that cannot be found or read (missing object, empty prefix, denied access...)."""


@dataclass(frozen=True, slots=True)
class MetadataBlob:
    """The bytes of one `_metadata` plus what the reader needs to describe and resolve it."""

    data: bytes
    source: str  # the file or object, for error messages
    base_dir: str  # the snapshot directory; relative state handles resolve against it


# ---- local files ------------------------------------------------------------------------
def _local_path(name: str) -> Path:
    if name.startswith("file:"):
        parsed = urlparse(name)
        if parsed.netloc not in ("", "localhost"):
            raise StorageError(f"{name}: file URIs with a host are not supported")
        return Path(unquote(parsed.path))
    return Path(name)


def _newest(candidates: list[tuple[float, str, Any]]) -> Any:
    return max(candidates, key=lambda c: (c[0], c[1]))[2]


def _read_local(name: str, max_bytes: int) -> MetadataBlob:
    path = _local_path(name)
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
def s3_client() -> Any:
    """A boto3 S3 client from the standard AWS environment (endpoint, region, credentials)."""
    import boto3
    from botocore.config import Config

    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    config = Config(retries={"max_attempts": 3, "mode": "standard"}, connect_timeout=5, read_timeout=60,
                    s3={"addressing_style": "path"} if endpoint else {})
    return boto3.client("s3", endpoint_url=endpoint, region_name=region, config=config)


def _s3_error(uri: str, exc: Exception) -> StorageError:
    from botocore.exceptions import BotoCoreError, ClientError

    if isinstance(exc, ClientError):
        err = exc.response.get("Error", {})
        code = str(err.get("Code", "?"))
        if code in ("NoSuchKey", "404", "NotFound"):
            return StorageError(f"{uri}: no such object")
        if code in ("NoSuchBucket",):
            return StorageError(f"{uri}: no such bucket")
        if code in ("403", "AccessDenied", "SignatureDoesNotMatch", "InvalidAccessKeyId", "Forbidden"):
            return StorageError(f"{uri}: access denied (S3 error {code}: {err.get('Message') or 'Forbidden'}); "
                                f"check the credentials")
        return StorageError(f"{uri}: S3 error {code}: {err.get('Message') or exc}")
    if isinstance(exc, BotoCoreError):
        return StorageError(f"{uri}: S3 request failed: {exc}")
    return StorageError(f"{uri}: {exc}")


def _split_s3(uri: str) -> tuple[str, str]:
    parsed = urlparse(uri)
    if not parsed.netloc:
        raise StorageError(f"{uri}: expected s3://bucket/prefix")
    return parsed.netloc, parsed.path.lstrip("/")


def _get_object(client: Any, bucket: str, key: str, max_bytes: int, what: str = "metadata files") -> bytes:
    uri = f"s3://{bucket}/{key}"
    try:
        obj = client.get_object(Bucket=bucket, Key=key)
        length = int(obj.get("ContentLength", 0))
        if length > max_bytes:
            obj["Body"].close()
            raise StorageError(f"{uri}: {length} bytes is larger than the {max_bytes}-byte limit for {what}")
        with obj["Body"] as body:
            data = body.read(max_bytes + 1)
    except StorageError:
        raise
    except Exception as exc:
        raise _s3_error(uri, exc) from None
    if len(data) > max_bytes:
        raise StorageError(f"{uri}: larger than the {max_bytes}-byte limit for {what}")
    return data


def is_s3(name: str) -> bool:
    return name.startswith(("s3://", "s3a://"))


def read_object(name: str, *, max_bytes: int, client: Any | None = None, what: str = "this kind of file") -> bytes:
    """A whole small file or S3 object (a graph spec, a plan, a jar), bounded in size.

    Errors are `StorageError`s naming the object, as for `_metadata`: the CLI, the Spark jobs and
    the Airflow hook all read graphs through here, so they fail the same way."""
    if is_s3(name):
        bucket, key = _split_s3("s3://" + name.split("://", 1)[1])
        return _get_object(client or s3_client(), bucket, key, max_bytes, what)
    path = _local_path(name)
    try:
        with open(path, "rb") as f:
            data = f.read(max_bytes + 1)
    except FileNotFoundError:
        raise StorageError(f"{name}: no such file") from None
    except OSError as exc:
        raise StorageError(f"{name}: cannot read: {exc.strerror or exc}") from None
    if len(data) > max_bytes:
        raise StorageError(f"{name}: larger than the {max_bytes}-byte limit for {what}")
    return data


def write_object(name: str, data: bytes, *, client: Any | None = None,
                 content_type: str = "application/octet-stream") -> None:
    """Publish a report (one PUT on S3; write-then-rename locally, so readers never see half a file)."""
    if is_s3(name):
        bucket, key = _split_s3("s3://" + name.split("://", 1)[1])
        try:
            (client or s3_client()).put_object(Bucket=bucket, Key=key, Body=data, ContentType=content_type)
        except Exception as exc:
            raise _s3_error(name, exc) from None
        return
    path = _local_path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


def _exists(client: Any, bucket: str, key: str) -> bool:
    from botocore.exceptions import ClientError

    try:
        client.head_object(Bucket=bucket, Key=key)
        return True
    except ClientError as exc:
        if str(exc.response.get("Error", {}).get("Code")) in ("404", "NoSuchKey", "NotFound"):
            return False
        raise _s3_error(f"s3://{bucket}/{key}", exc) from None
    except Exception as exc:
        raise _s3_error(f"s3://{bucket}/{key}", exc) from None


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
        raise _s3_error(f"s3://{bucket}/{prefix}", exc) from None
    return best[1] if best else None


def _read_s3(uri: str, max_bytes: int, client: Any | None) -> MetadataBlob:
    bucket, key = _split_s3(uri)
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
    data = _get_object(client, bucket, meta_key, max_bytes)
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

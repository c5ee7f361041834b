"""The S3 side shared by savepoint reads and object reads: one boto3 client, one error wording.

Errors are `StorageError`s (an `InputError`: exit 2, one line naming the object), so the CLI, the
Spark jobs and the Airflow hook fail the same way on the same bad location.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from hashing.errors import InputError


class StorageError(InputError):
    """A location that cannot be found or read (missing object, empty prefix, denied access...)."""


def is_s3(name: str) -> bool:
    return name.startswith(("s3://", "s3a://"))


def local_path(name: str) -> Path:
    """A plain path or a `file://` URI as a path."""
    if name.startswith("file:"):
        parsed = urlparse(name)
        if parsed.netloc not in ("", "localhost"):
            raise StorageError(f"{name}: file URIs with a host are not supported")
        return Path(unquote(parsed.path))
    return Path(name)


def s3_client() -> Any:
    """A boto3 S3 client from the standard AWS environment (endpoint, region, credentials)."""
    import boto3
    from botocore.config import Config

    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    config = Config(retries={"max_attempts": 3, "mode": "standard"}, connect_timeout=5, read_timeout=60,
                    s3={"addressing_style": "path"} if endpoint else {})
    return boto3.client("s3", endpoint_url=endpoint, region_name=region, config=config)


def s3_error(uri: str, exc: Exception) -> StorageError:
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


def split_s3(uri: str) -> tuple[str, str]:
    parsed = urlparse(uri)
    if not parsed.netloc:
        raise StorageError(f"{uri}: expected s3://bucket/prefix")
    return parsed.netloc, parsed.path.lstrip("/")


def get_object(client: Any, bucket: str, key: str, max_bytes: int, what: str = "metadata files") -> bytes:
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
        raise s3_error(uri, exc) from None
    if len(data) > max_bytes:
        raise StorageError(f"{uri}: larger than the {max_bytes}-byte limit for {what}")
    return data



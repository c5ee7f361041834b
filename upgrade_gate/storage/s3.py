"""The S3 side shared by savepoint reads and object reads: one boto3 client, one error wording.

Errors are `StorageError`s (an `InputError`: exit 2, one line naming the object), so the CLI, the
Spark jobs and the Airflow hook fail the same way on the same bad location.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from hashing.errors import InputError
from upgrade_gate.storage.watchdog import Guard, guard_boto_client
from upgrade_gate.storage.watchdog import current as current_guard


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


TIMEOUT_ENV = "UPGRADE_GATE_S3_TIMEOUT"
DEFAULT_TIMEOUT_S = 60.0
DOWNLOAD_ATTEMPTS = 4  # whole-object GETs before a cut download is reported (each already retried by botocore)
_PIECE = 1 << 20


def timeout_budget() -> float:
    """The total seconds one storage read may take, from `UPGRADE_GATE_S3_TIMEOUT` (default 60).

    Bounded so a server that accepts connections but never answers fails the CLI, a Spark task or an
    Airflow task in predictable time instead of after botocore's defaults (minutes)."""
    raw = os.environ.get(TIMEOUT_ENV, "").strip()
    if not raw:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value <= 3600:
        raise StorageError(f"{TIMEOUT_ENV}={raw}: expected a number of seconds between 0 and 3600")
    return value


@dataclass(frozen=True, slots=True)
class Timeouts:
    """botocore's per-call settings derived from the total budget.

    One call's worst case is `attempts * (connect + read) + backoff` (botocore's standard retry mode
    sleeps at most 2**(i-1) s before retry i), kept under 80% of the budget so the budget also covers
    listing and the download re-tries done here."""

    budget: float
    attempts: int
    connect: float
    read: float

    @classmethod
    def for_budget(cls, budget: float) -> Timeouts:
        attempts = 3 if budget >= 15 else 2 if budget >= 4 else 1
        connect = min(5.0, budget / 12)
        backoff = float(2 ** (attempts - 1) - 1)
        read = max(0.2, (0.8 * budget - backoff) / attempts - connect)
        return cls(budget, attempts, round(connect, 3), round(read, 3))

    @property
    def worst_call(self) -> float:
        return self.attempts * (self.connect + self.read) + 2 ** (self.attempts - 1) - 1


def client_config(budget: float | None = None) -> Any:
    """The botocore `Config` (timeouts and retries) every S3 client of ours uses; merged into the
    Airflow connection's own config by the storage hook, so both paths share one budget."""
    from botocore.config import Config

    t = Timeouts.for_budget(timeout_budget() if budget is None else budget)
    return Config(retries={"total_max_attempts": t.attempts, "mode": "standard"}, connect_timeout=t.connect,
                  read_timeout=t.read)


def s3_client() -> Any:
    """A boto3 S3 client from the standard AWS environment (endpoint, region, credentials)."""
    import boto3
    from botocore.config import Config

    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    config = client_config().merge(Config(s3={"addressing_style": "path"} if endpoint else {}))
    return guard_boto_client(boto3.client("s3", endpoint_url=endpoint, region_name=region, config=config))


class Deadline:
    """The wall-clock end of one storage read (discovery + download), shared across every retry."""

    def __init__(self, budget: float | None = None) -> None:
        self.budget = timeout_budget() if budget is None else budget
        self.start = time.monotonic()

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def remaining(self) -> float:
        return self.budget - self.elapsed()

    def timed_out(self, uri: str, detail: str = "the server did not answer") -> StorageError:
        return StorageError(f"{uri}: timed out after {self.elapsed():.1f} s ({detail}; the limit is "
                            f"{self.budget:g} s, set by {TIMEOUT_ENV})")

    def check(self, uri: str) -> None:
        if self.remaining() <= 0:
            raise self.timed_out(uri, "too slow")

    @contextlib.contextmanager
    def guard(self, uri: str, detail: str = "the server sent its answer too slowly") -> Iterator[Guard]:
        """The block's sockets are shut down when this deadline passes (`upgrade_gate.storage.watchdog`), and
        whatever that makes the block raise (or return short) becomes the one timed-out error naming `uri`.

        Socket timeouts alone bound each read, not the call: a server trickling one byte per half second
        never trips them."""
        guard = Guard(self.remaining())
        try:
            with guard:
                yield guard
        except Exception:
            if guard.expired:
                raise self.timed_out(uri, detail) from None
            raise
        if guard.expired:
            raise self.timed_out(uri, detail)


def _is_timeout(exc: BaseException) -> bool:
    from botocore.exceptions import ConnectTimeoutError, ReadTimeoutError

    return isinstance(exc, (ReadTimeoutError, ConnectTimeoutError, TimeoutError))


def _is_cut(exc: BaseException) -> bool:
    """A connection lost before or while the body arrived: worth another GET, never a corrupt object."""
    from botocore.exceptions import ConnectionClosedError, IncompleteReadError, ResponseStreamingError
    from urllib3.exceptions import ProtocolError

    return isinstance(exc, (ResponseStreamingError, IncompleteReadError, ConnectionClosedError, ProtocolError,
                            ConnectionError))


_MISSING = ("NoSuchKey", "404", "NotFound")  # GET says NoSuchKey, HEAD (no body to say it in) 404


def s3_error(uri: str, exc: Exception, deadline: Deadline | None = None) -> StorageError:
    from botocore.exceptions import BotoCoreError, ClientError

    if _is_timeout(exc):
        return deadline.timed_out(uri) if deadline else StorageError(f"{uri}: timed out ({exc})")

    if isinstance(exc, ClientError):
        err = exc.response.get("Error", {})
        code = str(err.get("Code", "?"))
        if code in _MISSING:
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


def head_object(client: Any, bucket: str, key: str, deadline: Deadline | None = None,
                shown: str | None = None) -> dict[str, Any] | None:
    """The object's HEAD answer (`ContentLength`, `LastModified`), or None when there is no such object: a
    snapshot still being written has no `_metadata` yet, and whether that is an error is the caller's to say.
    Bounded by `deadline` (a fresh one if None) on the sockets; every other failure (access denied, the
    endpoint down, the deadline) is `s3_error`'s one line naming `shown` (default the `s3://` URI)."""
    from botocore.exceptions import ClientError

    uri = shown or f"s3://{bucket}/{key}"
    deadline = deadline or Deadline()
    guard_boto_client(client)
    deadline.check(uri)
    try:
        with deadline.guard(uri):
            return client.head_object(Bucket=bucket, Key=key)
    except StorageError:
        raise
    except Exception as exc:
        if isinstance(exc, ClientError) and str(exc.response.get("Error", {}).get("Code")) in _MISSING:
            return None
        raise s3_error(uri, exc, deadline) from None


def get_object(client: Any, bucket: str, key: str, max_bytes: int, what: str = "metadata files",
               deadline: Deadline | None = None) -> bytes:
    """The whole object, verified complete: its length must equal the Content-Length S3 announced.

    A connection cut mid-body (or a short body) is retried with a fresh GET, a bounded number of times
    and within the deadline; if every attempt is cut the error says so. It is never handed on: a
    truncated `_metadata` would otherwise be reported as a corrupt savepoint."""
    uri = f"s3://{bucket}/{key}"
    deadline = deadline or Deadline()
    guard_boto_client(client)
    worst = Timeouts.for_budget(deadline.budget).worst_call
    problem = ""
    for attempt in range(1, DOWNLOAD_ATTEMPTS + 1):
        deadline.check(uri)
        try:
            with deadline.guard(uri, "the server sent the object too slowly"):
                data, length = _get_once(client, uri, bucket, key, max_bytes, what, deadline)
            if length is None or len(data) == length:
                return data
            problem = f"the connection ended after {len(data)} of {length} bytes"
        except StorageError:
            raise
        except Exception as exc:
            if _is_timeout(exc):
                raise deadline.timed_out(uri) from None
            if not _is_cut(exc):
                raise s3_error(uri, exc, deadline) from None
            problem = str(exc) or type(exc).__name__
        pause = min(0.2 * 2 ** (attempt - 1), 2.0)
        if attempt == DOWNLOAD_ATTEMPTS or deadline.remaining() < pause + worst:
            break
        time.sleep(pause)
    raise StorageError(f"{uri}: download cut, the object arrived incomplete on each of {attempt} attempts "
                       f"(last: {problem}); a network or storage problem, not a corrupt object: try again")


def _get_once(client: Any, uri: str, bucket: str, key: str, max_bytes: int, what: str,
              deadline: Deadline) -> tuple[bytes, int | None]:
    obj = client.get_object(Bucket=bucket, Key=key)
    length = obj.get("ContentLength")
    length = int(length) if length is not None else None
    body = obj["Body"]
    guard = current_guard()
    if guard is not None:  # the body's own connection, in case the pools could not be guarded
        guard.add(getattr(body, "_raw_stream", body))
    with body:
        if length is not None and length > max_bytes:
            raise StorageError(f"{uri}: {length} bytes is larger than the {max_bytes}-byte limit for {what}")
        parts: list[bytes] = []
        got = 0
        while got <= max_bytes:
            if deadline.remaining() <= 0:
                raise deadline.timed_out(uri, f"still downloading, {got} bytes received")
            try:
                piece = body.read(min(_PIECE, max_bytes + 1 - got))
            except Exception as exc:
                if length is None or _is_timeout(exc) or not _is_cut(exc):
                    raise
                break  # the caller sees fewer bytes than Content-Length
            if not piece:
                break
            parts.append(piece)
            got += len(piece)
    if got > max_bytes:
        raise StorageError(f"{uri}: larger than the {max_bytes}-byte limit for {what}")
    return b"".join(parts), length

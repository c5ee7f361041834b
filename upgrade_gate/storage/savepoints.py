"""Where savepoints live (read-only): plain paths, `file://` URIs and `s3://bucket/prefix` (boto3).

A savepoint can be named by its directory, by its `_metadata` file/object, or by a prefix holding
several snapshot directories of ONE job: then the newest *complete* one (it has `_metadata`;
newest by the modification time of that file, ties broken by the larger name) is chosen. A job's
retained-checkpoint folder (`<JobID>/` holding `chk-<n>/`, `shared/`, `taskowned/`) selects its highest
complete `chk-<n>` (on S3 by listing `chk-*` one level, never the `shared/` objects). A prefix
(or a bucket) whose complete snapshots belong to several jobs is refused as ambiguous rather than
handing over another job's savepoint; see `one_job_or_refuse` for how the job is told apart.
Everything here is read-only: only stat/list/get calls, never put, copy or delete, because a
savepoint is the one thing an upgrade must never damage. Reads are bounded in size (a `_metadata`
larger than `MAX_METADATA_BYTES` is refused before it is read) and on S3 in time (`Deadline`).
"""

from __future__ import annotations

import errno
import os
import re
from dataclasses import dataclass
from pathlib import Path
from stat import S_ISDIR, S_ISREG
from typing import Any, BinaryIO

from upgrade_gate.flink.metadata import METADATA_FILE_NAME, CheckpointMetadata, parse_metadata
from upgrade_gate.storage.s3 import (
    Deadline,
    StorageError,
    get_object,
    local_path,
    s3_client,
    s3_error,
    split_s3,
)

MAX_METADATA_BYTES = 512 * 1024 * 1024
LOCAL_SEARCH_DEPTH = 3  # <root>/<job>/<snapshot>/_metadata; S3 listings see every depth anyway
SHOWN_CANDIDATES = 5
# Flink's savepoint directory: "savepoint-" + the first 6 hex digits of the JobID + "-" + 12 random hex
# digits (org.apache.flink.runtime.state.filesystem.AbstractFsCheckpointStorageAccess#createSavepointDirectory).
# Checkpoints live in "<checkpoint dir>/<JobID>/chk-<n>" (FsCheckpointStorageAccess), so their job is the parent.
_SAVEPOINT_DIR = re.compile(r"savepoint-([0-9a-f]{6})-[0-9a-f]{12}")
_CHECKPOINT_DIR = re.compile(r"chk-(\d+)")


@dataclass(frozen=True, slots=True)
class MetadataBlob:
    """The bytes of one `_metadata` plus what the reader needs to describe and resolve it."""

    data: bytes
    source: str  # the file or object, for error messages
    base_dir: str  # the snapshot directory; relative state handles resolve against it


def one_job_or_refuse(name: str, snapshot_dirs: list[str], shown: list[str]) -> None:
    """Refuse a prefix whose complete snapshots come from more than one job.

    `snapshot_dirs` are relative to the prefix. Two snapshots are of different jobs when they sit in
    different folders (one folder per job, or `<JobID>/chk-<n>`), or when their savepoint directory
    names carry different JobID prefixes. Directories in one folder whose names are not Flink's
    (`savepoint-old`, `chk-7`, hand-made copies) are taken as that folder's job. Picking the newest
    across jobs would check one job's upgrade against another job's state, so the user must name the
    directory. `shown` are the candidates to list, newest first."""
    parents = {d.rsplit("/", 1)[0] if "/" in d else "" for d in snapshot_dirs}
    job_ids = {m.group(1) for d in snapshot_dirs if (m := _SAVEPOINT_DIR.fullmatch(d.rsplit("/", 1)[-1]))}
    if len(parents) <= 1 and len(job_ids) <= 1:
        return
    more = f" and {len(shown) - SHOWN_CANDIDATES} more" if len(shown) > SHOWN_CANDIDATES else ""
    raise StorageError(f"{name}: ambiguous, it holds complete snapshots of several jobs "
                       f"({', '.join(shown[:SHOWN_CANDIDATES])}{more}); name the savepoint directory "
                       f"(or the job's own folder) to read")


# ---- local files ------------------------------------------------------------------------
def _newest(candidates: list[tuple[float, str, Any]]) -> Any:
    """Newest by modification time; when every candidate is a `chk-<n>` of one folder (a job's retained
    checkpoints), the highest checkpoint number: Flink's counter, which copies and uploads keep."""
    numbers = [_CHECKPOINT_DIR.fullmatch(os.path.basename(c[1])) for c in candidates]  # a scandir entry: its name
    if candidates and all(numbers) and len({str(Path(c[1]).parent) for c in candidates}) == 1:
        return max(zip(numbers, candidates, strict=True), key=lambda x: int(x[0].group(1)))[1][2]  # type: ignore[union-attr]
    return max(candidates, key=lambda c: (c[0], c[1]))[2]


_IGNORED_ERRNOS = (errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP)  # what pathlib's is_dir/is_file ignore


def _stat(path: Path) -> os.stat_result | None:
    """`os.stat(path)`, or None where `Path.is_dir()`/`is_file()` would answer False (missing, not a directory
    on the way, a symlink loop, a NUL byte); other errors propagate as from those calls.

    One stat answers "directory?", "regular file?", mtime and size: a fleet reads thousands of savepoints,
    and asking pathlib each question was a separate stat call each time."""
    try:
        return os.stat(path)
    except OSError as exc:
        if getattr(exc, "errno", None) not in _IGNORED_ERRNOS:
            raise
        return None
    except ValueError:
        return None


def _local_candidates(root: Path) -> list[tuple[float, str, Path, os.stat_result]]:
    """Complete snapshot directories below `root` (a few levels; a snapshot's own files are not searched),
    each with the stat of its `_metadata`."""
    found: list[tuple[float, str, Path, os.stat_result]] = []
    stack = [(root, 1)]
    while stack:
        folder, depth = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            if not entry.is_dir(follow_symlinks=False):
                continue
            meta = Path(entry.path) / METADATA_FILE_NAME
            st = _stat(meta)
            if st is not None and S_ISREG(st.st_mode):
                found.append((st.st_mtime, entry.path, meta, st))
            elif depth < LOCAL_SEARCH_DEPTH:
                stack.append((Path(entry.path), depth + 1))
    return found


def _local_metadata(name: str, job_folder: bool) -> tuple[Path, os.stat_result]:
    """The `_metadata` file `name` stands for, and its stat (taken when it was found)."""
    path = local_path(name)
    st = _stat(path)
    if st is not None and S_ISDIR(st.st_mode):
        meta = path / METADATA_FILE_NAME
        meta_st = _stat(meta)
        if meta_st is not None and S_ISREG(meta_st.st_mode):
            return meta, meta_st
        found = _local_candidates(path)
        if not found:
            raise StorageError(f"{name}: no {METADATA_FILE_NAME} in this directory or in any directory below it "
                               f"(not a savepoint, or no complete savepoint yet)")
        if not job_folder:
            ordered = sorted(found, key=lambda c: (c[0], c[1]), reverse=True)
            one_job_or_refuse(name, [os.path.relpath(c[1], path).replace(os.sep, "/") for c in found],
                              [c[1] for c in ordered])
        chosen = _newest([(c[0], c[1], c) for c in found])
        return chosen[2], chosen[3]
    if st is not None and S_ISREG(st.st_mode):
        return path, st
    raise StorageError(f"{name}: no such file or directory")


def _read_up_to(f: BinaryIO, first: int, limit: int) -> bytes:
    """What `f.read(limit)` returns (the bytes up to `limit` or the end), asking for `first` bytes first."""
    chunks: list[bytes] = []
    left = limit
    ask = first
    while left > 0:
        chunk = f.read(min(left, ask))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
        ask = 1 << 16
    return b"".join(chunks)


def _read_local(name: str, max_bytes: int, job_folder: bool) -> MetadataBlob:
    """The bytes of the chosen `_metadata`, bounded before and while reading.

    The size comes from the stat that found the file, and the read asks for that size plus one byte
    (reading on only if the file grew), not for `max_bytes + 1`: a read of 512 MiB makes Python map
    and unmap a buffer that large for every savepoint. `base_dir` is `os.path.realpath` of the folder,
    which is what `Path.resolve()` returns; resolve's extra stat only detects a symlink loop, and
    there is none on the way to a folder whose file was just opened."""
    meta, st = _local_metadata(name, job_folder)
    size = st.st_size
    if size > max_bytes:
        raise StorageError(f"{meta}: {size} bytes is larger than the {max_bytes}-byte limit for metadata files")
    try:
        with open(meta, "rb", buffering=0) as f:
            data = _read_up_to(f, size + 1, max_bytes + 1)
    except OSError as exc:
        raise StorageError(f"{meta}: cannot read: {exc.strerror or exc}") from None
    if len(data) > max_bytes:
        raise StorageError(f"{meta}: larger than the {max_bytes}-byte limit for metadata files")
    return MetadataBlob(data, str(meta), os.path.realpath(meta.parent))


# ---- S3 ---------------------------------------------------------------------------------
def _exists(client: Any, bucket: str, key: str, deadline: Deadline) -> bool:
    from botocore.exceptions import ClientError

    deadline.check(f"s3://{bucket}/{key}")
    try:
        client.head_object(Bucket=bucket, Key=key)
        return True
    except ClientError as exc:
        if str(exc.response.get("Error", {}).get("Code")) in ("404", "NoSuchKey", "NotFound"):
            return False
        raise s3_error(f"s3://{bucket}/{key}", exc, deadline) from None
    except Exception as exc:
        raise s3_error(f"s3://{bucket}/{key}", exc, deadline) from None


def metadata_candidates(client: Any, bucket: str, prefix: str,
                        deadline: Deadline | None = None) -> list[tuple[Any, str]]:
    """(LastModified, key) of every `_metadata` object under `prefix` (all pages are read)."""
    deadline = deadline or Deadline()
    uri = f"s3://{bucket}/{prefix}"
    found: list[tuple[Any, str]] = []
    try:
        paginator = client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=bucket, Prefix=prefix):
            deadline.check(uri)
            for obj in page.get("Contents", ()):
                key = obj["Key"]
                if key.rsplit("/", 1)[-1] == METADATA_FILE_NAME:
                    found.append((obj["LastModified"], key))
    except StorageError:
        raise
    except Exception as exc:
        raise s3_error(uri, exc, deadline) from None
    return found


def newest_metadata_key(client: Any, bucket: str, prefix: str, deadline: Deadline | None = None) -> str | None:
    """The `_metadata` key of the newest complete snapshot under `prefix`, whatever job it belongs to."""
    found = metadata_candidates(client, bucket, prefix, deadline)
    return max(found)[1] if found else None


def _latest_s3_checkpoint(client: Any, bucket: str, prefix: str, deadline: Deadline) -> tuple[Any, str] | None:
    """(LastModified, key) of the `_metadata` of the highest complete `chk-<n>/` directly under `prefix`
    (one job's checkpoint folder), listing one level only: its `shared/` can hold millions of SSTs."""
    uri = f"s3://{bucket}/{prefix}"
    folders: list[tuple[int, str]] = []
    try:
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"{prefix}chk-",
                                                                     Delimiter="/"):
            deadline.check(uri)
            for cp in page.get("CommonPrefixes", ()):
                m = _CHECKPOINT_DIR.fullmatch(cp["Prefix"][len(prefix):].rstrip("/"))
                if m:
                    folders.append((int(m.group(1)), cp["Prefix"]))
    except StorageError:
        raise
    except Exception as exc:
        raise s3_error(uri, exc, deadline) from None
    for _, folder in sorted(folders, reverse=True):  # the newest complete one: it has _metadata
        key = f"{folder}{METADATA_FILE_NAME}"
        if _exists(client, bucket, key, deadline):
            return 0, key
    return None


def _read_s3(uri: str, max_bytes: int, client: Any | None, job_folder: bool) -> MetadataBlob:
    bucket, key = split_s3(uri)
    deadline = Deadline()
    client = client or s3_client()
    if key.rsplit("/", 1)[-1] == METADATA_FILE_NAME:
        meta_key = key
    else:
        prefix = key.rstrip("/")
        direct = f"{prefix}/{METADATA_FILE_NAME}" if prefix else METADATA_FILE_NAME
        if _exists(client, bucket, direct, deadline):
            meta_key = direct
        else:
            below = f"{prefix}/" if prefix else ""
            checkpoint = _latest_s3_checkpoint(client, bucket, below, deadline)
            found = [checkpoint] if checkpoint else metadata_candidates(client, bucket, below, deadline)
            if not found:
                raise StorageError(f"{uri}: no complete savepoint ({METADATA_FILE_NAME}) under this prefix")
            if not job_folder:
                dirs = [k[len(below):].rsplit("/", 1)[0] for _, k in found]
                shown = [f"s3://{bucket}/{k.rsplit('/', 1)[0]}" for _, k in sorted(found, reverse=True)]
                one_job_or_refuse(uri, dirs, shown)
            meta_key = max(found)[1]
    data = get_object(client, bucket, meta_key, max_bytes, deadline=deadline)
    base = meta_key.rsplit("/", 1)[0] if "/" in meta_key else ""
    return MetadataBlob(data, f"s3://{bucket}/{meta_key}", f"s3://{bucket}/{base}".rstrip("/"))


# ---- entry points -----------------------------------------------------------------------
def read_metadata_blob(name: str, *, max_bytes: int = MAX_METADATA_BYTES, client: Any | None = None,
                       job_folder: bool = False) -> MetadataBlob:
    """Find and read the `_metadata` a user named (path, file:// or s3:// URI).

    `job_folder=True` is for callers that know `name` is one job's own folder (the gate's
    `<savepoint root>/<job>/`, the fleet scan's one prefix per job): every upgrade starts the job
    under a new JobID, so its savepoints there carry several JobID prefixes and are still one job."""
    if name.startswith("s3://") or name.startswith("s3a://"):
        return _read_s3("s3://" + name.split("://", 1)[1], max_bytes, client, job_folder)
    if "://" in name and not name.startswith("file:"):
        raise StorageError(f"{name}: unsupported scheme (use a path, file:// or s3://)")
    return _read_local(name, max_bytes, job_folder)


def load_savepoint(name: str, *, max_bytes: int = MAX_METADATA_BYTES, client: Any | None = None,
                   job_folder: bool = False) -> CheckpointMetadata:
    """Read and parse a savepoint's metadata; relative handles resolve against its directory."""
    blob = read_metadata_blob(name, max_bytes=max_bytes, client=client, job_folder=job_folder)
    return parse_metadata(blob.data, blob.source, blob.base_dir)

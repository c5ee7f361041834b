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
larger than `MAX_METADATA_BYTES` is refused before it is read) and on S3 in time (`Deadline`, enforced
on the sockets however slowly an answer trickles in).

"Newest complete" is checked, not assumed: a snapshot directory without `_metadata` is still being
written, and so is one whose `_metadata` ends early (a copy or upload in progress, a writer that died).
`load_newest_complete` parses the newest candidate and, when its `_metadata` is cut short and an older
candidate exists, takes the next one and says which it skipped (`Skipped`), instead of failing the
upgrade on a file that is not a savepoint yet. A `_metadata` that is complete but corrupt still fails.
"""

from __future__ import annotations

import errno
import logging
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from stat import S_ISDIR, S_ISREG
from typing import Any, BinaryIO

from upgrade_gate.flink.metadata import METADATA_FILE_NAME, CheckpointMetadata, parse_metadata
from upgrade_gate.flink.metadata.errors import MetadataFormatError
from upgrade_gate.storage.s3 import (
    Deadline,
    StorageError,
    get_object,
    head_object,
    local_path,
    s3_client,
    s3_error,
    split_s3,
)
from upgrade_gate.storage.watchdog import guard_boto_client

MAX_METADATA_BYTES = 512 * 1024 * 1024
LOCAL_SEARCH_DEPTH = 3  # <root>/<job>/<snapshot>/_metadata; S3 listings see every depth anyway
SHOWN_CANDIDATES = 5
# Flink's savepoint directory: "savepoint-" + the first 6 hex digits of the JobID + "-" + 12 random hex
# digits (org.apache.flink.runtime.state.filesystem.AbstractFsCheckpointStorageAccess#createSavepointDirectory).
# Checkpoints live in "<checkpoint dir>/<JobID>/chk-<n>" (FsCheckpointStorageAccess), so their job is the parent.
_SAVEPOINT_DIR = re.compile(r"savepoint-([0-9a-f]{6})-[0-9a-f]{12}")
_CHECKPOINT_DIR = re.compile(r"chk-(\d+)")
# How many incomplete snapshots (newest first) are passed over before the newest one's error is reported:
# a few writes or copies in progress at once, never a scan of the whole history.
MAX_INCOMPLETE_SKIPPED = 4
# the `_metadata` reader's wording when the data ended before the structure did
_CUT_SHORT = re.compile(r"^truncated\b|\bonly \d+ left\b")
log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class MetadataBlob:
    """The bytes of one `_metadata` plus what the reader needs to describe and resolve it."""

    data: bytes
    source: str  # the file or object, for error messages
    base_dir: str  # the snapshot directory; relative state handles resolve against it


@dataclass(frozen=True, slots=True)
class Skipped:
    """A snapshot newer than the one read that was passed over because it is not complete."""

    location: str
    why: str

    def __str__(self) -> str:
        return f"skipped the newer {self.location}: {self.why}"


@dataclass(frozen=True, slots=True)
class LoadedSavepoint:
    """The parsed `_metadata` of the newest complete snapshot, and the incomplete newer ones skipped."""

    metadata: CheckpointMetadata
    source: str  # the `_metadata` read
    location: str  # the snapshot it belongs to, as the choice named it
    skipped: tuple[Skipped, ...] = ()


def cut_short(exc: MetadataFormatError) -> bool:
    """Did parsing fail because the data ended (a `_metadata` still being written or copied)?"""
    return bool(_CUT_SHORT.search(exc.detail))


def first_complete(choices: Sequence[tuple[str, Callable[[], MetadataBlob]]],
                   skipped: Sequence[Skipped] = ()) -> LoadedSavepoint:
    """Read and parse `choices` (location, reader), newest first, until one is complete.

    A `_metadata` that ends early is passed over (at most `MAX_INCOMPLETE_SKIPPED` of them) when an older
    choice remains; anything else (a corrupt file, a foreign format, a cut download) fails at once, as does
    the last choice: the newest one's error is the one reported."""
    passed: list[Skipped] = list(skipped)
    first_error: MetadataFormatError | None = None
    for i, (location, read) in enumerate(choices):
        blob = read()
        try:
            metadata = parse_metadata(blob.data, blob.source, blob.base_dir)
        except MetadataFormatError as exc:
            first_error = first_error or exc
            last = i + 1 >= min(len(choices), MAX_INCOMPLETE_SKIPPED + 1)
            if last or not cut_short(exc):
                raise first_error from None
            passed.append(Skipped(location, f"its {METADATA_FILE_NAME} is incomplete ({len(blob.data)} bytes, "
                                            f"cut off at offset {exc.offset}): still being written or copied?"))
            continue
        return LoadedSavepoint(metadata, blob.source, location, tuple(passed))
    raise StorageError("no snapshot to read")  # pragma: no cover - callers pass at least one choice


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
def _by_checkpoint_number(candidates: list[tuple[float, str, Any]]) -> bool:
    """Every candidate is a `chk-<n>` of one folder (a job's retained checkpoints): ordered by Flink's
    counter, which copies and uploads keep, rather than by file times, which they do not."""
    return (bool(candidates) and all(_CHECKPOINT_DIR.fullmatch(os.path.basename(c[1])) for c in candidates)
            and len({str(Path(c[1]).parent) for c in candidates}) == 1)


def _chk_number(path: str) -> int:
    m = _CHECKPOINT_DIR.fullmatch(os.path.basename(path))
    return int(m.group(1)) if m else -1


def _ordered(candidates: list[tuple[float, str, Any]]) -> list[Any]:
    """Newest first: by modification time, or by checkpoint number (see `_by_checkpoint_number`)."""
    if _by_checkpoint_number(candidates):
        return [c[2] for c in sorted(candidates, key=lambda c: _chk_number(c[1]), reverse=True)]
    return [c[2] for c in sorted(candidates, key=lambda c: (c[0], c[1]), reverse=True)]


def _newer_incomplete(incomplete: list[tuple[float, str]], chosen: tuple[float, str]) -> list[Skipped]:
    """Flink-named snapshot directories without `_metadata` that are newer than the chosen snapshot."""
    mtime, where = chosen
    out = []
    for dir_mtime, path in sorted(incomplete, reverse=True):
        if _CHECKPOINT_DIR.fullmatch(os.path.basename(path)) and _CHECKPOINT_DIR.fullmatch(os.path.basename(where)):
            newer = (str(Path(path).parent) == str(Path(where).parent)
                     and _chk_number(path) > _chk_number(where))
        else:
            newer = dir_mtime > mtime
        if newer:
            out.append(Skipped(path, f"no {METADATA_FILE_NAME} (still being written, or abandoned)"))
    return out[:MAX_INCOMPLETE_SKIPPED]


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


def _local_candidates(root: Path, incomplete: list[tuple[float, str]] | None = None
                      ) -> list[tuple[float, str, Path, os.stat_result]]:
    """Complete snapshot directories below `root` (a few levels; a snapshot's own files are not searched),
    each with the stat of its `_metadata`. Flink-named snapshot directories without one are appended to
    `incomplete` (mtime, path) when it is given."""
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
                continue
            flink_named = _SAVEPOINT_DIR.fullmatch(entry.name) or _CHECKPOINT_DIR.fullmatch(entry.name)
            if incomplete is not None and flink_named:
                dir_st = _stat(Path(entry.path))
                incomplete.append((dir_st.st_mtime if dir_st else 0.0, entry.path))
            if depth < LOCAL_SEARCH_DEPTH:
                stack.append((Path(entry.path), depth + 1))
    return found


def _local_choices(name: str, job_folder: bool) -> tuple[list[tuple[Path, os.stat_result]], list[Skipped]]:
    """The `_metadata` files `name` may stand for, newest first, each with its stat (taken when it was
    found), and the newer snapshot directories that have none yet."""
    path = local_path(name)
    st = _stat(path)
    if st is not None and S_ISDIR(st.st_mode):
        meta = path / METADATA_FILE_NAME
        meta_st = _stat(meta)
        if meta_st is not None and S_ISREG(meta_st.st_mode):
            return [(meta, meta_st)], []
        incomplete: list[tuple[float, str]] = []
        found = _local_candidates(path, incomplete)
        if not found:
            raise StorageError(f"{name}: no {METADATA_FILE_NAME} in this directory or in any directory below it "
                               f"(not a savepoint, or no complete savepoint yet)")
        if not job_folder:
            ordered = sorted(found, key=lambda c: (c[0], c[1]), reverse=True)
            one_job_or_refuse(name, [os.path.relpath(c[1], path).replace(os.sep, "/") for c in found],
                              [c[1] for c in ordered])
        chosen = _ordered([(c[0], c[1], c) for c in found])
        return [(c[2], c[3]) for c in chosen], _newer_incomplete(incomplete, (chosen[0][0], chosen[0][1]))
    if st is not None and S_ISREG(st.st_mode):
        return [(path, st)], []
    raise StorageError(f"{name}: no such file or directory")


def _local_metadata(name: str, job_folder: bool) -> tuple[Path, os.stat_result]:
    """The `_metadata` file `name` stands for, and its stat (taken when it was found)."""
    return _local_choices(name, job_folder)[0][0]


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
    return _read_local_file(meta, st, max_bytes)


def _read_local_file(meta: Path, st: os.stat_result, max_bytes: int) -> MetadataBlob:
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
    return MetadataBlob(data, str(meta), real_folder(meta.parent))


_PROC_FD = "/proc/self/fd"  # where Linux names each open descriptor's file
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)


def real_folder(folder: Path) -> str:
    """`os.path.realpath(folder)` of an existing directory, asked of the kernel where it can answer.

    `realpath` is pure Python in 3.11: an lstat and string work per component, ~40 µs for a fleet's savepoint
    folder eight levels deep, 1.3 % of a fleet job (docs/performance.md). An open descriptor of the folder names
    its resolved path in /proc/self/fd (three system calls). Where that is not so (no /proc, a folder deleted or
    not ours to open, a name the kernel shows otherwise), `realpath` answers as before."""
    try:
        fd = os.open(folder, _DIR_FLAGS)
    except (OSError, ValueError):
        return os.path.realpath(folder)
    try:
        target = os.readlink(f"{_PROC_FD}/{fd}")
    except OSError:
        target = ""
    finally:
        os.close(fd)
    if not target.startswith("/") or target.endswith(" (deleted)"):
        return os.path.realpath(folder)
    return target


# ---- S3 ---------------------------------------------------------------------------------
def metadata_listing(client: Any, bucket: str, prefix: str, deadline: Deadline
             ) -> tuple[list[tuple[Any, str]], dict[str, Any]]:
    """(LastModified, key) of every `_metadata` under `prefix` (all pages), and the Flink-named snapshot
    "directories" that hold objects but no `_metadata` yet, each with its newest LastModified."""
    uri = f"s3://{bucket}/{prefix}"
    found: list[tuple[Any, str]] = []
    dirs: dict[str, Any] = {}
    complete: set[str] = set()
    guard_boto_client(client)
    try:
        with deadline.guard(uri):
            for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
                deadline.check(uri)
                for obj in page.get("Contents", ()):
                    key = obj["Key"]
                    folder, _, leaf = key.rpartition("/")
                    if leaf == METADATA_FILE_NAME:
                        found.append((obj["LastModified"], key))
                        complete.add(folder)
                        continue
                    snapshot = _snapshot_dir_of(folder)
                    if snapshot is not None and (snapshot not in dirs or obj["LastModified"] > dirs[snapshot]):
                        dirs[snapshot] = obj["LastModified"]
    except StorageError:
        raise
    except Exception as exc:
        raise s3_error(uri, exc, deadline) from None
    return found, {d: t for d, t in dirs.items() if d not in complete}


def _snapshot_dir_of(folder: str) -> str | None:
    """The innermost Flink-named snapshot directory (`savepoint-…`, `chk-<n>`) on the way to an object."""
    parts = folder.split("/")
    for i in range(len(parts) - 1, -1, -1):
        if _SAVEPOINT_DIR.fullmatch(parts[i]) or _CHECKPOINT_DIR.fullmatch(parts[i]):
            return "/".join(parts[:i + 1])
    return None


def metadata_candidates(client: Any, bucket: str, prefix: str,
                        deadline: Deadline | None = None) -> list[tuple[Any, str]]:
    """(LastModified, key) of every `_metadata` object under `prefix` (all pages are read)."""
    return metadata_listing(client, bucket, prefix, deadline or Deadline())[0]


def newest_metadata_key(client: Any, bucket: str, prefix: str, deadline: Deadline | None = None) -> str | None:
    """The `_metadata` key of the newest complete snapshot under `prefix`, whatever job it belongs to."""
    found = metadata_candidates(client, bucket, prefix, deadline)
    return max(found)[1] if found else None


def _s3_checkpoints(client: Any, bucket: str, prefix: str, deadline: Deadline) -> tuple[list[str], list[Skipped]]:
    """The `_metadata` keys of the highest complete `chk-<n>/` directly under `prefix` (one job's checkpoint
    folder), highest first, and the higher ones without `_metadata`; listing one level only: its `shared/`
    can hold millions of SSTs."""
    uri = f"s3://{bucket}/{prefix}"
    folders: list[tuple[int, str]] = []
    guard_boto_client(client)
    try:
        with deadline.guard(uri):
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
    keys: list[str] = []
    skipped: list[Skipped] = []
    for _, folder in sorted(folders, reverse=True):  # the newest complete ones: they have _metadata
        key = f"{folder}{METADATA_FILE_NAME}"
        if head_object(client, bucket, key, deadline) is not None:
            keys.append(key)
            if len(keys) > MAX_INCOMPLETE_SKIPPED:
                break
        elif not keys and len(skipped) < MAX_INCOMPLETE_SKIPPED:
            skipped.append(Skipped(f"s3://{bucket}/{folder.rstrip('/')}",
                                   f"no {METADATA_FILE_NAME} (still being written, or abandoned)"))
    return keys, skipped if keys else []


def _s3_choices(uri: str, client: Any, job_folder: bool, deadline: Deadline) -> tuple[list[str], list[Skipped]]:
    """The `_metadata` keys `uri` may stand for, newest first, and the newer snapshots that have none yet."""
    bucket, key = split_s3(uri)
    if key.rsplit("/", 1)[-1] == METADATA_FILE_NAME:
        return [key], []
    prefix = key.rstrip("/")
    direct = f"{prefix}/{METADATA_FILE_NAME}" if prefix else METADATA_FILE_NAME
    if head_object(client, bucket, direct, deadline) is not None:
        return [direct], []
    below = f"{prefix}/" if prefix else ""
    checkpoints, skipped = _s3_checkpoints(client, bucket, below, deadline)
    if checkpoints:
        return checkpoints, skipped
    found, incomplete = metadata_listing(client, bucket, below, deadline)
    if not found:
        raise StorageError(f"{uri}: no complete savepoint ({METADATA_FILE_NAME}) under this prefix")
    if not job_folder:
        dirs = [k[len(below):].rsplit("/", 1)[0] for _, k in found]
        shown = [f"s3://{bucket}/{k.rsplit('/', 1)[0]}" for _, k in sorted(found, reverse=True)]
        one_job_or_refuse(uri, dirs, shown)
    ordered = sorted(found, reverse=True)
    newest = ordered[0][0]
    skipped = [Skipped(f"s3://{bucket}/{d}", f"no {METADATA_FILE_NAME} (still being written, or abandoned)")
               for d, t in sorted(incomplete.items(), key=lambda kv: kv[1], reverse=True) if t > newest]
    return [k for _, k in ordered], skipped[:MAX_INCOMPLETE_SKIPPED]


def _read_s3_key(client: Any, bucket: str, meta_key: str, max_bytes: int, deadline: Deadline) -> MetadataBlob:
    data = get_object(client, bucket, meta_key, max_bytes, deadline=deadline)
    base = meta_key.rsplit("/", 1)[0] if "/" in meta_key else ""
    return MetadataBlob(data, f"s3://{bucket}/{meta_key}", f"s3://{bucket}/{base}".rstrip("/"))


def _read_s3(uri: str, max_bytes: int, client: Any | None, job_folder: bool) -> MetadataBlob:
    deadline = Deadline()
    client = guard_boto_client(client or s3_client())
    keys, _ = _s3_choices(uri, client, job_folder, deadline)
    return _read_s3_key(client, split_s3(uri)[0], keys[0], max_bytes, deadline)


# ---- entry points -----------------------------------------------------------------------
def _is_s3(name: str) -> bool:
    return name.startswith(("s3://", "s3a://"))


def read_metadata_blob(name: str, *, max_bytes: int = MAX_METADATA_BYTES, client: Any | None = None,
                       job_folder: bool = False) -> MetadataBlob:
    """Find and read the `_metadata` a user named (path, file:// or s3:// URI): the newest, unparsed.

    `job_folder=True` is for callers that know `name` is one job's own folder (the gate's
    `<savepoint root>/<job>/`, the fleet scan's one prefix per job): every upgrade starts the job
    under a new JobID, so its savepoints there carry several JobID prefixes and are still one job."""
    if _is_s3(name):
        return _read_s3("s3://" + name.split("://", 1)[1], max_bytes, client, job_folder)
    if "://" in name and not name.startswith("file:"):
        raise StorageError(f"{name}: unsupported scheme (use a path, file:// or s3://)")
    return _read_local(name, max_bytes, job_folder)


def load_newest_complete(name: str, *, max_bytes: int = MAX_METADATA_BYTES, client: Any | None = None,
                         job_folder: bool = False) -> LoadedSavepoint:
    """Read and parse the newest complete snapshot `name` stands for (see the module docstring): a newer one
    whose `_metadata` is missing or ends early is skipped and named in `skipped` (and logged)."""
    if _is_s3(name):
        uri = "s3://" + name.split("://", 1)[1]
        deadline = Deadline()
        s3 = guard_boto_client(client or s3_client())
        bucket = split_s3(uri)[0]
        keys, skipped = _s3_choices(uri, s3, job_folder, deadline)
        return first_complete([(f"s3://{bucket}/{k.rsplit('/', 1)[0]}",
                                lambda k=k: _read_s3_key(s3, bucket, k, max_bytes, deadline)) for k in keys], skipped)
    if "://" in name and not name.startswith("file:"):
        raise StorageError(f"{name}: unsupported scheme (use a path, file:// or s3://)")
    files, skipped = _local_choices(name, job_folder)
    return first_complete([(str(meta.parent), lambda m=meta, st=st: _read_local_file(m, st, max_bytes))
                           for meta, st in files], skipped)


def load_savepoint(name: str, *, max_bytes: int = MAX_METADATA_BYTES, client: Any | None = None,
                   job_folder: bool = False) -> CheckpointMetadata:
    """Read and parse a savepoint's metadata; relative handles resolve against its directory. Newer
    incomplete snapshots skipped on the way are logged (`load_newest_complete` returns them)."""
    loaded = load_newest_complete(name, max_bytes=max_bytes, client=client, job_folder=job_folder)
    for skipped in loaded.skipped:
        log.warning("%s", skipped)
    return loaded.metadata

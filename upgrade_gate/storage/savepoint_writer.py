"""Writing a NEW savepoint (what `upgrade-gate repair` produces); the one module of storage that writes state.

A savepoint is the one thing an upgrade must never damage, so this module never writes where a savepoint
is: the destination must not exist yet (locally: no such path; on S3: no object under the prefix) and must
not lie inside the source. The state files the new `_metadata` needs are copied (S3 to S3 server-side,
`CopyObject`/`UploadPartCopy` through boto3's managed copy), `_metadata` is written last (Flink and our
discovery take a directory without it for an incomplete snapshot), and a failed write removes what it
wrote, and only that.

Which files: Flink's savepoints name their own files relative to their directory (`RelativeFileStateHandle`),
so those are copied under the same names. An absolute file handle inside the source directory (a retained
checkpoint's exclusive files) is copied and written back as a relative handle. Files outside the source
(a retained incremental checkpoint's `shared/` SSTs, file-merging segments) are not copied; they are listed
in `WriteResult.external`, because the new savepoint needs them until the job has taken its own.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from upgrade_gate.flink.metadata import METADATA_FILE_NAME, CheckpointMetadata
from upgrade_gate.flink.metadata.model import FileStateHandle, RelativeFileStateHandle
from upgrade_gate.storage.s3 import StorageError, head_object, is_s3, local_path, s3_client, s3_error, split_s3

__all__ = ["Copy", "StorageError", "WriteResult", "check_copies", "check_destination", "relocate", "remove_savepoint",
           "remove_unfinished", "write_savepoint"]

# (files copied, files in all, bytes copied, bytes in all): the caller says it in its own words
Progress = Callable[[int, int, int, int], None]


@dataclass(frozen=True, slots=True)
class Copy:
    """One state file: where it is read, and its name relative to the new savepoint's directory."""

    source: str
    relative: str
    size: int


@dataclass(frozen=True, slots=True)
class WriteResult:
    destination: str  # the new savepoint's directory, as Flink's -s takes it
    metadata_bytes: int
    copies: tuple[Copy, ...]
    external: tuple[str, ...]  # files the new savepoint references outside its own directory

    @property
    def copied_bytes(self) -> int:
        return sum(c.size for c in self.copies)


def _plain(location: str) -> str:
    """`file:/x` -> `/x` (normalised), `s3a://` -> `s3://`, so locations compare."""
    if is_s3(location):
        return "s3://" + location.split("://", 1)[1].rstrip("/")
    return os.path.normpath(os.path.abspath(str(local_path(location))))


def _comparable(path: str) -> str | None:
    """A handle's path normalised like `_plain`, or None for a file system we do not read (hdfs://, gs://...)."""
    if is_s3(path) or path.startswith("file:") or "://" not in path:
        return _plain(path)
    return None


def _inside(child: str, parent: str) -> bool:
    return child == parent or child.startswith(parent.rstrip("/") + "/")


# ---- which files the new savepoint needs -------------------------------------------------------------------
def _map_handles(obj: Any, fn: Callable[[Any], Any], depth: int = 0) -> Any:
    """`obj` with every file handle replaced by `fn(handle)`; unchanged parts are the same objects."""
    if depth > 12 or obj is None or isinstance(obj, bytes | str | int | float | bool):
        return obj
    if isinstance(obj, FileStateHandle | RelativeFileStateHandle):
        return fn(obj)
    if isinstance(obj, tuple):
        items = tuple(_map_handles(x, fn, depth + 1) for x in obj)
        return obj if all(a is b for a, b in zip(items, obj, strict=True)) else items
    if isinstance(obj, dict):
        values = {k: _map_handles(v, fn, depth + 1) for k, v in obj.items()}
        return obj if all(values[k] is v for k, v in obj.items()) else values
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        changed = {}
        for f in dataclasses.fields(obj):
            if not f.init:
                continue
            value = getattr(obj, f.name)
            new = _map_handles(value, fn, depth + 1)
            if new is not value:
                changed[f.name] = new
        return dataclasses.replace(obj, **changed) if changed else obj
    return obj


def relocate(metadata: CheckpointMetadata, source_dir: str) -> tuple[CheckpointMetadata, list[Copy], list[str]]:
    """The metadata to write in the new directory, the files to copy there, and the files left outside."""
    base = _plain(source_dir)
    copies: dict[str, Copy] = {}
    external: dict[str, None] = {}

    def place(h: FileStateHandle | RelativeFileStateHandle) -> Any:
        if isinstance(h, RelativeFileStateHandle):
            copies.setdefault(h.relative_path, Copy(h.path, h.relative_path, h.size))
            return h
        where = _comparable(h.path)
        if where is not None and where != base and _inside(where, base):
            rel = where[len(base.rstrip("/")) + 1:]
            copies.setdefault(rel, Copy(h.path, rel, h.size))
            return RelativeFileStateHandle(h.path, rel, h.size)
        external.setdefault(h.path)
        return h

    out = _map_handles(metadata, place)
    for handle_path in _segment_paths(out):
        external.setdefault(handle_path)
    return out, list(copies.values()), list(external)


def _segment_paths(metadata: CheckpointMetadata) -> list[str]:
    """File-merging segments (FLIP-306) are absolute and shared by design: always outside."""
    found: list[str] = []

    def walk(obj: Any, depth: int = 0) -> None:
        if depth > 12 or obj is None or isinstance(obj, bytes | str | int | float | bool):
            return
        if isinstance(obj, tuple | list):
            for x in obj:
                walk(x, depth + 1)
        elif isinstance(obj, dict):
            for x in obj.values():
                walk(x, depth + 1)
        elif type(obj).__name__ == "SegmentFileStateHandle":
            found.append(obj.path)
        elif dataclasses.is_dataclass(obj):
            for f in dataclasses.fields(obj):
                walk(getattr(obj, f.name), depth + 1)

    walk(metadata.operator_states)
    return found


# ---- where it goes -----------------------------------------------------------------------------------------
def check_destination(destination: str, source_dir: str, client: Any | None = None) -> None:
    """Refuse a destination that exists, is inside the source, or holds the source."""
    dest, src = _plain(destination), _plain(source_dir)
    if _inside(dest, src):
        raise StorageError(f"{destination}: the repaired savepoint must not be written inside the source savepoint "
                           f"{source_dir}")
    if _inside(src, dest):
        raise StorageError(f"{destination}: holds the source savepoint {source_dir}; choose a new location")
    if is_s3(dest):
        bucket, key = split_s3(dest)
        if not key:
            raise StorageError(f"{destination}: name a prefix inside the bucket for the repaired savepoint")
        try:
            found = (client or s3_client()).list_objects_v2(Bucket=bucket, Prefix=key.rstrip("/") + "/", MaxKeys=1)
        except Exception as exc:
            raise s3_error(destination, exc) from None
        if found.get("KeyCount", 0):
            raise StorageError(f"{destination}: already holds objects; a repair writes only to a new location")
        return
    if os.path.lexists(dest):
        raise StorageError(f"{destination}: already exists; a repair writes only to a new location")


def _copy_one(c: Copy, dest: str, client: Any | None) -> None:
    src = _comparable(c.source) or c.source
    target = dest.rstrip("/") + "/" + c.relative
    if is_s3(target):
        bucket, key = split_s3(target)
        if is_s3(src):
            sb, sk = split_s3(src)
            client.copy({"Bucket": sb, "Key": sk}, bucket, key)  # server-side, multipart above 8 MiB
        else:
            client.upload_file(src, bucket, key)
        return
    os.makedirs(os.path.dirname(target), exist_ok=True)
    if is_s3(src):
        sb, sk = split_s3(src)
        client.download_file(sb, sk, target)
    else:
        shutil.copyfile(src, target)


def _remove_written(dest: str, written: list[str], client: Any | None) -> None:
    if is_s3(dest):
        bucket, _ = split_s3(dest)
        for key in written:
            with contextlib.suppress(Exception):  # best effort: the error that brought us here is the one to report
                client.delete_object(Bucket=bucket, Key=key)
        return
    shutil.rmtree(dest, ignore_errors=True)


def write_savepoint(metadata_bytes: bytes, copies: list[Copy], destination: str, source_dir: str, *,
                    external: list[str] = (), client: Any | None = None,  # type: ignore[assignment]
                    progress: Progress | None = None) -> WriteResult:
    """Copy the state files, then write `_metadata`; on any failure remove what this call wrote."""
    dest = _plain(destination)
    if is_s3(dest) or any(is_s3(c.source) for c in copies):
        client = client or s3_client()
    check_destination(destination, source_dir, client)
    say = progress or (lambda *_: None)
    total = sum(c.size for c in copies)
    written: list[str] = []
    if not is_s3(dest):
        try:
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            os.mkdir(dest)
        except OSError as exc:
            raise StorageError(f"{destination}: cannot create the directory: {exc.strerror or exc}") from None
    done = 0
    try:
        for i, c in enumerate(copies, 1):
            try:
                _copy_one(c, dest, client)
            except FileNotFoundError:
                raise StorageError(f"{c.source}: state file of the source savepoint is missing") from None
            except OSError as exc:
                raise StorageError(f"{c.source}: cannot copy to {destination}: {exc.strerror or exc}") from None
            except StorageError:
                raise
            except Exception as exc:
                raise s3_error(c.source, exc) from None
            if is_s3(dest):
                written.append(split_s3(dest.rstrip("/") + "/" + c.relative)[1])
            done += c.size
            if i == len(copies) or i % 50 == 0:
                say(i, len(copies), done, total)
        _write_metadata(dest, metadata_bytes, client, written)
    except BaseException:
        _remove_written(dest, written, client)
        raise
    return WriteResult(destination if is_s3(dest) else dest, len(metadata_bytes), tuple(copies), tuple(external))


def _write_metadata(dest: str, data: bytes, client: Any | None, written: list[str]) -> None:
    if is_s3(dest):
        bucket, key = split_s3(dest.rstrip("/") + "/" + METADATA_FILE_NAME)
        try:
            client.put_object(Bucket=bucket, Key=key, Body=data)
        except Exception as exc:
            raise s3_error(dest, exc) from None
        written.append(key)
        return
    tmp = os.path.join(dest, "." + METADATA_FILE_NAME + ".inprogress")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, os.path.join(dest, METADATA_FILE_NAME))


def remove_savepoint(written: WriteResult, client: Any | None = None) -> None:
    """Remove a savepoint this module wrote (a repair whose read-back check failed)."""
    dest = written.destination
    if not is_s3(dest):
        shutil.rmtree(dest, ignore_errors=True)
        return
    client = client or s3_client()
    prefix = split_s3(dest)[1].rstrip("/") + "/"
    _remove_written(dest, [prefix + c.relative for c in written.copies] + [prefix + METADATA_FILE_NAME], client)


def remove_unfinished(destination: str, client: Any | None = None) -> None:
    """Remove a repair's destination that an interrupted run of the same upgrade left without `_metadata`.

    Only for a location the caller recorded as its own repair's before writing it (the Airflow upgrade's record):
    a directory holding `_metadata` is a complete savepoint and is never removed here."""
    dest = _plain(destination)
    if is_s3(dest):
        client = client or s3_client()
        bucket, key = split_s3(dest)
        prefix = key.rstrip("/") + "/"
        try:
            found = client.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])
        except Exception as exc:
            raise s3_error(destination, exc) from None
        keys = [o["Key"] for o in found]
        if prefix + METADATA_FILE_NAME in keys:
            raise StorageError(f"{destination}: holds a complete savepoint; it is not removed")
        _remove_written(dest, keys, client)
        return
    if os.path.isfile(os.path.join(dest, METADATA_FILE_NAME)):
        raise StorageError(f"{destination}: holds a complete savepoint; it is not removed")
    shutil.rmtree(dest, ignore_errors=True)


def check_copies(written: WriteResult, client: Any | None = None) -> None:
    """Every copied state file is at the destination with the size of its source."""
    dest = written.destination
    for c in written.copies:
        target = dest.rstrip("/") + "/" + c.relative
        if is_s3(target):
            client = client or s3_client()
            bucket, key = split_s3(target)
            size = _s3_size(client, bucket, key, target)
            want = _source_size(c, client)
        else:
            try:
                size = os.stat(target).st_size
            except OSError as exc:
                raise StorageError(f"{target}: not readable after the copy: {exc.strerror or exc}") from None
            want = _source_size(c, client)
        if size != want:
            raise StorageError(f"{target}: {size} bytes after the copy, the source has {want}")


def _source_size(c: Copy, client: Any | None) -> int:
    src = _comparable(c.source) or c.source
    if is_s3(src):
        bucket, key = split_s3(src)
        return _s3_size(client or s3_client(), bucket, key, src)
    return os.stat(src).st_size


def _s3_size(client: Any, bucket: str, key: str, shown: str) -> int:
    head = head_object(client, bucket, key, shown=shown)
    if head is None:
        raise StorageError(f"{shown}: no such object")
    return int(head["ContentLength"])

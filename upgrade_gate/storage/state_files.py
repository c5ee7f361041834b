"""State files behind a snapshot (read-only): the first bytes of each for the state-meta reader, local
files and S3 objects, and the list of files a snapshot needs outside its own directory (`external_files`).

The state-meta reader (upgrade_gate/flink/state_meta/) reads inline handles and local files itself; this
opener adds `s3://` state files with ranged GETs (only the proxy at a stream's start is needed, never the
whole object), inside the same time budget as every other S3 read (`Deadline`).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, is_dataclass
from pathlib import Path
from typing import Any

from upgrade_gate.flink.metadata import CheckpointMetadata
from upgrade_gate.flink.state_meta import OperatorSchemas, read_state_schemas
from upgrade_gate.flink.state_meta.streams import Opener, StateFileError, StreamRef, local_opener
from upgrade_gate.storage.s3 import Deadline, StorageError, is_s3, s3_client, s3_error, split_s3
from upgrade_gate.storage.savepoints import load_savepoint

__all__ = ["ExternalFile", "external_files", "external_files_json", "read_savepoint_states", "state_stream_opener"]


def state_stream_opener(client: Any | None = None) -> Opener:
    """An opener for `read_state_schemas`: S3 objects by ranged GET, everything else as `local_opener`."""
    clients: list[Any] = [client] if client is not None else []

    def open_stream(ref: StreamRef, limit: int) -> tuple[bytes, bool]:
        if ref.path is None or not is_s3(ref.path):
            return local_opener(ref, limit)
        if not clients:
            clients.append(s3_client())
        want = limit if ref.size < 0 else min(limit, ref.size)
        bucket, key = split_s3("s3://" + ref.path.split("://", 1)[1])
        deadline = Deadline()
        try:
            byte_range = f"bytes={ref.start}-{ref.start + max(want, 1) - 1}"
            obj = clients[0].get_object(Bucket=bucket, Key=key, Range=byte_range)
            with obj["Body"] as body:
                data = body.read(want + 1)
        except StorageError as exc:
            raise StateFileError(str(exc)) from None
        except Exception as exc:
            raise StateFileError(str(s3_error(ref.path, exc, deadline))) from None
        data = data[:want]
        return data, len(data) < limit or 0 <= ref.size <= limit

    return open_stream


def read_savepoint_states(savepoint: CheckpointMetadata | str, opener: Opener | None = None
                          ) -> tuple[OperatorSchemas, ...]:
    """Every operator's state meta information, for a report's State section (the CLI's HTML check, the Airflow
    gate's published report): a parsed `CheckpointMetadata` or any name `load_savepoint` reads. Unreadable or
    malformed state files are noted per operator, never raised (`tolerant`): the check already warns about them."""
    metadata = load_savepoint(savepoint) if isinstance(savepoint, str) else savepoint
    return read_state_schemas(metadata, opener or state_stream_opener(), tolerant=True)


# ---- files a snapshot references outside its own directory ------------------------------
# A retained incremental RocksDB checkpoint (native format) keeps only its own small files in
# `chk-<n>/`; its SST files (and, with file merging, segment files) sit in the job's `shared/` and
# `taskowned/` folders and were often uploaded by an earlier checkpoint. Deleting "old" checkpoints by
# folder, or copying `chk-<n>/` alone, breaks the restore. Flink records these as absolute paths
# (`FileStateHandle`, `SegmentFileStateHandle`); files in the snapshot's own directory are relative
# (`RelativeFileStateHandle`) or inline (`ByteStreamStateHandle`).

_FILE_HANDLES = ("FileStateHandle", "SegmentFileStateHandle")
_MAX_DEPTH = 8


@dataclass(frozen=True, slots=True)
class ExternalFile:
    """One file a snapshot needs that lies outside its own directory."""

    path: str  # as recorded in `_metadata`
    size: int
    area: str  # "shared", "taskowned" or "other": the folder of the job's checkpoint directory it is in
    relative: str | None  # the path from that folder on (`shared/<uuid>`), None for "other"
    found: str  # "yes", "no", "moved: <where>" (beside this copy of the snapshot) or "not checked" (S3)

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "relative": self.relative, "bytes": self.size, "area": self.area,
                "found": self.found}


def _walk(obj: Any, out: dict[str, int], depth: int = 0) -> None:
    if depth > _MAX_DEPTH or obj is None or isinstance(obj, bytes | str | int | float | bool):
        return
    if isinstance(obj, tuple | list):
        for x in obj:
            _walk(x, out, depth + 1)
        return
    if isinstance(obj, dict):
        for x in obj.values():
            _walk(x, out, depth + 1)
        return
    if type(obj).__name__ in _FILE_HANDLES:
        out.setdefault(obj.path, int(getattr(obj, "size", 0) or 0))
        return
    if is_dataclass(obj):
        for f in fields(obj):
            _walk(getattr(obj, f.name), out, depth + 1)


def _plain(path: str) -> str:
    """`file:/x`, `file:///x` -> `/x`; `s3a://`, `s3p://` -> `s3://` (Flink's S3 plugins)."""
    if path.startswith("file:"):
        rest = path[5:]
        return "/" + rest.lstrip("/") if rest.startswith("//") else rest
    for scheme in ("s3a://", "s3p://", "s3n://"):
        if path.startswith(scheme):
            return "s3://" + path[len(scheme):]
    return path


def _area(path: str) -> tuple[str, str | None]:
    """("shared" | "taskowned" | "other", the path from that folder on)."""
    parts = path.split("/")
    for i in range(len(parts) - 2, -1, -1):
        if parts[i] in ("shared", "taskowned"):
            return parts[i], "/".join(parts[i:])
    return "other", None


def external_files(metadata: CheckpointMetadata, snapshot_dir: str) -> list[ExternalFile]:
    """Every file the snapshot's handles name outside `snapshot_dir` (the directory its `_metadata` is in).

    Local files are looked up where `_metadata` says; a file missing there but present at the same place
    beside this copy of the snapshot (`<job folder>/shared/...`) is reported as moved: Flink itself reads
    the recorded path, so a moved incremental checkpoint restores only if those paths exist again."""
    found: dict[str, int] = {}
    for op in metadata.operator_states:
        for sub in op.subtask_states.values():
            _walk(sub, found)
    base = _plain(snapshot_dir).rstrip("/")
    job_dir = base.rsplit("/", 1)[0] if "/" in base else base
    out = []
    for path, size in sorted(found.items()):
        plain = _plain(path)
        if plain.startswith(base + "/"):
            continue
        area, tail = _area(plain)
        if is_s3(plain) or is_s3(base):
            state = "not checked"
        elif Path(plain).is_file():
            state = "yes"
        elif tail is not None and Path(job_dir, tail).is_file():
            state = f"moved: {Path(job_dir, tail)}"
        else:
            state = "no"
        out.append(ExternalFile(path, size, area, tail, state))
    return out


def external_files_json(metadata: CheckpointMetadata, snapshot_dir: str) -> dict[str, Any]:
    """The `external_files` object of `inspect --format json` (additive to the documented fields)."""
    files = external_files(metadata, snapshot_dir)
    return {"snapshot_dir": snapshot_dir, "count": len(files), "bytes": sum(f.size for f in files),
            "missing": sum(f.found == "no" for f in files),
            "why": "files this snapshot needs outside its own directory (shared SSTs of earlier checkpoints, "
                   "task-owned files): they must not be deleted before the upgrade has restored from it",
            "files": [f.to_json() for f in files]}

"""Bounded reads of the first bytes of a state handle's stream: inline, local file or S3 object.

Only the serialization proxy at the start of a stream is needed, never the state itself, so a
stream is read as a prefix (64 KiB first; more, up to `MAX_PROXY_BYTES`, only when the proxy turns
out to be longer). A state file may be as large as the state: reading it whole is never needed.
File handles are `FileStateHandle` (absolute path or URI), `RelativeFileStateHandle` (already resolved
against the savepoint directory by the `_metadata` reader) and `SegmentFileStateHandle` (a slice of a
merged file, FLIP-306).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import unquote, urlparse

from hashing.errors import InputError
from hashing.frozen import fast_init
from upgrade_gate.flink.metadata.model import (
    ByteStreamStateHandle,
    EmptySegmentFileStateHandle,
    FileStateHandle,
    KeyGroupsStateHandle,
    RelativeFileStateHandle,
    SegmentFileStateHandle,
)

__all__ = ["FIRST_READ", "MAX_PROXY_BYTES", "Opener", "StateFileError", "StreamRef", "local_opener", "stream_of"]

FIRST_READ = 64 * 1024
MAX_PROXY_BYTES = 64 * 1024 * 1024


class StateFileError(InputError):
    """A state file that cannot be read (missing, unreadable, or on storage this opener cannot reach)."""


@fast_init
@dataclass(frozen=True, slots=True)
class StreamRef:
    """Where a stream's bytes are: inline `data`, or `path` (local path, file: or s3:// URI) from `start`."""

    source: str
    data: bytes | memoryview | None = None  # inline: a view into the `_metadata` bytes (ByteStreamStateHandle.view)
    path: str | None = None
    start: int = 0
    size: int = -1  # -1: to the end of the file


# (stream, limit) -> (up to `limit` bytes from the stream's start, whether that is the whole stream)
Opener = Callable[[StreamRef, int], tuple[bytes, bool]]


def _local(path: str) -> str:
    if path.startswith("file:"):
        parsed = urlparse(path)
        if parsed.netloc not in ("", "localhost"):
            raise StateFileError(f"{path}: file URIs with a host are not supported")
        return unquote(parsed.path)
    return path


def local_opener(ref: StreamRef, limit: int) -> tuple[bytes, bool]:
    """Inline bytes and local files; S3 objects need the storage layer's opener
    (`upgrade_gate.storage.state_files.state_stream_opener`)."""
    if ref.data is not None:
        return bytes(ref.data[:limit]), len(ref.data) <= limit
    assert ref.path is not None
    if "://" in ref.path and not ref.path.startswith("file:"):
        raise StateFileError(f"{ref.path}: state file on remote storage; this reader was given no opener for it")
    want = limit if ref.size < 0 else min(limit, ref.size)
    try:
        data = _read_prefix(_local(ref.path), ref.start, want)
    except OSError as exc:
        raise StateFileError(f"{ref.path}: cannot read state file: {exc.strerror or exc}") from None
    return data, len(data) < limit or 0 <= ref.size <= limit


def _read_prefix(path: str, start: int, want: int) -> bytes:
    """Up to `want` bytes of `path` from `start`. The request is cut to the file's size first: a buffered
    `read(65536)` of a 2 KB state file allocates and faults in the whole 64 KiB, and was most of the
    state-meta reader's time on a fleet of small savepoints (docs/performance.md, "Reading side")."""
    fd = os.open(path, os.O_RDONLY)
    try:
        st = os.fstat(fd)
        if stat.S_ISREG(st.st_mode):
            want = max(0, min(want, st.st_size - start))
        chunks = []
        while want > 0:
            chunk = os.pread(fd, want, start)
            if not chunk:
                break
            chunks.append(chunk)
            start += len(chunk)
            want -= len(chunk)
    finally:
        os.close(fd)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def stream_of(handle: object, metadata_source: str) -> StreamRef | None:
    """The stream behind a stream state handle (None: no bytes, e.g. an empty file-merging segment)."""
    if isinstance(handle, KeyGroupsStateHandle):  # a key-groups handle used as a stream: its delegate
        return stream_of(handle.delegate, metadata_source)
    if isinstance(handle, ByteStreamStateHandle):
        return StreamRef(f"{metadata_source} (inline state {handle.handle_name})", data=handle.view)
    if isinstance(handle, (FileStateHandle, RelativeFileStateHandle)):
        return StreamRef(handle.path, path=handle.path)
    if isinstance(handle, SegmentFileStateHandle):
        return StreamRef(f"{handle.path} (segment at {handle.start_pos})", path=handle.path,
                         start=handle.start_pos, size=handle.size)
    if handle is None or isinstance(handle, EmptySegmentFileStateHandle):
        return None
    return None

"""Entry point of the reader: Flink's `Checkpoints.loadCheckpointMetadata`, in Python.

`parse_metadata(data, source, base_dir)` checks the magic number and version, dispatches to the
version's serializer and insists that the whole input was consumed (a trailer Flink would ignore
is reported: a `_metadata` with garbage after it is not one Flink wrote).
"""

from __future__ import annotations

import gc
import struct

from upgrade_gate.flink.metadata.errors import MetadataFormatError
from upgrade_gate.flink.metadata.handles import DeserializationContext
from upgrade_gate.flink.metadata.model import CheckpointMetadata
from upgrade_gate.flink.metadata.reader import BoundedReader
from upgrade_gate.flink.metadata.serializers import get_serializer

__all__ = ["HEADER_MAGIC_NUMBER", "METADATA_FILE_NAME", "parse_metadata"]

HEADER_MAGIC_NUMBER = 0x4960672D
METADATA_FILE_NAME = "_metadata"


def parse_metadata(data: bytes, source: str = METADATA_FILE_NAME, base_dir: str | None = None, *,
                   fast_paths: bool = True) -> CheckpointMetadata:
    """Read a complete `_metadata` file. `base_dir` resolves relative file handles (the snapshot dir).

    `fast_paths=False` reads with the per-version definitions only; the result is the same (the
    fast readers are an optimisation, tests/flink/test_metadata_fastpath.py compares both).
    """
    data = bytes(data)
    if len(data) < 8:
        raise MetadataFormatError(source, len(data), f"truncated: expected magic number and version (8 bytes), "
                                                     f"file has {len(data)}")
    magic, version = struct.unpack_from(">ii", data, 0)
    if magic != HEADER_MAGIC_NUMBER:
        raise MetadataFormatError(
            source, 0, f"Unexpected magic number. This can have multiple reasons: (1) You are trying to load a "
                       f"Flink 1.0 savepoint, which is not supported. (2) The file is not a Flink checkpoint or "
                       f"savepoint metadata file. Expected 0x4960672d, found {magic & 0xFFFFFFFF:#010x}")
    serializer = get_serializer(version, source, 4)
    r = BoundedReader(data, source, 8)
    # The model is a tree (no reference cycles), so the cyclic collector has nothing to find while it is
    # built; left on, it ran a generation-0 pass every 700 new objects and re-scanned the survivors, ~40 %
    # of a 1,000-subtask file's CPU (docs/performance.md, issue 34). Paused, the objects are counted once
    # when it resumes. Another thread's pause or resume may overlap ours: collection is only delayed.
    collecting = gc.isenabled()
    gc.disable()
    try:
        metadata = serializer.deserialize(r, DeserializationContext(base_dir, fast_paths))
    finally:
        if collecting:
            gc.enable()
    if r.remaining():
        r.fail(f"trailing bytes: {r.remaining()} bytes after the end of the version-{version} metadata")
    return metadata

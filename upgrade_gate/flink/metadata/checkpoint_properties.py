"""The v4+ `_metadata` trailer: Flink's Java-serialized `CheckpointProperties`, read into the model.

Since format v4 `MetadataV4Serializer` appends `ObjectOutputStream.writeObject(CheckpointProperties)` to the
file. java_serialization.py parses the stream as data; this module picks out what the gate reports (the
`SnapshotType`, its format and the boolean flags). The parse is lossy, so the trailer's bytes are kept too
(`CheckpointProperties.raw`): the writer copies them back.
"""

from __future__ import annotations

from upgrade_gate.flink.metadata.java_serialization import JavaEnum, JavaObject, UnsupportedJavaStream, read_stream
from upgrade_gate.flink.metadata.model import CheckpointProperties
from upgrade_gate.flink.metadata.reader import BoundedReader

__all__ = ["PROPERTIES_CLASS", "read_checkpoint_properties"]

PROPERTIES_CLASS = "org.apache.flink.runtime.checkpoint.CheckpointProperties"


def _enum_name(v: object) -> str | None:
    return v.constant if isinstance(v, JavaEnum) else None


# The trailer is the same few hundred bytes in every savepoint of a kind (no ids, no paths), and
# parsing the Java stream costs about a tenth of a whole file. So parsed trailers are remembered
# by their bytes: the parse depends on nothing else, and only successes are kept (a bad trailer is
# parsed, and reported, every time). Keys are the bytes from the trailer to the end of the input,
# so a hit also consumes exactly what the parse did; long tails are not kept, and the number of
# entries is bounded.
_PROPERTIES_CACHE: dict[bytes, tuple[CheckpointProperties, int]] = {}
_PROPERTIES_CACHE_ENTRIES = 64
_PROPERTIES_CACHE_MAX_BYTES = 4096


def read_checkpoint_properties(r: BoundedReader) -> CheckpointProperties:
    """The v4+ trailer: Flink's `CheckpointProperties` and its `SnapshotType`."""
    at = r.pos
    if r.end - at > _PROPERTIES_CACHE_MAX_BYTES:
        return _read_checkpoint_properties(r)
    key = bytes(r.data[at:r.end])
    hit = _PROPERTIES_CACHE.get(key)
    if hit is None:
        props = _read_checkpoint_properties(r)
        if len(_PROPERTIES_CACHE) >= _PROPERTIES_CACHE_ENTRIES:
            _PROPERTIES_CACHE.clear()
        _PROPERTIES_CACHE[key] = (props, r.pos - at)
    else:
        props, consumed = hit
        r.pos = at + consumed
    # a fresh object per file: `flags` is a dict, and callers must not share it
    return CheckpointProperties(props.is_savepoint, props.format_type, props.name, props.post_checkpoint_action,
                                props.sharing_files_strategy, dict(props.flags), props.raw)


def _read_checkpoint_properties(r: BoundedReader) -> CheckpointProperties:
    at = r.pos
    try:
        obj = read_stream(r, "checkpoint properties")
    except UnsupportedJavaStream as exc:  # Flink writes none of it here: the trailer is not Flink's
        r.fail(exc.message, exc.offset)
    if not isinstance(obj, JavaObject) or obj.class_name != PROPERTIES_CLASS:
        got = obj.class_name if isinstance(obj, JavaObject) else type(obj).__name__
        r.fail(f"expected a serialized {PROPERTIES_CLASS}, found {got}", at)
    snapshot = obj.fields.get("checkpointType")
    if not isinstance(snapshot, JavaObject):
        r.fail("checkpoint properties without a snapshot type", at)
    is_savepoint = snapshot.class_name.endswith(".SavepointType")
    name = snapshot.fields.get("name")
    flags = {k: v for k, v in obj.fields.items() if isinstance(v, bool)}
    return CheckpointProperties(
        is_savepoint=is_savepoint,
        format_type=_enum_name(snapshot.fields.get("formatType")),
        name=name if isinstance(name, str) else None,
        post_checkpoint_action=_enum_name(snapshot.fields.get("postCheckpointAction")),
        sharing_files_strategy=_enum_name(snapshot.fields.get("sharingFilesStrategy")),
        flags=flags,
        raw=bytes(r.data[at:r.pos]),  # what the writer copies back (the fields above lose some of it)
    )

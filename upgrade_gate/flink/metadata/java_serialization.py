"""A small, bounded reader of Java's object serialization stream, for the v4+ properties trailer.

Since format v4 Flink appends `ObjectOutputStream.writeObject(CheckpointProperties)` to the file.
We parse the stream grammar (class descriptors, objects, enums, strings, arrays, back-references)
faithfully but only as data: nothing is instantiated, every length is checked against the bytes
left, and nesting is limited. Custom `writeObject` data is skipped block by block. The parse is
lossy, so the trailer's bytes are kept too (`CheckpointProperties.raw`): the writer copies them back.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from upgrade_gate.flink.metadata.model import CheckpointProperties
from upgrade_gate.flink.metadata.reader import BoundedReader, decode_modified_utf8

__all__ = ["PROPERTIES_CLASS", "STREAM_MAGIC", "STREAM_VERSION", "JavaClassDesc", "JavaEnum", "JavaObject",
           "JavaStreamReader", "read_checkpoint_properties"]

STREAM_MAGIC = 0xACED
STREAM_VERSION = 5
TC_NULL, TC_REFERENCE, TC_CLASSDESC, TC_OBJECT, TC_STRING, TC_ARRAY, TC_CLASS = range(0x70, 0x77)
TC_BLOCKDATA, TC_ENDBLOCKDATA, TC_RESET, TC_BLOCKDATALONG, TC_EXCEPTION, TC_LONGSTRING = range(0x77, 0x7D)
TC_PROXYCLASSDESC, TC_ENUM = 0x7D, 0x7E
BASE_WIRE_HANDLE = 0x7E0000
SC_WRITE_METHOD, SC_SERIALIZABLE, SC_EXTERNALIZABLE, SC_BLOCK_DATA, SC_ENUM = 0x01, 0x02, 0x04, 0x08, 0x10
_PRIMITIVES = {"B": (">b", 1), "C": (">H", 2), "D": (">d", 8), "F": (">f", 4), "I": (">i", 4),
               "J": (">q", 8), "S": (">h", 2), "Z": (">?", 1)}
_MAX_DEPTH = 32
PROPERTIES_CLASS = "org.apache.flink.runtime.checkpoint.CheckpointProperties"


@dataclass(slots=True)
class JavaClassDesc:
    name: str
    flags: int = 0
    fields: list[tuple[str, str]] = field(default_factory=list)  # (type code, name)
    super_desc: JavaClassDesc | None = None


@dataclass(slots=True)
class JavaObject:
    class_name: str
    fields: dict[str, object] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class JavaEnum:
    class_name: str
    constant: str


class JavaStreamReader:
    """Reads one serialized object from a `BoundedReader` positioned at the stream header."""

    def __init__(self, r: BoundedReader) -> None:
        self.r = r
        self.handles: list[object] = []

    def read_stream(self) -> object:
        r = self.r
        at = r.pos
        magic = r.read_int("Java serialization header (AC ED 00 05)") & 0xFFFFFFFF
        if magic != (STREAM_MAGIC << 16 | STREAM_VERSION):
            r.fail(f"expected Java serialization header AC ED 00 05 (checkpoint properties), found {magic:08X}", at)
        return self.read_content(0)

    def _new_handle(self, obj: object) -> int:
        self.handles.append(obj)
        return len(self.handles) - 1

    def _reference(self) -> object:
        r = self.r
        at = r.pos
        h = r.read_int("back-reference handle") - BASE_WIRE_HANDLE
        if not 0 <= h < len(self.handles):
            r.fail(f"Java serialization back-reference to unknown handle {h + BASE_WIRE_HANDLE:#x}", at)
        return self.handles[h]

    def _utf(self, what: str) -> str:
        return self.r.read_utf(what)

    def _long_utf(self, what: str) -> str:
        r = self.r
        at = r.pos
        n = r.read_long(f"length of {what}")
        if n < 0 or n > r.remaining():
            r.fail(f"length of {what} {n} exceeds the bytes left ({r.remaining()})", at)
        raw = r.read_bytes(n, what)
        return decode_modified_utf8(raw, lambda msg: r.fail(f"{what}: {msg}", at))

    def read_content(self, depth: int) -> object:
        r = self.r
        if depth > _MAX_DEPTH:
            r.fail("Java serialization stream nested too deeply")
        at = r.pos
        tc = r.read_ubyte("Java serialization type code")
        if tc == TC_NULL:
            return None
        if tc == TC_REFERENCE:
            return self._reference()
        if tc == TC_STRING:
            s = self._utf("Java string")
            self._new_handle(s)
            return s
        if tc == TC_LONGSTRING:
            s = self._long_utf("Java long string")
            self._new_handle(s)
            return s
        if tc == TC_CLASSDESC:
            r.pos = at
            return self._class_desc(depth)
        if tc == TC_CLASS:
            desc = self._class_desc(depth + 1)
            self._new_handle(desc)
            return desc
        if tc == TC_ENUM:
            desc = self._class_desc(depth + 1)
            handle = self._new_handle(None)
            name_at = r.pos
            constant = self.read_content(depth + 1)
            if not isinstance(constant, str):
                r.fail("expected the name of an enum constant (a Java string)", name_at)
            value = JavaEnum(desc.name if desc else "?", constant)
            self.handles[handle] = value
            return value
        if tc == TC_OBJECT:
            return self._object(depth)
        if tc == TC_ARRAY:
            return self._array(depth)
        if tc == TC_RESET:
            self.handles.clear()
            return self.read_content(depth)
        r.fail(f"unsupported Java serialization type code {tc:#04x}", at)

    def _class_desc(self, depth: int) -> JavaClassDesc | None:
        r = self.r
        if depth > _MAX_DEPTH:
            r.fail("Java serialization stream nested too deeply")
        at = r.pos
        tc = r.read_ubyte("Java class descriptor")
        if tc == TC_NULL:
            return None
        if tc == TC_REFERENCE:
            ref = self._reference()
            if not isinstance(ref, JavaClassDesc):
                r.fail("back-reference is not a class descriptor", at)
            return ref
        if tc != TC_CLASSDESC:
            r.fail(f"expected a Java class descriptor (0x72, 0x71 or 0x70), found {tc:#04x}", at)
        desc = JavaClassDesc(self._utf("Java class name"))
        r.read_long("serialVersionUID")
        self._new_handle(desc)
        desc.flags = r.read_ubyte("class descriptor flags")
        count_at = r.pos
        n = struct.unpack(">h", r.read_bytes(2, "number of serializable fields"))[0]
        if n < 0 or n * 3 > r.remaining():
            r.fail(f"invalid number of serializable fields {n}", count_at)
        for _ in range(n):
            code_at = r.pos
            code = chr(r.read_ubyte("field type code"))
            name = self._utf("field name")
            if code in ("L", "["):
                type_name = self.read_content(depth + 1)
                if not isinstance(type_name, str):
                    r.fail("expected a field type name (a Java string)", code_at)
            elif code not in _PRIMITIVES:
                r.fail(f"unknown Java field type code {code!r}", code_at)
            desc.fields.append((code, name))
        self._skip_annotation(depth)
        desc.super_desc = self._class_desc(depth + 1)
        return desc

    def _skip_annotation(self, depth: int) -> None:
        """Block data and objects up to TC_ENDBLOCKDATA (class annotations, writeObject extras)."""
        r = self.r
        while True:
            at = r.pos
            tc = r.read_ubyte("Java annotation or end-of-block marker")
            if tc == TC_ENDBLOCKDATA:
                return
            if tc == TC_BLOCKDATA:
                n = r.read_ubyte("block data length")
                r.read_bytes(n, "block data")
            elif tc == TC_BLOCKDATALONG:
                n = r.read_count("block data bytes", 1)
                r.read_bytes(n, "block data")
            else:
                r.pos = at
                self.read_content(depth + 1)

    def _object(self, depth: int) -> JavaObject:
        r = self.r
        desc = self._class_desc(depth + 1)
        if desc is None:
            r.fail("a Java object needs a class descriptor")
        obj = JavaObject(desc.name)
        self._new_handle(obj)
        chain = []
        d: JavaClassDesc | None = desc
        while d is not None:
            chain.append(d)
            d = d.super_desc
            if len(chain) > _MAX_DEPTH:
                r.fail("Java class hierarchy too deep")
        for d in reversed(chain):
            if d.flags & SC_EXTERNALIZABLE:
                if not d.flags & SC_BLOCK_DATA:
                    r.fail(f"cannot read externalizable class {d.name} without block data")
                self._skip_annotation(depth)
                continue
            for code, name in d.fields:
                if code in ("L", "["):
                    obj.fields[name] = self.read_content(depth + 1)
                else:
                    fmt, size = _PRIMITIVES[code]
                    obj.fields[name] = struct.unpack(fmt, r.read_bytes(size, f"field {d.name}.{name}"))[0]
            if d.flags & SC_WRITE_METHOD:
                self._skip_annotation(depth)
        return obj

    def _array(self, depth: int) -> list[object]:
        r = self.r
        desc = self._class_desc(depth + 1)
        if desc is None or not desc.name.startswith("["):
            r.fail("expected an array class descriptor")
        values: list[object] = []
        self._new_handle(values)
        component = desc.name[1:2]
        size = _PRIMITIVES.get(component, (None, 1))[1]
        n = r.read_count("array elements", size)
        if component in _PRIMITIVES:
            fmt = _PRIMITIVES[component][0][1]
            values.extend(struct.unpack(f">{n}{fmt}", r.read_bytes(n * size, "array elements")))
        else:
            values.extend(self.read_content(depth + 1) for _ in range(n))
        return values


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
    obj = JavaStreamReader(r).read_stream()
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

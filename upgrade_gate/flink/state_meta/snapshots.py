"""Reader of `TypeSerializerSnapshot`s as Flink writes them into state meta information.

A snapshot is written by `TypeSerializerSnapshot.writeVersionedSnapshot`: the snapshot's class name
(`writeUTF`), its current version (`writeInt`), then its own body (`writeSnapshot`). At the top of a
state meta info, `TypeSerializerSnapshotSerializationUtil.writeSerializerSnapshot` puts its proxy's
format version (2) in front. The body is not length-framed, so every snapshot class whose body we
cannot parse stops the reading: `UnknownSnapshotFormat` names it, and the caller keeps what came before.

Bodies, by class (facts from Flink 1.20 and 2.x):
- `SimpleTypeSerializerSnapshot` subclasses (basic types, primitive arrays, VoidNamespace, TimeWindow...):
  empty at version 3 (version 2 wrote the serializer class name).
- `GenericTypeSerializerSnapshot` subclasses (`ValueSerializer`, `CopyableValueSerializer`): the type class.
- `EnumSerializer.EnumSerializerSnapshot` v3: enum class, int count, the constants' names.
- `CompositeTypeSerializerSnapshot` (v3): int magic 911108, int outer version, the subclass's outer
  snapshot (tuple/array: a class name; Row: a boolean; Nullable: an int padding; List/Map/Set/TTL/
  timers: nothing), then `NestedSerializersSnapshotDelegate`: int magic 1333245, int version 1, int
  count, each nested snapshot versioned.
- `PojoSerializerSnapshot` v2: POJO class name, then three `LinkedOptionalMapSerializer` maps (fields,
  registered subclasses, non-registered subclasses): long header 0x4F2C69A3D70, int size, per entry a
  key name, an optional framed key (int length + bytes) and an optional framed value (a versioned
  snapshot).
- `KryoSerializerSnapshot` v2: the type class, then three optional maps: registrations (value frame:
  registered class, int `SerializerDefinitionType` ordinal, the serializer class for CLASS), default
  serializer instances (Java-serialized, skipped), default serializer classes (value frame: class name).
- flink-table-runtime's `DecimalDataSerializer.DecimalSerializerSnapshot` v3 (int precision, int scale),
  `TimestampDataSerializer.TimestampDataSerializerSnapshot` v1 (int precision),
  `BinaryRowDataSerializer.BinaryRowDataSerializerSnapshot` v3 (int number of fields).
- `RowDataSerializer.RowDataSerializerSnapshot` v3 (flink-table-runtime): int count, each field's
  `LogicalType` Java-serialized on its own (`InstantiationUtil.serializeObject`, read by
  metadata/java_serialization.py into `logical_types`), then `NestedSerializersSnapshotDelegate`.
"""

from __future__ import annotations

import re

from upgrade_gate.flink.metadata.java_serialization import UnsupportedJavaStream, read_stream
from upgrade_gate.flink.metadata.reader import BoundedReader
from upgrade_gate.flink.state_meta.logical_types import type_string
from upgrade_gate.flink.state_meta.model import KRYO_SNAPSHOT, POJO_SNAPSHOT, SerializerSnapshot

__all__ = ["COMPOSITE_OUTER", "UnknownSnapshotFormat", "read_serializer_snapshot", "read_versioned_snapshot"]

SNAPSHOT_PROXY_VERSION = 2  # TypeSerializerSnapshotSerializationUtil.TypeSerializerSnapshotSerializationProxy
COMPOSITE_MAGIC = 911108
NESTED_MAGIC = 1333245
NESTED_MARKER = NESTED_MAGIC.to_bytes(4, "big") + (1).to_bytes(4, "big")
OPTIONAL_MAP_HEADER = 0x4F2C69A3D70  # LinkedOptionalMapSerializer.HEADER
MAX_DEPTH = 32
_NOT_IN_CLASS_NAME = re.compile("[ /;\n\x00]")  # what no Java class name holds: the bytes are not a snapshot
_DEFINITION_TYPES = ("UNSPECIFIED", "CLASS", "INSTANCE")  # KryoRegistration.SerializerDefinitionType

_B = "org.apache.flink.api.common.typeutils.base."
_A = _B + "array."
SIMPLE = frozenset({
    *(f"{_B}{t}Serializer${t}SerializerSnapshot" for t in (
        "BigDec", "BigInt", "Bitmap", "Boolean", "BooleanValue", "Byte", "ByteValue", "Char", "CharValue", "Date",
        "Double", "DoubleValue", "Float", "FloatValue", "Instant", "Int", "IntValue", "LocalDate", "LocalDateTime",
        "LocalTime", "Long", "LongValue", "NullValue", "Short", "ShortValue", "SqlDate", "SqlTime", "SqlTimestamp",
        "String", "StringValue", "Variant", "Void")),
    *(f"{_A}{t}PrimitiveArraySerializer${t}PrimitiveArraySerializerSnapshot" for t in (
        "Boolean", "Byte", "Char", "Double", "Float", "Int", "Long", "Short")),
    f"{_A}StringArraySerializer$StringArraySerializerSnapshot",
    "org.apache.flink.api.java.typeutils.runtime.Tuple0SerializerSnapshot",
    "org.apache.flink.queryablestate.client.VoidNamespaceSerializer$VoidNamespaceSerializerSnapshot",
    "org.apache.flink.runtime.state.JavaSerializer$JavaSerializerSnapshot",
    "org.apache.flink.runtime.state.VoidNamespaceSerializer$VoidNamespaceSerializerSnapshot",
    "org.apache.flink.streaming.api.windowing.windows.GlobalWindow$Serializer$GlobalWindowSerializerSnapshot",
    "org.apache.flink.streaming.api.windowing.windows.TimeWindow$Serializer$TimeWindowSerializerSnapshot",
    # flink-table-runtime's simple snapshots (the legacy group windows' namespaces: TimeWindow, CountWindow)
    *(f"org.apache.flink.table.runtime.typeutils.{t}Serializer${t}SerializerSnapshot" for t in (
        "StringData", "RawValueData")),
    *(f"org.apache.flink.table.runtime.operators.window.{t}$Serializer${t}SerializerSnapshot" for t in (
        "TimeWindow", "CountWindow")),
})
GENERIC_TYPE = frozenset({
    "org.apache.flink.api.java.typeutils.runtime.ValueSerializer$ValueSerializerSnapshot",
    "org.apache.flink.api.java.typeutils.runtime.CopyableValueSerializer$CopyableValueSerializerSnapshot",
})
ENUM = "org.apache.flink.api.common.typeutils.base.EnumSerializer$EnumSerializerSnapshot"
# CompositeTypeSerializerSnapshot subclasses whose outer snapshot we parse: "" nothing, "utf" a class
# name, "bool", "int". Other composites are recognised by their magic number and their outer snapshot
# is skipped up to the nested snapshots' own magic number.
COMPOSITE_OUTER: dict[str, str] = {
    _B + "ListSerializerSnapshot": "",
    _B + "MapSerializerSnapshot": "",
    _B + "SetSerializerSnapshot": "",
    _B + "GenericArraySerializerSnapshot": "utf",
    "org.apache.flink.api.common.typeutils.SingleThreadAccessCheckingTypeSerializer"
    "$SingleThreadAccessCheckingTypeSerializerSnapshot": "",
    "org.apache.flink.api.java.typeutils.runtime.TupleSerializerSnapshot": "utf",
    "org.apache.flink.api.java.typeutils.runtime.RowSerializer$RowSerializerSnapshot": "bool",
    "org.apache.flink.api.java.typeutils.runtime.NullableSerializer$NullableSerializerSnapshot": "int",
    "org.apache.flink.api.java.typeutils.runtime.JavaEitherSerializerSnapshot": "",
    "org.apache.flink.runtime.state.ArrayListSerializerSnapshot": "",
    "org.apache.flink.runtime.state.ttl.TtlStateFactory$TtlSerializerSnapshot": "",
    "org.apache.flink.runtime.state.v2.ttl.TtlStateFactory$TtlSerializerSnapshot": "",
    "org.apache.flink.streaming.api.operators.TimerSerializerSnapshot": "",
    "org.apache.flink.streaming.runtime.streamrecord.StreamElementSerializer$StreamElementSerializerSnapshot": "",
}
# flink-table-runtime snapshots whose body is ints: class -> (version, how many). DecimalSerializerSnapshot:
# precision, scale; TimestampDataSerializerSnapshot (TIMESTAMP and TIMESTAMP_LTZ): precision;
# BinaryRowDataSerializerSnapshot: the number of fields.
_T = "org.apache.flink.table.runtime.typeutils."
INT_PARAMETERS: dict[str, tuple[int, int]] = {
    _T + "DecimalDataSerializer$DecimalSerializerSnapshot": (3, 2),
    _T + "TimestampDataSerializer$TimestampDataSerializerSnapshot": (1, 1),
    _T + "BinaryRowDataSerializer$BinaryRowDataSerializerSnapshot": (3, 1),
}
# Non-composite snapshots that end with a NestedSerializersSnapshotDelegate after a prefix we skip
# (RowDataSerializerSnapshot of a version other than 3, or with types this reader does not model).
ROW_DATA_SNAPSHOT = "org.apache.flink.table.runtime.typeutils.RowDataSerializer$RowDataSerializerSnapshot"
ENDS_WITH_NESTED = frozenset({ROW_DATA_SNAPSHOT})


class UnknownSnapshotFormat(Exception):
    """A snapshot class whose body we cannot parse (not a malformed file: the bytes after it are unread)."""

    def __init__(self, class_name: str, version: int, offset: int, message: str | None = None) -> None:
        super().__init__(message or f"serializer snapshot {class_name} (version {version}) at offset {offset} has a "
                                    f"format this reader does not know")
        self.class_name = class_name
        self.version = version
        self.offset = offset


def read_serializer_snapshot(r: BoundedReader) -> SerializerSnapshot:
    """`TypeSerializerSnapshotSerializationUtil.readSerializerSnapshot`: proxy version, then the snapshot."""
    at = r.pos
    version = r.read_int("serializer snapshot proxy version")
    if version == 1:  # a legacy, Java-serialized TypeSerializerConfigSnapshot: valid bytes Flink 1.17+ refuses
        raise UnknownSnapshotFormat("TypeSerializerConfigSnapshot", version, at, (
            f"a TypeSerializerConfigSnapshot at offset {at} (written by Flink 1.16 or older): Flink 1.17+ cannot "
            f"restore it; take a savepoint on Flink 1.16 with TypeSerializerSnapshots first"))
    if version != SNAPSHOT_PROXY_VERSION:
        r.fail(f"expected serializer snapshot proxy version {SNAPSHOT_PROXY_VERSION}, found {version}", at)
    return read_versioned_snapshot(r, 0)


def read_versioned_snapshot(r: BoundedReader, depth: int) -> SerializerSnapshot:
    """`TypeSerializerSnapshot.readVersionedSnapshot`: class name, version, body."""
    at = r.pos
    if depth > MAX_DEPTH:
        r.fail(f"serializer snapshots nested deeper than {MAX_DEPTH}", at)
    name = r.read_utf("serializer snapshot class name")
    if not name or _NOT_IN_CLASS_NAME.search(name):
        r.fail(f"expected a serializer snapshot class name, found {name[:80]!r}", at)
    version = r.read_int("serializer snapshot version")
    body = r.pos
    if name in SIMPLE:
        if version == 2:
            r.read_utf("serializer class name (legacy simple snapshot)")
        elif version != 3:
            raise UnknownSnapshotFormat(name, version, at)
        return SerializerSnapshot(name, version)
    if name in GENERIC_TYPE:
        return SerializerSnapshot(name, version, type_name=r.read_utf("type class name"))
    if name == ENUM:
        return _enum(r, name, version, at)
    if name == POJO_SNAPSHOT:
        return _pojo(r, name, version, at, depth)
    if name == KRYO_SNAPSHOT:
        return _kryo(r, name, version, at)
    if INT_PARAMETERS.get(name, (0, 0))[0] == version:
        return SerializerSnapshot(name, version, parameters=tuple(
            r.read_int(f"{name} parameter") for _ in range(INT_PARAMETERS[name][1])))
    if name == ROW_DATA_SNAPSHOT and version == 3:
        types = _row_types(r)
        return SerializerSnapshot(name, version, nested=_nested(r, depth), composite=True, logical_types=types)
    if name in ENDS_WITH_NESTED:
        _skip_to_nested(r, name, version, at)
        return SerializerSnapshot(name, version, nested=_nested(r, depth), composite=True)
    if name in COMPOSITE_OUTER or (version >= 3 and r.remaining() >= 4
                                   and int.from_bytes(r.data[body:body + 4], "big") == COMPOSITE_MAGIC):
        if version < 3:  # CompositeTypeSerializerSnapshot's legacy (pre-magic) layout
            raise UnknownSnapshotFormat(name, version, at)
        return _composite(r, name, version, at, depth)
    raise UnknownSnapshotFormat(name, version, at)


def _row_types(r: BoundedReader) -> tuple[str, ...] | None:
    """`RowDataSerializerSnapshot` v3's types: int count, one Java-serialized `LogicalType` each (None if a
    type is not modelled; a stream this reader does not model is skipped up to the nested snapshots)."""
    start = r.pos
    n = r.read_count("row field logical types", 8)
    types: list[str | None] = []
    try:
        for _ in range(n):
            types.append(type_string(read_stream(r, "row field LogicalType")))
    except UnsupportedJavaStream:
        r.pos = start
        _skip_to_nested(r, ROW_DATA_SNAPSHOT, 3, start)
        return None
    if r.data[r.pos:r.pos + len(NESTED_MARKER)] != NESTED_MARKER:
        r.fail("expected the row's nested serializer snapshots after its logical types")
    return None if any(t is None for t in types) else tuple(t for t in types if t is not None)


def _enum(r: BoundedReader, name: str, version: int, at: int) -> SerializerSnapshot:
    if version != 3:
        raise UnknownSnapshotFormat(name, version, at)
    enum_class = r.read_utf("enum class name")
    n = r.read_count("enum constants", 2)
    return SerializerSnapshot(name, version, type_name=enum_class,
                              enum_constants=tuple(r.read_utf("enum constant") for _ in range(n)))


def _composite(r: BoundedReader, name: str, version: int, at: int, depth: int) -> SerializerSnapshot:
    magic_at = r.pos
    magic = r.read_int("composite snapshot magic number")
    if magic != COMPOSITE_MAGIC:
        r.fail(f"Corrupt data, magic number mismatch. Expected {COMPOSITE_MAGIC:8x}, found {magic & 0xFFFFFFFF:8x}",
               magic_at)
    r.read_int("composite outer snapshot version")
    outer = COMPOSITE_OUTER.get(name)
    type_name = None
    if outer == "utf":
        type_name = r.read_utf("composite outer snapshot class name")
    elif outer == "bool":
        r.read_bool("composite outer snapshot flag")
    elif outer == "int":
        r.read_int("composite outer snapshot int")
    elif outer is None:
        _skip_to_nested(r, name, version, at)
    return SerializerSnapshot(name, version, nested=_nested(r, depth), type_name=type_name, composite=True)


def _skip_to_nested(r: BoundedReader, name: str, version: int, at: int) -> None:
    """Skip an outer snapshot we do not parse, up to `NestedSerializersSnapshotDelegate`'s magic + version."""
    found = r.data.find(NESTED_MARKER, r.pos, r.end)
    if found < 0:
        raise UnknownSnapshotFormat(name, version, at)
    r.pos = found


def _nested(r: BoundedReader, depth: int) -> tuple[SerializerSnapshot, ...]:
    at = r.pos
    magic = r.read_int("nested serializer snapshots magic number")
    if magic != NESTED_MAGIC:
        r.fail(f"expected the nested serializer snapshots' magic number {NESTED_MAGIC}, found {magic}", at)
    at = r.pos
    version = r.read_int("nested serializer snapshots version")
    if version != 1:
        r.fail(f"expected nested serializer snapshots version 1, found {version}", at)
    n = r.read_count("nested serializer snapshots", 6)
    return tuple(read_versioned_snapshot(r, depth + 1) for _ in range(n))


def _optional_map(r: BoundedReader, what: str) -> list[tuple[str, BoundedReader | None, BoundedReader | None]]:
    """`LinkedOptionalMapSerializer.readOptionalMap`: (key name, key frame, value frame) per entry."""
    at = r.pos
    header = r.read_long(f"{what} header")
    if header != OPTIONAL_MAP_HEADER:
        r.fail(f"expected the {what} header {OPTIONAL_MAP_HEADER:#x}, found {header & 0xFFFFFFFFFFFFFFFF:#x}", at)
    n = r.read_count(what, 4)
    out = []
    for _ in range(n):
        key_name = r.read_utf(f"{what} key name")
        frames: list[BoundedReader | None] = []
        for part in ("key", "value"):
            if r.read_bool(f"{what} {part} present"):
                size = r.read_count(f"{what} {part} frame bytes", 1)
                start = r.pos
                r.read_bytes(size, f"{what} {part} frame")
                frames.append(BoundedReader(r.data, r.source, start, start + size))
            else:
                frames.append(None)
        out.append((key_name, frames[0], frames[1]))
    return out


def _pojo(r: BoundedReader, name: str, version: int, at: int, depth: int) -> SerializerSnapshot:
    if version != 2:
        raise UnknownSnapshotFormat(name, version, at)
    pojo_class = r.read_utf("POJO class name")
    fields = tuple((k, read_versioned_snapshot(v, depth + 1) if v else None)
                   for k, _, v in _optional_map(r, "POJO field snapshots"))
    subclasses = []
    for what in ("registered subclass snapshots", "non-registered subclass snapshots"):
        subclasses += [(k, read_versioned_snapshot(v, depth + 1) if v else None) for k, _, v in _optional_map(r, what)]
    return SerializerSnapshot(name, version, fields=fields, type_name=pojo_class, subclasses=tuple(subclasses))


def _kryo(r: BoundedReader, name: str, version: int, at: int) -> SerializerSnapshot:
    if version != 2:
        raise UnknownSnapshotFormat(name, version, at)
    type_class = r.read_utf("Kryo type class name")
    registrations = []
    for key, _, value in _optional_map(r, "Kryo registrations"):
        definition: str | None = None
        serializer = None
        if value is not None:
            value.read_utf("registered class name")
            kind_at = value.pos
            kind = value.read_int("Kryo serializer definition type")
            if not 0 <= kind < len(_DEFINITION_TYPES):
                value.fail(f"expected a Kryo serializer definition type (0, 1 or 2), found {kind}", kind_at)
            definition = _DEFINITION_TYPES[kind]
            if definition == "CLASS":
                serializer = value.read_utf("Kryo serializer class name")
        registrations.append((key, definition, serializer))
    defaults = [k for k, _, _ in _optional_map(r, "default Kryo serializers")]
    defaults += [k for k, _, _ in _optional_map(r, "default Kryo serializer classes")]
    return SerializerSnapshot(name, version, type_name=type_class, registrations=tuple(registrations),
                              default_serializers=tuple(defaults))

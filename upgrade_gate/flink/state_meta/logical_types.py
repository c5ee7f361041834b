"""Flink `LogicalType`s read from their Java serialization, as `LogicalType#asSerializableString()` spells them.

`RowDataSerializerSnapshot` keeps its row's field types as Java-serialized `LogicalType`s
(metadata/java_serialization.py reads them), and `resolveSchemaCompatibility` refuses the new serializer unless
the type arrays are equal (`Arrays.equals`, so `LogicalType#equals`: class, nullability and each type's
parameters: VARCHAR length, DECIMAL precision and scale, TIMESTAMP precision, ROW field names and
descriptions; not TimestampType's kind, the rowtime/proctime marker). `asSerializableString()` carries
exactly these (e.g. `VARCHAR(3) NOT NULL`, `DECIMAL(10, 2)`, `ROW<\\`a\\` INT>`), so two types are equal when
their strings are, and the exporter (flink_bridge/java/common/streamgraph/SqlStateDumper.java) writes the new
job's types with that same method.

Types without a plain serializable string here (RAW, structured, distinct, legacy, interval, symbol types,
and the zero-length string literals Flink itself cannot serialize) give None: the caller then knows the
types are there but not what they are.
"""

from __future__ import annotations

from typing import Any

from upgrade_gate.flink.metadata.java_serialization import JavaObject

__all__ = ["display", "type_string"]

_P = "org.apache.flink.table.types.logical."
_PLAIN = {f"{_P}{cls}Type": sql for cls, sql in (
    ("Boolean", "BOOLEAN"), ("TinyInt", "TINYINT"), ("SmallInt", "SMALLINT"), ("Int", "INT"), ("BigInt", "BIGINT"),
    ("Float", "FLOAT"), ("Double", "DOUBLE"), ("Date", "DATE"))}
# class -> (format, field names of its parameters); lengths must be >= 1 (0 is the empty literal)
_PARAMETERS = {
    f"{_P}CharType": ("CHAR({})", ("length",)),
    f"{_P}VarCharType": ("VARCHAR({})", ("length",)),
    f"{_P}BinaryType": ("BINARY({})", ("length",)),
    f"{_P}VarBinaryType": ("VARBINARY({})", ("length",)),
    f"{_P}DecimalType": ("DECIMAL({}, {})", ("precision", "scale")),
    f"{_P}TimeType": ("TIME({})", ("precision",)),
    f"{_P}TimestampType": ("TIMESTAMP({})", ("precision",)),
    f"{_P}ZonedTimestampType": ("TIMESTAMP({}) WITH TIME ZONE", ("precision",)),
    f"{_P}LocalZonedTimestampType": ("TIMESTAMP({}) WITH LOCAL TIME ZONE", ("precision",)),
}
_COLLECTIONS = {f"{_P}ArrayType": "ARRAY", f"{_P}MultisetType": "MULTISET"}
_LENGTHS = {"CharType", "VarCharType", "BinaryType", "VarBinaryType"}
MAX_LENGTH = 2147483647


def type_string(t: Any, depth: int = 0) -> str | None:
    """`t.asSerializableString()` for a deserialized LogicalType; None for types not modelled here."""
    if not isinstance(t, JavaObject) or depth > 32:
        return None
    cls = t.class_name
    if cls == f"{_P}NullType":
        return "NULL"
    body = _body(t, cls, depth)
    if body is None:
        return None
    nullable = t.fields.get("isNullable")
    if not isinstance(nullable, bool):
        return None
    return body if nullable else f"{body} NOT NULL"


def _body(t: JavaObject, cls: str, depth: int) -> str | None:
    if cls in _PLAIN:
        return _PLAIN[cls]
    if cls in _PARAMETERS:
        fmt, names = _PARAMETERS[cls]
        values = [t.fields.get(n) for n in names]
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            return None
        if cls.rsplit(".", 1)[-1] in _LENGTHS and values[0] < 1:
            return None
        return fmt.format(*values)
    if cls in _COLLECTIONS:
        inner = type_string(t.fields.get("elementType"), depth + 1)
        return None if inner is None else f"{_COLLECTIONS[cls]}<{inner}>"
    if cls == f"{_P}MapType":
        k, v = (type_string(t.fields.get(n), depth + 1) for n in ("keyType", "valueType"))
        return None if k is None or v is None else f"MAP<{k}, {v}>"
    if cls == f"{_P}RowType":
        return _row(t, depth)
    return None


def _row(t: JavaObject, depth: int) -> str | None:
    fields = t.fields.get("fields")
    items = fields.elements() if isinstance(fields, JavaObject) else None
    if items is None:
        return None
    out = []
    for f in items:
        if not isinstance(f, JavaObject) or not isinstance(f.fields.get("name"), str):
            return None
        inner = type_string(f.fields.get("type"), depth + 1)
        if inner is None:
            return None
        text = f"`{f.fields['name'].replace('`', '``')}` {inner}"
        desc = f.fields.get("description")
        if isinstance(desc, str):
            text += " '" + desc.replace("'", "''") + "'"
        out.append(text)
    return f"ROW<{', '.join(out)}>"


def display(types: tuple[str, ...] | list[str]) -> str:
    """Field types for messages, with Flink's short names for the unbounded strings: `ROW<VARCHAR(3), STRING>`."""
    short = [s.replace(f"VARCHAR({MAX_LENGTH})", "STRING").replace(f"VARBINARY({MAX_LENGTH})", "BYTES")
             for s in types]
    return f"ROW<{', '.join(short)}>"

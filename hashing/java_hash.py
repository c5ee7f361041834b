"""Java `hashCode()` of the key types Flink jobs key by.

A key's key group is `murmur(key.hashCode()) % maxParallelism`, so predicting where a key's
state lives needs Java's hashCode, not Python's `hash()`. Python values are ambiguous (an
`int` may be a Java Integer or Long, a `float` a Double or Float), so callers may name the
Java type; without one, ints in int32 range are Integers and larger ones Longs.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hashing.errors import InputError

_M32 = 0xFFFFFFFF
ROW_KINDS = {"+I": 0, "-U": 1, "+U": 2, "-D": 3,
             "INSERT": 0, "UPDATE_BEFORE": 1, "UPDATE_AFTER": 2, "DELETE": 3}


def to_int32(x: int) -> int:
    x &= _M32
    return x - (1 << 32) if x >= 0x80000000 else x


def string_hash(s: str) -> int:
    """`String.hashCode` over UTF-16 code units (supplementary characters count twice)."""
    h = 0
    data = s.encode("utf-16-le", errors="surrogatepass")
    for (unit,) in struct.iter_unpack("<H", data):
        h = (31 * h + unit) & _M32
    return to_int32(h)


def long_hash(v: int) -> int:
    v &= 0xFFFFFFFFFFFFFFFF
    return to_int32(v ^ (v >> 32))


def double_bits(v: float) -> int:
    """`Double.doubleToLongBits`: every NaN is the canonical 0x7ff8000000000000."""
    if math.isnan(v):
        return 0x7FF8000000000000
    return struct.unpack("<q", struct.pack("<d", v))[0]


def double_hash(v: float) -> int:
    return long_hash(double_bits(v))


def boolean_hash(v: bool) -> int:
    return 1231 if v else 1237


@dataclass(frozen=True)
class Tuple:
    """A Flink `TupleN` key (hash: 31 * r + h(f) over the fields, null -> 0)."""

    fields: tuple[Any, ...]
    types: tuple[str | None, ...] | None = None


@dataclass(frozen=True)
class Row:
    """A Flink `Row` key (`RowUtils.deepHashCodeRow`), with its RowKind short string."""

    fields: tuple[Any, ...]
    kind: str = "+I"
    types: tuple[str | None, ...] | None = None


def _field_types(types: Sequence[str | None] | None, n: int) -> Sequence[str | None]:
    return types if types is not None else [None] * n


def java_hash_code(key: Any, key_type: str | None = None) -> int:
    """hashCode of `key` as Java would compute it; `key_type` is a Java simple class name."""
    t = (key_type or "").lower()
    if key is None:
        return 0
    if t in ("string", "java.lang.string") or (not t and isinstance(key, str)):
        return string_hash(str(key))
    if t in ("boolean", "bool") or (not t and isinstance(key, bool)):
        return boolean_hash(bool(key))
    if t in ("integer", "int", "short", "byte", "character", "char"):
        return to_int32(ord(key) if isinstance(key, str) else int(key))
    if t == "long":
        return long_hash(int(key))
    if t in ("double", "float") or (not t and isinstance(key, float)):
        if t == "float":
            return struct.unpack("<i", struct.pack("<f", float(key)))[0] if not math.isnan(key) else 0x7FC00000
        return double_hash(float(key))
    if not t and isinstance(key, int):
        return to_int32(key) if -(1 << 31) <= key < (1 << 31) else long_hash(key)
    if isinstance(key, Tuple) or t.startswith("tuple"):
        fields = key.fields if isinstance(key, Tuple) else tuple(key)
        types = _field_types(key.types if isinstance(key, Tuple) else None, len(fields))
        r = 0
        for i, (f, ft) in enumerate(zip(fields, types, strict=True)):
            h = java_hash_code(f, ft) if f is not None else 0
            r = h if i == 0 else (31 * r + h) & _M32
        return to_int32(r)
    if isinstance(key, Row) or t == "row":
        row = key if isinstance(key, Row) else Row(tuple(key))
        if row.kind not in ROW_KINDS:
            raise InputError(f"unknown RowKind {row.kind!r}; expected one of {', '.join(ROW_KINDS)}")
        a = 1
        for f, ft in zip(row.fields, _field_types(row.types, len(row.fields)), strict=True):
            a = (31 * a + (0 if f is None else 31 + java_hash_code(f, ft))) & _M32
        return to_int32(31 * ROW_KINDS[row.kind] + a)
    raise InputError(f"cannot compute a Java hashCode for key {key!r} of type {key_type or type(key).__name__}")

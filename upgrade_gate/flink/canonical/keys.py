"""Keys as a key serializer wrote them into a composite key, and the `hashCode` Flink assigns their key group by.

A key group is `murmurHash(key.hashCode()) % maxParallelism` (`KeyGroupRangeAssignment`), so moving an entry to
another max parallelism needs the key's Java `hashCode`, and that needs the key decoded exactly as its serializer
wrote it. Only serializers whose bytes and hash are known exactly are decoded (Flink's `LongSerializer`,
`IntSerializer`, `StringSerializer` (`StringValue#writeString`), the other primitive serializers, tuples of those
(`TupleSerializer`), and SQL's binary rows (`RowDataSerializer`/`BinaryRowDataSerializer`, hashed by
`BinaryRowData#hashCode`: Murmur3 with seed 42 over the row's bytes)); any other key serializer is refused by
name. Each codec is checked against every canonical savepoint committed under tests/fixtures: the key group it
computes must be the prefix Flink wrote (tests/flink/test_canonical_keyed_state.py).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import mmh3

from hashing.java_hash import boolean_hash, double_hash, long_hash, to_int32
from upgrade_gate.flink.state_meta.model import SerializerSnapshot

__all__ = ["KeyCodec", "UnsupportedKey", "codec_for"]

_BASE = "org.apache.flink.api.common.typeutils.base."
_TABLE = "org.apache.flink.table.runtime.typeutils."
_TUPLE = "org.apache.flink.api.java.typeutils.runtime.TupleSerializerSnapshot"


class UnsupportedKey(Exception):
    """A key serializer whose bytes or hash this module does not reproduce exactly."""


# (bytes at `pos`) -> (the key's Java hashCode, the position after the key)
Decode = Callable[[bytes, int], tuple[int, int]]


def _fixed(size: int, fmt: str, hash_of: Callable[[Any], int]) -> Decode:
    unpack = struct.Struct(">" + fmt).unpack_from

    def decode(data: bytes, pos: int) -> tuple[int, int]:
        if pos + size > len(data):
            raise ValueError(f"a key needs {size} bytes at {pos}, the composite key has {len(data) - pos}")
        return hash_of(unpack(data, pos)[0]), pos + size

    return decode


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """`StringValue`'s 7-bit groups, least significant first, high bit = more follows."""
    value, shift = 0, 0
    while True:
        if pos >= len(data):
            raise ValueError("a string key is cut short")
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
        if shift > 35:
            raise ValueError("a string key's length or character is longer than 5 bytes")


def _string(data: bytes, pos: int) -> tuple[int, int]:
    """`StringValue#readString`: length + 1 (0 = null), then each UTF-16 unit as a varint."""
    n, pos = _varint(data, pos)
    if n == 0:
        raise ValueError("a null String key (Flink refuses null keys)")
    h = 0
    for _ in range(n - 1):
        unit, pos = _varint(data, pos)
        h = (31 * h + (unit & 0xFFFF)) & 0xFFFFFFFF
    return to_int32(h), pos


def _binary_row(data: bytes, pos: int) -> tuple[int, int]:
    """`BinaryRowDataSerializer#serialize`: int size, then the row's bytes; `BinaryRowData#hashCode` is
    `MurmurHashUtil.hashUnsafeBytes(segments, offset, size)` (seed 42, 4-byte little-endian blocks; a binary
    row's size is a multiple of 8, so there is no tail)."""
    if pos + 4 > len(data):
        raise ValueError("a row key is cut short")
    size = int.from_bytes(data[pos:pos + 4], "big", signed=True)
    if size < 0 or size % 4 or pos + 4 + size > len(data):
        raise ValueError(f"a row key of {size} bytes does not fit the composite key")
    return mmh3.hash(data[pos + 4:pos + 4 + size], 42, signed=True), pos + 4 + size


_SIMPLE: dict[str, Decode] = {
    _BASE + "LongSerializer$LongSerializerSnapshot": _fixed(8, "q", long_hash),
    _BASE + "IntSerializer$IntSerializerSnapshot": _fixed(4, "i", int),
    _BASE + "ShortSerializer$ShortSerializerSnapshot": _fixed(2, "h", int),
    _BASE + "ByteSerializer$ByteSerializerSnapshot": _fixed(1, "b", int),
    _BASE + "CharSerializer$CharSerializerSnapshot": _fixed(2, "H", int),
    _BASE + "BooleanSerializer$BooleanSerializerSnapshot": _fixed(1, "?", boolean_hash),
    _BASE + "DoubleSerializer$DoubleSerializerSnapshot": _fixed(8, "d", double_hash),
    _BASE + "StringSerializer$StringSerializerSnapshot": _string,
    _TABLE + "BinaryRowDataSerializer$BinaryRowDataSerializerSnapshot": _binary_row,
    _TABLE + "RowDataSerializer$RowDataSerializerSnapshot": _binary_row,
}


def _tuple(fields: list[Decode]) -> Decode:
    """`TupleSerializer`: the fields back to back; `TupleN#hashCode`: 31 * r + h over the fields."""
    def decode(data: bytes, pos: int) -> tuple[int, int]:
        r = 0
        for i, f in enumerate(fields):
            h, pos = f(data, pos)
            r = h if i == 0 else (31 * r + h) & 0xFFFFFFFF
        return to_int32(r), pos

    return decode


def _decoder(snapshot: SerializerSnapshot, depth: int = 0) -> Decode:
    if snapshot.class_name in _SIMPLE:
        return _SIMPLE[snapshot.class_name]
    if snapshot.class_name == _TUPLE and snapshot.nested and depth < 4:
        return _tuple([_decoder(s, depth + 1) for s in snapshot.nested])
    raise UnsupportedKey(f"keys written by {snapshot.class_name.rsplit('.', 1)[-1]} (only boxed primitives, String, "
                         f"tuples of those and SQL binary rows are hashed exactly as Flink does)")


@dataclass(frozen=True, slots=True)
class KeyCodec:
    """Where the key starts in a composite key (after the prefix, and a timer's 8-byte timestamp) and its hash."""

    decode: Decode

    def hash_code(self, composite: bytes, start: int) -> int:
        return self.decode(composite, start)[0]


def codec_for(key_serializer: SerializerSnapshot | None) -> KeyCodec:
    if key_serializer is None:
        raise UnsupportedKey("the key serializer's snapshot could not be read")
    return KeyCodec(_decoder(key_serializer))


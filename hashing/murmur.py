"""Guava's `Hashing.murmur3_128(0)` as Flink feeds it, on top of `mmh3`.

Flink hashes `putInt` as 4 little-endian bytes and `putString(s, UTF_8)` as the UTF-8 bytes;
`hash().asBytes()` is h1 then h2, each little-endian, which is exactly `mmh3.hash_bytes(data,
0, x64arch=True)`. Those 16 bytes, unchanged, are the OperatorID/JobVertexID.
"""

from __future__ import annotations

import struct
from functools import lru_cache

import mmh3

ZERO_ID = bytes(16)


def murmur3_128(data: bytes) -> bytes:
    return mmh3.hash_bytes(data, 0, True)


def put_string_bytes(s: str) -> bytes:
    """Java's `String.getBytes(UTF_8)`: a lone surrogate becomes '?' (Java's replacement byte)."""
    return s.encode("utf-8", errors="replace")


def uid_hash(uid: str) -> bytes:
    """The operator ID of a node with `uid(...)` (also `OperatorIDGenerator.fromUid`)."""
    return murmur3_128(put_string_bytes(uid))


@lru_cache(maxsize=65536)
def traverse_id_hash(tid: int, repeats: int) -> bytes:
    """murmur3 of LE32(tid) written `repeats` times: V2's node-local hash before input mixing.

    Cached because fleets of jobs reuse the same (tid, chainable-out-edge count) pairs.
    """
    return murmur3_128(struct.pack("<i", tid) * repeats)


def hex_id(raw: bytes) -> str:
    return raw.hex()

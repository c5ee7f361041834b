"""NumPy versions of the key-group rules for millions of keys (key-alignment scans).

Same rules as `hashing.keygroups` / `hashing.java_hash`, on arrays: uint32 arithmetic wraps
like Java ints. Tests assert element-wise equality with the scalar functions and with Flink's
own vectors, so there is still one definition of each rule, checked twice.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

_U32 = np.uint32


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << _U32(r)) | (x >> _U32(32 - r))


def murmur_hash(codes: np.ndarray) -> np.ndarray:
    """`MathUtils.murmurHash` of int32 hash codes -> non-negative int32 (as int64 array)."""
    with np.errstate(over="ignore"):
        k = codes.astype(np.int64).astype(_U32) * _U32(0xCC9E2D51)
        k = _rotl(k, 15) * _U32(0x1B873593)
        h = _rotl(k, 13)
        h = h * _U32(5) + _U32(0xE6546B64)
        h ^= _U32(4)
        h ^= h >> _U32(16)
        h *= _U32(0x85EBCA6B)
        h ^= h >> _U32(13)
        h *= _U32(0xC2B2AE35)
        h ^= h >> _U32(16)
    signed = h.view(np.int32).astype(np.int64)
    return np.where(signed >= 0, signed, np.where(signed == -(1 << 31), 0, -signed))


def int_hash_codes(values: np.ndarray) -> np.ndarray:
    """Integer.hashCode: the value itself (int32)."""
    return values.astype(np.int32)


def long_hash_codes(values: np.ndarray) -> np.ndarray:
    """Long.hashCode: (int) (v ^ (v >>> 32))."""
    u = values.astype(np.int64).view(np.uint64)
    return (u ^ (u >> np.uint64(32))).astype(_U32).view(np.int32)


def string_hash_codes(values: Sequence[str]) -> np.ndarray:
    """String.hashCode of many strings at once: sum(c_i * 31^(n-1-i)) mod 2^32 over UTF-16 units.

    All strings are concatenated into one UTF-16 array; each unit is weighted by 31 raised to
    its distance from the end of its own string, and `np.add.reduceat` sums per string.
    """
    n = len(values)
    if n == 0:
        return np.zeros(0, dtype=np.int32)
    units = np.frombuffer("".join(values).encode("utf-16-le", errors="surrogatepass"), dtype="<u2").astype(_U32)
    lengths = np.fromiter((len(s.encode("utf-16-le", errors="surrogatepass")) // 2 for s in values),
                          dtype=np.int64, count=n)
    out = np.zeros(n, dtype=_U32)
    if units.size == 0:
        return out.view(np.int32)
    ends = np.cumsum(lengths)
    starts = ends - lengths
    owner = np.repeat(np.arange(n), lengths)
    exponent = (ends[owner] - 1) - np.arange(units.size)
    max_exp = int(lengths.max())
    powers = np.ones(max_exp, dtype=_U32)
    with np.errstate(over="ignore"):
        for i in range(1, max_exp):
            powers[i] = powers[i - 1] * _U32(31)
        weighted = units * powers[exponent]
    nonempty = lengths > 0
    sums = np.add.reduceat(weighted, starts[nonempty]).astype(_U32) if nonempty.any() else np.zeros(0, _U32)
    out[nonempty] = sums
    return out.view(np.int32)


def key_groups(hash_codes: np.ndarray, max_parallelism: int) -> np.ndarray:
    return murmur_hash(hash_codes) % max_parallelism


def operator_indexes(key_group_ids: np.ndarray, max_parallelism: int, parallelism: int) -> np.ndarray:
    return key_group_ids * parallelism // max_parallelism

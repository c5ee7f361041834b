"""NumPy versions of the key-group rules for millions of keys (key-alignment scans).

Same rules as `hashing.keygroups` / `hashing.java_hash`, on arrays: uint32 arithmetic wraps
like Java ints. Tests assert element-wise equality with the scalar functions and with Flink's
own vectors, so there is still one definition of each rule, checked twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

_U32 = np.uint32


_BLOCK = 1 << 16  # elements per pass: a block's temporaries stay in the CPU cache


def murmur_hash(codes: np.ndarray) -> np.ndarray:
    """`MathUtils.murmurHash` of int32 hash codes -> non-negative int32.

    Works block by block with in-place uint32 operations: on millions of keys the plain
    expression form spends most of its time moving temporaries through memory."""
    codes = np.ascontiguousarray(codes, dtype=np.int32)
    out = np.empty(codes.shape, dtype=np.int32)
    flat_in, flat_out = codes.reshape(-1), out.reshape(-1)
    with np.errstate(over="ignore"):
        for lo in range(0, flat_in.size, _BLOCK):
            h = flat_in[lo:lo + _BLOCK].view(_U32) * _U32(0xCC9E2D51)
            t = h >> _U32(17)
            h <<= _U32(15)
            h |= t
            h *= _U32(0x1B873593)
            np.right_shift(h, _U32(19), out=t)
            h <<= _U32(13)
            h |= t
            h *= _U32(5)
            h += _U32(0xE6546B64)
            h ^= _U32(4)
            for shift, mul in ((16, 0x85EBCA6B), (13, 0xC2B2AE35)):
                np.right_shift(h, _U32(shift), out=t)
                h ^= t
                h *= _U32(mul)
            np.right_shift(h, _U32(16), out=t)
            h ^= t
            signed = h.view(np.int32)
            # Flink: h >= 0 ? h : (h != MIN_VALUE ? -h : 0); abs(MIN_VALUE) wraps to MIN_VALUE (< 0)
            np.abs(signed, out=signed)
            np.maximum(signed, 0, out=flat_out[lo:lo + _BLOCK])
    return out


def int_hash_codes(values: np.ndarray) -> np.ndarray:
    """Integer.hashCode: the value itself (int32)."""
    return values.astype(np.int32)


def long_hash_codes(values: np.ndarray) -> np.ndarray:
    """Long.hashCode: (int) (v ^ (v >>> 32))."""
    u = values.astype(np.int64).view(np.uint64)
    return (u ^ (u >> np.uint64(32))).astype(_U32).view(np.int32)


def string_hash_codes(values: Sequence[str] | Any) -> np.ndarray:
    """String.hashCode of many strings at once: sum(c_i * 31^(n-1-i)) mod 2^32 over UTF-16 units.

    `values`: Python strings, or a pyarrow string array without nulls (read straight from its
    UTF-8 buffers, which is what makes millions of keys cheap). All strings become one UTF-16
    array; each unit is weighted by 31 raised to its distance from the end of its own string,
    and `np.add.reduceat` sums per string.
    """
    n = len(values)
    if n == 0:
        return np.zeros(0, dtype=np.int32)
    if hasattr(values, "combine_chunks"):  # a pyarrow ChunkedArray
        values = values.combine_chunks()
    utf8 = _utf8_buffers(values)
    if utf8 is None and hasattr(values, "to_pylist"):  # Arrow, but with nulls or not strings
        values = values.to_pylist()
    if utf8 is not None:
        data, offsets = utf8
        if not data.size or int(data.max()) < 0x80:  # ASCII: the bytes are the UTF-16 units
            lengths = np.diff(offsets)
            units = data.astype(_U32)
        else:
            # UTF-16 units per string: one per code point (bytes that do not continue a sequence),
            # plus one more for each 4-byte sequence (a surrogate pair in Java)
            per_byte = ((data & 0xC0) != 0x80).astype(np.int64) + (data >= 0xF0)
            before = np.concatenate(([0], np.cumsum(per_byte)))  # units before each byte
            lengths = before[offsets[1:]] - before[offsets[:-1]]
            text = data.tobytes().decode("utf-8", errors="surrogatepass")
            units = np.frombuffer(text.encode("utf-16-le", errors="surrogatepass"), dtype="<u2").astype(_U32)
    else:
        lengths = np.fromiter((len(s.encode("utf-16-le", errors="surrogatepass")) // 2 for s in values),
                              dtype=np.int64, count=n)
        units = np.frombuffer("".join(values).encode("utf-16-le", errors="surrogatepass"), dtype="<u2").astype(_U32)
    out = np.zeros(n, dtype=_U32)
    if units.size == 0:
        return out.view(np.int32)
    index = np.int32 if units.size < (1 << 31) else np.int64
    ends = np.cumsum(lengths)
    starts = ends - lengths
    # each unit's distance from the end of its own string
    exponent = np.repeat((ends - 1).astype(index), lengths) - np.arange(units.size, dtype=index)
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


def _utf8_buffers(values: Any) -> tuple[np.ndarray, np.ndarray] | None:
    """(UTF-8 bytes, n + 1 offsets into them) of a null-free pyarrow string array, else None."""
    buffers = getattr(values, "buffers", None)
    type_ = getattr(values, "type", None)
    if buffers is None or getattr(values, "null_count", 1) != 0 or str(type_) not in ("string", "large_string"):
        return None
    _, offsets_buf, data_buf = buffers()
    dtype = np.int64 if str(type_) == "large_string" else np.int32
    offsets = np.frombuffer(offsets_buf, dtype=dtype)[values.offset:values.offset + len(values) + 1].astype(np.int64)
    base = int(offsets[0])
    data = np.frombuffer(data_buf, dtype=np.uint8)[base:int(offsets[-1])] if data_buf is not None \
        else np.zeros(0, np.uint8)
    return data, offsets - base


def key_groups(hash_codes: np.ndarray, max_parallelism: int) -> np.ndarray:
    return murmur_hash(hash_codes) % max_parallelism


def operator_indexes(key_group_ids: np.ndarray, max_parallelism: int, parallelism: int) -> np.ndarray:
    return key_group_ids * parallelism // max_parallelism

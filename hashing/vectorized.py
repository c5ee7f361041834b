"""NumPy versions of the key-group rules for millions of keys (key-alignment scans).

Same rules as `hashing.keygroups` / `hashing.java_hash`, on arrays: uint32 arithmetic wraps
like Java ints. Tests assert element-wise equality with the scalar functions and with Flink's
own vectors, so there is still one definition of each rule, checked twice.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from hashing.shipped_extensions import load_shipped

try:
    from hashing import _javastrings
except ImportError:  # built without a C compiler (NumPy's rules run), or our packages came as a zip to a Spark
    _javastrings = load_shipped("hashing._javastrings")  # executor: maybe the driver shipped the file beside it

_U32 = np.uint32
# what computes String.hashCode of Arrow strings, for logs and benchmarks: "compiled" or "numpy"
STRING_HASH = "compiled" if _javastrings is not None else "numpy"


_BLOCK = 1 << 16  # elements per pass: a block's scratch arrays stay in the CPU cache
_STRINGS_PER_CHUNK = 1 << 14  # strings per pass of the NumPy String.hashCode path (its temporaries stay small)


def _murmur_block(codes: np.ndarray, h: np.ndarray, t: np.ndarray) -> np.ndarray:
    """`MathUtils.murmurHash` of one block of int32 codes, in the uint32 scratch `h` (`t` another);
    returns `h` viewed as the non-negative int32 results."""
    np.multiply(codes.view(_U32), _U32(0xCC9E2D51), out=h)
    np.right_shift(h, _U32(17), out=t)
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
    np.maximum(signed, 0, out=signed)
    return signed


def _blocks(n: int) -> range:
    return range(0, n, _BLOCK)


def _scratch(n: int, dtype: type[np.generic]) -> np.ndarray:
    return np.empty(min(n, _BLOCK), dtype=dtype)


def _power_of_two(x: int) -> bool:
    return x > 0 and x & (x - 1) == 0


def murmur_hash(codes: np.ndarray) -> np.ndarray:
    """`MathUtils.murmurHash` of int32 hash codes -> non-negative int32.

    Works block by block in two cache-sized scratch arrays: on millions of keys the plain
    expression form spends most of its time page-faulting fresh temporaries (docs/performance.md)."""
    def store(murmur: np.ndarray, out: np.ndarray) -> None:
        out[:] = murmur

    return _murmur_blockwise(codes, store)


def _murmur_blockwise(codes: np.ndarray, finish: Callable[[np.ndarray, np.ndarray], None]) -> np.ndarray:
    """The int32 result of `finish(murmur_block, out_block)` over `codes`, one cache-sized block at a time, with
    the two scratch arrays the murmur step reuses (one loop for `murmur_hash` and `key_groups`)."""
    codes = np.ascontiguousarray(codes, dtype=np.int32)
    out = np.empty(codes.shape, dtype=np.int32)
    flat_in, flat_out = codes.reshape(-1), out.reshape(-1)
    h, t = _scratch(flat_in.size, _U32), _scratch(flat_in.size, _U32)
    with np.errstate(over="ignore"):
        for lo in _blocks(flat_in.size):
            m = min(_BLOCK, flat_in.size - lo)
            finish(_murmur_block(flat_in[lo:lo + m], h[:m], t[:m]), flat_out[lo:lo + m])
    return out


def int_hash_codes(values: np.ndarray) -> np.ndarray:
    """Integer.hashCode: the value itself (int32; an int32 array is returned as is, not copied)."""
    return np.asarray(values).astype(np.int32, copy=False)


def long_hash_codes(values: np.ndarray) -> np.ndarray:
    """Long.hashCode: (int) (v ^ (v >>> 32)), block by block (no array-sized temporaries)."""
    longs = np.ascontiguousarray(values).astype(np.int64, copy=False).reshape(-1).view(np.uint64)
    out = np.empty(longs.size, dtype=_U32)
    t = _scratch(longs.size, np.uint64)
    for lo in _blocks(longs.size):
        m = min(_BLOCK, longs.size - lo)
        block = longs[lo:lo + m]
        np.right_shift(block, np.uint64(32), out=t[:m])
        t[:m] ^= block
        np.copyto(out[lo:lo + m], t[:m], casting="unsafe")  # the low 32 bits: Java's (int) cast
    return out.view(np.int32).reshape(np.shape(values))


def string_hash_codes(values: Sequence[str] | Any, *, compiled: bool = True) -> np.ndarray:
    """String.hashCode of many strings at once: sum(c_i * 31^(n-1-i)) mod 2^32 over UTF-16 units.

    `values`: Python strings, or a pyarrow string array without nulls (read straight from its
    UTF-8 buffers, which is what makes millions of keys cheap). Arrow strings go through
    `hashing._javastrings` (hashing/_javastrings.c, one pass over the bytes) when it was built and
    `compiled` is true; otherwise, and for Python strings, through NumPy (`_numpy_hash_codes`).
    Both give the same codes (tests/hashing/test_flink_keygroups.py).
    """
    n = len(values)
    if n == 0:
        return np.zeros(0, dtype=np.int32)
    if hasattr(values, "combine_chunks"):  # a pyarrow ChunkedArray
        values = values.combine_chunks()
    utf8 = _utf8_buffers(values)
    if utf8 is None:
        if hasattr(values, "to_pylist"):  # Arrow, but with nulls or not strings
            values = values.to_pylist()
        lengths = np.fromiter((len(s.encode("utf-16-le", errors="surrogatepass")) // 2 for s in values),
                              dtype=np.int64, count=n)
        units = np.frombuffer("".join(values).encode("utf-16-le", errors="surrogatepass"), dtype="<u2")
        return _units_hash_codes(units.astype(_U32), lengths)
    data, offsets = utf8
    if compiled and _javastrings is not None:
        out = np.empty(n, dtype=np.int32)
        try:
            _javastrings.hash_codes(data, offsets, out)
            return out
        except ValueError:  # not UTF-8 after all: the NumPy path raises the error users see
            pass
    return _numpy_hash_codes(data, offsets)


def _numpy_hash_codes(data: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """String.hashCode from UTF-8 bytes + offsets with NumPy, `_STRINGS_PER_CHUNK` strings at a time."""
    n = offsets.size - 1
    out = np.empty(n, dtype=np.int32)
    for lo in range(0, n, _STRINGS_PER_CHUNK):
        hi = min(lo + _STRINGS_PER_CHUNK, n)
        bounds = offsets[lo:hi + 1].astype(np.int64)
        chunk = data[int(bounds[0]):int(bounds[-1])]
        bounds -= bounds[0]
        if not chunk.size or int(chunk.max()) < 0x80:  # ASCII: the bytes are the UTF-16 units
            out[lo:hi] = _units_hash_codes(chunk.astype(_U32), np.diff(bounds))
            continue
        # UTF-16 units per string: one per code point (bytes that do not continue a sequence),
        # plus one more for each 4-byte sequence (a surrogate pair in Java)
        per_byte = ((chunk & 0xC0) != 0x80).astype(np.int64) + (chunk >= 0xF0)
        before = np.concatenate(([0], np.cumsum(per_byte)))  # units before each byte
        lengths = before[bounds[1:]] - before[bounds[:-1]]
        text = chunk.tobytes().decode("utf-8", errors="surrogatepass")
        units = np.frombuffer(text.encode("utf-16-le", errors="surrogatepass"), dtype="<u2").astype(_U32)
        out[lo:hi] = _units_hash_codes(units, lengths)
    return out


def _units_hash_codes(units: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Per string, sum(unit * 31^(distance from the string's end)) mod 2^32: each unit is weighted
    by 31 raised to its distance from the end of its own string, and `np.add.reduceat` sums per string."""
    n = lengths.size
    out = np.zeros(n, dtype=_U32)
    if units.size == 0:
        return out.view(np.int32)
    index = np.int32 if units.size < (1 << 31) else np.int64
    ends = np.cumsum(lengths)
    starts = ends - lengths
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
    """(the UTF-8 data buffer, the n + 1 offsets into it) of a null-free pyarrow string array, else None.

    Views, not copies: the offsets keep Arrow's int32/int64 and are not rebased."""
    buffers = getattr(values, "buffers", None)
    type_ = getattr(values, "type", None)
    if buffers is None or getattr(values, "null_count", 1) != 0 or str(type_) not in ("string", "large_string"):
        return None
    _, offsets_buf, data_buf = buffers()
    dtype = np.int64 if str(type_) == "large_string" else np.int32
    offsets = np.frombuffer(offsets_buf, dtype=dtype)[values.offset:values.offset + len(values) + 1]
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    return data, offsets


def key_groups(hash_codes: np.ndarray, max_parallelism: int) -> np.ndarray:
    """`KeyGroupRangeAssignment.computeKeyGroupForKeyHash`: murmurHash(code) % maxParallelism (int32),
    block by block."""
    return _murmur_blockwise(hash_codes, lambda murmur, out: _key_group_block(murmur, max_parallelism, out))


def key_groups_and_operator_indexes(hash_codes: np.ndarray, max_parallelism: int,
                                    parallelism: int) -> tuple[np.ndarray, np.ndarray]:
    """`key_groups` and `operator_indexes` of the same codes in one pass (int32 both).

    What key alignment needs per batch: each block's key groups are turned into operator indexes
    while still in the cache, and no array-sized temporary is made (docs/performance.md)."""
    codes = np.ascontiguousarray(hash_codes, dtype=np.int32).reshape(-1)
    groups, owners = _place(codes.size, lambda lo, m: codes[lo:lo + m], max_parallelism, parallelism)
    return groups.reshape(np.shape(hash_codes)), owners.reshape(np.shape(hash_codes))


def long_key_groups_and_operator_indexes(values: np.ndarray, max_parallelism: int,
                                         parallelism: int) -> tuple[np.ndarray, np.ndarray]:
    """Key groups and operator indexes of Long keys, `Long.hashCode` computed block by block too.

    The same as `key_groups_and_operator_indexes(long_hash_codes(values), ...)` without the array of
    hash codes: on 10 M keys that is 40 MB less fresh memory to page-fault per call."""
    longs = np.ascontiguousarray(values).astype(np.int64, copy=False).reshape(-1).view(np.uint64)
    wide = _scratch(longs.size, np.uint64)
    narrow = _scratch(longs.size, _U32)

    def codes(lo: int, m: int) -> np.ndarray:
        block = longs[lo:lo + m]
        np.right_shift(block, np.uint64(32), out=wide[:m])
        wide[:m] ^= block
        np.copyto(narrow[:m], wide[:m], casting="unsafe")  # the low 32 bits: Java's (int) cast
        return narrow[:m].view(np.int32)

    groups, owners = _place(longs.size, codes, max_parallelism, parallelism)
    return groups.reshape(np.shape(values)), owners.reshape(np.shape(values))


def _place(n: int, codes_of: Callable[[int, int], np.ndarray], max_parallelism: int,
           parallelism: int) -> tuple[np.ndarray, np.ndarray]:
    """Block by block: hash codes (`codes_of(start, length)`) -> murmur -> key group ->
    operator index, into two int32 arrays of n."""
    groups = np.empty(n, dtype=np.int32)
    owners = np.empty(n, dtype=np.int32)
    h, t = _scratch(n, _U32), _scratch(n, _U32)
    with np.errstate(over="ignore"):
        for lo in _blocks(n):
            m = min(_BLOCK, n - lo)
            murmur = _murmur_block(codes_of(lo, m), h[:m], t[:m])
            _key_group_block(murmur, max_parallelism, groups[lo:lo + m])
            _operator_index_block(groups[lo:lo + m], max_parallelism, parallelism, murmur, owners[lo:lo + m])
    return groups, owners


def _key_group_block(murmur: np.ndarray, max_parallelism: int, out: np.ndarray) -> None:
    """murmur % maxParallelism; a power of two takes the mask, which equals % on non-negative ints."""
    if _power_of_two(max_parallelism):
        np.bitwise_and(murmur, max_parallelism - 1, out=out)
    else:
        np.remainder(murmur, max_parallelism, out=out)


def _operator_index_block(groups: np.ndarray, max_parallelism: int, parallelism: int, scratch: np.ndarray,
                          out: np.ndarray) -> None:
    """keyGroupId * parallelism / maxParallelism; a power of two takes the arithmetic shift, which is
    floor division by it (key group * parallelism < 2^30 within Flink's bounds: no int32 overflow)."""
    np.multiply(groups, parallelism, out=scratch)
    if _power_of_two(max_parallelism):
        np.right_shift(scratch, max_parallelism.bit_length() - 1, out=out)
    else:
        np.floor_divide(scratch, max_parallelism, out=out)


def operator_indexes(key_group_ids: np.ndarray, max_parallelism: int, parallelism: int) -> np.ndarray:
    """`computeOperatorIndexForKeyGroup`: keyGroupId * parallelism / maxParallelism, block by block
    (int32 and int64 arrays keep their dtype; anything else takes the plain expression)."""
    groups = np.asarray(key_group_ids)
    if groups.dtype not in (np.int32, np.int64) or groups.ndim != 1:
        return groups * parallelism // max_parallelism
    out = np.empty(groups.shape, dtype=groups.dtype)
    t = _scratch(groups.size, groups.dtype.type)
    for lo in _blocks(groups.size):
        m = min(_BLOCK, groups.size - lo)
        _operator_index_block(groups[lo:lo + m], max_parallelism, parallelism, t[:m], out[lo:lo + m])
    return out

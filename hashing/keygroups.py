"""`KeyGroupRangeAssignment`: which key group a key falls in and which subtask owns it.

Keyed state is stored per key group; on restore each new subtask takes a contiguous range of
key groups. Everything here is 32-bit Java int arithmetic and is safe only because max
parallelism is at most 2^15, which is why the bounds checks (with Flink's messages) matter.
"""

from __future__ import annotations

from typing import Any

from hashing.errors import FlinkError
from hashing.java_hash import java_hash_code

DEFAULT_LOWER_BOUND_MAX_PARALLELISM = 1 << 7
UPPER_BOUND_MAX_PARALLELISM = 1 << 15

_M32 = 0xFFFFFFFF


def _rotl32(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def murmur_hash(code: int) -> int:
    """`MathUtils.murmurHash(int)`: one Murmur3-32 block, seed 0, length 4; non-negative result."""
    k = (code & _M32) * 0xCC9E2D51 & _M32
    k = _rotl32(k, 15) * 0x1B873593 & _M32
    h = _rotl32(k, 13)
    h = (h * 5 + 0xE6546B64) & _M32
    h ^= 4
    h ^= h >> 16
    h = h * 0x85EBCA6B & _M32
    h ^= h >> 13
    h = h * 0xC2B2AE35 & _M32
    h ^= h >> 16
    if h >= 0x80000000:  # negative as a Java int
        h -= 1 << 32
        return -h if h != -(1 << 31) else 0
    return h


def check_parallelism_preconditions(parallelism: int) -> None:
    if not 0 < parallelism <= UPPER_BOUND_MAX_PARALLELISM:
        raise FlinkError(f"Operator parallelism not within bounds: {parallelism}")


def compute_key_group_for_key_hash(key_hash: int, max_parallelism: int) -> int:
    return murmur_hash(key_hash) % max_parallelism


def assign_to_key_group(key: Any, max_parallelism: int, key_type: str | None = None) -> int:
    if key is None:
        raise FlinkError("Assigned key must not be null!", "java.lang.NullPointerException")
    return compute_key_group_for_key_hash(java_hash_code(key, key_type), max_parallelism)


def compute_operator_index_for_key_group(max_parallelism: int, parallelism: int, key_group_id: int) -> int:
    return key_group_id * parallelism // max_parallelism


def assign_key_to_parallel_operator(key: Any, max_parallelism: int, parallelism: int,
                                    key_type: str | None = None) -> int:
    return compute_operator_index_for_key_group(max_parallelism, parallelism,
                                                assign_to_key_group(key, max_parallelism, key_type))


def compute_key_group_range_for_operator_index(max_parallelism: int, parallelism: int,
                                               operator_index: int) -> tuple[int, int]:
    """Inclusive [start, end] of the key groups subtask `operator_index` owns."""
    check_parallelism_preconditions(parallelism)
    check_parallelism_preconditions(max_parallelism)
    if max_parallelism < parallelism:
        raise FlinkError("Maximum parallelism must not be smaller than parallelism.")
    start = (operator_index * max_parallelism + parallelism - 1) // parallelism
    end = ((operator_index + 1) * max_parallelism - 1) // parallelism
    return start, end


def key_group_ranges(max_parallelism: int, parallelism: int) -> list[tuple[int, int]]:
    return [compute_key_group_range_for_operator_index(max_parallelism, parallelism, i) for i in range(parallelism)]


def _round_up_to_power_of_two(x: int) -> int:
    return 1 << (x - 1).bit_length() if x > 1 else 1


def compute_default_max_parallelism(parallelism: int) -> int:
    """Flink derives max parallelism per job vertex from its parallelism unless it is set."""
    check_parallelism_preconditions(parallelism)
    return min(max(_round_up_to_power_of_two(parallelism + parallelism // 2), DEFAULT_LOWER_BOUND_MAX_PARALLELISM),
               UPPER_BOUND_MAX_PARALLELISM)

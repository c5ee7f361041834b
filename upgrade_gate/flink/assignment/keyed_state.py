"""Keyed-state redistribution (`StateAssignmentOperation.reAssignSubKeyedStates`).

Each new subtask owns `computeKeyGroupRangeForOperatorIndex(maxP, newP, i)`. With unchanged
parallelism it gets old subtask i's handles as they are; otherwise every old handle that
intersects its range contributes the intersection (key-groups handles are cut at the key-group
offsets; incremental RocksDB/ForSt handles come whole and the backend clips them).

Keyed state is only read by an operator with a keyed input (`has_keyed_input`), a property of the
new job graph that the gate's misrouting and remedy rules use too.
"""

from __future__ import annotations

from dataclasses import dataclass

from hashing.graph import Partitioner, StreamGraph
from hashing.keygroups import key_group_ranges
from upgrade_gate.flink.metadata.model import KeyGroupsStateHandle, OperatorState

__all__ = ["KEYED_PARTITIONERS", "KeyedPiece", "has_keyed_input", "has_keyed_state", "key_group_partitions",
           "reassign_keyed"]

# The partitioners of a keyBy edge: `KeyGroupStreamPartitioner` (HASH) and, in batch mode, the
# `ForwardForConsecutiveHashPartitioner` that replaces a keyBy between consecutive keyed operators.
KEYED_PARTITIONERS = frozenset({Partitioner.HASH, Partitioner.FORWARD_FOR_CONSECUTIVE_HASH})


def has_keyed_input(graph: StreamGraph, node_id: int) -> bool:
    """Whether the new operator can read keyed state at all.

    Flink gives an operator a keyed state backend only when its `StreamConfig` carries a state key
    serializer, which the stream graph sets for operators fed by a `KeyedStream` (a keyBy edge).
    Keyed state restored into any other operator is never read: the operator took the id by position.
    """
    return any(e.partitioner in KEYED_PARTITIONERS for e in graph.in_edges[node_id])


def has_keyed_state(op: OperatorState) -> bool:
    """Whether any subtask of the savepoint operator holds managed or raw keyed state handles."""
    return any(st.managed_keyed_state or st.raw_keyed_state for st in op.subtask_states.values())


@dataclass(frozen=True)
class KeyedPiece:
    old_subtask: int
    key_groups: tuple[int, int]  # inclusive, the part of the old handle this subtask takes
    bytes: int
    raw: bool = False


def _start_of(offsets: tuple[int, ...], index: int, size: int) -> int:
    """Where key group `index` (relative) starts in the stream. An empty key group has offset 0 in real
    savepoints (`KeyGroupRangeOffsets` is only set for groups that wrote data; the stream opens with
    the serialization proxy, so no group starts at 0): it starts where the next non-empty one does."""
    for offset in offsets[index:]:
        if offset > 0:
            return offset
    return size


def _slice_bytes(h: object, first: int, last: int) -> int:
    """Bytes of key groups first..last of a handle (whole handle when not a key-groups handle). The stream's
    head (the serialization proxy, before the first key group) is counted with the slice that holds the
    handle's first key group, so the slices of one handle add up to its `state_size` (every reader reads the
    head too, but it is one handle's bytes, shown once: issue 32, "rescale bytes that add up")."""
    if not isinstance(h, KeyGroupsStateHandle) or not h.offsets:
        return h.state_size  # type: ignore[attr-defined]
    start = h.key_group_range.start
    begin = 0 if first == start else _start_of(h.offsets, first - start, h.state_size)
    end = _start_of(h.offsets, last - start + 1, h.state_size)
    return max(0, end - begin)


def key_group_partitions(max_parallelism: int, parallelism: int) -> list[tuple[int, int]]:
    """`StateAssignmentOperation.createKeyGroupPartitions`: subtask i owns
    `KeyGroupRangeAssignment.computeKeyGroupRangeForOperatorIndex(maxP, p, i)`, inclusive."""
    return key_group_ranges(max_parallelism, parallelism)


def reassign_keyed(op: OperatorState, partitions: list[tuple[int, int]]) -> list[list[KeyedPiece]]:
    """Per new subtask, the keyed pieces it reads; [] when the operator has no keyed state."""
    new_p = len(partitions)
    if not has_keyed_state(op):
        return []  # no keyed state (most operators): nothing for any subtask
    out: list[list[KeyedPiece]] = []
    for i, (a, b) in enumerate(partitions):
        pieces: list[KeyedPiece] = []
        if new_p == op.parallelism:
            st = op.subtask_states.get(i)
            if st is not None:
                for raw, group in ((False, st.managed_keyed_state), (True, st.raw_keyed_state)):
                    for h in group:
                        r = h.key_group_range
                        pieces.append(KeyedPiece(i, (r.start, r.end), h.state_size, raw))
        else:
            for j in range(op.parallelism):
                st = op.subtask_states.get(j)
                if st is None:
                    continue
                for raw, group in ((False, st.managed_keyed_state), (True, st.raw_keyed_state)):
                    for h in group:
                        r = h.key_group_range
                        lo, hi = max(a, r.start), min(b, r.end)
                        if lo <= hi:
                            pieces.append(KeyedPiece(j, (lo, hi), _slice_bytes(h, lo, hi), raw))
        out.append(pieces)
    return out

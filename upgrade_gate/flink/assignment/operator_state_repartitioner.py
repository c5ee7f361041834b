"""`RoundRobinOperatorStateRepartitioner`: how operator (list/union/broadcast) state is redistributed.

Same parallelism and no UNION state: every subtask keeps its own handles. Otherwise:
SPLIT_DISTRIBUTE states are cut into `total // newP` (+1 for the first `total % newP`) consecutive
partitions per name, starting each name where the previous one stopped handing out extras (load
balancing across names, in Java `HashMap` order of the names); UNION states go to every subtask;
BROADCAST subtask i takes old subtask `i % oldP`'s copy. Partitions are list elements.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from hashing.java_hash import string_hash
from upgrade_gate.flink.metadata.model import Mode, OperatorStreamStateHandle

__all__ = ["NewSubtaskOperatorState", "Piece", "java_hashmap_order", "repartition_state"]


@dataclass(frozen=True)
class Piece:
    """Part of one old subtask's state for one name: `elements` partitions out of `handle`."""

    old_subtask: int
    name: str
    mode: Mode
    elements: int
    handle: OperatorStreamStateHandle


@dataclass
class NewSubtaskOperatorState:
    index: int
    pieces: list[Piece] = field(default_factory=list)

    def elements(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for p in self.pieces:
            out[p.name] = out.get(p.name, 0) + p.elements
        return out

    def bytes(self) -> int:
        """Bytes of the distinct state files (delegates) this subtask reads."""
        seen: dict[int, int] = {}
        for p in self.pieces:
            seen[id(p.handle)] = p.handle.state_size
        return sum(seen.values())


def java_hashmap_order(names: list[str]) -> list[str]:
    """Iteration order of a `java.util.HashMap` filled with `names` in this order (no treeified bins)."""
    return list(_hashmap_order(tuple(names)))


@lru_cache(maxsize=4096)  # a fleet repeats the same few state-name sets on every subtask of every job
def _hashmap_order(names: tuple[str, ...]) -> tuple[str, ...]:
    cap = 16
    while len(names) > cap * 3 // 4:
        cap *= 2

    def bucket(s: str) -> int:
        h = string_hash(s) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (cap - 1)

    first = {n: i for i, n in reversed(list(enumerate(names)))}
    return tuple(sorted(first, key=lambda n: (bucket(n), first[n])))


def _entries(old: list[list[OperatorStreamStateHandle]]) -> list[tuple[int, OperatorStreamStateHandle, str, Mode, int]]:
    out = []
    for j, handles in enumerate(old):
        for h in handles:
            for name in java_hashmap_order(list(h.state_name_to_partition_offsets)):
                info = h.state_name_to_partition_offsets[name]
                out.append((j, h, name, info.mode, len(info.offsets)))
    return out


def repartition_state(old: list[list[OperatorStreamStateHandle]], old_parallelism: int,
                      new_parallelism: int) -> list[NewSubtaskOperatorState]:
    """`repartitionState(previousParallelSubtaskStates, oldParallelism, newParallelism)`."""
    result = [NewSubtaskOperatorState(i) for i in range(new_parallelism)]
    entries = _entries(old)
    if new_parallelism == old_parallelism:
        unions = [e for e in entries if e[3] is Mode.UNION]
        for j, h, name, mode, n in entries:
            if mode is not Mode.UNION:
                result[j].pieces.append(Piece(j, name, mode, n, h))
        for sub in result:
            for j, h, name, mode, n in unions:
                sub.pieces.append(Piece(j, name, mode, n, h))
        return result

    by_mode: dict[Mode, dict[str, list[tuple[int, OperatorStreamStateHandle, int]]]] = {m: {} for m in Mode}
    for j, h, name, mode, n in entries:
        by_mode[mode].setdefault(name, []).append((j, h, n))

    split = by_mode[Mode.SPLIT_DISTRIBUTE]
    start = 0
    for name in java_hashmap_order(list(split)):
        current = split[name]
        total = sum(n for _, _, n in current)
        base, remainder = divmod(total, new_parallelism)
        new_start = start
        lst, offset_idx = 0, 0
        for i in range(new_parallelism):
            idx = (i + start) % new_parallelism
            count = base
            if remainder > 0:
                count += 1
                remainder -= 1
            elif remainder == 0:
                new_start = idx
                remainder -= 1
            while count > 0:
                j, h, n = current[lst]
                remaining = n - offset_idx
                if remaining > count:
                    take = count
                    offset_idx += count
                else:
                    take = remaining
                    offset_idx = 0
                    lst += 1
                count -= remaining
                result[idx].pieces.append(Piece(j, name, Mode.SPLIT_DISTRIBUTE, take, h))
        start = new_start

    for name, current in by_mode[Mode.UNION].items():
        for sub in result:
            for j, h, n in current:
                sub.pieces.append(Piece(j, name, Mode.UNION, n, h))

    for name, current in by_mode[Mode.BROADCAST].items():
        for sub in result:
            j, h, n = current[sub.index % len(current)]
            sub.pieces.append(Piece(j, name, Mode.BROADCAST, n, h))
    return result

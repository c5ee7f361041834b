"""The key-group stream of a canonical savepoint's keyed state (`FullSnapshotAsyncWriter#writeKVStateData`).

Reading is bounded like every other reader of ours (`BoundedReader`: a length is checked against the bytes left
before anything is allocated); writing produces exactly the layout Flink's writer does, so a stream read and
written back unchanged is the same bytes (tests/flink/test_canonical_keyed_state.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from upgrade_gate.flink.metadata.reader import BoundedReader

__all__ = ["END_OF_KEY_GROUP_MARK", "META_DATA_FOLLOWS", "Entry", "key_group_prefix", "prefix_bytes",
           "read_key_group", "write_key_group"]

END_OF_KEY_GROUP_MARK = 0xFFFF  # FullSnapshotUtil.END_OF_KEY_GROUP_MARK
META_DATA_FOLLOWS = 0x80  # FullSnapshotUtil.FIRST_BIT_IN_BYTE_MASK, set in the first key byte


def prefix_bytes(max_parallelism: int) -> int:
    """`CompositeKeySerializationUtils.computeRequiredBytesInKeyGroupPrefix`."""
    return 2 if max_parallelism > 128 else 1


def key_group_prefix(key_group: int, size: int) -> bytes:
    return key_group.to_bytes(size, "big")


@dataclass(frozen=True, slots=True)
class Entry:
    """One key/value pair of one state; `key` without the meta-data-follows flag."""

    state: int
    key: bytes
    value: bytes


def read_key_group(r: BoundedReader, offset: int, what: str) -> Iterator[Entry]:
    """The entries of the key group whose stream starts at `offset`, in the order Flink wrote them."""
    r.pos = offset
    state = int.from_bytes(r.read_bytes(2, f"{what}: state id"), "big")
    while True:
        n = r.read_count(f"{what}: key bytes", 1)
        key = r.read_bytes(n, f"{what}: key")
        n = r.read_count(f"{what}: value bytes", 1)
        value = r.read_bytes(n, f"{what}: value")
        if not key:
            r.fail(f"{what}: an empty key (a key holds at least its key-group prefix)")
        follows = key[0] & META_DATA_FOLLOWS
        if follows:
            key = bytes((key[0] & ~META_DATA_FOLLOWS,)) + key[1:]
        yield Entry(state, key, value)
        if follows:
            nxt = int.from_bytes(r.read_bytes(2, f"{what}: state id or end of key group"), "big")
            if nxt == END_OF_KEY_GROUP_MARK:
                return
            state = nxt


def _pair(out: bytearray, key: bytes, value: bytes) -> None:
    out += len(key).to_bytes(4, "big")
    out += key
    out += len(value).to_bytes(4, "big")
    out += value


def write_key_group(out: bytearray, entries: Iterable[Entry]) -> None:
    """Append one key group's stream: entries must be grouped by state (one run per state id)."""
    items = list(entries)
    if not items:
        raise ValueError("a key group with no entries has no stream (its offset stays 0)")
    out += items[0].state.to_bytes(2, "big")
    for i, e in enumerate(items):
        last = i + 1 == len(items)
        switch = not last and items[i + 1].state != e.state
        if last or switch:
            _pair(out, bytes((e.key[0] | META_DATA_FOLLOWS,)) + e.key[1:], e.value)
            out += (END_OF_KEY_GROUP_MARK if last else items[i + 1].state).to_bytes(2, "big")
        else:
            _pair(out, e.key, e.value)

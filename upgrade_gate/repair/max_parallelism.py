"""A savepoint rewritten for another max parallelism: every keyed entry and timer into its new key group.

Flink cannot restore keyed state into a job whose max parallelism changed (`StateAssignmentOperation` refuses:
the key groups, `murmur(key.hashCode()) % maxParallelism`, are different ones), and the State Processor API
can do it only with the job's own classes. A canonical savepoint does not need them: each entry's key is
decoded by the key serializer the savepoint names, hashed as Flink hashes it (`upgrade_gate.flink.canonical`)
and written, with a new key-group prefix, into the stream of the subtask that owns its new key group. Values
are copied byte for byte; nothing is deserialized but the key.

Memory stays bounded by one state file plus one new subtask's state: a first pass reads the old streams one at
a time and appends each entry to a spill file of its new subtask; a second pass sorts one subtask's entries by
key group and writes its stream. Refused, with the reason: keyed state that is not in the canonical format
(RocksDB native savepoints and checkpoints: take a canonical savepoint, the default), compressed snapshots,
raw keyed state, and keys no codec hashes exactly (`keys.UnsupportedKey`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from hashing.keygroups import compute_key_group_for_key_hash, compute_operator_index_for_key_group, key_group_ranges
from upgrade_gate.flink.canonical.format import Entry, key_group_prefix, prefix_bytes, read_key_group, write_key_group
from upgrade_gate.flink.canonical.keys import KeyCodec, UnsupportedKey, codec_for
from upgrade_gate.flink.metadata.errors import MetadataFormatError
from upgrade_gate.flink.metadata.model import (
    CheckpointMetadata,
    KeyGroupRange,
    KeyGroupsSavepointStateHandle,
    OperatorState,
    RelativeFileStateHandle,
)
from upgrade_gate.flink.metadata.reader import BoundedReader
from upgrade_gate.flink.state_meta.proxy import read_keyed_proxy
from upgrade_gate.flink.state_meta.streams import Opener, StateFileError, stream_of

__all__ = ["Rescaled", "cannot_rescale", "rescale"]

_KEYED_TYPES = ("KEY_VALUE", "PRIORITY_QUEUE")


@dataclass(frozen=True, slots=True)
class OperatorRescale:
    operator_id: str
    name: str | None
    old_max_parallelism: int
    entries: int
    timers: int
    bytes_read: int
    bytes_written: int


@dataclass(frozen=True)
class Rescaled:
    metadata: CheckpointMetadata
    operators: tuple[OperatorRescale, ...]


@dataclass(frozen=True, slots=True)
class _Stream:
    data: bytes
    proxy_end: int
    state_names: tuple[str, ...]
    state_types: tuple[str, ...]
    codec: KeyCodec


def _keyed_handles(op: OperatorState) -> Iterator[tuple[int, KeyGroupsSavepointStateHandle]]:
    for index in sorted(op.subtask_states):
        st = op.subtask_states[index]
        if st.raw_keyed_state:
            raise UnsupportedKey(f"operator {op.operator_id_hex} holds raw keyed state (its layout is the "
                                 f"operator's own)")
        for h in st.managed_keyed_state:
            if not isinstance(h, KeyGroupsSavepointStateHandle):
                raise UnsupportedKey(f"operator {op.operator_id_hex} holds keyed state as {h.kind}, not in the "
                                     f"canonical savepoint format: take a canonical savepoint (Flink's default "
                                     f"format) of the running job and repair that one")
            yield index, h


def _open(h: KeyGroupsSavepointStateHandle, opener: Opener, source: str) -> _Stream:
    ref = stream_of(h.delegate, source)
    # the whole stream: its size is the handle's (an opener reads at most what it is asked for)
    data = b"" if ref is None else opener(ref, (h.delegate.state_size if h.delegate is not None else 0) + 1)[0]
    r = BoundedReader(data, ref.source if ref is not None else source)
    meta = read_keyed_proxy(r, h.kind)
    if meta.incomplete:
        raise UnsupportedKey(f"{r.source}: {meta.incomplete}")
    if meta.compression:
        raise UnsupportedKey(f"{r.source}: the snapshot is compressed (execution.checkpointing.snapshot-compression)")
    bad = [s.name for s in meta.states if s.backend_type not in _KEYED_TYPES]
    if bad:
        raise UnsupportedKey(f"{r.source}: states of a kind this rewrite does not know: {', '.join(bad)}")
    return _Stream(data, r.pos, tuple(s.name for s in meta.states), tuple(s.backend_type for s in meta.states),
                   codec_for(meta.key_serializer))


def cannot_rescale(metadata: CheckpointMetadata, opener: Opener) -> list[str]:
    """Why `rescale` would refuse (reading only each keyed stream's serialization proxy); [] = it would not."""
    problems = []
    for op in metadata.operator_states:
        try:
            for _, h in _keyed_handles(op):
                _open(h, _prefix_opener(opener), metadata.source)
        except (UnsupportedKey, MetadataFormatError, StateFileError) as exc:
            problems.append(str(exc))
    return problems


def _prefix_opener(opener: Opener) -> Opener:
    """Only the proxy is needed to judge: a bounded prefix of each stream, as the state-meta reader reads."""
    def first(ref, limit):  # type: ignore[no-untyped-def]
        return opener(ref, min(limit, 1 << 20))
    return first


def _spill_record(e: Entry, key_group: int, key: bytes) -> bytes:
    return b"".join((key_group.to_bytes(2, "big"), e.state.to_bytes(2, "big"), len(key).to_bytes(4, "big"), key,
                     len(e.value).to_bytes(4, "big"), e.value))


def _spilled(path: Path) -> list[tuple[int, int, int, bytes, bytes]]:
    data = path.read_bytes() if path.exists() else b""
    out = []
    pos = seq = 0
    while pos < len(data):
        kg = int.from_bytes(data[pos:pos + 2], "big")
        state = int.from_bytes(data[pos + 2:pos + 4], "big")
        n = int.from_bytes(data[pos + 4:pos + 8], "big")
        key = data[pos + 8:pos + 8 + n]
        pos += 8 + n
        m = int.from_bytes(data[pos:pos + 4], "big")
        value = data[pos + 4:pos + 4 + m]
        pos += 4 + m
        out.append((kg, state, seq, key, value))
        seq += 1
    return out


def _rescale_operator(op: OperatorState, new_max: int, workdir: Path, opener: Opener,
                      source: str) -> tuple[OperatorState, OperatorRescale]:
    handles = list(_keyed_handles(op))
    p = op.parallelism
    if not handles:  # no keyed state: only the number Flink compares changes
        return dataclasses.replace(op, max_parallelism=new_max), OperatorRescale(
            op.operator_id_hex, op.name, op.max_parallelism, 0, 0, 0, 0)
    if new_max < p:
        raise UnsupportedKey(f"max parallelism {new_max} is below the operator's parallelism {p}")
    old_pb, new_pb = prefix_bytes(op.max_parallelism), prefix_bytes(new_max)
    spill = workdir / f".spill-{op.operator_id_hex}"
    spill.mkdir()
    buckets = {i: open(spill / str(i), "ab") for i in range(p)}  # noqa: SIM115 (closed below)
    proxy = names = None
    entries = timers = read = 0
    try:
        for _, h in handles:
            s = _open(h, opener, source)
            read += len(s.data)
            if proxy is None:
                proxy, names = s.data[:s.proxy_end], s.state_names
            elif s.state_names != names:
                raise UnsupportedKey(f"operator {op.operator_id_hex}: its subtasks registered different states "
                                     f"({list(names or ())} and {list(s.state_names)})")
            r = BoundedReader(s.data, source)
            for j, offset in enumerate(h.offsets):
                if not offset:
                    continue
                old_kg = h.key_group_range.start + j
                for e in read_key_group(r, offset, f"key group {old_kg}"):
                    if int.from_bytes(e.key[:old_pb], "big") != old_kg:
                        raise UnsupportedKey(f"operator {op.operator_id_hex}: an entry of key group {old_kg} carries "
                                             f"the prefix of another (not a canonical savepoint's stream)")
                    if e.state >= len(s.state_types):
                        raise UnsupportedKey(f"operator {op.operator_id_hex}: key group {old_kg} names state "
                                             f"{e.state}, but its proxy registers {len(s.state_types)}")
                    timer = s.state_types[e.state] == "PRIORITY_QUEUE"
                    start = old_pb + (8 if timer else 0)  # a timer's key follows its timestamp (TimerSerializer)
                    kg = compute_key_group_for_key_hash(s.codec.hash_code(e.key, start), new_max)
                    key = key_group_prefix(kg, new_pb) + e.key[old_pb:]
                    buckets[compute_operator_index_for_key_group(new_max, p, kg)].write(_spill_record(e, kg, key))
                    entries += 1
                    timers += timer
    except ValueError as exc:  # a key the codec cannot decode: the bytes are not what its serializer writes
        raise UnsupportedKey(f"operator {op.operator_id_hex}: {exc}") from None
    finally:
        for f in buckets.values():
            f.close()
    assert proxy is not None
    written = 0
    subtasks = dict(op.subtask_states)
    for i, (start, end) in enumerate(key_group_ranges(new_max, p)):
        out = bytearray(proxy)
        offsets = [0] * (end - start + 1)
        rows = sorted(_spilled(spill / str(i)))
        at = 0
        while at < len(rows):
            kg = rows[at][0]
            stop = at
            while stop < len(rows) and rows[stop][0] == kg:
                stop += 1
            offsets[kg - start] = len(out)
            write_key_group(out, (Entry(state, key, value) for _, state, _, key, value in rows[at:stop]))
            at = stop
        (spill / str(i)).unlink(missing_ok=True)
        # named by its content, as a UUID like Flink's names: the same repair writes the same savepoint
        name = str(uuid.UUID(bytes=hashlib.sha256(out).digest()[:16], version=4))
        path = workdir / name
        path.write_bytes(out)
        written += len(out)
        handle = KeyGroupsSavepointStateHandle(KeyGroupRange(start, end), tuple(offsets),
                                               RelativeFileStateHandle(str(path), name, len(out)))
        subtasks[i] = dataclasses.replace(subtasks[i], managed_keyed_state=(handle,))
    os.rmdir(spill)
    return (dataclasses.replace(op, max_parallelism=new_max, subtask_states=subtasks),
            OperatorRescale(op.operator_id_hex, op.name, op.max_parallelism, entries, timers, read, written))


def rescale(metadata: CheckpointMetadata, new_max: int, workdir: Path, opener: Opener,
            progress: Callable[[str], None] | None = None) -> Rescaled:
    """Every operator at `new_max`; keyed state rewritten into files under `workdir` (the caller copies them
    into the new savepoint and removes `workdir`). Raises `UnsupportedKey` with the reason it cannot."""
    if not 0 < new_max <= 1 << 15:
        raise UnsupportedKey(f"max parallelism {new_max} is outside 1..32768 (KeyGroupRangeAssignment)")
    ops, done = [], []
    for op in metadata.operator_states:
        if op.max_parallelism == new_max or op.fully_finished:
            ops.append(op)
            continue
        new_op, stats = _rescale_operator(op, new_max, workdir, opener, metadata.source)
        ops.append(new_op)
        if stats.entries and progress is not None:
            progress(f"{op.name or op.operator_id_hex}: {stats.entries:,} keyed entries and timers moved from max "
                     f"parallelism {op.max_parallelism} to {new_max}")
        done.append(stats)
    return Rescaled(dataclasses.replace(metadata, operator_states=tuple(ops)), tuple(done))

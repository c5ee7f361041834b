"""Dropping one named state of an operator (`repair --drop OPERATOR/STATE`), the rest of its state kept.

Flink restores every state a snapshot's serialization proxy lists, declared by the new job or not, and keeps
carrying it (an obsolete state) or refuses it (a state declared again with a type it cannot migrate to). So
dropping a state means removing it from the proxy, not only from the handle:

* operator state (list, union, broadcast): the state's meta info is cut out of the
  `OperatorBackendSerializationProxy` and its name out of the handle's offsets; the partitions of the other states
  keep their bytes, their offsets move by what the proxy lost (`OperatorStateRestoreOperation` reads each state
  at its offsets, after the proxy);
* keyed state, in the canonical savepoint format: cut out of the `KeyedBackendSerializationProxy`, its entries
  removed from every key group and the later states' ids renumbered (`FullSnapshotAsyncWriter`'s ids are the
  proxy's order), as `upgrade_gate.flink.canonical` reads and writes them.

New streams go to the caller's scratch directory (inline ones stay inline); refused with the reason: keyed
state not in the canonical format, file-merged operator state.
"""

from __future__ import annotations

import dataclasses
import hashlib
import uuid
from pathlib import Path
from typing import Any

from upgrade_gate.flink.canonical.format import Entry, read_key_group, write_key_group
from upgrade_gate.flink.metadata.model import (
    ByteStreamStateHandle,
    CheckpointMetadata,
    FileMergingOperatorStreamStateHandle,
    KeyGroupsSavepointStateHandle,
    OperatorState,
    OperatorStreamStateHandle,
    RelativeFileStateHandle,
    StateMetaInfo,
)
from upgrade_gate.flink.metadata.reader import BoundedReader
from upgrade_gate.flink.state_meta import read_state_schemas
from upgrade_gate.flink.state_meta.proxy import proxy_layout
from upgrade_gate.flink.state_meta.streams import Opener, stream_of
from upgrade_gate.repair.max_parallelism import UnsupportedKey

__all__ = ["drop_named_states", "state_names_of"]


def _read(delegate: Any, opener: Opener, source: str) -> tuple[bytes, str]:
    ref = stream_of(delegate, source)
    if ref is None:
        return b"", source
    return opener(ref, (delegate.state_size if delegate is not None else 0) + 1)[0], ref.source


def _store(data: bytes, like: Any, workdir: Path) -> Any:
    """The new stream: inline where the old one was, else a file named by its content (a reproducible repair)."""
    if isinstance(like, ByteStreamStateHandle):
        return ByteStreamStateHandle(like.handle_name, data)
    name = str(uuid.UUID(bytes=hashlib.sha256(data).digest()[:16], version=4))
    path = workdir / name
    path.write_bytes(data)
    return RelativeFileStateHandle(str(path), name, len(data))


def state_names_of(metadata: CheckpointMetadata, op: OperatorState, opener: Opener) -> tuple[set[str], set[str]]:
    """(operator-state names, keyed-state names) of a savepoint operator, from its proxies (`read_state_schemas`,
    every handle kind) and its handles' offsets (an operator state the proxy could not be read for)."""
    one = dataclasses.replace(metadata, operator_states=(op,))
    schemas = read_state_schemas(one, opener, tolerant=True)
    operator = {s.name for sch in schemas for s in sch.states if s.backend_type in ("OPERATOR", "BROADCAST")}
    keyed = {s.name for sch in schemas for s in sch.states if s.backend_type not in ("OPERATOR", "BROADCAST")}
    for st in op.subtask_states.values():
        for h in st.managed_operator_state:
            operator.update(h.state_name_to_partition_offsets)
    return operator, keyed


def _drop_operator_state(h: OperatorStreamStateHandle, names: set[str], opener: Opener, source: str,
                         workdir: Path) -> OperatorStreamStateHandle:
    if isinstance(h, FileMergingOperatorStreamStateHandle):
        raise UnsupportedKey(f"{source}: operator state in a merged file (FLIP-306) cannot have a state dropped")
    data, where = _read(h.delegate, opener, source)
    layout = proxy_layout(data, where, keyed=False)
    if not names & (layout.names | set(h.state_name_to_partition_offsets)):
        return h
    proxy = layout.without(data, names)
    shift = layout.end - len(proxy)
    kept = {name: StateMetaInfo(tuple(o - shift for o in meta.offsets), meta.mode)
            for name, meta in h.state_name_to_partition_offsets.items() if name not in names}
    return dataclasses.replace(h, state_name_to_partition_offsets=kept,
                               delegate=_store(proxy + data[layout.end:], h.delegate, workdir))


def _drop_keyed_state(h: Any, names: set[str], opener: Opener, source: str,
                      workdir: Path) -> KeyGroupsSavepointStateHandle:
    if not isinstance(h, KeyGroupsSavepointStateHandle):
        raise UnsupportedKey(f"keyed state as {h.kind}, not in the canonical savepoint format: take a canonical "
                             f"savepoint (Flink's default format) to drop one keyed state")
    data, where = _read(h.delegate, opener, source)
    layout = proxy_layout(data, where, keyed=True)
    if not names & layout.names:
        return h
    order = [name for name, _, _ in layout.lists[0][1]]
    renumber = {old: new for new, old in enumerate(i for i, name in enumerate(order) if name not in names)}
    out = bytearray(layout.without(data, names))
    r = BoundedReader(data, where)
    offsets = []
    for j, offset in enumerate(h.offsets):
        if not offset:
            offsets.append(0)
            continue
        kept = [Entry(renumber[e.state], e.key, e.value)
                for e in read_key_group(r, offset, f"key group {h.key_group_range.start + j}") if e.state in renumber]
        if not kept:
            offsets.append(0)
            continue
        offsets.append(len(out))
        write_key_group(out, kept)
    return dataclasses.replace(h, offsets=tuple(offsets), delegate=_store(bytes(out), h.delegate, workdir))


def drop_named_states(metadata: CheckpointMetadata, named: dict[bytes, set[str]], workdir: Path,
                      opener: Opener) -> CheckpointMetadata:
    """`named`: savepoint operator id -> state names to drop (each is an operator or a keyed state of it)."""
    ops = []
    for op in metadata.operator_states:
        names = named.get(op.operator_id)
        if not names:
            ops.append(op)
            continue
        _, keyed_names = state_names_of(metadata, op, opener)
        subtasks = {}
        for i, st in op.subtask_states.items():
            if st.finished:
                subtasks[i] = st
                continue
            managed = tuple(_drop_operator_state(h, names, opener, metadata.source, workdir)
                            for h in st.managed_operator_state)
            keyed = tuple(_drop_keyed_state(h, names, opener, metadata.source, workdir)
                          for h in st.managed_keyed_state) if names & keyed_names else st.managed_keyed_state
            subtasks[i] = dataclasses.replace(st, managed_operator_state=managed, managed_keyed_state=keyed)
        ops.append(dataclasses.replace(op, subtask_states=subtasks))
    return dataclasses.replace(metadata, operator_states=tuple(ops))

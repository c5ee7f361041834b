"""Every state of a savepoint, with its serializers: the proxies of all managed state handles.

`read_state_schemas(metadata)` opens each subtask's managed keyed handles (a key-groups handle's
stream, a RocksDB incremental/native handle's meta stream, a changelog handle's materialized part)
and managed operator handles, and reads the serialization proxy each stream starts with. Raw state
has no proxy (it is the operator's own bytes) and changelog increments hold no meta information: both
are skipped. Malformed bytes raise `MetadataFormatError` (an `InputError`: exit code 2, one line
naming the state file or inline handle and the offset).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar

from upgrade_gate.flink.metadata.errors import MetadataFormatError
from upgrade_gate.flink.metadata.model import (
    ChangelogStateBackendHandleImpl,
    CheckpointMetadata,
    IncrementalRemoteKeyedStateHandle,
    KeyGroupsStateHandle,
)
from upgrade_gate.flink.metadata.reader import BoundedReader
from upgrade_gate.flink.state_meta.model import (
    KeyedStateMeta,
    OperatorSchemas,
    OperatorStateMeta,
    StateMetaInfo,
    SubtaskStateMeta,
)
from upgrade_gate.flink.state_meta.proxy import read_keyed_proxy, read_operator_proxy
from upgrade_gate.flink.state_meta.streams import (
    FIRST_READ,
    MAX_PROXY_BYTES,
    Opener,
    StateFileError,
    StreamRef,
    local_opener,
    stream_of,
)

__all__ = ["oracle_view", "read_state_schemas"]

T = TypeVar("T", KeyedStateMeta, OperatorStateMeta)


def _parse(ref: StreamRef, parse: Callable[[BoundedReader], T], opener: Opener,
           seen: dict[tuple[bool, bytes], Any]) -> T:
    """Parse the proxy from a prefix of the stream, reading more only if the proxy is longer.

    `seen` memoizes by the bytes read: the subtasks of one operator usually write byte-identical proxies
    (RocksDB meta streams hold nothing else), so a 1,000-subtask savepoint parses each distinct one once."""
    limit = FIRST_READ
    while True:
        data, whole = opener(ref, limit)
        key = (whole, hashlib.blake2b(data, digest_size=16).digest())  # a digest: keys stay small
        hit = seen.get(key)
        if hit is not None and hit[0] is parse:
            return replace(hit[1], source=ref.source)
        try:
            result = parse(BoundedReader(data, ref.source))
        except MetadataFormatError as exc:
            if whole or limit >= MAX_PROXY_BYTES or not exc.detail.startswith("truncated"):
                raise
        else:
            if whole or result.incomplete is None or limit >= MAX_PROXY_BYTES:
                seen[key] = (parse, result)
                return result
        limit = min(limit * 16, MAX_PROXY_BYTES)


def _keyed_streams(handle: object) -> list[tuple[str, object]]:
    """(handle kind, stream handle holding the proxy) of a managed keyed handle."""
    if isinstance(handle, IncrementalRemoteKeyedStateHandle):
        return [(handle.kind, handle.meta_state_handle)]
    if isinstance(handle, KeyGroupsStateHandle):
        return [(handle.kind, handle.delegate)]
    if isinstance(handle, ChangelogStateBackendHandleImpl):
        return [s for h in handle.materialized for s in _keyed_streams(h)]
    return []


def read_state_schemas(metadata: CheckpointMetadata, opener: Opener = local_opener,
                       strict: bool = False, tolerant: bool = False) -> tuple[OperatorSchemas, ...]:
    """Per operator (in the file's order): every subtask's proxies, and the union of its states by name.

    `opener` reads streams (default: inline and local files; the storage layer's opener adds S3). A state
    file that cannot be read (deleted, denied) is noted in the operator's `incomplete` unless `strict`:
    the `_metadata` alone still tells much, and a missing file is the restore's problem, reported there.
    Malformed bytes raise, unless `tolerant`: then they are noted like an unreadable file (the gate's
    rules must still judge everything else; `inspect` keeps reporting them as bad input)."""
    unreadable: tuple[type[Exception], ...] = (StateFileError, MetadataFormatError) if tolerant else (StateFileError,)
    out = []
    seen: dict[tuple[bool, bytes], Any] = {}
    keyed_parsers: dict[str, Callable[[BoundedReader], KeyedStateMeta]] = {}
    for op in metadata.operator_states:
        subtasks = []
        for index in sorted(op.subtask_states):
            st = op.subtask_states[index]
            keyed = []
            for h in st.managed_keyed_state:
                for kind, stream_handle in _keyed_streams(h):
                    ref = stream_of(stream_handle, metadata.source)
                    if ref is None:
                        continue
                    try:
                        parser = keyed_parsers.setdefault(kind, lambda r, k=kind: read_keyed_proxy(r, k))
                        keyed.append(_parse(ref, parser, opener, seen))
                    except unreadable as exc:
                        if strict:
                            raise
                        keyed.append(KeyedStateMeta(kind, 0, False, None, (), ref.source, str(exc)))
            operator = []
            for h in st.managed_operator_state:
                ref = stream_of(h.delegate, metadata.source)
                if ref is None:
                    continue
                try:
                    operator.append(_parse(ref, read_operator_proxy, opener, seen))
                except unreadable as exc:
                    if strict:
                        raise
                    operator.append(OperatorStateMeta(0, False, (), (), ref.source, str(exc)))
            if keyed or operator:
                subtasks.append(SubtaskStateMeta(index, tuple(keyed), tuple(operator)))
        if not subtasks:
            continue
        states: dict[str, StateMetaInfo] = {}
        key_serializer = None
        incomplete: list[str] = []
        for s in subtasks:
            for k in s.keyed:
                key_serializer = key_serializer or k.key_serializer
                for m in k.states:
                    states.setdefault(m.name, m)
                if k.incomplete and k.incomplete not in incomplete:
                    incomplete.append(k.incomplete)
            for o in s.operator:
                for m in (*o.operator_states, *o.broadcast_states):
                    states.setdefault(m.name, m)
                if o.incomplete and o.incomplete not in incomplete:
                    incomplete.append(o.incomplete)
        out.append(OperatorSchemas(op.operator_id_hex, op.name, op.uid, tuple(subtasks), key_serializer,
                                   tuple(states.values()), tuple(incomplete)))
    return tuple(out)


def oracle_view(schemas: tuple[OperatorSchemas, ...]) -> dict[str, Any]:
    """The shape of flink-state-meta.json (StateMetaDump.java), for comparison with Flink's own reading."""
    return {"operators": [
        {"operator_id": op.operator_id,
         "subtasks": [{"index": s.index, "keyed": [k.view() for k in s.keyed],
                       "operator": [o.view() for o in s.operator]} for s in op.subtasks]}
        for op in schemas]}

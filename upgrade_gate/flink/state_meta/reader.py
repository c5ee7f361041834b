"""Every state of a savepoint, with its serializers: the proxies of all managed state handles.

`read_state_schemas(metadata)` opens each subtask's managed keyed handles (a key-groups handle's
stream, a RocksDB incremental/native handle's meta stream, a changelog handle's materialized part)
and managed operator handles, and reads the serialization proxy each stream starts with. Raw state
has no proxy (it is the operator's own bytes) and changelog increments hold no meta information: both
are skipped. Malformed bytes raise `MetadataFormatError` (an `InputError`: exit code 2, one line
naming the state file or inline handle and the offset).
"""

from __future__ import annotations

import functools
import hashlib
import threading
from collections.abc import Callable
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
from upgrade_gate.flink.state_meta.snapshots import ROW_DATA_SNAPSHOT
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


class _Seen:
    """The proxies one `read_state_schemas` call has parsed, to parse each distinct one once.

    The subtasks of one operator usually write byte-identical proxies, but a stream holds its state
    right after the proxy, so two subtasks' streams differ although their proxies do not. A complete
    proxy is therefore kept under its own bytes (`by_proxy`: parser -> proxy length -> proxy bytes ->
    result): the parser reads a stream front to back and decides nothing from the bytes after the
    proxy, so a stream that starts with the same bytes holds the same proxy. Counts are checked only
    against lower bounds of what the items really take, which the bytes read already met. An
    incomplete reading (an unknown snapshot format stops it) may depend on what follows, so it is
    kept only under a digest of the whole prefix read (`by_digest`).

    An operator's subtasks come one after another, so the proxy last found (`last`, per parser) is
    tried first, by comparing the stream's first bytes with it (`bytes.startswith`, a memcmp): on a
    1,000-subtask RocksDB native savepoint (9.5 KB proxies inline) that replaced a slice and a hash of
    the whole proxy per handle, about 2 µs of its 2.5. Otherwise lengths are tried last hit first, one
    slice and one lookup each. Two kept proxies cannot both start a stream (the parser reads a proxy to
    its end and stops there), so which one is tried first never changes the result."""

    __slots__ = ("by_digest", "by_proxy", "kept", "last")

    def __init__(self) -> None:
        self.by_proxy: dict[Callable[[BoundedReader], Any], dict[int, dict[bytes, Any]]] = {}
        self.by_digest: dict[tuple[bool, bytes], tuple[Callable[[BoundedReader], Any], Any]] = {}
        self.last: dict[Callable[[BoundedReader], Any], tuple[bytes, Any]] = {}
        self.kept = 0

    def next_savepoint(self) -> _Seen:
        """This memo for another `read_state_schemas` call of the same thread.

        The complete proxies stay: what a proxy holds depends on its bytes alone (the class docstring), so
        the savepoints of a fleet, whose jobs mostly declare the same states with the same serializers,
        parse each distinct proxy once per process instead of once per savepoint (docs/performance.md,
        "Reading side"). The incomplete readings (`by_digest`) are per savepoint; past `_MAX_KEPT`
        proxies everything is dropped, so a long-lived process holds a bounded amount."""
        self.by_digest = {}
        if self.kept > _MAX_KEPT:
            self.by_proxy, self.last, self.kept = {}, {}, 0
        return self

    def proxy(self, data: bytes, parse: Callable[[BoundedReader], T]) -> T | None:
        last = self.last.get(parse)
        if last is not None and data.startswith(last[0]):
            return last[1]  # type: ignore[no-any-return]
        lengths = self.by_proxy.get(parse)
        if not lengths:
            return None
        for length, known in reversed(lengths.items()):
            key = data[:length] if len(data) >= length else None
            hit = known.get(key) if key is not None else None
            if hit is not None:
                if length != next(reversed(lengths)):  # the next subtask most likely holds this one too
                    lengths[length] = lengths.pop(length)
                self.last[parse] = (key, hit)
                return hit  # type: ignore[no-any-return]
        return None

    def keep(self, data: bytes, whole: bool, digest: bytes, parse: Callable[[BoundedReader], T], result: T,
             length: int) -> None:
        if result.incomplete is None and not _looked_past(result):
            lengths = self.by_proxy.setdefault(parse, {})
            lengths[length] = lengths.pop(length, {})  # tried first from now on
            proxy = data[:length]
            lengths[length][proxy] = result
            self.kept += 1
            self.last[parse] = (proxy, result)
        else:
            self.by_digest[(whole, digest)] = (parse, result)


_MAX_KEPT = 4096  # distinct complete proxies one thread keeps across savepoints (a proxy is ~0.1-10 KB)
_MEMO = threading.local()


def _memo() -> _Seen:
    """This thread's `_Seen`, ready for one more savepoint (`_Seen.next_savepoint`)."""
    seen: _Seen | None = getattr(_MEMO, "seen", None)
    if seen is None:
        seen = _MEMO.seen = _Seen()
    return seen.next_savepoint()


@functools.cache
def _keyed_parser(kind: str) -> Callable[[BoundedReader], KeyedStateMeta]:
    """The keyed-proxy parser of a handle kind, one object per kind: `_Seen` keys its memo by parser."""
    return functools.partial(read_keyed_proxy, handle_kind=kind)


def _looked_past(meta: KeyedStateMeta | OperatorStateMeta) -> bool:
    """Whether reading `meta` may have looked at bytes after its proxy: a row type's Java stream this
    reader does not model is parsed until it fails, then skipped (`snapshots._row_types`), so it may
    have read into the state that follows."""
    if isinstance(meta, KeyedStateMeta):
        states = meta.states
        roots = [meta.key_serializer] if meta.key_serializer is not None else []
    else:
        states = (*meta.operator_states, *meta.broadcast_states)
        roots = []
    roots += [s for st in states for _, s in st.serializers]
    return any(snap.class_name == ROW_DATA_SNAPSHOT and snap.logical_types is None
               for root in roots for _, snap in root.walk())


def _with_source(meta: T, source: str) -> T:
    """`meta` as read from another stream with the same bytes (only `source` differs): built directly,
    `dataclasses.replace` costs several times more and this runs for most subtasks of a savepoint."""
    if meta.source == source:
        return meta
    if isinstance(meta, KeyedStateMeta):
        return KeyedStateMeta(meta.handle, meta.version, meta.compression, meta.key_serializer,  # type: ignore[return-value]
                              meta.states, source, meta.incomplete)
    return OperatorStateMeta(meta.version, meta.compression, meta.operator_states,  # type: ignore[return-value]
                             meta.broadcast_states, source, meta.incomplete)


def _parse(ref: StreamRef, parse: Callable[[BoundedReader], T], opener: Opener, seen: _Seen) -> T:
    """Parse the proxy from a prefix of the stream, reading more only if the proxy is longer.

    `seen` memoizes what this savepoint's streams held so far (`_Seen`): a 1,000-subtask savepoint
    parses each distinct proxy once."""
    limit = FIRST_READ
    while True:
        data, whole = opener(ref, limit)
        hit = seen.proxy(data, parse)
        if hit is not None:
            return _with_source(hit, ref.source)
        digest = hashlib.blake2b(data, digest_size=16).digest()  # a digest: keys stay small
        known = seen.by_digest.get((whole, digest))
        if known is not None and known[0] is parse:
            return _with_source(known[1], ref.source)
        reader = BoundedReader(data, ref.source)
        try:
            result = parse(reader)
        except MetadataFormatError as exc:
            if whole or limit >= MAX_PROXY_BYTES or not exc.detail.startswith("truncated"):
                raise
        else:
            if whole or result.incomplete is None or limit >= MAX_PROXY_BYTES:
                seen.keep(data, whole, digest, parse, result, reader.pos)
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
    seen = _memo()
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
                        keyed.append(_parse(ref, _keyed_parser(kind), opener, seen))
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

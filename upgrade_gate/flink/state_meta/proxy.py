"""Readers of the two serialization proxies at the start of state handle streams.

`KeyedBackendSerializationProxy` (written first by `FullSnapshotAsyncWriter` for HashMap and RocksDB
full/canonical snapshots, and into the meta stream of RocksDB incremental/native snapshots):
int version (6 since Flink 1.17), boolean key-group compression, the key serializer's snapshot, a
short count of states, then one `StateMetaInfoSnapshot` each. `OperatorBackendSerializationProxy`
(at the start of an operator state handle's stream): int version (6), boolean compression, a short
count and the list/union states' meta infos, a short count and the broadcast states' meta infos.

A `StateMetaInfoSnapshot` (`StateMetaInfoSnapshotReadersWriters.CurrentWriterImpl`): name (UTF),
`BackendStateType` ordinal (int), an int count of string options (UTF key, UTF value), an int count of
serializer snapshots (UTF role, then `TypeSerializerSnapshotSerializationUtil.writeSerializerSnapshot`).
"""

from __future__ import annotations

from dataclasses import dataclass

from upgrade_gate.flink.metadata.reader import BoundedReader
from upgrade_gate.flink.state_meta.model import KeyedStateMeta, OperatorStateMeta, SerializerSnapshot, StateMetaInfo
from upgrade_gate.flink.state_meta.snapshots import UnknownSnapshotFormat, read_serializer_snapshot

__all__ = ["BACKEND_STATE_TYPES", "ProxyLayout", "proxy_layout", "read_keyed_proxy", "read_operator_proxy"]

PROXY_VERSION = 6  # KeyedBackendSerializationProxy.VERSION and OperatorBackendSerializationProxy.VERSION
# StateMetaInfoSnapshot.BackendStateType by ordinal (KEY_VALUE_V2: Flink 2.x's asynchronous state API).
BACKEND_STATE_TYPES = ("KEY_VALUE", "OPERATOR", "BROADCAST", "PRIORITY_QUEUE", "KEY_VALUE_V2")


class _Partial(Exception):
    """Carries the states read before an unknown snapshot format stopped the reading."""

    def __init__(self, cause: UnknownSnapshotFormat, states: list[StateMetaInfo]) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.states = states


class OldProxyVersion(Exception):
    """A proxy older than version 6: valid bytes of an old Flink, in a layout Flink 1.17+ refuses to read."""


def _version(r: BoundedReader, what: str) -> int:
    at = r.pos
    version = r.read_int(f"{what} version")
    if 1 <= version < PROXY_VERSION:
        raise OldProxyVersion(f"{r.source}: {what} version {version} (Flink 1.16 or older): Flink 1.17+ refuses it "
                              f"(\"please migrate using Flink 1.16\")")
    if version != PROXY_VERSION:
        r.fail(f"expected {what} version {PROXY_VERSION}, found {version}", at)
    return version


def _short_count(r: BoundedReader, what: str) -> int:
    at = r.pos
    raw = r.read_bytes(2, f"number of {what}")
    n = int.from_bytes(raw, "big", signed=True)
    if n < 0:
        r.fail(f"expected a number of {what} >= 0, found {n}", at)
    if n * 10 > r.remaining():  # name, type, two counts: at least 10 bytes each
        r.fail(f"number of {what} {n} needs at least {n * 10} bytes, only {r.remaining()} left", at)
    return n


def read_state_meta_info(r: BoundedReader) -> StateMetaInfo:
    name = r.read_utf("state name")
    at = r.pos
    ordinal = r.read_int("backend state type")
    if not 0 <= ordinal < len(BACKEND_STATE_TYPES):
        r.fail(f"expected a backend state type ordinal 0-{len(BACKEND_STATE_TYPES) - 1}, found {ordinal}", at)
    n = r.read_count("state options", 4)
    options = tuple((r.read_utf("option key"), r.read_utf("option value")) for _ in range(n))
    n = r.read_count("state serializer snapshots", 10)
    serializers = []
    for _ in range(n):
        role = r.read_utf("serializer role")
        serializers.append((role, read_serializer_snapshot(r)))
    return StateMetaInfo(name, BACKEND_STATE_TYPES[ordinal], options, tuple(serializers))


def _states(r: BoundedReader, what: str) -> list[StateMetaInfo]:
    out: list[StateMetaInfo] = []
    for _ in range(_short_count(r, what)):
        try:
            out.append(read_state_meta_info(r))
        except UnknownSnapshotFormat as exc:
            raise _Partial(exc, out) from None
    return out


def read_keyed_proxy(r: BoundedReader, handle_kind: str) -> KeyedStateMeta:
    """`KeyedBackendSerializationProxy.read`, from the start of a keyed handle's (meta) stream."""
    try:
        version = _version(r, "keyed backend serialization proxy")
    except OldProxyVersion as exc:
        return KeyedStateMeta(handle_kind, 0, False, None, (), r.source, str(exc))
    compression = r.read_bool("key-group compression flag")
    key: SerializerSnapshot | None = None
    try:
        key = read_serializer_snapshot(r)
        states = _states(r, "keyed states")
    except UnknownSnapshotFormat as exc:
        return KeyedStateMeta(handle_kind, version, compression, None, (), r.source, str(exc))
    except _Partial as p:
        return KeyedStateMeta(handle_kind, version, compression, key, tuple(p.states), r.source, str(p.cause))
    return KeyedStateMeta(handle_kind, version, compression, key, tuple(states), r.source)


def read_operator_proxy(r: BoundedReader) -> OperatorStateMeta:
    """`OperatorBackendSerializationProxy.read`, from the start of an operator handle's stream."""
    try:
        version = _version(r, "operator backend serialization proxy")
    except OldProxyVersion as exc:
        return OperatorStateMeta(0, False, (), (), r.source, str(exc))
    compression = r.read_bool("state compression flag")
    operator: list[StateMetaInfo] | None = None
    try:
        operator = _states(r, "operator states")
        broadcast = _states(r, "broadcast states")
    except _Partial as p:
        done = (tuple(p.states), ()) if operator is None else (tuple(operator), tuple(p.states))
        return OperatorStateMeta(version, compression, *done, r.source, str(p.cause))
    return OperatorStateMeta(version, compression, tuple(operator), tuple(broadcast), r.source)


@dataclass(frozen=True, slots=True)
class ProxyLayout:
    """Where each state's meta info lies in a serialization proxy's bytes: what dropping one state by name needs
    (its block cut out, its list's count lowered; the state data after the proxy is untouched).

    `lists`: (offset of the short count, [(state name, start, end), ...]) per list of the proxy: keyed states for
    a keyed proxy; operator states, then broadcast states for an operator proxy. `end`: where the proxy ends."""

    lists: tuple[tuple[int, tuple[tuple[str, int, int], ...]], ...]
    end: int

    @property
    def names(self) -> set[str]:
        return {name for _, states in self.lists for name, _, _ in states}

    def without(self, data: bytes, names: set[str]) -> bytes:
        """The proxy's bytes with the named states' meta infos removed."""
        out = bytearray()
        at = 0
        for count_at, states in self.lists:
            kept = [s for s in states if s[0] not in names]
            out += data[at:count_at]
            out += len(kept).to_bytes(2, "big")
            for _, start, stop in kept:
                out += data[start:stop]
            at = states[-1][2] if states else count_at + 2
        out += data[at:self.end]
        return bytes(out)


def _layout_list(r: BoundedReader, what: str) -> tuple[int, tuple[tuple[str, int, int], ...]]:
    count_at = r.pos
    states = []
    for _ in range(_short_count(r, what)):
        start = r.pos
        meta = read_state_meta_info(r)
        states.append((meta.name, start, r.pos))
    return count_at, tuple(states)


def proxy_layout(data: bytes, source: str, keyed: bool) -> ProxyLayout:
    """The layout of the proxy at the start of `data` (`KeyedBackendSerializationProxy` when `keyed`, else
    `OperatorBackendSerializationProxy`). Raises `UnknownSnapshotFormat` for a snapshot whose length this reader
    cannot find: a state it cannot step over is never cut by guess."""
    r = BoundedReader(data, source)
    _version(r, "keyed backend serialization proxy" if keyed else "operator backend serialization proxy")
    r.read_bool("compression flag")
    if keyed:
        read_serializer_snapshot(r)
        lists = (_layout_list(r, "keyed states"),)
    else:
        lists = (_layout_list(r, "operator states"), _layout_list(r, "broadcast states"))
    return ProxyLayout(lists, r.pos)

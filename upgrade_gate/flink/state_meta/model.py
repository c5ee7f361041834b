"""What a state handle's serialization proxy says about its states, named after Flink's classes.

A keyed state handle starts with `KeyedBackendSerializationProxy` (the key serializer's snapshot, then
one `StateMetaInfoSnapshot` per registered state); an operator state handle with
`OperatorBackendSerializationProxy` (list/union state, then broadcast state). Each meta info holds the
state's name, its `BackendStateType`, string options (`KEYED_STATE_TYPE`, `OPERATOR_STATE_DISTRIBUTION_MODE`)
and `TypeSerializerSnapshot`s keyed by role (`KEY_SERIALIZER`, `NAMESPACE_SERIALIZER`, `VALUE_SERIALIZER`,
`USER_KEY_SERIALIZER`). These frozen dataclasses hold exactly that, plus `view()` dicts in the shape
of the Java oracle (flink_bridge/java/savepoints/common/ugate/savepoints/StateMetaDump.java).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from hashing.frozen import fast_init

__all__ = ["KRYO_SNAPSHOT", "POJO_SNAPSHOT", "TTL_SNAPSHOTS", "KeyedStateMeta", "OperatorStateMeta",
           "SerializerSnapshot", "StateMetaInfo", "short_name"]

KRYO_SNAPSHOT = "org.apache.flink.api.java.typeutils.runtime.kryo.KryoSerializerSnapshot"
POJO_SNAPSHOT = "org.apache.flink.api.java.typeutils.runtime.PojoSerializerSnapshot"
TTL_SNAPSHOTS = frozenset({"org.apache.flink.runtime.state.ttl.TtlStateFactory$TtlSerializerSnapshot",
                           "org.apache.flink.runtime.state.v2.ttl.TtlStateFactory$TtlSerializerSnapshot"})
TIMER_STATE_PREFIX = "_timer_state/"  # InternalTimeServiceManagerImpl's priority-queue state names


@dataclass(frozen=True, slots=True)
class SerializerSnapshot:
    """One `TypeSerializerSnapshot`: its class, the version it was written with, and what it nests.

    `nested` are a `CompositeTypeSerializerSnapshot`'s nested snapshots; `fields` a POJO snapshot's field
    snapshots by field name (None: the field's snapshot could not be framed); `type_name` the POJO, Kryo,
    enum, tuple or generic type class; `registrations` a Kryo snapshot's registrations (class name ->
    `KryoRegistration.SerializerDefinitionType`: UNSPECIFIED, CLASS or INSTANCE, with the serializer class
    for CLASS); `default_serializers` the classes given a default Kryo serializer."""

    class_name: str
    version: int
    nested: tuple[SerializerSnapshot, ...] = ()
    fields: tuple[tuple[str, SerializerSnapshot | None], ...] = ()
    type_name: str | None = None
    registrations: tuple[tuple[str, str | None, str | None], ...] = ()
    default_serializers: tuple[str, ...] = ()
    subclasses: tuple[tuple[str, SerializerSnapshot | None], ...] = ()
    enum_constants: tuple[str, ...] = ()
    composite: bool = False  # a CompositeTypeSerializerSnapshot (or one ending with nested snapshots)
    # RowDataSerializerSnapshot: its fields' LogicalTypes as `asSerializableString()` (logical_types.py);
    # None when not read (another snapshot, or a type not modelled there).
    logical_types: tuple[str, ...] | None = None
    # flink-table-runtime's parameter snapshots: DECIMAL (precision, scale), TIMESTAMP (precision), BinaryRow (arity)
    parameters: tuple[int, ...] = ()

    @property
    def is_kryo(self) -> bool:
        return self.class_name == KRYO_SNAPSHOT

    @property
    def is_pojo(self) -> bool:
        return self.class_name == POJO_SNAPSHOT

    def walk(self, path: str = "") -> Iterator[tuple[str, SerializerSnapshot]]:
        """Every snapshot in this tree with a readable path (`counts`, `[0]`, `counts.[1]`), this one first."""
        yield path, self
        for i, n in enumerate(self.nested):
            yield from n.walk(f"{path}.[{i}]" if path else f"[{i}]")
        for name, f in (*self.fields, *self.subclasses):
            if f is not None:
                yield from f.walk(f"{path}.{name}" if path else name)

    def describe(self) -> str:
        """A compact one-line type: `Pojo(CollectionPojo){id: Long, counts: Kryo(java.util.HashMap)}`."""
        name = short_name(self.class_name)
        if self.is_kryo:
            return f"Kryo({self.type_name})"
        if self.is_pojo:
            inner = ", ".join(f"{n}: {f.describe() if f else '?'}" for n, f in self.fields)
            return f"Pojo({(self.type_name or '?').rsplit('.', 1)[-1]}){{{inner}}}"
        if self.type_name and not self.nested:
            name = f"{name}({self.type_name.rsplit('.', 1)[-1]})"
        if self.nested:
            name = f"{name}<{', '.join(n.describe() for n in self.nested)}>"
        return name

    def view(self) -> dict[str, Any]:
        """The oracle's shape: class, version, then nested / type+fields (POJO) / type+registrations (Kryo)."""
        out: dict[str, Any] = {"class": self.class_name, "version": self.version}
        if self.class_name == KRYO_SNAPSHOT:
            out["type"] = self.type_name
            out["registrations"] = {n: d for n, d, _ in self.registrations}
            out["default_serializers"] = list(self.default_serializers)
        elif self.class_name == POJO_SNAPSHOT:
            out["type"] = self.type_name
            out["fields"] = {n: (f.view() if f is not None else None) for n, f in self.fields}
        elif self.composite:
            out["nested"] = [n.view() for n in self.nested]
        return out


def short_name(class_name: str) -> str:
    """`org...LongSerializer$LongSerializerSnapshot` -> `Long`; `...ListSerializerSnapshot` -> `List`."""
    tail = class_name.rsplit(".", 1)[-1]
    tail = tail.split("$")[-1] if "$" in tail else tail
    for suffix in ("SerializerSnapshot", "Snapshot"):
        if tail.endswith(suffix) and len(tail) > len(suffix):
            return tail[: -len(suffix)]
    return tail


@dataclass(frozen=True, slots=True)
class StateMetaInfo:
    """`StateMetaInfoSnapshot`: one registered state."""

    name: str
    backend_type: str  # KEY_VALUE | OPERATOR | BROADCAST | PRIORITY_QUEUE | KEY_VALUE_V2
    options: tuple[tuple[str, str], ...]
    serializers: tuple[tuple[str, SerializerSnapshot], ...]

    def option(self, key: str) -> str | None:
        return next((v for k, v in self.options if k == key), None)

    def serializer(self, role: str) -> SerializerSnapshot | None:
        return next((s for k, s in self.serializers if k == role), None)

    @property
    def kind(self) -> str:
        """value, list, map, reducing, aggregating (keyed); timers / priority-queue; list, union, broadcast."""
        if self.backend_type in ("KEY_VALUE", "KEY_VALUE_V2"):
            return (self.option("KEYED_STATE_TYPE") or "unknown").lower()
        if self.backend_type == "PRIORITY_QUEUE":
            return "timers" if self.name.startswith(TIMER_STATE_PREFIX) else "priority-queue"
        mode = self.option("OPERATOR_STATE_DISTRIBUTION_MODE") or ""
        return {"SPLIT_DISTRIBUTE": "list", "UNION": "union", "BROADCAST": "broadcast"}.get(mode, mode.lower())

    @property
    def ttl(self) -> bool:
        """TTL state: its value serializer wraps the user's in `TtlStateFactory.TtlSerializer` (the TTL
        duration itself is not in the savepoint)."""
        value = self.serializer("VALUE_SERIALIZER")
        return value is not None and any(s.class_name in TTL_SNAPSHOTS for _, s in value.walk())

    def view(self) -> dict[str, Any]:
        return {"name": self.name, "backend_type": self.backend_type, "options": dict(sorted(self.options)),
                "serializers": {k: s.view() for k, s in sorted(self.serializers)}}


@fast_init
@dataclass(frozen=True, slots=True)
class KeyedStateMeta:
    """A keyed handle's `KeyedBackendSerializationProxy`. `incomplete` names what stopped the reading
    (a serializer snapshot class whose format we do not know); `states` then holds those read before it."""

    handle: str
    version: int
    compression: bool
    key_serializer: SerializerSnapshot | None
    states: tuple[StateMetaInfo, ...]
    source: str = ""
    incomplete: str | None = None

    def view(self) -> dict[str, Any]:
        return {"handle": self.handle, "version": self.version, "compression": self.compression,
                "key_serializer": self.key_serializer.view() if self.key_serializer else None,
                "states": [s.view() for s in self.states]}


@fast_init
@dataclass(frozen=True, slots=True)
class OperatorStateMeta:
    """An operator handle's `OperatorBackendSerializationProxy`: list/union states, then broadcast states."""

    version: int
    compression: bool
    operator_states: tuple[StateMetaInfo, ...]
    broadcast_states: tuple[StateMetaInfo, ...]
    source: str = ""
    incomplete: str | None = None

    def view(self) -> dict[str, Any]:
        return {"version": self.version, "compression": self.compression,
                "operator_states": [s.view() for s in self.operator_states],
                "broadcast_states": [s.view() for s in self.broadcast_states]}


@dataclass(frozen=True, slots=True)
class SubtaskStateMeta:
    index: int
    keyed: tuple[KeyedStateMeta, ...] = ()
    operator: tuple[OperatorStateMeta, ...] = ()


@dataclass(frozen=True, slots=True)
class OperatorSchemas:
    """Every subtask's proxies of one operator, and the states they name (first subtask that has each)."""

    operator_id: str
    name: str | None
    uid: str | None
    subtasks: tuple[SubtaskStateMeta, ...]
    key_serializer: SerializerSnapshot | None = None
    states: tuple[StateMetaInfo, ...] = field(default=())
    incomplete: tuple[str, ...] = ()

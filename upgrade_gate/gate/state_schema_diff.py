"""A schema diff of two savepoints of one job: which state changes Flink cannot migrate.

The *old* savepoint is what the upgrade restores (written by the running job); the *new* one was written by
the new job version from scratch (a staging or test run): its serializer snapshots are the serializers the new
job registers. Flink restores a state by asking the new serializer's snapshot to resolve its compatibility with
the old snapshot (`TypeSerializerSnapshot#resolveSchemaCompatibility`): compatible as is, compatible after
migration (the backend rewrites the state), or incompatible (the restore fails). This module replays that
per state, on the snapshot trees `upgrade_gate.flink.state_meta` reads, with the rules of Flink's snapshots:

- any serializer snapshot replaced by another class (Long -> String): incompatible; TTL turned on or off (a
  `TtlStateFactory$TtlSerializerSnapshot` appears or goes) is what the restoring release does, looked up in
  `release_rules.TTL_RULES` (recorded real restores per release, state kind and backend), incompatible and "not
  verified on this release" where nothing was recorded;
- `PojoSerializerSnapshot`: another POJO class is incompatible; a field added or removed is compatible after
  migration; a field whose serializer is incompatible makes the POJO incompatible;
- `CompositeTypeSerializerSnapshot` (Row, tuples, List, Map, TTL...): another arity (a Row field added or
  removed) or another outer type (tuple class) is incompatible; otherwise the worst of its nested snapshots;
- `KryoSerializerSnapshot`: another type is incompatible (registrations are reconfigured: compatible);
- `EnumSerializerSnapshot`: a constant removed is incompatible; added or reordered is reconfigured;
- the key serializer (`KeyedBackendSerializationProxy`) must be compatible, as must a state's namespace
  serializer; a state whose kind changed (value -> list) is refused.

Flink's error depends on the backend that restores (measured, tests/fixtures/savepoints/state-schemas/changes/):
the heap backend reads every value with the *old* serializer while it restores, so a POJO field whose type
changed fails there with an `IllegalArgumentException` (a reflective field set), before any compatibility
check; RocksDB checks compatibility first and throws `StateMigrationException`. The texts below are Flink's
message formats (`HeapKeyedStateBackend`, `RocksDBKeyedStateBackend`, `RegisteredKeyValueStateBackendMetaInfo`)
with the serializer classes in place of Flink's `Object#toString` (class@hash).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from enum import IntEnum
from typing import Any

from hashing.versions import FlinkVersion
from upgrade_gate.flink.state_meta import OperatorSchemas, SerializerSnapshot, StateMetaInfo
from upgrade_gate.flink.state_meta.model import KRYO_SNAPSHOT, POJO_SNAPSHOT, TTL_SNAPSHOTS, short_name
from upgrade_gate.gate.release_rules import TtlOutcome, ttl_rule

__all__ = ["BACKENDS", "TTL_OFF", "TTL_ON", "Compat", "SchemaChange", "StateDiff", "TtlContext", "describe_diff",
           "diff_schemas", "resolve", "serializer_class"]

BACKENDS = ("hashmap", "rocksdb")
ENUM_SNAPSHOT = "org.apache.flink.api.common.typeutils.base.EnumSerializer$EnumSerializerSnapshot"
_MIGRATION = "org.apache.flink.util.StateMigrationException"
TTL_ON, TTL_OFF = "TTL turned on", "TTL turned off"


class Compat(IntEnum):
    """`TypeSerializerSchemaCompatibility`'s outcomes, ordered worst last."""

    AS_IS = 0
    RECONFIGURED = 1  # compatibleWithReconfiguredSerializer: no rewrite
    MIGRATION = 2  # compatibleAfterMigration: the backend rewrites the state on restore
    INCOMPATIBLE = 3


@dataclass(frozen=True, slots=True)
class SchemaChange:
    """One difference in one serializer tree: where (`path`: a POJO field, `[i]` a nested serializer), what."""

    path: str
    what: str
    old: str
    new: str
    compat: Compat
    field_retyped: bool = False  # a POJO field whose serializer is incompatible (the heap backend's reflective set)
    evidence: str = ""  # for a rule that differs by release: the recorded restore it follows, or "not verified"

    def to_json(self) -> dict[str, Any]:
        out = {"path": self.path, "change": self.what, "old": self.old, "new": self.new,
               "compatibility": self.compat.name}
        return {**out, "evidence": self.evidence} if self.evidence else out

    def text(self) -> str:
        where = f"{self.path}: " if self.path else ""
        return f"{where}{self.what} ({self.old} -> {self.new}{'; ' + self.evidence if self.evidence else ''})"


@dataclass(frozen=True, slots=True)
class TtlContext:
    """The restore a TTL switch is judged for: the new job's Flink release line, its backend (None: not known,
    so every backend must agree) and whether the savepoint's `_metadata` version is the one that line writes (the
    rules were recorded with savepoints of the restoring release)."""

    version: FlinkVersion
    backend: str | None = None
    same_line: bool = True


@dataclass(frozen=True, slots=True)
class StateDiff:
    """One state (operator, name) compared across the two savepoints."""

    operator_id: str
    operator: str  # uid, else name, else id: how a person knows the operator
    state: str
    kind: str
    role: str  # KEY_SERIALIZER (the backend's key), VALUE_SERIALIZER, NAMESPACE_SERIALIZER, USER_KEY_SERIALIZER, STATE
    changes: tuple[SchemaChange, ...]
    compat: Compat
    errors: tuple[tuple[str, str], ...] = ()  # (backend, Flink's error) when INCOMPATIBLE

    @property
    def blocking(self) -> bool:
        return self.compat is Compat.INCOMPATIBLE

    def error(self, backend: str | None) -> str:
        """Flink's error on `backend` (hashmap | rocksdb), or every backend's when it is not known."""
        texts = dict(self.errors)
        if backend in texts:
            return texts[backend]
        if len(set(texts.values())) == 1:
            return next(iter(texts.values()))
        return "; ".join(f"{b}: {t}" for b, t in self.errors)

    def summary(self) -> str:
        return "; ".join(c.text() for c in self.changes)

    def to_json(self, backend: str | None = None) -> dict[str, Any]:
        return {"operator_id": self.operator_id, "operator": self.operator, "state": self.state, "kind": self.kind,
                "serializer": self.role, "compatibility": self.compat.name,
                "changes": [c.to_json() for c in self.changes],
                "flink_error": self.error(backend) if self.blocking else None}


def serializer_class(snapshot_class: str) -> str:
    """The serializer a snapshot class belongs to, as Flink's messages print it (without `@hash`):
    `RowSerializer$RowSerializerSnapshot` -> `RowSerializer`, `PojoSerializerSnapshot` -> `PojoSerializer`."""
    outer, _, inner = snapshot_class.rpartition("$")
    if outer and outer.rsplit("$", 1)[-1].rsplit(".", 1)[-1].endswith("Serializer"):
        return outer  # the snapshot nested in its serializer (LongSerializer$LongSerializerSnapshot)
    if outer:  # a sibling (TtlStateFactory$TtlSerializerSnapshot -> TtlStateFactory$TtlSerializer)
        return f"{outer}${inner.removesuffix('Snapshot')}"
    return snapshot_class.removesuffix("Snapshot")


def _text(s: SerializerSnapshot | None) -> str:
    return s.describe() if s is not None else "-"


def resolve(old: SerializerSnapshot, new: SerializerSnapshot, path: str = "") -> list[SchemaChange]:
    """Every change from `old` to `new`, each with its compatibility (empty: compatible as is)."""
    if old.class_name != new.class_name:
        was_ttl, is_ttl = old.class_name in TTL_SNAPSHOTS, new.class_name in TTL_SNAPSHOTS
        if was_ttl == is_ttl:
            return [SchemaChange(path, "serializer replaced", _text(old), _text(new), Compat.INCOMPATIBLE)]
        switch = SchemaChange(path, TTL_ON if is_ttl else TTL_OFF, _text(old), _text(new), Compat.INCOMPATIBLE)
        # a release that migrates across the switch still resolves the wrapped value's serializer against the
        # plain one (2.x `TtlAwareSerializerSnapshot#resolveCompatibilityForTtlMigration`: incompatible stays so);
        # `TtlSerializerSnapshot` nests (the timestamp's LongSerializer, the value's serializer)
        wrapped, plain = (new, old) if is_ttl else (old, new)
        if not wrapped.nested:
            return [switch]
        inner = resolve(plain, wrapped.nested[-1], path) if is_ttl else resolve(wrapped.nested[-1], plain, path)
        return [switch, *inner]
    if old.class_name == POJO_SNAPSHOT:
        return _pojo(old, new, path)
    if old.class_name == KRYO_SNAPSHOT:
        if old.type_name != new.type_name:
            return [SchemaChange(path, "Kryo type changed", _text(old), _text(new), Compat.INCOMPATIBLE)]
        if old.registrations != new.registrations or old.default_serializers != new.default_serializers:
            return [SchemaChange(path, "Kryo registrations changed", _text(old), _text(new), Compat.RECONFIGURED)]
        return []
    if old.class_name == ENUM_SNAPSHOT and old.enum_constants != new.enum_constants:
        removed = [c for c in old.enum_constants if c not in new.enum_constants]
        if removed or old.type_name != new.type_name:
            return [SchemaChange(path, f"enum constants removed ({', '.join(removed)})" if removed
                                 else "enum type changed", _text(old), _text(new), Compat.INCOMPATIBLE)]
        return [SchemaChange(path, "enum constants added or reordered", ", ".join(old.enum_constants),
                             ", ".join(new.enum_constants), Compat.RECONFIGURED)]
    if old.type_name != new.type_name:  # tuple / array / value classes: the outer snapshot names the type
        return [SchemaChange(path, "type changed", _text(old), _text(new), Compat.INCOMPATIBLE)]
    if len(old.nested) != len(new.nested):
        what = f"arity changed ({len(old.nested)} -> {len(new.nested)} fields)"
        return [SchemaChange(path, what, _text(old), _text(new), Compat.INCOMPATIBLE)]
    out: list[SchemaChange] = []
    for i, (o, n) in enumerate(zip(old.nested, new.nested, strict=True)):
        out += resolve(o, n, f"{path}.[{i}]" if path else f"[{i}]")
    return out


def _pojo(old: SerializerSnapshot, new: SerializerSnapshot, path: str) -> list[SchemaChange]:
    if old.type_name != new.type_name:
        return [SchemaChange(path, "POJO class changed", _text(old), _text(new), Compat.INCOMPATIBLE)]
    old_fields, new_fields = dict(old.fields), dict(new.fields)
    out: list[SchemaChange] = []
    for name, snap in old_fields.items():
        where = f"{path}.{name}" if path else name
        if name not in new_fields:
            out.append(SchemaChange(where, "field removed", _text(snap), "-", Compat.MIGRATION))
            continue
        n = new_fields[name]
        if snap is None or n is None:
            continue  # a field snapshot we could not frame: nothing to compare
        inner = resolve(snap, n, where)
        if any(c.compat is Compat.INCOMPATIBLE for c in inner):
            out.append(SchemaChange(where, "field type changed", _text(snap), _text(n), Compat.INCOMPATIBLE,
                                    field_retyped=True))
        else:
            out += inner
    for name, snap in new_fields.items():
        if name not in old_fields:
            out.append(SchemaChange(f"{path}.{name}" if path else name, "field added", "-", _text(snap),
                                    Compat.MIGRATION))
    return out


def _errors(role: str, old: SerializerSnapshot, new: SerializerSnapshot,
            changes: list[SchemaChange]) -> tuple[tuple[str, str], ...]:
    """Flink's error per backend for an incompatible `role` serializer (message formats of Flink's backends)."""
    o, n = serializer_class(old.class_name), serializer_class(new.class_name)
    if role == "KEY_SERIALIZER":
        text = f"{_MIGRATION}: The new key serializer ({n}) must be compatible with the previous key serializer ({o})."
        return (("hashmap", text), ("rocksdb", text))
    if role == "NAMESPACE_SERIALIZER":
        tail = f"the new namespace serializer ({n}) must be compatible with the old namespace serializer ({o})."
        return (("hashmap", f"{_MIGRATION}: For heap backends, {tail}"), ("rocksdb", f"{_MIGRATION}: The {tail[4:]}"))
    tail = f"the new state serializer ({n}) must not be incompatible with the old state serializer ({o})."
    heap = f"{_MIGRATION}: For heap backends, {tail}"
    retyped = next((c for c in changes if c.field_retyped), None)
    if retyped is not None:
        # HeapRestoreOperation reads each value with the restored (old) PojoSerializer into the new class:
        # Field#set of the old field's value into the retyped field (sun.reflect's wording)
        pojo = old.type_name or "?"
        heap = (f"java.lang.IllegalArgumentException: Can not set {_java_type(retyped.new)} field "
                f"{pojo}.{retyped.path.rsplit('.', 1)[-1]} to {_java_type(retyped.old, boxed=True)}")
    return (("hashmap", heap), ("rocksdb", f"{_MIGRATION}: The {tail[4:]}"))


_JAVA_TYPES = {"Long": "long", "Int": "int", "Short": "short", "Byte": "byte", "Boolean": "boolean",
               "Double": "double", "Float": "float", "Char": "char", "String": "java.lang.String"}
_BOXED = {"long": "java.lang.Long", "int": "java.lang.Integer", "short": "java.lang.Short", "byte": "java.lang.Byte",
          "boolean": "java.lang.Boolean", "double": "java.lang.Double", "float": "java.lang.Float",
          "char": "java.lang.Character"}


def _java_type(described: str, boxed: bool = False) -> str:
    """A field's Java type as reflection prints it, from a snapshot's short description (`Long` -> `long`).
    The snapshot does not say whether a Long field was `long` or `Long`; primitives are the common case."""
    t = _JAVA_TYPES.get(described, described)
    return _BOXED.get(t, t) if boxed else t


def judge_ttl(change: SchemaChange, kind: str, ttl: TtlContext | None) -> SchemaChange:
    """A TTL switch as the restoring release handles it (`release_rules.TTL_RULES`); other changes as they are.
    Unrecorded (another release line, state kind or writer of the savepoint): incompatible, and said so."""
    if change.what not in (TTL_ON, TTL_OFF):
        return change
    if ttl is None:
        return replace(change, evidence="not verified on this release (no Flink release given)")
    key = "off-on" if change.what == TTL_ON else "on-off"
    where = f"Flink {ttl.version}{' ' + ttl.backend if ttl.backend else ''}"
    if not ttl.same_line:
        return replace(change, evidence=f"not verified on this release: {where} restoring a savepoint another "
                                        f"release line wrote")
    rules = [ttl_rule(ttl.version, key, kind, b) for b in ((ttl.backend,) if ttl.backend else BACKENDS)]
    if any(r is None for r in rules):
        return replace(change, evidence=f"not verified on this release: no recorded restore of {kind} state on "
                                        f"{where}")
    proof = ", ".join(r.scenario for r in rules if r is not None)
    if all(r is not None and r.outcome is TtlOutcome.RESTORES for r in rules):
        return replace(change, compat=Compat.MIGRATION, evidence=f"{where} restores it: real restore {proof}")
    return replace(change, evidence=f"{where} refuses it: real restore {proof}")


def _label(op: OperatorSchemas) -> str:
    return op.uid or op.name or op.operator_id


def _state_diff(op: OperatorSchemas, old: StateMetaInfo, new: StateMetaInfo,
                ttl: TtlContext | None) -> Iterator[StateDiff]:
    if old.backend_type != new.backend_type or old.kind != new.kind:
        text = (f"java.lang.IllegalStateException: Incompatible key/value state types. Was [{old.kind.upper()}], "
                f"registered with [{new.kind.upper()}].")
        yield StateDiff(op.operator_id, _label(op), old.name, old.kind, "STATE",
                        (SchemaChange("", "state kind changed", old.kind, new.kind, Compat.INCOMPATIBLE),),
                        Compat.INCOMPATIBLE, (("hashmap", text), ("rocksdb", text)))
        return
    new_roles = dict(new.serializers)
    for role, o in old.serializers:
        n = new_roles.get(role)
        if n is None:
            continue
        changes = [judge_ttl(c, old.kind, ttl) for c in resolve(o, n)]
        if not changes:
            continue
        worst = max(c.compat for c in changes)
        errors = _errors(role, o, n, changes) if worst is Compat.INCOMPATIBLE else ()
        yield StateDiff(op.operator_id, _label(op), old.name, old.kind, role, tuple(changes), worst, errors)


def diff_schemas(old: Iterable[OperatorSchemas], new: Iterable[OperatorSchemas],
                 operator_map: Mapping[str, str] | None = None,
                 ttl: TtlContext | None = None) -> tuple[list[StateDiff], list[str]]:
    """Per state (operator, name) present in both, the schema diff; plus notes (states only on one side).

    `operator_map` maps an old operator id to the new job's operator id that restores it (from the gate's
    simulated assignment); without it operators pair by id, then by uid. `ttl` says which release restores, for
    the TTL rules that differ by release (without it a TTL switch is incompatible, "not verified")."""
    new_by_id = {op.operator_id: op for op in new}
    new_by_uid = {op.uid: op for op in new_by_id.values() if op.uid}
    diffs: list[StateDiff] = []
    notes: list[str] = []
    for op in old:
        target = new_by_id.get((operator_map or {}).get(op.operator_id, op.operator_id))
        if target is None and op.uid:
            target = new_by_uid.get(op.uid)
        if target is None:
            continue  # the new job has no such operator: the assignment rules report it (lost or dropped)
        if op.key_serializer is not None and target.key_serializer is not None:
            changes = resolve(op.key_serializer, target.key_serializer)
            if changes:
                worst = max(c.compat for c in changes)
                errors = _errors("KEY_SERIALIZER", op.key_serializer, target.key_serializer, changes) \
                    if worst is Compat.INCOMPATIBLE else ()
                diffs.append(StateDiff(op.operator_id, _label(op), "(key)", "key", "KEY_SERIALIZER", tuple(changes),
                                       worst, errors))
        new_states = {s.name: s for s in target.states}
        for s in op.states:
            n = new_states.get(s.name)
            if n is None:
                notes.append(f"operator {_label(op)}: state '{s.name}' ({s.kind}) is not in the new job's savepoint: "
                             f"Flink restores it, but the new job does not declare it")
                continue
            diffs.extend(_state_diff(op, s, n, ttl))
        old_names = {s.name for s in op.states}
        for s in target.states:
            if s.name not in old_names:
                notes.append(f"operator {_label(op)}: state '{s.name}' ({s.kind}) is new: it starts empty")
    return diffs, notes


def describe_diff(d: StateDiff) -> str:
    """One line: `operator evolving: state 'account' (value): amount: field type changed (Long -> String)`."""
    role = "" if d.role in ("VALUE_SERIALIZER", "STATE", "KEY_SERIALIZER") else f", {short_name(d.role)}"
    return f"operator {d.operator}: state '{d.state}' ({d.kind}{role}): {d.summary()}"

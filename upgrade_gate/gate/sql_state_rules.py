"""SQL state whose row type changed: Flink keeps the operator ID, restores, and fails on the state.

A SQL operator keeps its ID through many query edits (IDs are topology hashes when
`table.exec.uid.generation` is PLAN_ONLY), so the restore simulation matches its state; but the state is
`RowData` and the savepoint holds the old `RowDataSerializer` snapshots (key serializer and each state's
value serializer, read by `upgrade_gate/flink/state_meta/`). When the new query's key or state row differs,
the heap backend refuses it at restore with `StateMigrationException` (`HeapKeyedStateBackend`,
`HeapRestoreOperation`), RocksDB the same way (`RocksDBKeyedStateBackend`). Measured with real Flink 1.20.5
and 2.3.0: tests/fixtures/restores/<release>/sql-*/ (flink_bridge/sql_scenarios.py).

The new job's serializers come from the exported graph: `upgrade-gate export` of a SQL script or plan writes
a top-level `sql_state` beside the spec (flink_bridge/java/common/streamgraph/SqlStateDumper.java): per
stream node the key serializer and the row types its operator and function hold for their state. Which of
those rows a named state is serialized with is the table `_STATE_ROWS` (the state names are Flink's
`GroupAggFunction` and its mini-batch forms, the deduplicate functions, and the window aggregates' `window-aggs`,
whose row the exporter reads from `WindowAggOperator`'s window processor); a regular join's record states
(`StreamingJoinOperator`'s `left-records` / `right-records`) hold its input rows, exported as `leftType` /
`rightType`: a side whose projected fields change (one more column) changes the row the savepoint holds, and Flink
refuses it (tests/fixtures/restores/<release>/sql-join-row-gains-column). A window or mini-batch aggregate gaining an
aggregate gains an accumulator field the same way (sql-window-row-gains-field, sql-mini-batch-second-aggregate).

Compared the way Flink does: serializer snapshot classes, and for rows
(`RowDataSerializerSnapshot#resolveSchemaCompatibility`) first the fields' logical types, which must be
equal (`Arrays.equals` of the `LogicalType`s: nullability, VARCHAR length, DECIMAL precision and scale,
TIMESTAMP precision count; upgrade_gate/flink/state_meta/logical_types.py reads them from the savepoint, the
exporter writes the new job's as `logical_types`), then the field serializers in order. So VARCHAR(3) ->
STRING or NOT NULL -> nullable is refused although the serializers are the same; DECIMAL(10, 2) written as
NUMERIC(10, 2) is the same type. When a side has no types (a graph exported before `logical_types`, or a
type the reader does not model: RAW, structured) only the serializers are compared.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from upgrade_gate.flink.state_meta import OperatorSchemas, SerializerSnapshot, read_state_schemas
from upgrade_gate.flink.state_meta.logical_types import display
from upgrade_gate.flink.state_meta.streams import local_opener
from upgrade_gate.gate.sql_meaning import args
from upgrade_gate.gate.state_schema_diff import serializer_class

__all__ = ["SqlStateError", "predict", "sql_state_errors"]

_ROW = "org.apache.flink.table.runtime.typeutils.RowDataSerializer$RowDataSerializerSnapshot"
_BOOLEAN = "org.apache.flink.api.common.typeutils.base.BooleanSerializer$BooleanSerializerSnapshot"
# state name -> the field of the new operator / function whose row type the state's values are (first found).
_STATE_ROWS: dict[str, tuple[str, ...]] = {
    # GroupAggFunction, and the mini-batch MiniBatchGroupAggFunction / MiniBatchGlobalGroupAggFunction (the function
    # of KeyedMapBundleOperator): ValueState<RowData> of the accumulators, InternalTypeInfo.ofFields(accTypes)
    "accState": ("function.accTypes",),
    "deduplicate-state": ("function.typeInfo",),  # ProcTimeDeduplicateKeepLastRowFunction: the last row
    # A window aggregate's accumulators per key and window: WindowAggOperator's processor (AbstractWindowAggProcessor
    # on 1.20, AbstractSyncStateWindowAggProcessor on 2.x) declares ValueState "window-aggs" with its accSerializer;
    # the legacy group window (WindowOperator) with new RowDataSerializer(accumulatorTypes)
    "window-aggs": ("windowProcessor.accSerializer", "accumulatorTypes"),
}
# Functions whose state is not a row: KeepFirstRow keeps only a flag that a row was seen.
_FUNCTION_STATE = {
    "org.apache.flink.table.runtime.operators.deduplicate.ProcTimeDeduplicateKeepFirstRowFunction":
        {"deduplicate-state": {"class": _BOOLEAN, "nested": []}},
}


@dataclass(frozen=True)
class SqlStateError:
    """One state (or the key) of a restored SQL operator that Flink cannot read with the new serializer."""

    operator_id: str
    operator: str
    state: str  # the state name, or "key"
    old: str
    new: str
    message: str  # Flink's message (serializer classes in place of Flink's class@hash)

    def to_json(self) -> dict[str, Any]:
        return {"operator_id": self.operator_id, "operator": self.operator, "state": self.state, "old": self.old,
                "new": self.new, "flink_error": self.message}


def _describe(tree: dict[str, Any] | SerializerSnapshot, typed: bool = False) -> str:
    """`ROW<VARCHAR(3), BIGINT>` when both sides' rows carry logical types (`typed`), else the serializers:
    `RowDataSerializer<StringDataSerializer, LongSerializer>`."""
    cls, nested = _parts(tree)
    types = _types(tree)
    if typed and types is not None:
        return display(types)
    short = serializer_class(cls).rsplit(".", 1)[-1]
    return f"{short}<{', '.join(_describe(n) for n in nested)}>" if cls == _ROW else short


def _types(tree: dict[str, Any] | SerializerSnapshot) -> tuple[str, ...] | None:
    """A row's field types as `LogicalType#asSerializableString()`; None when not known."""
    if isinstance(tree, SerializerSnapshot):
        return tree.logical_types
    types = tree.get("logical_types")
    if isinstance(types, list) and all(isinstance(t, str) for t in types):
        return tuple(types)
    return None


def _parts(tree: dict[str, Any] | SerializerSnapshot) -> tuple[str, list[Any]]:
    if isinstance(tree, SerializerSnapshot):
        return tree.class_name, list(tree.nested)
    return str(tree.get("class")), list(tree.get("nested") or [])


def _compatible(old: SerializerSnapshot, new: dict[str, Any]) -> bool:
    old_cls, old_nested = _parts(old)
    new_cls, new_nested = _parts(new)
    if old_cls != new_cls:
        return False
    if old_cls != _ROW:
        return True
    old_types, new_types = _types(old), _types(new)
    if old_types is not None and new_types is not None and old_types != new_types:
        return False  # RowDataSerializerSnapshot: !Arrays.equals(types, old.types) -> incompatible
    if len(old_nested) != len(new_nested):
        return False
    return all(_compatible(o, n) for o, n in zip(old_nested, new_nested, strict=True))


def _typed(old: SerializerSnapshot, new: dict[str, Any]) -> bool:
    return _types(old) is not None and _types(new) is not None


def _new_row(entry: dict[str, Any], state: str) -> dict[str, Any] | None:
    fixed = _FUNCTION_STATE.get(str(entry.get("function_class")), {}).get(state)
    if fixed is not None:
        return fixed
    types = entry.get("types") or {}
    return next((types[f] for f in _STATE_ROWS.get(state, ()) if f in types), None)


# StreamingJoinOperator's record state views (JoinRecordStateViews, OuterJoinRecordStateViews): the state's name ->
# the exported input row type and the Join description's input spec argument
_JOIN_RECORDS = {"left-records": ("leftType", "leftInputSpec"), "right-records": ("rightType", "rightInputSpec")}
_MAP = "org.apache.flink.api.common.typeutils.base.MapSerializerSnapshot"


def _record(tree: SerializerSnapshot) -> SerializerSnapshot | None:
    """The input row a join's record state holds: the last `RowDataSerializer` of the state's serializer, depth
    first. The views store it as `ValueState<row>` (the join key contains a unique key), `MapState<row, count>`
    (no unique key) or `MapState<unique key, row>` (a unique key); an outer side keeps its matches beside the row
    (`MapState<row, Tuple2<count, matches>>`, `Tuple2<row, matches>` in place of the row). In each the record is
    the last row (the unique key comes before it); measured for no unique key, inner and left outer
    (tests/fixtures/restores/<release>/sql-{join,left-join}-row-gains-column)."""
    if tree.class_name == _ROW:
        return tree
    return next((r for r in (_record(n) for n in reversed(tree.nested)) if r is not None), None)


def _join_record_error(old: OperatorSchemas, name: str, entry: dict[str, Any], state: str,
                       old_value: SerializerSnapshot) -> SqlStateError | None:
    """A regular join's record state whose input row changed (the new query projects another field of that side):
    Flink's state serializer (`MapSerializer` or the row's) nests the row, whose `RowDataSerializerSnapshot` is
    incompatible, so the heap backend refuses the whole state. The record views kept (a map state stays a map):
    a view changed by another unique key is a change of state kind, not compared here."""
    type_field, spec_arg = _JOIN_RECORDS[state]
    new_row = (entry.get("types") or {}).get(type_field)
    spec = args(str(entry.get("description") or "")).get(spec_arg, "")
    old_row = _record(old_value)
    if not isinstance(new_row, dict) or old_row is None or not spec:
        return None
    if (old_value.class_name == _MAP) != (spec != "JoinKeyContainsUniqueKey") or _compatible(old_row, new_row):
        return None
    typed = _typed(old_row, new_row)
    cls = serializer_class(old_value.class_name)
    return SqlStateError(old.operator_id, name, state, _describe(old_row, typed), _describe(new_row, typed),
                         f"For heap backends, the new state serializer ({cls}) must not be incompatible with "
                         f"the old state serializer ({cls}).")


def _value_serializer(serializers: Iterable[tuple[str, SerializerSnapshot]]) -> SerializerSnapshot | None:
    return next((s for role, s in serializers if role == "VALUE_SERIALIZER"), None)


def predict(old: OperatorSchemas, entry: dict[str, Any]) -> Iterator[SqlStateError]:
    """The key first (Flink checks it when the keyed backend restores), then each state with a known row."""
    name = str(entry.get("name") or old.name)
    new_key = entry.get("key")
    if old.key_serializer is not None and isinstance(new_key, dict) and not _compatible(old.key_serializer, new_key):
        o, n = serializer_class(old.key_serializer.class_name), serializer_class(str(new_key.get("class")))
        typed = _typed(old.key_serializer, new_key)
        yield SqlStateError(old.operator_id, name, "key", _describe(old.key_serializer, typed),
                            _describe(new_key, typed),
                            f"The new key serializer ({n}) must be compatible with the previous key serializer "
                            f"({o}).")
        return
    for st in old.states:
        if st.backend_type != "KEY_VALUE":
            continue
        old_value = _value_serializer(st.serializers)
        if st.name in _JOIN_RECORDS and old_value is not None:
            err = _join_record_error(old, name, entry, st.name, old_value)
            if err is not None:
                yield err
            continue
        new_value = _new_row(entry, st.name)
        if old_value is None or new_value is None or _compatible(old_value, new_value):
            continue
        o, n = serializer_class(old_value.class_name), serializer_class(str(new_value.get("class")))
        typed = _typed(old_value, new_value)
        yield SqlStateError(old.operator_id, name, st.name, _describe(old_value, typed), _describe(new_value, typed),
                            f"For heap backends, the new state serializer ({n}) must not be incompatible with "
                            f"the old state serializer ({o}).")


def sql_state_errors(metadata: Any, restores: Iterable[Any], sql_state: dict[str, Any] | None,
                     opener: Any = None,
                     schemas: Callable[[], Iterable[OperatorSchemas]] | None = None) -> list[SqlStateError]:
    """Every restored SQL operator whose state Flink would refuse. `restores`: the simulation's
    `OperatorRestore`s (the old state each new node receives); `opener`: the state-file opener;
    `schemas`: the savepoint's proxies as another rule already read them (`check_upgrade` reads them once)."""
    if not sql_state:
        return []
    received = {r.old.operator_id_hex: str(r.pair.node_id) for r in restores if r.old is not None}
    if not received:
        return []
    out: list[SqlStateError] = []
    read = schemas() if schemas is not None else read_state_schemas(metadata, opener or local_opener,
                                                                     tolerant=True)
    for op in read:
        node = received.get(op.operator_id)
        entry = sql_state.get(node) if node is not None else None
        if isinstance(entry, dict):
            out += predict(op, entry)
    return out

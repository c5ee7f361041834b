"""The repaired `CheckpointMetadata`: a plan's moves and drops applied to the model, nothing else changed.

A move changes an operator's ID and, in metadata v5+ (Flink 2.x records them), its name and uid to the new
operator's, as a savepoint the new job took would record them. Everything the operator holds moves with it:
subtask state of every kind and its coordinator state (Flink's `SavepointWriter#changeOperatorIdentifier`
loses the latter: FLINK-40837). Operators keep their order in the file; state handles are shared, not
copied, so the rewrite costs nothing per state byte.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from upgrade_gate.flink.metadata.model import CheckpointMetadata, OperatorState, OperatorSubtaskState

__all__ = ["Rename", "apply_plan"]

# (savepoint operator id, new operator id, new operator's name, its uid): one `plan.Move`
Rename = tuple[bytes, bytes, str | None, str | None]


def _without_keyed(subtasks: dict[int, OperatorSubtaskState]) -> dict[int, OperatorSubtaskState]:
    return {i: s if s.finished or not (s.managed_keyed_state or s.raw_keyed_state)
            else dataclasses.replace(s, managed_keyed_state=(), raw_keyed_state=())
            for i, s in subtasks.items()}


def _drop_parts(op: OperatorState, parts: set[str]) -> OperatorState:
    changes: dict[str, object] = {}
    if "coordinator" in parts:
        changes["coordinator_state"] = None
    if "keyed" in parts:
        changes["subtask_states"] = _without_keyed(op.subtask_states)
    return dataclasses.replace(op, **changes) if changes else op  # type: ignore[arg-type]


def apply_plan(metadata: CheckpointMetadata, renames: Iterable[Rename],
               drops: Iterable[tuple[bytes, str | None]]) -> CheckpointMetadata:
    """`drops`: (savepoint operator id, None for the whole operator or a part: "coordinator", "keyed")."""
    by_old = {r[0]: r for r in renames}
    gone = set()
    parts: dict[bytes, set[str]] = {}
    for oid, part in drops:
        if part is None:
            gone.add(oid)
        else:
            parts.setdefault(oid, set()).add(part)
    targets = {r[1] for r in by_old.values()}
    names = metadata.version >= 5  # MetadataV5Serializer: operator name and uid before the id
    out = []
    for op in metadata.operator_states:
        oid = op.operator_id
        if oid in gone:
            continue
        move = by_old.get(oid)
        if move is None and oid in targets:
            continue  # a stateless entry under an ID a moved state takes (plan._without_collisions noted it)
        if oid in parts:
            op = _drop_parts(op, parts[oid])
        if move is not None:
            _, new_id, name, uid = move
            op = dataclasses.replace(op, operator_id=new_id, name=name if names else op.name,
                                     uid=uid if names else op.uid)
        out.append(op)
    return dataclasses.replace(metadata, operator_states=tuple(out))

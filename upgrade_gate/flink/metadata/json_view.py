"""The `inspect` JSON (docs/design.md, Contracts) and, with `detail=True`, every handle as Flink's oracle dumps it."""

from __future__ import annotations

from typing import Any

from upgrade_gate.flink.metadata.model import (
    ByteStreamStateHandle,
    CheckpointMetadata,
    CheckpointProperties,
    IncrementalRemoteKeyedStateHandle,
    KeyGroupRange,
    KeyGroupsStateHandle,
    OperatorState,
    OperatorStreamStateHandle,
    OperatorSubtaskState,
    RelativeFileStateHandle,
)

__all__ = ["properties_json", "to_json"]


def _range(r: KeyGroupRange) -> list[int]:
    return [r.start, r.end]


def properties_json(p: CheckpointProperties | None) -> dict[str, Any] | None:
    if p is None:
        return None
    return {"type": "savepoint" if p.is_savepoint else "checkpoint", "format": p.format_type, "name": p.name}


def _operator_summary(h: OperatorStreamStateHandle) -> dict[str, Any]:
    states = {name: {"mode": info.mode.name, "partitions": len(info.offsets)}
              for name, info in sorted(h.state_name_to_partition_offsets.items())}
    return {"states": states, "bytes": h.state_size}


def _stream(h: Any) -> dict[str, Any] | None:
    if h is None:
        return None
    j: dict[str, Any] = {"class": h.kind, "state_size": h.state_size}
    if isinstance(h, ByteStreamStateHandle):
        j["name"] = h.handle_name
    path = getattr(h, "path", None)
    if path is not None:
        j["path"] = path
    if isinstance(h, RelativeFileStateHandle):
        j["relative_path"] = h.relative_path
    start = getattr(h, "start_pos", None)
    if start is not None:
        j["start_pos"] = start
    return j


def _keyed(h: Any) -> dict[str, Any]:
    j: dict[str, Any] = {"class": h.kind, "state_size": h.state_size, "key_groups": _range(h.key_group_range)}
    if isinstance(h, KeyGroupsStateHandle):
        j["offsets"] = list(h.offsets)
        j["delegate"] = _stream(h.delegate)
    elif isinstance(h, IncrementalRemoteKeyedStateHandle):
        j["checkpoint_id"] = h.checkpoint_id
        j["backend_id"] = h.backend_id
        j["checkpointed_size"] = h.checkpointed_size
        j["meta"] = _stream(h.meta_state_handle)
        j["shared"] = [{"local_path": p.local_path, "handle": _stream(p.handle)} for p in h.shared_state]
        j["private"] = [{"local_path": p.local_path, "handle": _stream(p.handle)} for p in h.private_state]
    else:
        j["checkpointed_size"] = h.checkpointed_size
    return j


def _operator_detail(h: OperatorStreamStateHandle) -> dict[str, Any]:
    states = {name: {"mode": info.mode.name, "offsets": list(info.offsets)}
              for name, info in sorted(h.state_name_to_partition_offsets.items())}
    return {"class": h.kind, "state_size": h.state_size, "states": states, "delegate": _stream(h.delegate)}


def _channel(h: Any) -> dict[str, Any]:
    j: dict[str, Any] = {"class": h.kind, "state_size": h.state_size, "subtask": h.subtask_index}
    offsets = getattr(h, "offsets", None)
    if offsets is not None:
        j["offsets"] = list(offsets)
    j["delegate"] = _stream(h.delegate)
    return j


def _subtask(index: int, s: OperatorSubtaskState, detail: bool) -> dict[str, Any]:
    j: dict[str, Any] = {
        "index": index,
        "finished": s.finished,
        "managed_keyed": [{"key_groups": _range(h.key_group_range), "bytes": h.state_size}
                          for h in s.managed_keyed_state],
        "raw_keyed": [{"key_groups": _range(h.key_group_range), "bytes": h.state_size} for h in s.raw_keyed_state],
        "managed_operator": [_operator_summary(h) for h in s.managed_operator_state],
        "raw_operator": [_operator_summary(h) for h in s.raw_operator_state],
        "channel_state_bytes": s.channel_state_size,
    }
    if detail:
        j["state_size"] = s.state_size
        j["handles"] = {
            "managed_keyed": [_keyed(h) for h in s.managed_keyed_state],
            "raw_keyed": [_keyed(h) for h in s.raw_keyed_state],
            "managed_operator": [_operator_detail(h) for h in s.managed_operator_state],
            "raw_operator": [_operator_detail(h) for h in s.raw_operator_state],
            "input_channel": [_channel(h) for h in s.input_channel_state],
            "result_subpartition": [_channel(h) for h in s.result_subpartition_state],
        }
    return j


def _operator(o: OperatorState, detail: bool) -> dict[str, Any]:
    return {
        "operator_id": o.operator_id_hex,
        "name": o.name,
        "uid": o.uid,
        "parallelism": o.parallelism,
        "max_parallelism": o.max_parallelism,
        "fully_finished": o.fully_finished,
        "coordinator_state_bytes": o.coordinator_state.state_size if o.coordinator_state is not None else None,
        "state_bytes": o.state_size,
        "subtasks": [_subtask(i, o.subtask_states[i], detail) for i in sorted(o.subtask_states)],
    }


def to_json(m: CheckpointMetadata, detail: bool = False) -> dict[str, Any]:
    """The `inspect` fields; `detail` adds master states and every handle (the oracle comparison shape)."""
    j: dict[str, Any] = {"version": m.version, "checkpoint_id": m.checkpoint_id,
                         "properties": properties_json(m.properties)}
    if detail:
        j["master_states"] = [{"name": s.name, "version": s.version, "bytes": len(s.data)} for s in m.master_states]
    j["operators"] = [_operator(o, detail) for o in m.operator_states]
    return j

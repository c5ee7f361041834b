"""Minimal in-memory inputs for the direct Flink-rule tests: ids, job vertices, operator states.

Each builder makes exactly one of Flink's objects, with only what the rule under test reads, so a
test shows the rule and nothing else. Operator ids are 16 repeated bytes (`oid(1)` = 0101…01).
"""

from __future__ import annotations

from hashing.graph import Factory, Partitioner, StreamEdge, StreamGraph, StreamNode
from hashing.job_graph import JobVertex, OperatorIDPair
from hashing.keygroups import compute_default_max_parallelism, key_group_ranges
from upgrade_gate.flink.assignment.job import ExecutionJobVertex
from upgrade_gate.flink.metadata.model import (
    ByteStreamStateHandle,
    CheckpointMetadata,
    HandleAndLocalPath,
    IncrementalRemoteKeyedStateHandle,
    InputChannelStateHandle,
    KeyGroupRange,
    KeyGroupsStateHandle,
    Mode,
    OperatorState,
    OperatorStreamStateHandle,
    OperatorSubtaskState,
    ResultSubpartitionStateHandle,
    StateMetaInfo,
)

__all__ = ["Mode", "blob", "channel_in", "channel_out", "graph", "incremental", "keyed", "lists", "metadata", "oid",
           "operator", "pair", "vertex"]

_handles = 0


def oid(n: int) -> bytes:
    """A 16-byte operator id made of one repeated byte."""
    return bytes([n]) * 16


def pair(node_id: int, generated: bytes, *alternatives: bytes, name: str | None = None,
         uid: str | None = None) -> OperatorIDPair:
    return OperatorIDPair(node_id, generated, tuple(alternatives), name or f"op{node_id}", uid)


def vertex(*head_first: OperatorIDPair, parallelism: int = 2, max_parallelism: int | None = None) -> ExecutionJobVertex:
    """A job vertex of the given chain (head first); Flink lists its operators tail first.

    `max_parallelism=None` is "not configured": derived with `computeDefaultMaxParallelism`."""
    configured = max_parallelism is not None
    maxp = max_parallelism if configured else compute_default_max_parallelism(parallelism)
    jv = JobVertex(head_first[0].generated, head_first[0].node_id, tuple(reversed(head_first)), parallelism,
                   max_parallelism)
    return ExecutionJobVertex(jv, " -> ".join(p.name for p in head_first), parallelism, maxp, configured)


def graph(nodes: list[StreamNode] | None = None, edges: list[tuple[int, int, Partitioner]] = (),
          names: dict[int, str] | None = None, sources: set[int] = frozenset()) -> StreamGraph:
    """A stream graph over node ids (all parallelism 2); `sources` are FLIP-27 sources."""
    if nodes is None:
        ids = sorted({n for e in edges for n in e[:2]} | set(names or {}) | set(sources))
        nodes = [StreamNode(i, (names or {}).get(i, f"op{i}"), 2,
                            factory=Factory.SOURCE if i in sources else Factory.OPERATOR) for i in ids]
    return StreamGraph.of("test", nodes, [StreamEdge(a, b, p) for a, b, p in edges])


def blob(size: int) -> ByteStreamStateHandle:
    """An inline state file of `size` bytes, distinct from every other one."""
    global _handles
    _handles += 1
    return ByteStreamStateHandle(f"handle-{_handles}", bytes(size))


PROXY_BYTES = 100  # a full snapshot's stream opens with the backend's serialization proxy


def keyed(start: int, end: int, bytes_per_group: int = 10) -> KeyGroupsStateHandle:
    """A full-snapshot keyed handle of key groups start..end: the proxy, then one offset per key group."""
    n = end - start + 1
    return KeyGroupsStateHandle(KeyGroupRange(start, end),
                                tuple(PROXY_BYTES + i * bytes_per_group for i in range(n)),
                                blob(PROXY_BYTES + n * bytes_per_group))


def incremental(start: int, end: int, size: int) -> IncrementalRemoteKeyedStateHandle:
    """A RocksDB/ForSt incremental handle of key groups start..end, `size` bytes of SST files."""
    return IncrementalRemoteKeyedStateHandle("backend", KeyGroupRange(start, end), 1,
                                             (HandleAndLocalPath("1.sst", blob(size)),), (), None, size)


def lists(**states: tuple[int, Mode]) -> OperatorStreamStateHandle:
    """One subtask's operator-state file: name -> (number of list elements, mode)."""
    return OperatorStreamStateHandle({name: StateMetaInfo(tuple(range(0, 8 * n, 8)), mode)
                                      for name, (n, mode) in states.items()}, blob(100))


def channel_in() -> tuple[InputChannelStateHandle, ...]:
    return (InputChannelStateHandle(0, (0, 0), blob(10), (0,), 10),)


def channel_out() -> tuple[ResultSubpartitionStateHandle, ...]:
    return (ResultSubpartitionStateHandle(0, (0, 0), blob(10), (0,), 10),)


def operator(operator_id: bytes, parallelism: int = 2, max_parallelism: int = 128,
             subtasks: dict[int, OperatorSubtaskState] | None = None, coordinator: bool = False,
             fully_finished: bool = False) -> OperatorState:
    """An `OperatorState`; without `subtasks`, every subtask holds one managed keyed handle of its key groups."""
    if subtasks is None and not fully_finished:
        subtasks = {i: OperatorSubtaskState(managed_keyed_state=(keyed(a, b),))
                    for i, (a, b) in enumerate(key_group_ranges(max_parallelism, parallelism))}
    return OperatorState(operator_id, None, None, parallelism, max_parallelism,
                         ByteStreamStateHandle("coordinator", b"c") if coordinator else None, subtasks or {},
                         fully_finished)


def metadata(*ops: OperatorState, version: int = 3) -> CheckpointMetadata:
    return CheckpointMetadata(version, 1, (), tuple(ops), None)

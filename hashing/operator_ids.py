"""Operator IDs of a job under a hasher version: the one entry point Spark, Airflow and the CLI use.

`compute_operator_ids(graph, "v2")` is what Flink 1.18–2.3 assigns; `"v3"` is FLIP-411's
proposal, with `[uid_hash?, v2_id]` as ordered alternatives so that V2 savepoints restore.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hashing.errors import FlinkError, InputError
from hashing.graph import StreamGraph
from hashing.hashers import HASHERS, StreamGraphUserHashHasher, stream_graph_hashes
from hashing.job_graph import CHAINS, JobVertex, OperatorIDPair, chains
from hashing.versions import FlinkVersion

EMPTY_UID_MSG = "Empty string operator uid is not allowed"
EMPTY_NAME_MSG = "Empty string operator name is not allowed"


@dataclass(frozen=True)
class OperatorIds:
    hasher: str
    flink_version: FlinkVersion
    pairs: dict[int, OperatorIDPair]  # by stream node id, in node-id order
    job_vertices: tuple[JobVertex, ...]
    v2_hashes: dict[int, bytes]

    def to_json(self) -> dict[str, Any]:
        """The `ids` contract of docs/design.md, Contracts (field names are stable)."""
        return {
            "hasher": self.hasher,
            "flink_version": str(self.flink_version),
            "nodes": [{"node_id": p.node_id, "name": p.name, "uid": p.uid, "generated_id": p.generated.hex(),
                       "alternative_ids": [a.hex() for a in p.alternatives]} for p in self.pairs.values()],
            "job_vertices": [{"id": v.id.hex(), "node_ids": v.node_ids_head_first,
                              "operator_ids": [p.generated.hex() for p in v.operators],
                              "parallelism": v.parallelism, "max_parallelism": v.max_parallelism}
                             for v in self.job_vertices],
        }


def _check_names_and_uids(graph: StreamGraph, version: FlinkVersion) -> None:
    if not version.rejects_empty_uid:
        return
    for node in graph.nodes:
        if node.uid == "":
            raise FlinkError(EMPTY_UID_MSG)
        if node.name == "":
            raise FlinkError(EMPTY_NAME_MSG)


def compute_operator_ids(graph: StreamGraph, hasher: str = "v2", flink_version: str | FlinkVersion | None = None,
                         ) -> OperatorIds:
    """The ids Flink's JobGraph would carry; memoised per graph, hasher and version.

    One check asks for the same ids several times (the V2 -> V3 table, the simulator, the
    remedies), and a fleet run does it for thousands of jobs; a graph never changes once built."""
    version = flink_version if isinstance(flink_version, FlinkVersion) else FlinkVersion.parse(flink_version)
    if hasher not in HASHERS:
        raise InputError(f"--hasher {hasher!r}: expected one of {', '.join(HASHERS)}")
    key = f"operator_ids:{hasher}:{version}"
    cached = graph.cache.get(key)
    if cached is None:
        cached = graph.cache[key] = _compute(graph, hasher, version)
    return cached  # type: ignore[return-value]


def _per_graph(graph: StreamGraph, key: str, make: Callable[[StreamGraph], Any]) -> Any:
    """What every hasher and version of one graph shares (V2 hashes, chains): computed once."""
    value = graph.cache.get(key)
    if value is None:
        value = graph.cache[key] = make(graph)
    return value


def _compute(graph: StreamGraph, hasher: str, version: FlinkVersion) -> OperatorIds:
    v2 = graph.cache.get("v2_hashes")
    if hasher == "v2":
        if v2 is None:
            v2 = graph.cache["v2_hashes"] = stream_graph_hashes(graph, v2=True, v3=False)[0]
        primary = v2
    else:  # V3 with V2 as the fallback ids: one pass computes both (hashing/hashers.py)
        v2_new, primary = stream_graph_hashes(graph, v2=v2 is None, v3=True)
        if v2 is None:
            v2 = graph.cache["v2_hashes"] = v2_new
    user = _per_graph(graph, "user_hashes", StreamGraphUserHashHasher().traverse_stream_graph_and_generate_hashes)
    _check_names_and_uids(graph, version)

    pairs: dict[int, OperatorIDPair] = {}
    for node in graph.nodes:
        alternatives = [user[node.id]] if node.id in user else []
        if hasher != "v2":
            alternatives.append(v2[node.id])
        pairs[node.id] = OperatorIDPair(node.id, primary[node.id], tuple(alternatives), node.name, node.uid)

    vertices = []
    for head, members in _per_graph(graph, CHAINS, chains):
        head_node = graph.by_id[head]
        vertices.append(JobVertex(primary[head], head, tuple(pairs[m] for m in members),
                                  head_node.parallelism, head_node.max_parallelism))
    return OperatorIds(hasher, version, pairs, tuple(vertices), v2)

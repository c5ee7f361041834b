"""The new job as the scheduler sees it at restore: `ExecutionJobVertex`es with their parallelism info.

Max parallelism is per job vertex: explicit when the chain head has one configured (transformation
or `pipeline.max-parallelism`), otherwise derived from the parallelism
(`KeyGroupRangeAssignment.computeDefaultMaxParallelism`) and then *re-settable*: a derived
vertex adopts the savepoint's max parallelism (`DefaultVertexParallelismInfo` with the scheduler's
"autoConfigured" validator), an explicit one refuses ("Cannot override a configured max parallelism.").
"""

from __future__ import annotations

from dataclasses import dataclass

from hashing.frozen import fast_init
from hashing.job_graph import JobVertex, OperatorIDPair
from hashing.keygroups import compute_default_max_parallelism
from hashing.operator_ids import OperatorIds

__all__ = ["JOB_VERTEX_MAX_PARALLELISM_DEFAULT", "ExecutionJobVertex", "execution_job_vertices"]

JOB_VERTEX_MAX_PARALLELISM_DEFAULT = -1


@fast_init
@dataclass(frozen=True)
class ExecutionJobVertex:
    vertex: JobVertex
    name: str  # Flink's job-vertex name: operator names head -> tail joined by " -> "
    parallelism: int
    max_parallelism: int  # effective before restore (derived when not configured)
    max_parallelism_configured: bool
    # operator names of the chain whose own max parallelism differs from the vertex's (FLINK-40113 kind)
    mixed_max_parallelism: tuple[str, ...] = ()

    @property
    def id_hex(self) -> str:
        return self.vertex.id.hex()

    @property
    def operators(self) -> tuple[OperatorIDPair, ...]:
        """Tail first, head last (Flink's `getOperatorIDs()` order)."""
        return self.vertex.operators

    def can_rescale_max_parallelism(self, desired: int) -> bool:
        """`ExecutionJobVertex.canRescaleMaxParallelism`: only a derived max parallelism may change."""
        return desired != JOB_VERTEX_MAX_PARALLELISM_DEFAULT and not self.max_parallelism_configured


def execution_job_vertices(ids: OperatorIds, graph_nodes: dict[int, object]) -> list[ExecutionJobVertex]:
    out = []
    for v in ids.job_vertices:
        configured = v.max_parallelism is not None
        maxp = v.max_parallelism if configured else compute_default_max_parallelism(v.parallelism)
        names = [ids.pairs[n].name for n in v.node_ids_head_first]
        mixed = tuple(ids.pairs[n].name for n in v.node_ids_head_first
                      if getattr(graph_nodes[n], "max_parallelism", None) not in (None, v.max_parallelism))
        out.append(ExecutionJobVertex(v, " -> ".join(names), v.parallelism, maxp, configured, mixed))
    return out

"""One restore, replayed: metadata version -> load validation -> finished state -> state assignment.

`simulate` returns either the full `Assignment` or the `RestoreFailure` Flink would raise first,
in Flink's order (CheckpointCoordinator.restoreSavepoint: read `_metadata`, validate, then assign).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from hashing.graph import StreamGraph
from hashing.operator_ids import OperatorIds
from hashing.versions import FlinkVersion
from upgrade_gate.flink.assignment.errors import RestoreFailure, parallelism_above_configured_max, unreadable_version
from upgrade_gate.flink.assignment.job import ExecutionJobVertex, execution_job_vertices
from upgrade_gate.flink.assignment.load_validation import LoadResult, has_state, load_and_validate
from upgrade_gate.flink.assignment.state_assignment import Assignment, assign_states
from upgrade_gate.flink.metadata.model import CheckpointMetadata

__all__ = ["Simulation", "max_metadata_version", "simulate"]


def max_metadata_version(version: FlinkVersion) -> int:
    """Newest `_metadata` format a release reads; the rule is `FlinkVersion`'s (hashing/versions.py)."""
    return version.metadata_version


@dataclass
class Simulation:
    vertices: list[ExecutionJobVertex]
    load: LoadResult | None
    assignment: Assignment | None
    failure: RestoreFailure | None

    @cached_property
    def receivers(self) -> frozenset[int]:
        """The new job's nodes that get state back from the snapshot (none when the restore fails). Asked by
        several rules of one pass and by the state roles of the check, of a restore that never changes: once."""
        if self.failure is not None or self.assignment is None:
            return frozenset()
        return frozenset(nid for nid, r in self.assignment.operators.items()
                         if r.old is not None and has_state(r.old))


def _vertices(graph: StreamGraph, ids: OperatorIds) -> list[ExecutionJobVertex]:
    """`execution_job_vertices` of these ids, once per graph (`StreamGraph.cache`, as the ids themselves): a check
    simulates one graph several times (with and without allowNonRestoredState, its repair plan's re-check), and
    the vertices depend on the graph and its ids only. Nothing changes them (frozen, never appended to)."""
    key = f"execution_job_vertices:{ids.hasher}:{ids.flink_version}"
    made = graph.cache.get(key)
    if not isinstance(made, tuple) or made[0] is not ids:
        made = graph.cache[key] = (ids, execution_job_vertices(ids, graph.by_id))
    return made[1]


def simulate(metadata: CheckpointMetadata, graph: StreamGraph, ids: OperatorIds, pointer: str, *,
             allow_non_restored_state: bool, matching: str, old_graph: StreamGraph | None = None,
             from_ha_metadata: bool = False) -> Simulation:
    vertices = _vertices(graph, ids)
    load = None
    try:
        for v in vertices:  # the execution graph is built (and refused) before the savepoint is read
            if v.max_parallelism_configured and v.parallelism > v.max_parallelism:
                raise parallelism_above_configured_max(v.name, v.parallelism, v.max_parallelism)
        if not ids.flink_version.reads_metadata(metadata.version):
            raise unreadable_version(metadata.version)
        load = load_and_validate(metadata, vertices, pointer, allow_non_restored_state, from_ha_metadata)
        assignment = assign_states(load, vertices, graph, matching, ids.hasher, old_graph)
    except RestoreFailure as failure:
        # kept without its traceback: the traceback holds this frame, whose locals hold the Simulation, so
        # a kept traceback makes every failed restore's graph and savepoint a reference cycle that only
        # the cyclic GC frees (in a fleet task, a third of the jobs; docs/performance.md, "Rows as columns")
        return Simulation(vertices, load, None, failure.with_traceback(None))
    return Simulation(vertices, load, assignment, None)

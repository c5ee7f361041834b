"""The new job as the scheduler sees it (`ExecutionJobVertex`, `DefaultVertexParallelismInfo`),
upgrade_gate/flink/assignment/job.py.

* Max parallelism is per job vertex: the chain head's configured value, else
  `KeyGroupRangeAssignment.computeDefaultMaxParallelism(p) = min(max(roundUpToPowerOfTwo(p + p/2), 128), 32768)`
  (`SchedulerBase`, "autoConfigured").
* `canRescaleMaxParallelism(m)`: false for -1 (`JobVertex.MAX_PARALLELISM_DEFAULT`), false when configured
  ("Cannot override a configured max parallelism."), true when derived.
* `getOperatorIDs()` lists the chain tail first, head last; the vertex name joins the names head -> tail.
"""

from __future__ import annotations

import pytest

from hashing.graph import Partitioner, StreamEdge, StreamGraph, StreamNode
from hashing.operator_ids import compute_operator_ids
from upgrade_gate.flink.assignment.job import JOB_VERTEX_MAX_PARALLELISM_DEFAULT, execution_job_vertices


def _job(parallelism: int, max_parallelism: int | None = None):
    g = StreamGraph.of("job", [StreamNode(1, "Source: numbers", parallelism, max_parallelism),
                               StreamNode(2, "map", parallelism),
                               StreamNode(3, "counts", parallelism)],
                       [StreamEdge(1, 2, Partitioner.FORWARD), StreamEdge(2, 3, Partitioner.HASH)])
    ids = compute_operator_ids(g, "v2", "2.3")
    by_name = {v.name: v for v in execution_job_vertices(ids, g.by_id)}
    return ids, (by_name["Source: numbers -> map"], by_name["counts"])


def test_chain_order_and_name() -> None:
    ids, (chain, _) = _job(2)
    assert [p.node_id for p in chain.operators] == [2, 1]  # tail first, head last
    assert chain.id_hex == ids.pairs[1].generated.hex()  # a job vertex's id is its head's hash


@pytest.mark.parametrize(("parallelism", "derived"), [
    (1, 128), (85, 128), (86, 256), (100, 256), (128, 256), (171, 256), (172, 512), (1000, 2048), (21845, 32768),
    (32768, 32768),
])
def test_unconfigured_max_parallelism_is_derived_from_parallelism(parallelism: int, derived: int) -> None:
    _, (chain, _) = _job(parallelism)
    assert (chain.max_parallelism, chain.max_parallelism_configured) == (derived, False)


def test_a_derived_max_parallelism_may_adopt_the_savepoints() -> None:
    _, (chain, _) = _job(2)
    assert chain.can_rescale_max_parallelism(256)
    assert chain.can_rescale_max_parallelism(4)
    assert not chain.can_rescale_max_parallelism(JOB_VERTEX_MAX_PARALLELISM_DEFAULT)


def test_a_configured_max_parallelism_may_not_change() -> None:
    _, (chain, keyed) = _job(2, max_parallelism=64)
    assert (chain.max_parallelism, chain.max_parallelism_configured) == (64, True)
    assert not chain.can_rescale_max_parallelism(128)
    # the head's setting is the vertex's; another vertex of the same job derives its own
    assert (keyed.max_parallelism, keyed.max_parallelism_configured) == (128, False)

"""Flink's chaining decision (`StreamingJobGraphGenerator.isChainable`), as of Flink 1.18–2.3.

Since Flink 1.11 `StreamGraphHasherV2` calls the job-graph generator's live chaining rules, so
this one function decides both which operators share a task and the V2 operator IDs. The rules
did not change between 1.18 and 2.3 for the hasher (2.x's `allowChainWithDefaultParallelism`
is passed as false there); see Flink's `StreamingJobGraphGenerator#isChainable`.
"""

from __future__ import annotations

from hashing.graph import ChainingStrategy, ExchangeMode, Factory, Partitioner, StreamEdge, StreamGraph, StreamNode

_UPSTREAM_MAY_CHAIN = {
    ChainingStrategy.NEVER: False,
    ChainingStrategy.ALWAYS: True,
    ChainingStrategy.HEAD: True,
    ChainingStrategy.HEAD_WITH_SOURCES: True,
}


def is_chainable(edge: StreamEdge, graph: StreamGraph) -> bool:
    """`isChainable`: the target has exactly one input and that input can be chained.

    With a single in-edge, `isChainableInput`'s union guard cannot fire, so it is skipped here.
    """
    return len(graph.in_edges[edge.target]) == 1 and _input_checks(edge, graph)


def is_chainable_input(edge: StreamEdge, graph: StreamGraph) -> bool:
    if not _input_checks(edge, graph):
        return False
    # The "union" guard: another input of the same index (typeNumber) means a union; no chaining.
    return not any(e is not edge and e.type_number == edge.type_number for e in graph.in_edges[edge.target])


def _input_checks(edge: StreamEdge, graph: StreamGraph) -> bool:
    """Flink's conjunction in `isChainableInput`, reordered cheapest-first (no term has side effects)."""
    if not (graph.chaining_enabled and _partitioner_and_exchange_chainable(edge)):
        return False
    up, down = graph.by_id[edge.source], graph.by_id[edge.target]
    return up.slot_sharing_group == down.slot_sharing_group and are_operators_chainable(up, down, graph)


def _partitioner_and_exchange_chainable(edge: StreamEdge) -> bool:
    if edge.partitioner is Partitioner.FORWARD_FOR_CONSECUTIVE_HASH:
        return True  # only legal in dynamic (adaptive batch) graphs, where Flink checks that
    return edge.partitioner is Partitioner.FORWARD and edge.exchange_mode is not ExchangeMode.BATCH


def head_operator_of_chain(node: StreamNode, graph: StreamGraph) -> StreamNode:
    """Walk back through single chainable in-edges to the chain head (`headOperatorOfChain`)."""
    seen = {node.id}
    current = node
    while True:
        ins = graph.in_edges[current.id]
        if len(ins) != 1 or not is_chainable_input(ins[0], graph):
            return current
        current = graph.by_id[ins[0].source]
        if current.id in seen:  # defensive: graphs are validated acyclic
            return current
        seen.add(current.id)


def are_operators_chainable(up: StreamNode, down: StreamNode, graph: StreamGraph) -> bool:
    if down.factory is Factory.YIELDING and head_operator_of_chain(up, graph).factory is Factory.LEGACY_SOURCE:
        return False  # a mailbox-yielding operator cannot run inside a legacy source's thread
    ok = _UPSTREAM_MAY_CHAIN[up.chaining_strategy]
    strategy = down.chaining_strategy
    if strategy in (ChainingStrategy.NEVER, ChainingStrategy.HEAD):
        ok = False
    elif strategy is ChainingStrategy.HEAD_WITH_SOURCES:
        ok = ok and up.factory is Factory.SOURCE
    ok = ok and up.parallelism == down.parallelism
    if not graph.chain_operators_with_different_max_parallelism:
        ok = ok and up.max_parallelism == down.max_parallelism
    return ok


CHAINABLE_EDGES = "chainable_edges"  # `StreamGraph.cache` key of `chainable_edges`


def chainable_edges(graph: StreamGraph) -> bytes:
    """One flag per edge position (1: the edge chains), computed once per graph.

    A flag per position rather than a set of positions: the compiled hasher hands it back as one
    bytes object, with no Python object per edge (docs/performance.md, "Operator IDs")."""
    cached = graph.cache.get(CHAINABLE_EDGES)
    if cached is None:
        cached = bytes(is_chainable(e, graph) for e in graph.edges) if graph.chaining_enabled \
            else bytes(len(graph.edges))
        graph.cache[CHAINABLE_EDGES] = cached
    return cached  # type: ignore[return-value]


def chainable_out_edge_counts(graph: StreamGraph) -> dict[int, int]:
    """Per node, how many of its out-edges are chainable: the only thing V2 hashes about chaining."""
    counts = dict.fromkeys(graph.by_id, 0)
    for edge, chains in zip(graph.edges, chainable_edges(graph), strict=True):
        counts[edge.source] += chains
    return counts

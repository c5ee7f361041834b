"""Properties of V2 and V3 over random job graphs (hypothesis), the FLIP-411 promise among them."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from hashing.graph import Partitioner, StreamEdge, StreamGraph, StreamNode
from hashing.hashers import StreamGraphHasherV2, StreamGraphHasherV3


@st.composite
def dags(draw):
    n = draw(st.integers(1, 14))
    nodes = [StreamNode(i + 1, f"op{i}", draw(st.sampled_from([1, 2, 4])),
                        uid=draw(st.one_of(st.none(), st.just(f"uid-{i}")))) for i in range(n)]
    edges = []
    for t in range(1, n):
        for s in draw(st.sets(st.integers(0, t - 1), max_size=2)):
            edges.append(StreamEdge(s + 1, t + 1, draw(st.sampled_from([Partitioner.FORWARD, Partitioner.HASH]))))
    order = draw(st.permutations(range(len(edges))))
    return StreamGraph.of("g", nodes, [edges[i] for i in order])


@settings(max_examples=150, deadline=None)
@given(dags())
def test_every_node_gets_a_distinct_id(graph):
    hashes = StreamGraphHasherV2().traverse_stream_graph_and_generate_hashes(graph)
    assert set(hashes) == set(graph.by_id)
    assert len(set(hashes.values())) == len(hashes)


@settings(max_examples=150, deadline=None)
@given(dags(), st.data())
def test_v3_ignores_chaining_v2_does_not_when_a_chainable_edge_breaks(graph, data):
    """FLIP-411: changing a parallelism (which breaks chains) must not change V3 ids."""
    v3 = StreamGraphHasherV3()
    nid = data.draw(st.sampled_from([n.id for n in graph.nodes]))
    nodes = [replace(n, parallelism=n.parallelism * 3) if n.id == nid else n for n in graph.nodes]
    changed = StreamGraph.of("g", nodes, graph.edges)
    assert v3.traverse_stream_graph_and_generate_hashes(graph) == v3.traverse_stream_graph_and_generate_hashes(changed)
    unchained = StreamGraph.of("g", graph.nodes, graph.edges, chaining_enabled=False)
    assert StreamGraphHasherV2().traverse_stream_graph_and_generate_hashes(unchained) == \
        v3.traverse_stream_graph_and_generate_hashes(graph)

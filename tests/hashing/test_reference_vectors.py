"""Hand-checkable vectors: murmur3 / uid hashes verified against Flink 1.20.5 and 2.3.0, and the two
worked examples of a public blog post that computes JobVertexIDs by hand (its second job has a
non-chainable 4 -> 5 edge; the blog's own Flink log lines confirm those ids)."""

from __future__ import annotations

from hashing.graph import Partitioner, StreamEdge, StreamGraph, StreamNode
from hashing.murmur import traverse_id_hash, uid_hash
from hashing.operator_ids import compute_operator_ids


def _ids(nodes, edges):
    ids = compute_operator_ids(StreamGraph.of("t", nodes, edges), "v2")
    return {nid: p.generated.hex() for nid, p in ids.pairs.items()}


def test_uid_vectors():
    assert uid_hash("my-src2").hex() == "8971ea1910d729f362c1d821a7e8ef14"
    assert uid_hash("dup").hex() == "9fa7902226ea02616ca509b5cdc595bc"
    assert uid_hash("source-uid").hex() == "bef22c5df1ab33dd94bb7a6ecac555fb"
    assert uid_hash("ü-uid").hex() == "8baa1010ad8d2d04f37515556e9e9c1b"
    assert uid_hash("").hex() == "0" * 32


def test_deterministic_vectors():
    assert traverse_id_hash(0, 1).hex() == "bc764cd8ddf7a0cff126f51c16239658"
    assert traverse_id_hash(0, 2).hex() == "cbc357ccb763df2852fee8c4fc7d55f2"


def test_worked_graph_of_the_reference():
    n = StreamNode
    ids = _ids([n(1, "src1", 2), n(2, "src2", 2, uid="my-src2"), n(3, "map1", 2), n(4, "filter1", 3),
                n(7, "keyedmap", 2), n(8, "map3", 2, uid_hash="ab" * 16), n(9, "sink", 2)],
               [StreamEdge(1, 3), StreamEdge(3, 4, Partitioner.REBALANCE), StreamEdge(4, 7, Partitioner.HASH),
                StreamEdge(2, 7, Partitioner.HASH), StreamEdge(7, 8), StreamEdge(8, 9)])
    assert ids[1].startswith("cbc357cc") and ids[1].endswith("55f2")
    assert ids[2] == "8971ea1910d729f362c1d821a7e8ef14"
    assert ids[3].startswith("2be4fe38") and ids[3].endswith("4e03")
    assert ids[4].startswith("aca1a4ff") and ids[4].endswith("cf21")
    assert ids[7].startswith("6a29027f") and ids[7].endswith("23b8")
    assert ids[8].startswith("26d568c9") and ids[8].endswith("ab90")
    assert ids[9].startswith("5e5f131d") and ids[9].endswith("3da")


def test_blog_example_with_uids():
    n = StreamNode
    ids = _ids([n(1, "src", 4, uid="source_uid"), n(2, "map", 4), n(4, "count", 4, uid="count_uid"), n(5, "sink", 4)],
               [StreamEdge(1, 2), StreamEdge(2, 4, Partitioner.HASH), StreamEdge(4, 5)])
    assert ids == {1: "64248066b88fd35e9203cd469ffb4a53", 2: "d216482dd1005af6d275607ff9eabe2c",
                   4: "77fec41789154996bfa76055dea29472", 5: "f0bb9ed0d20321fef7413e1942e21550"}


def test_blog_example_without_uids_and_an_unchained_sink():
    n = StreamNode
    ids = _ids([n(1, "src", 4), n(2, "map", 4), n(4, "count", 4), n(5, "sink", 1)],
               [StreamEdge(1, 2), StreamEdge(2, 4, Partitioner.HASH), StreamEdge(4, 5, Partitioner.REBALANCE)])
    assert ids == {1: "cbc357ccb763df2852fee8c4fc7d55f2", 2: "7df19f87deec5680128845fd9a6ca18d",
                   4: "9dd63673dd41ea021b896d5203f3ba7c", 5: "1a936cb48657826a536f331e9fb33b5e"}

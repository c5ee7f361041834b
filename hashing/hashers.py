"""Flink's stream-graph hashers: `StreamGraphHasherV2`, FLIP-411's V3, and the user-hash hasher.

V2 and V3 share one traversal; they differ only in whether each chainable out-edge adds another
`putInt(tid)` (V2) or not (V3, FLIP-411: "V2 without the chained-output terms"). The traversal
reproduces Flink's exactly, including the parts that look accidental, because they decide IDs:
sources sorted by id, BFS in out-edge order, a node with unhashed inputs is dropped and
re-enqueued by its last parent, a node with a uid is hashed on first poll regardless of its
inputs, the traverse id is the number of hashes so far, and inputs are mixed byte-wise in
in-edge order with Java `byte` arithmetic.
"""

from __future__ import annotations

import re
from collections import deque

from hashing.chaining import chainable_out_edge_counts
from hashing.errors import FlinkError
from hashing.graph import StreamGraph
from hashing.murmur import traverse_id_hash, uid_hash

# (b * 37) & 0xFF for every byte: Java's `(byte) (hash[j] * 37 ^ other[j])` keeps 8 bits only,
# so the multiplication can be done with `bytes.translate` and the XOR on a 128-bit int.
_MUL37 = bytes((b * 37) & 0xFF for b in range(256))
_UID_HASH_RE = re.compile(r"^[0-9A-Fa-f]{32}$")

HASH_COLLISION_MSG = ('Hash collision on user-specified ID "{uid}". Most likely cause is a non-unique ID. '
                      "Please check that all IDs specified via `uid(String)` are unique.")
BAD_UID_HASH_MSG = "Node hash must be a 32 character String that describes a hex code. Found: {hash}"


def mix_inputs(local: bytes, inputs: list[bytes]) -> bytes:
    """`hash[j] = (byte) ((hash[j] * 37) ^ other[j])` for each input in in-edge order."""
    h = local
    for other in inputs:
        h = (int.from_bytes(h.translate(_MUL37), "little") ^ int.from_bytes(other, "little")).to_bytes(16, "little")
    return h


def traverse_stream_graph(graph: StreamGraph, *, chained_output_terms: bool) -> dict[int, bytes]:
    """Node id -> 16-byte hash, in the order Flink computes them (dict order = traverse ids)."""
    chainable = chainable_out_edge_counts(graph) if chained_output_terms else None
    in_sources = {nid: [e.source for e in es] for nid, es in graph.in_edges.items()}
    out_targets = {nid: [e.target for e in es] for nid, es in graph.out_edges.items()}
    by_id = graph.by_id
    hashes: dict[int, bytes] = {}
    seen: set[bytes] = set()
    sources = graph.source_ids()
    visited = set(sources)
    queue = deque(sources)
    while queue:
        nid = queue.popleft()
        uid = by_id[nid].uid
        if uid is None:
            ins = in_sources[nid]
            if any(s not in hashes for s in ins):
                visited.discard(nid)  # revisit: the last parent to be hashed enqueues it again
                continue
            tid = len(hashes)
            h = traverse_id_hash(tid, 1 + (chainable[nid] if chainable is not None else 0))
            if ins:
                h = mix_inputs(h, [hashes[s] for s in ins])
        else:
            h = uid_hash(uid)
            if h in seen:
                raise FlinkError(HASH_COLLISION_MSG.format(uid=uid))
        hashes[nid] = h
        seen.add(h)
        for t in out_targets[nid]:
            if t not in visited:
                visited.add(t)
                queue.append(t)
    return hashes


class StreamGraphHasherV2:
    """Flink's default hasher since 1.2 (the only one shipped through 2.3)."""

    name = "v2"

    def traverse_stream_graph_and_generate_hashes(self, graph: StreamGraph) -> dict[int, bytes]:
        return traverse_stream_graph(graph, chained_output_terms=True)


class StreamGraphHasherV3:
    """FLIP-411's chaining-agnostic hasher: V2 without the chainable-out-edge terms."""

    name = "v3"

    def traverse_stream_graph_and_generate_hashes(self, graph: StreamGraph) -> dict[int, bytes]:
        return traverse_stream_graph(graph, chained_output_terms=False)


def validate_uid_hash(value: str) -> bytes:
    """`Transformation.setUidHash` accepts exactly 32 hex chars, any case."""
    if not _UID_HASH_RE.match(value):
        raise FlinkError(BAD_UID_HASH_MSG.format(hash=value))
    return bytes.fromhex(value)


class StreamGraphUserHashHasher:
    """The legacy hasher: the `setUidHash(...)` value of every node that has one."""

    name = "user"

    def traverse_stream_graph_and_generate_hashes(self, graph: StreamGraph) -> dict[int, bytes]:
        return {n.id: validate_uid_hash(n.uid_hash) for n in graph.nodes if n.uid_hash is not None}


HASHERS = {"v2": StreamGraphHasherV2, "v3": StreamGraphHasherV3}

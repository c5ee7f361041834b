"""Flink's stream-graph hashers: `StreamGraphHasherV2`, FLIP-411's V3, and the user-hash hasher.

V2 and V3 share one traversal; they differ only in whether each chainable out-edge adds another
`putInt(tid)` (V2) or not (V3, FLIP-411: "V2 without the chained-output terms"). The traversal
reproduces Flink's exactly, including the parts that look accidental, because they decide IDs:
sources sorted by id, BFS in out-edge order, a node with unhashed inputs is dropped and
re-enqueued by its last parent, a node with a uid is hashed on first poll regardless of its
inputs, the traverse id is the number of hashes so far, and inputs are mixed byte-wise in
in-edge order with Java `byte` arithmetic.

The rules run compiled when `hashing._fastids` (hashing/_fastids.c, built by `pip install -e .`)
is importable: one C call per graph gives the chainable edges and the V2 and/or V3 hashes. The
Python functions below are the reference it was ported from and the fallback when no compiler
was available; tests/hashing/test_fastids.py checks both agree on every fixture and on random
graphs (docs/performance.md, "Operator IDs"). Spark executors on a cluster get our code as a zip, which
cannot hold the extension: they load the file the driver shipped beside it
(`hashing.shipped_extensions`).
"""

from __future__ import annotations

import re
from collections import deque

from hashing.chaining import CHAINABLE_EDGES, chainable_out_edge_counts
from hashing.errors import FlinkError
from hashing.graph import ChainingStrategy, ExchangeMode, Factory, Partitioner, StreamEdge, StreamGraph, StreamNode
from hashing.murmur import traverse_id_hash, uid_hash
from hashing.shipped_extensions import load_shipped

try:
    from hashing import _fastids
except ImportError:  # built without a C compiler, or our packages came as a zip: maybe Spark shipped the file
    _fastids = load_shipped("hashing._fastids")
if _fastids is not None:
    _fastids.configure((ChainingStrategy.NEVER, ChainingStrategy.HEAD, ChainingStrategy.HEAD_WITH_SOURCES,
                        Partitioner.FORWARD, Partitioner.FORWARD_FOR_CONSECUTIVE_HASH, ExchangeMode.BATCH,
                        Factory.SOURCE, Factory.LEGACY_SOURCE, Factory.YIELDING), StreamNode, StreamEdge)
COMPILED = _fastids is not None
# what ran, for logs and reports: "compiled" or "python" (`spark_jobs.common.hasher_use` collects it from executors)
IMPLEMENTATION = "compiled" if COMPILED else "python"

# (b * 37) & 0xFF for every byte: Java's `(byte) (hash[j] * 37 ^ other[j])` keeps 8 bits only,
# so the multiplication can be done with `bytes.translate` and the XOR on a 128-bit int.
_MUL37 = bytes((b * 37) & 0xFF for b in range(256))
_UID_HASH_RE = re.compile(r"^[0-9A-Fa-f]{32}$")

HASH_COLLISION_MSG = ('Hash collision on user-specified ID "{uid}". Most likely cause is a non-unique ID. '
                      "Please check that all IDs specified via `uid(String)` are unique.")
BAD_UID_HASH_MSG = "Node hash must be a 32 character String that describes a hex code. Found: {hash}"


def stream_graph_hashes(graph: StreamGraph, *, v2: bool, v3: bool, compiled: bool = True,
                        ) -> tuple[dict[int, bytes] | None, dict[int, bytes] | None]:
    """The V2 and/or V3 hashes of one graph in one pass (`compute_operator_ids` under V3 needs both).

    Compiled when possible: one C call per graph, one traversal for both hashers; the chainable
    edges it finds are cached on the graph for `chains`. A graph the compiled code does not handle
    (it returns None: a cycle, an unknown edge end) and `compiled=False` go through the Python
    rules, which also raise the product's errors; a uid collision comes back as the uid.
    """
    if compiled and _fastids is not None:
        done = _fastids.hash_graph(graph.nodes, graph.edges, graph.chaining_enabled,
                                   graph.chain_operators_with_different_max_parallelism, v2, v3)
        if type(done) is tuple:
            graph.cache.setdefault(CHAINABLE_EDGES, done[0])
            return done[1], done[2]
        if done is not None:
            raise FlinkError(HASH_COLLISION_MSG.format(uid=done))
    return (traverse_python(graph, chained_output_terms=True) if v2 else None,
            traverse_python(graph, chained_output_terms=False) if v3 else None)


def traverse_stream_graph(graph: StreamGraph, *, chained_output_terms: bool) -> dict[int, bytes]:
    """Node id -> 16-byte hash, in the order Flink computes them (dict order = traverse ids)."""
    h2, h3 = stream_graph_hashes(graph, v2=chained_output_terms, v3=not chained_output_terms)
    return h2 if chained_output_terms else h3  # type: ignore[return-value]


def traverse_python(graph: StreamGraph, *, chained_output_terms: bool) -> dict[int, bytes]:
    """The reference rules in Python: node id -> 16-byte hash, in Flink's order (dict order = traverse ids).

    Hot path (fleets hash millions of nodes): nodes are addressed by position, readiness is a
    counter of unhashed in-edges instead of a scan, and the byte mixing works on one 128-bit
    int per input. The visiting order is exactly Flink's.
    """
    nodes = graph.nodes
    pos = {n.id: i for i, n in enumerate(nodes)}
    count = len(nodes)
    outs: list[list[int]] = [[] for _ in range(count)]
    ins: list[list[int]] = [[] for _ in range(count)]
    for e in graph.edges:
        s, t = pos[e.source], pos[e.target]
        outs[s].append(t)
        ins[t].append(s)
    repeats = [1] * count
    if chained_output_terms:
        for nid, k in chainable_out_edge_counts(graph).items():
            repeats[pos[nid]] += k
    uids = [n.uid for n in nodes]
    pending = [len(x) for x in ins]  # in-edges whose source has no hash yet
    hashed: list[bytes | None] = [None] * count
    as_int: list[int] = [0] * count
    order: list[int] = []
    seen: set[bytes] = set()
    visited = [False] * count
    queue: deque[int] = deque()
    for i in range(count):
        if not ins[i]:
            visited[i] = True
            queue.append(i)
    mul37, from_bytes, tid_hash = _MUL37, int.from_bytes, traverse_id_hash
    while queue:
        i = queue.popleft()
        uid = uids[i]
        if uid is None:
            if pending[i]:
                visited[i] = False  # revisit: the last parent to be hashed enqueues it again
                continue
            h = tid_hash(len(order), repeats[i])
            for s in ins[i]:
                h = (from_bytes(h.translate(mul37), "little") ^ as_int[s]).to_bytes(16, "little")
        else:
            h = uid_hash(uid)
            if h in seen:
                raise FlinkError(HASH_COLLISION_MSG.format(uid=uid))
        hashed[i] = h
        as_int[i] = from_bytes(h, "little")
        order.append(i)
        seen.add(h)
        for t in outs[i]:
            pending[t] -= 1
            if not visited[t]:
                visited[t] = True
                queue.append(t)
    return {nodes[i].id: hashed[i] for i in order}  # type: ignore[misc]


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

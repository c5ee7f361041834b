"""The job-graph model: what Flink's `StreamGraph` holds that matters for IDs, chaining and state.

Only what changes an operator ID, a chain or a restore is modelled (docs/graph-spec.md). Names follow
Flink (`StreamNode`, `StreamEdge`, `ChainingStrategy`) so a Flink engineer can check each rule
against the Java source. Edge order is part of the model: Flink enqueues children in out-edge
order and mixes input hashes in in-edge order, and both orders are the order of `edges`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

# StreamNode ids, parallelisms and type numbers are Java `int`s in Flink: a value outside this range
# cannot come from a real job, and would not survive Flink's own serialisation.
JAVA_INT_MIN, JAVA_INT_MAX = -(2**31), 2**31 - 1


class ChainingStrategy(StrEnum):
    ALWAYS = "ALWAYS"
    NEVER = "NEVER"
    HEAD = "HEAD"
    HEAD_WITH_SOURCES = "HEAD_WITH_SOURCES"


class Partitioner(StrEnum):
    FORWARD = "FORWARD"
    HASH = "HASH"
    REBALANCE = "REBALANCE"
    RESCALE = "RESCALE"
    SHUFFLE = "SHUFFLE"
    BROADCAST = "BROADCAST"
    GLOBAL = "GLOBAL"
    CUSTOM = "CUSTOM"
    FORWARD_FOR_CONSECUTIVE_HASH = "FORWARD_FOR_CONSECUTIVE_HASH"


class ExchangeMode(StrEnum):
    UNDEFINED = "UNDEFINED"
    PIPELINED = "PIPELINED"
    BATCH = "BATCH"
    HYBRID_FULL = "HYBRID_FULL"
    HYBRID_SELECTIVE = "HYBRID_SELECTIVE"


class Factory(StrEnum):
    """The kind of operator factory, as far as Flink's chaining rules look at it."""

    OPERATOR = "operator"
    SOURCE = "source"  # SourceOperatorFactory (FLIP-27)
    LEGACY_SOURCE = "legacy_source"  # StreamSource around a SourceFunction
    YIELDING = "yielding"  # YieldingOperatorFactory, e.g. async I/O


@dataclass(frozen=True, slots=True)
class StreamNode:
    id: int
    name: str
    parallelism: int
    max_parallelism: int | None = None  # None: not set, Flink derives it per job vertex
    uid: str | None = None
    uid_hash: str | None = None
    chaining_strategy: ChainingStrategy = ChainingStrategy.ALWAYS
    slot_sharing_group: str | None = "default"
    factory: Factory = Factory.OPERATOR


@dataclass(frozen=True, slots=True)
class StreamEdge:
    source: int
    target: int
    partitioner: Partitioner = Partitioner.FORWARD
    exchange_mode: ExchangeMode = ExchangeMode.UNDEFINED
    type_number: int = 0


@dataclass(frozen=True)
class StreamGraph:
    """A validated graph; build it with `StreamGraph.of(...)` so adjacency is indexed once."""

    name: str
    nodes: tuple[StreamNode, ...]
    edges: tuple[StreamEdge, ...]
    chaining_enabled: bool = True
    max_parallelism: int | None = None
    chain_operators_with_different_max_parallelism: bool = True
    by_id: dict[int, StreamNode] = field(default_factory=dict, compare=False, repr=False)
    out_edges: dict[int, list[StreamEdge]] = field(default_factory=dict, compare=False, repr=False)
    in_edges: dict[int, list[StreamEdge]] = field(default_factory=dict, compare=False, repr=False)
    # derived facts computed once per graph by the rule modules (e.g. which edges chain)
    cache: dict[str, object] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of(cls, name: str, nodes: list[StreamNode] | tuple[StreamNode, ...],
           edges: list[StreamEdge] | tuple[StreamEdge, ...], *, chaining_enabled: bool = True,
           max_parallelism: int | None = None,
           chain_operators_with_different_max_parallelism: bool = True) -> StreamGraph:
        ordered = tuple(sorted(nodes, key=lambda n: n.id))
        by_id = {n.id: n for n in ordered}
        out_edges: dict[int, list[StreamEdge]] = {n.id: [] for n in ordered}
        in_edges: dict[int, list[StreamEdge]] = {n.id: [] for n in ordered}
        for e in edges:
            out_edges[e.source].append(e)
            in_edges[e.target].append(e)
        return cls(name, ordered, tuple(edges), chaining_enabled, max_parallelism,
                   chain_operators_with_different_max_parallelism, by_id, out_edges, in_edges, {})

    def source_ids(self) -> list[int]:
        """Nodes without in-edges, ascending: Flink sorts `getSourceIDs()` by StreamNode id."""
        return [n.id for n in self.nodes if not self.in_edges[n.id]]

    def effective_max_parallelism(self, node: StreamNode) -> int | None:
        """The node's own max parallelism, else the job-wide default; None when Flink derives it."""
        return node.max_parallelism if node.max_parallelism is not None else self.max_parallelism


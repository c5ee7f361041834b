"""The job graph spec of docs/graph-spec.md -> `StreamGraph`, validated.

Every error names the offending node or edge, because a user with a 200-operator spec needs
to know which line to fix. Flink's own limits are enforced with Flink's messages where Flink
has one (uid hash format, parallelism bounds).
"""

from __future__ import annotations

from dataclasses import fields
from enum import Enum
from typing import Any, TypeVar

from hashing.errors import InputError, describe
from hashing.graph import (
    JAVA_INT_MAX,
    JAVA_INT_MIN,
    ChainingStrategy,
    ExchangeMode,
    Factory,
    Partitioner,
    StreamEdge,
    StreamGraph,
    StreamNode,
)
from hashing.hashers import validate_uid_hash

UPPER_BOUND_MAX_PARALLELISM = 32768
MAX_NODES = 100_000

_NODE_KEYS = {"id", "name", "parallelism", "max_parallelism", "uid", "uid_hash", "chaining_strategy",
              "slot_sharing_group", "factory", "factory_class", "description", "state", "key_type", "kind", "connector"}
_EDGE_KEYS = {"source", "target", "partitioner", "exchange_mode", "type_number", "side"}

E = TypeVar("E", bound=Enum)


class _Where:
    """Where a node or edge is, for error messages: formatted only when an error is raised.

    A fleet parses millions of nodes; building every node's location string up front cost
    more than validating the node."""

    __slots__ = ("_args", "_make")

    def __init__(self, make: Any, *args: Any) -> None:
        self._make, self._args = make, args

    def __str__(self) -> str:
        return self._make(*self._args)

    def __format__(self, spec: str) -> str:  # f"{where}: ..." in an error message
        return format(str(self), spec)


def _node_where(origin: str, nid: int | None) -> str:
    return f"{origin}: node {nid}"


def _raw_node_where(origin: str, raw: dict, index: int) -> str:
    nid = raw.get("id")
    named = type(nid) is str or (type(nid) is int and nid.bit_length() <= 64)
    return f"{origin}: node {describe(nid)}" if named else f"{origin}: node #{index}"


def _edge_where(origin: str, index: int, raw: dict) -> str:
    return f"{origin}: edge #{index} ({describe(raw.get('source'))} -> {describe(raw.get('target'))})"


_ENUM_MEMBERS: dict[tuple[type, Any], Enum] = {}  # (kind, value as written) -> member, filled on first use


def _enum(kind: type[E], value: Any, default: E, where: Any, field: str) -> E:
    if value is None:
        return default
    member = _ENUM_MEMBERS.get((kind, value)) if isinstance(value, str) else None
    if member is not None:
        return member  # type: ignore[return-value]
    try:
        if not isinstance(value, str):
            raise ValueError(value)
        member = kind(value.upper() if kind is not Factory else value.lower())
    except ValueError:
        allowed = ", ".join(m.value for m in kind)  # type: ignore[attr-defined]
        raise InputError(f"{where}: {field} {describe(value)} is not one of {allowed}") from None
    if isinstance(value, str) and len(_ENUM_MEMBERS) < 4096:
        _ENUM_MEMBERS[(kind, value)] = member
    return member


def _int(value: Any, where: Any, field: str, *, lo: int | None = None, hi: int | None = None,
         optional: bool = False) -> int | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"{where}: {field} must be an integer, got {describe(value)}")
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise InputError(f"{where}: {field} {describe(value)} is out of range [{lo}, {hi}]")
    return value


def _names(keys: set[Any]) -> str:
    """Unknown field names for a message: plain when they are short words, else quoted and shortened."""
    shown = sorted(k if isinstance(k, str) and k.isidentifier() and len(k) <= 60 else describe(k) for k in keys)
    return ", ".join(shown[:10]) + (f" and {len(shown) - 10} more" if len(shown) > 10 else "")


def _str(value: Any, where: Any, field: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise InputError(f"{where}: {field} must be a string, got {describe(value)}")
    return value


def _plain_enum(enum: type, value: Any, default: Any) -> Any:
    """The member a plainly spelled `value` names (`default` when absent), else None."""
    if value is None:
        return default
    return _ENUM_MEMBERS.get((enum, value)) if type(value) is str else None


# ---- constructors for plain nodes and edges --------------------------------------------------
# A frozen dataclass's generated `__init__` sets each field through `object.__setattr__`; a fleet builds
# millions of nodes and edges, and that was a fifth of a spec's parse. These build the same objects by
# calling the slots' descriptors directly. The field lists are checked against the dataclasses at import,
# so a field added to either class cannot be silently left unset here.

def _slot_setters(cls: type, names: tuple[str, ...]) -> tuple[Any, ...]:
    declared = tuple(f.name for f in fields(cls))
    if declared != names:
        raise RuntimeError(f"{cls.__name__} fields {declared} differ from the spec reader's constructor {names}")
    return tuple(cls.__dict__[name].__set__ for name in names)


_new = object.__new__
(_set_id, _set_name, _set_parallelism, _set_max_parallelism, _set_uid, _set_uid_hash, _set_strategy, _set_group,
 _set_factory) = _slot_setters(StreamNode, ("id", "name", "parallelism", "max_parallelism", "uid", "uid_hash",
                                           "chaining_strategy", "slot_sharing_group", "factory"))
(_set_source, _set_target, _set_partitioner, _set_exchange_mode, _set_type_number) = _slot_setters(
    StreamEdge, ("source", "target", "partitioner", "exchange_mode", "type_number"))


def _new_node(nid: int, name: str, p: int, maxp: int | None, uid: str | None, strategy: ChainingStrategy,
              group: str | None, factory: Factory) -> StreamNode:
    """`StreamNode(nid, name, p, maxp, uid, None, strategy, group, factory)`."""
    node = _new(StreamNode)
    _set_id(node, nid)
    _set_name(node, name)
    _set_parallelism(node, p)
    _set_max_parallelism(node, maxp)
    _set_uid(node, uid)
    _set_uid_hash(node, None)
    _set_strategy(node, strategy)
    _set_group(node, group)
    _set_factory(node, factory)
    return node


def _new_edge(src: int, dst: int, partitioner: Partitioner, mode: ExchangeMode, type_number: int) -> StreamEdge:
    """`StreamEdge(src, dst, partitioner, mode, type_number)`."""
    edge = _new(StreamEdge)
    _set_source(edge, src)
    _set_target(edge, dst)
    _set_partitioner(edge, partitioner)
    _set_exchange_mode(edge, mode)
    _set_type_number(edge, type_number)
    return edge


def _plain_node(raw: dict) -> StreamNode | None:
    """The node if every field is plainly valid (what generated specs hold), else None.

    A fleet parses every spec twice (ids, then the check) and most of a parse was the per-field
    checks' calls. Anything unusual (a missing name, a uid hash, an enum spelling not seen yet,
    a bad value) returns None, and `_node` then checks it field by field, with the messages."""
    if not raw.keys() <= _NODE_KEYS:
        return None
    get = raw.get
    nid, name, p, maxp = get("id"), get("name"), get("parallelism", 1), get("max_parallelism")
    uid, group = get("uid"), get("slot_sharing_group", "default")
    strategy, factory = get("chaining_strategy"), get("factory")
    if (type(nid) is not int or not JAVA_INT_MIN <= nid <= JAVA_INT_MAX or type(name) is not str or type(p) is not int
            or not 1 <= p <= UPPER_BOUND_MAX_PARALLELISM or get("uid_hash") is not None
            or (maxp is not None and (type(maxp) is not int or not 1 <= maxp <= UPPER_BOUND_MAX_PARALLELISM))
            or (uid is not None and type(uid) is not str) or (group is not None and type(group) is not str)):
        return None
    # an absent field (most are) takes its default without a call
    strategy = ChainingStrategy.ALWAYS if strategy is None else _plain_enum(ChainingStrategy, strategy, None)
    factory = Factory.OPERATOR if factory is None else _plain_enum(Factory, factory, None)
    if strategy is None or factory is None:
        return None
    return _new_node(nid, name, p, maxp, uid, strategy, group, factory)


def _plain_edge(raw: dict, ids: set[int]) -> StreamEdge | None:
    """The edge if every field is plainly valid, else None (then `_edge` checks it field by field)."""
    if not raw.keys() <= _EDGE_KEYS:
        return None
    get = raw.get
    src, dst, type_number = get("source"), get("target"), get("type_number", 0)
    partitioner, mode = get("partitioner"), get("exchange_mode")
    if (type(src) is not int or type(dst) is not int or src == dst or src not in ids or dst not in ids
            or type(type_number) is not int or not 0 <= type_number <= JAVA_INT_MAX):
        return None
    partitioner = Partitioner.FORWARD if partitioner is None else _plain_enum(Partitioner, partitioner, None)
    mode = ExchangeMode.UNDEFINED if mode is None else _plain_enum(ExchangeMode, mode, None)
    if partitioner is None or mode is None:
        return None
    return _new_edge(src, dst, partitioner, mode, type_number)


def _node(raw: Any, index: int, origin: str) -> StreamNode:
    if type(raw) is dict and (plain := _plain_node(raw)) is not None:
        return plain
    if not isinstance(raw, dict):
        raise InputError(f"{origin}: nodes[{index}] must be an object, got {type(raw).__name__}")
    nid = _int(raw.get("id"), _Where(_raw_node_where, origin, raw, index), "id", lo=JAVA_INT_MIN, hi=JAVA_INT_MAX)
    where = _Where(_node_where, origin, nid)
    unknown = set(raw) - _NODE_KEYS
    if unknown:
        raise InputError(f"{where}: unknown field(s) {_names(unknown)}")
    uid_hash = _str(raw.get("uid_hash"), where, "uid_hash")
    if uid_hash is not None:
        if len(uid_hash) > 64 or not uid_hash.isprintable():  # Flink's message quotes it: keep it one short line
            raise InputError(f"{where}: uid_hash must be 32 hex characters, got {describe(uid_hash)}")
        try:
            validate_uid_hash(uid_hash)
        except InputError as exc:
            raise InputError(f"{where}: {exc}") from None
    assert nid is not None
    name = raw.get("name", f"node-{nid}")
    return StreamNode(
        id=nid,
        name=_str(name, where, "name") or "",
        parallelism=_int(raw.get("parallelism", 1), where, "parallelism", lo=1, hi=UPPER_BOUND_MAX_PARALLELISM) or 1,
        max_parallelism=_int(raw.get("max_parallelism"), where, "max_parallelism", lo=1,
                             hi=UPPER_BOUND_MAX_PARALLELISM, optional=True),
        uid=_str(raw.get("uid"), where, "uid"),
        uid_hash=uid_hash,
        chaining_strategy=_enum(ChainingStrategy, raw.get("chaining_strategy"), ChainingStrategy.ALWAYS,
                                where, "chaining_strategy"),
        slot_sharing_group=_str(raw.get("slot_sharing_group", "default"), where, "slot_sharing_group"),
        factory=_enum(Factory, raw.get("factory"), Factory.OPERATOR, where, "factory"),
    )


def _edge(raw: Any, index: int, origin: str, ids: set[int]) -> StreamEdge:
    if type(raw) is dict and (plain := _plain_edge(raw, ids)) is not None:
        return plain
    if not isinstance(raw, dict):
        raise InputError(f"{origin}: edge #{index} must be an object, got {type(raw).__name__}")
    where = _Where(_edge_where, origin, index, raw)
    unknown = set(raw) - _EDGE_KEYS
    if unknown:
        raise InputError(f"{where}: unknown field(s) {_names(unknown)}")
    src = _int(raw.get("source"), where, "source", lo=JAVA_INT_MIN, hi=JAVA_INT_MAX)
    dst = _int(raw.get("target"), where, "target", lo=JAVA_INT_MIN, hi=JAVA_INT_MAX)
    for field, value in (("source", src), ("target", dst)):
        if value not in ids:
            raise InputError(f"{where}: {field} {value} is not the id of any node")
    assert src is not None and dst is not None
    if src == dst:
        raise InputError(f"{where}: an edge from a node to itself makes a cycle")
    return StreamEdge(
        source=src, target=dst,
        partitioner=_enum(Partitioner, raw.get("partitioner"), Partitioner.FORWARD, where, "partitioner"),
        exchange_mode=_enum(ExchangeMode, raw.get("exchange_mode"), ExchangeMode.UNDEFINED, where, "exchange_mode"),
        type_number=_int(raw.get("type_number", 0), where, "type_number", lo=0, hi=JAVA_INT_MAX) or 0,
    )


def find_cycle(nodes: list[StreamNode], edges: list[StreamEdge]) -> list[int] | None:
    """Kahn's algorithm; on failure walk the remaining nodes to name one concrete cycle."""
    indegree = {n.id: 0 for n in nodes}
    outs: dict[int, list[int]] = {n.id: [] for n in nodes}
    for e in edges:
        indegree[e.target] += 1
        outs[e.source].append(e.target)
    ready = [nid for nid, d in indegree.items() if d == 0]
    done = 0
    while ready:
        nid = ready.pop()
        done += 1
        for t in outs[nid]:
            indegree[t] -= 1
            if indegree[t] == 0:
                ready.append(t)
    if done == len(nodes):
        return None
    remaining = {nid for nid, d in indegree.items() if d > 0}
    # Nodes downstream of a cycle remain too but lie on none: drop them (they have no out-edge back
    # into the rest), so the walk below always closes a cycle instead of running into a dead end.
    out_degree = {nid: sum(t in remaining for t in outs[nid]) for nid in remaining}
    ins: dict[int, list[int]] = {nid: [] for nid in remaining}
    for e in edges:
        if e.source in remaining and e.target in remaining:
            ins[e.target].append(e.source)
    dead = [nid for nid, d in out_degree.items() if d == 0]
    while dead:
        nid = dead.pop()
        remaining.discard(nid)
        for src in ins[nid]:
            if src in remaining:
                out_degree[src] -= 1
                if out_degree[src] == 0:
                    dead.append(src)
    path: list[int] = []
    pos: dict[int, int] = {}
    current = min(remaining)
    while current not in pos:
        pos[current] = len(path)
        path.append(current)
        current = next(t for t in outs[current] if t in remaining)
    return [*path[pos[current]:], current]


def parse_spec(doc: Any, origin: str) -> StreamGraph:
    if not isinstance(doc, dict):
        raise InputError(f"{origin}: a graph spec must be an object with 'nodes' and 'edges'")
    raw_nodes, raw_edges = doc.get("nodes"), doc.get("edges", [])
    if not isinstance(raw_nodes, list) or not raw_nodes:
        raise InputError(f"{origin}: 'nodes' must be a non-empty list")
    if not isinstance(raw_edges, list):
        raise InputError(f"{origin}: 'edges' must be a list")
    if len(raw_nodes) > MAX_NODES:
        raise InputError(f"{origin}: {len(raw_nodes)} nodes is more than the {MAX_NODES} supported")
    nodes = [_node(r, i, origin) for i, r in enumerate(raw_nodes)]
    ids: set[int] = set()
    for n in nodes:
        if n.id in ids:
            raise InputError(f"{origin}: node {n.id}: duplicate node id")
        ids.add(n.id)
    edges = [_edge(r, i, origin, ids) for i, r in enumerate(raw_edges)]
    cycle = find_cycle(nodes, edges)
    if cycle:
        raise InputError(f"{origin}: the graph has a cycle: {' -> '.join(map(str, cycle))}")
    chaining = doc.get("chaining_enabled", True)
    if not isinstance(chaining, bool):
        raise InputError(f"{origin}: chaining_enabled must be true or false, got {describe(chaining)}")
    diff_maxp = doc.get("chain_operators_with_different_max_parallelism", True)
    if not isinstance(diff_maxp, bool):
        raise InputError(f"{origin}: chain_operators_with_different_max_parallelism must be true or false")
    max_p = _int(doc.get("max_parallelism"), origin, "max_parallelism", lo=1, hi=UPPER_BOUND_MAX_PARALLELISM,
                 optional=True)
    name = _str(doc.get("name"), origin, "name") or origin
    return StreamGraph.of(name, nodes, edges, chaining_enabled=chaining, max_parallelism=max_p,
                          chain_operators_with_different_max_parallelism=diff_maxp)


def spec_of(graph: StreamGraph) -> dict[str, Any]:
    """The inverse of `parse_spec`, so tools can write what they read."""
    return {
        "name": graph.name,
        "chaining_enabled": graph.chaining_enabled,
        "max_parallelism": graph.max_parallelism,
        "chain_operators_with_different_max_parallelism": graph.chain_operators_with_different_max_parallelism,
        "nodes": [{"id": n.id, "name": n.name, "parallelism": n.parallelism, "max_parallelism": n.max_parallelism,
                   "uid": n.uid, "uid_hash": n.uid_hash, "chaining_strategy": n.chaining_strategy.value,
                   "slot_sharing_group": n.slot_sharing_group, "factory": n.factory.value} for n in graph.nodes],
        "edges": [{"source": e.source, "target": e.target, "partitioner": e.partitioner.value,
                   "exchange_mode": e.exchange_mode.value, "type_number": e.type_number} for e in graph.edges],
    }

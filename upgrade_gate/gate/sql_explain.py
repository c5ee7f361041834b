"""SQL findings in the query's terms: which statement, which operator, what state, why its ID changed.

A SQL job's operators are named by the planner (`GroupAggregate[78]`) and their state is invisible in the
query; a user reading "GroupAggregate[78] loses 3.7 KB" cannot tell which INSERT that is. The exported graph
(`upgrade-gate export --sql`, flink_bridge/java/common/streamgraph/SqlStateDumper.java) carries each SQL
operator's description as the planner prints it (`ExecNodeBase#getDescription`):
`[78]:GroupAggregate(groupBy=[user_id], select=[user_id, SUM(amount) AS c])`. From it and the graph:

* statement: the sink(s) downstream of the operator (`Sink(table=[cat.db.totals])`, or the sink writer's
  node name `totals[79]: Writer`) -> "INSERT INTO totals";
* operator: its kind and key -> "GroupAggregate on key (user_id)";
* state: what that kind keeps (`GroupAggFunction` accumulators, `StreamingJoinOperator` record buffers, ...);
* why (with the old graph): the old and new operator paired by kind and position relative to the sink, and
  what changed upstream (a filter `Calc(where=..)`, `MiniBatchAssigner` = mini-batch, `LocalGroupAggregate` =
  two-phase aggregation, another statement reading the same source) or in the operator itself.

The `[N]` planner counters differ between two translations of the SAME query (each translation counts on),
so they are stripped everywhere and never used to pair operators.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable
from typing import Any

from upgrade_gate.gate.annotations import SqlContext
from upgrade_gate.gate.sql_meaning import args, compare, family, kind, strip_counters

__all__ = ["causes", "describe", "explain", "explainer", "pair", "statements", "text"]

# what each family keeps in state (GroupAggFunction, the deduplicate functions, StreamingJoinOperator, ...)
_STATE = {
    "group aggregate": "the aggregates' accumulators per key",
    "local aggregate": "pre-aggregated accumulators of the current mini-batch",
    "window aggregate": "window state: the accumulators of every open window per key",
    "local window aggregate": "pre-aggregated window slices",
    "deduplicate": "dedup rows: the first or last row seen per key",
    "rank": "top-N rows per partition",
    "join": "join buffers: the rows of both inputs kept to match later rows",
    "over": "the rows and accumulators of the OVER window per key",
}


def _entry(side: Any, nid: int) -> dict[str, Any]:
    e = (side.sql_state or {}).get(str(nid))
    return e if isinstance(e, dict) else {}


def _description(side: Any, nid: int) -> str:
    return str(_entry(side, nid).get("description") or side.graph.by_id[nid].name)


def _key(k: str, a: dict[str, str]) -> str | None:
    for field in ("groupBy", "partitionBy", "key", "partitionKeys"):
        if a.get(field):
            return a[field]
    if family(k) == "join" and a.get("where"):
        return a["where"]
    return None


def describe(description: str) -> str:
    """"GroupAggregate on key (user_id)", "Join InnerJoin on (user_id = id)"."""
    k, a = kind(description), args(description)
    key = _key(k, a)
    if family(k) == "join":
        return f"{k} {a.get('joinType', '')} on {key}".replace("  ", " ") if key else k
    return f"{k} on key ({key})" if key else k


def _table(side: Any, nid: int) -> str:
    d = str(_entry(side, nid).get("description") or "")
    if kind(d) == "Sink" and args(d).get("table"):
        return args(d)["table"].rsplit(".", 1)[-1]
    name = strip_counters(side.graph.by_id[nid].name)
    name = re.sub(r"^Sink:\s*", "", name)
    return re.sub(r":\s*(Writer|Committer)$", "", name).strip()


def _is_sink(side: Any, nid: int) -> bool:
    d = str(_entry(side, nid).get("description") or "")
    return kind(d) == "Sink" or not side.graph.out_edges.get(nid)


def statements(side: Any, nid: int) -> list[str]:
    """`INSERT INTO <table>` of every sink downstream of the node (a statement set may feed several)."""
    seen, todo, out = {nid}, deque([nid]), []
    while todo:
        n = todo.popleft()
        if n != nid and _is_sink(side, n):
            t = _table(side, n)
            if f"INSERT INTO {t}" not in out:
                out.append(f"INSERT INTO {t}")
            continue
        for e in side.graph.out_edges.get(n, []):
            if e.target not in seen:
                seen.add(e.target)
                todo.append(e.target)
    return out


def _upstream(side: Any, nid: int) -> list[int]:
    seen, todo, out = {nid}, deque([nid]), []
    while todo:
        for e in side.graph.in_edges.get(todo.popleft(), []):
            if e.source not in seen:
                seen.add(e.source)
                out.append(e.source)
                todo.append(e.source)
    return out


def _downstream_same_family(side: Any, nid: int, fam: str) -> int:
    seen, todo, count = {nid}, deque([nid]), 0
    while todo:
        for e in side.graph.out_edges.get(todo.popleft(), []):
            if e.target not in seen:
                seen.add(e.target)
                todo.append(e.target)
                count += family(kind(_description(side, e.target))) == fam
    return count


def _position(side: Any, nid: int) -> tuple[Any, ...] | None:
    """Kind family + statements + how many operators of that family lie between it and the sink."""
    fam = family(kind(_description(side, nid)))
    if fam is None:
        return None
    return fam, tuple(statements(side, nid)), _downstream_same_family(side, nid, fam)


def pair(old: Any, new: Any) -> dict[int, int]:
    """Old stateful SQL node -> new one, by kind family and position relative to the sink (unique on both sides)."""
    def index(side: Any) -> dict[tuple[Any, ...], list[int]]:
        out: dict[tuple[Any, ...], list[int]] = {}
        for n in side.graph.nodes:
            p = _position(side, n.id)
            if p is not None:
                out.setdefault(p, []).append(n.id)
        return out

    olds, news = index(old), index(new)
    return {ids[0]: news[p][0] for p, ids in olds.items() if len(ids) == 1 and len(news.get(p, [])) == 1}


# what moved an operator's ID, as codes (`causes`): the remedies pick by these, the texts are for people
MINI_BATCH, AGG_PHASE, FAN_OUT, FILTER, UPSTREAM, OPERATOR = (
    "mini-batch", "agg-phase", "fan-out", "filter", "upstream", "operator")
JOIN_CONDITION = "join condition"  # one of sql_meaning.compare's aspects, which are causes by their own names


def _upstream_changes(old: Any, o: int, new: Any, n: int) -> list[tuple[str, str]]:
    """What differs upstream, in the planner's terms a user can map to the query and its settings: (cause, text)."""
    def descs(side: Any, nid: int) -> list[str]:
        return [strip_counters(_description(side, u)) for u in _upstream(side, nid)]

    before, after = descs(old, o), descs(new, n)
    added = [d for d in after if d not in before]
    removed = [d for d in before if d not in after]
    out = []
    added_kinds, removed_kinds = {kind(d) for d in added}, {kind(d) for d in removed}
    if "MiniBatchAssigner" in added_kinds - removed_kinds:
        out.append((MINI_BATCH, "mini-batch is now on: a MiniBatchAssigner was inserted upstream "
                                "(table.exec.mini-batch.enabled)"))
    if "MiniBatchAssigner" in removed_kinds - added_kinds:
        out.append((MINI_BATCH, "mini-batch is now off: the MiniBatchAssigner upstream was removed"))
    if "LocalGroupAggregate" in added_kinds - removed_kinds or "LocalWindowAggregate" in added_kinds - removed_kinds:
        out.append((AGG_PHASE, "the optimizer now aggregates in two phases: a Local aggregate was inserted upstream "
                               "(table.optimizer.agg-phase-strategy)"))
    if "LocalGroupAggregate" in removed_kinds - added_kinds:
        out.append((AGG_PHASE, "the optimizer now aggregates in one phase: the LocalGroupAggregate upstream was "
                               "removed"))
    filters_new = [d for d in added if kind(d) == "Calc" and "where" in args(d)]
    filters_old = [d for d in removed if kind(d) == "Calc" and "where" in args(d)]
    out += [(FILTER, f"a filter was added upstream: {d}") for d in filters_new]
    out += [(FILTER, f"a filter was removed upstream: {d}") for d in filters_old]
    # a projection (`Calc(select=..)` without `where`) is chained into its neighbours and its text is not hashed:
    # it never moves an ID, so naming it would only be noise
    skip = {"MiniBatchAssigner", "LocalGroupAggregate", "LocalWindowAggregate", "Calc"}
    for d in added:
        if kind(d) not in skip and d not in filters_new:
            out.append((UPSTREAM, f"upstream operator inserted or changed: {d}"))
    for d in removed:
        if kind(d) not in skip and d not in filters_old:
            out.append((UPSTREAM, f"upstream operator removed or changed: {d}"))

    def fan_out(side: Any, nid: int) -> dict[str, int]:
        return {strip_counters(_description(side, u)): len(side.graph.out_edges.get(u, []))
                for u in [nid, *_upstream(side, nid)]}

    fo, fn = fan_out(old, o), fan_out(new, n)
    for d, k in fn.items():
        if d in fo and fo[d] != k:
            out.append((FAN_OUT, f"'{d}' now feeds {k} operators (was {fo[d]}): another statement reads it, and "
                                 f"the operator IDs downstream of it change"))
    return out


def _own_changes(old: Any, o: int, new: Any, n: int) -> list[tuple[str, str]]:
    od, nd = _description(old, o), _description(new, n)
    if kind(od) != kind(nd):
        return [(OPERATOR, f"the operator itself changed: {kind(od)} -> {kind(nd)}")]
    return [(aspect, f"{aspect}: {a} -> {b}") for aspect, a, b in compare(od, nd)]


def _changes(old: Any, old_nid: int, side: Any, nid: int) -> list[tuple[str, str]]:
    return [*_own_changes(old, old_nid, side, nid), *_upstream_changes(old, old_nid, side, nid)]


def causes(side: Any, nid: int, old: Any, old_nid: int) -> set[str]:
    """The codes of what differs between old node `old_nid` and new node `nid` (the changes `explain`'s `why`
    words): `MINI_BATCH`, `AGG_PHASE`, `FAN_OUT`, `FILTER`, `UPSTREAM`, `OPERATOR`, or an aspect of the
    operator itself (`JOIN_CONDITION`, ...)."""
    return {cause for cause, _ in _changes(old, old_nid, side, nid)}


def explain(side: Any, nid: int, old: Any = None, old_nid: int | None = None, *,
            id_changed: bool | None = None) -> dict[str, Any] | None:
    """{statement, operator, state, why} of node `nid` of `side` (None if it is no SQL operator). With the old
    graph: `old_nid` is its old counterpart (paired here when not given) and `why` says what moved it."""
    if not side.sql_state or str(nid) not in side.sql_state:
        return None
    d = _description(side, nid)
    fam = family(kind(d))
    st = statements(side, nid)
    why = None
    if old is not None and old.sql_state:
        if old_nid is None:
            old_nid = {v: k for k, v in pair(old, side).items()}.get(nid)
        if old_nid is not None:
            changes = [text for _, text in _changes(old, old_nid, side, nid)]
            if id_changed is False:
                why = ("its operator ID did not change" + (f"; what changed: {'; '.join(changes)}" if changes
                                                           else ""))
            elif changes:
                why = "its operator ID changed because " + "; ".join(changes)
            else:
                why = "its operator ID changed, and the gate finds no difference upstream in the plan"
        else:
            why = "the old query has no operator of this kind at this place before the sink"
    return {"statement": ", ".join(st) if st else None, "operator": describe(d),
            "state": _STATE.get(fam or "", "no state of its own" if fam is None else "state"), "why": why}


def text(sql: dict[str, Any]) -> str:
    """One line for tables: "GroupAggregate on key (user_id) of INSERT INTO totals (aggregates ...)"."""
    s = sql["operator"] + (f" of {sql['statement']}" if sql.get("statement") else "")
    s += f"; holds {sql['state']}" if sql.get("state") else ""
    return s + (f"; {sql['why']}" if sql.get("why") else "")


def explainer(metadata: Any, sim: Any, side: Any, old: Any,
              writers: dict[bytes, int] | None) -> Callable[[str], SqlContext | None]:
    """The SQL context of a loss or misrouted state, by its savepoint operator ID: the receiver in the new job if the
    state restores, else its writer in the old job (with `--old-graph`) paired to its new counterpart; None for a
    state of no SQL operator (a source or sink has no SQL description)."""
    received: dict[str, int] = {}
    if sim is not None and sim.assignment is not None:
        received = {r.old.operator_id_hex: nid for nid, r in sim.assignment.operators.items() if r.old is not None}
    by_hex = {op.operator_id_hex: op.operator_id for op in metadata.operator_states}
    pairs = pair(old, side) if old is not None and old.sql_state else {}

    def context(oid: str) -> SqlContext | None:
        if not side.sql_state:
            return None
        w = (writers or {}).get(by_hex.get(oid, b""))
        nid = received.get(oid)
        said: dict[str, Any] | None = None
        if nid is not None:
            said = explain(side, nid, old, w if w is not None and str(w) in (old.sql_state or {}) else None,
                           id_changed=False) if old is not None else explain(side, nid)
        elif old is not None and w is not None and str(w) in (old.sql_state or {}):
            counterpart = pairs.get(w)
            said = explain(old, w)  # the lost state is the old operator's: name it, say what moved it
            if said is not None:
                moved = explain(side, counterpart, old, w, id_changed=True) if counterpart is not None else None
                said["why"] = (moved or {}).get("why") or ("the new query has no operator of this kind at this "
                                                           "place before the sink")
        return SqlContext(**said) if said is not None else None

    return context

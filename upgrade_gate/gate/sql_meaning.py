"""SQL state restored under another meaning: Flink accepts it, the job continues from the wrong numbers.

A SQL operator's ID is a topology hash, so many query edits keep it: group by another column of the same
type, COUNT -> SUM, another window size, another N in top-N. When the state's key and row serializers are
also unchanged (`upgrade_gate.gate.sql_state_rules` finds nothing), Flink restores "successfully" and the
new query continues from state written under the old one: a SUM that starts from old COUNTs, regions
looked up in per-user accumulators, 20 s windows holding 10 s slices. Measured with real Flink 1.20.5 and
2.3.0: tests/fixtures/restores/<release>/sql-{group-key-same-type,count-to-sum,window-size,topn-n,
session-gap-legacy,session-gap-tvf,window-size-legacy} (status RUNNING, the operator's state restored).

With the old query's exported graph (`--old-graph`) each restored SQL state is traced to its writer (the
old node whose operator ID it carries, `misrouting.old_writers`) and the writer's planner description is
compared with the receiver's in terms of meaning: grouping keys, aggregate calls (function + argument,
output aliases ignored), window spec (type, size, slide, offset, a session's gap; legacy group windows
(`GROUP BY SESSION(...)`) too), rank type/range/partitionBy/orderBy,
dedup keep/key/order, join type/condition. A difference is reported like misrouted state
(`detected_by: "sql-meaning"`): the state reaches an operator that means something else by it. The
planner's `[N]` counters and output aliases are ignored, so a pure rename never fires. Without the old
graph there is nothing to compare: one warning says so.
"""

from __future__ import annotations

import re
from typing import Any

from hashing.operator_ids import compute_operator_ids
from upgrade_gate.gate import misrouting
from upgrade_gate.gate.findings import Finding, Loss, MeaningChanged, Note, SavepointFacts, state_names
from upgrade_gate.gate.inputs import GraphSide

__all__ = ["args", "check", "compare", "family", "kind", "meaning", "split_top", "strip_counters", "writers",
           "writers_of"]

_PREFIX = re.compile(r"^\[\d+\]:")
_COUNTER = re.compile(r"\[\d+\]")

# planner operator kind -> family: the kinds of one family hold the same state (two-phase splits one in two)
_FAMILIES = {
    "GroupAggregate": "group aggregate", "GlobalGroupAggregate": "group aggregate",
    "IncrementalGroupAggregate": "group aggregate", "LocalGroupAggregate": "local aggregate",
    "WindowAggregate": "window aggregate", "GlobalWindowAggregate": "window aggregate",
    "LocalWindowAggregate": "local window aggregate", "GroupWindowAggregate": "window aggregate",
    "Deduplicate": "deduplicate", "WindowDeduplicate": "deduplicate", "Rank": "rank", "WindowRank": "rank",
    "Join": "join", "WindowJoin": "join", "IntervalJoin": "join", "TemporalJoin": "join", "OverAggregate": "over",
}


def strip_counters(text: str) -> str:
    """Without the planner counters (`[78]:` prefix, `[N]` in names): equal for two translations of one query."""
    return _COUNTER.sub("", _PREFIX.sub("", text)).strip()


def split_top(text: str) -> list[str]:
    """Split at commas outside brackets and parentheses."""
    out, depth, cur = [], 0, []
    for ch in text:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        out.append("".join(cur).strip())
    return out


def kind(description: str) -> str:
    s = strip_counters(description)
    return s.split("(", 1)[0].strip()


def args(description: str) -> dict[str, str]:
    """`Kind(a=[x], b=[y, z])` -> {"a": "x", "b": "y, z"} (brackets removed, nested text kept)."""
    s = strip_counters(description)
    if "(" not in s or not s.endswith(")"):
        return {}
    out = {}
    for part in split_top(s[s.index("(") + 1:-1]):
        k, sep, v = part.partition("=")
        if sep:
            v = v.strip()
            out[k.strip()] = v[1:-1] if v.startswith("[") and v.endswith("]") else v
    return out


def family(k: str) -> str | None:
    return _FAMILIES.get(k)


# window properties in a window aggregate's select list: not aggregates (WindowPropertiesRules)
_WINDOW_PROPS = re.compile(r"^(slice_end|start|end|rowtime|proctime|window_start|window_end|window_time)\(")
_ALIAS = re.compile(r"\s+AS\s+[^\s()]+$")


def _aggregates(select: str) -> list[str]:
    """The aggregate calls of a select list, as written (`COUNT(*) AS c`): items with a call, less window props."""
    return [x for x in split_top(select) if "(" in x and not _WINDOW_PROPS.match(x)]


# a legacy group window's positional arguments after (alias, time field): `LogicalWindow`'s subclasses in the
# planner (TumblingGroupWindow, SlidingGroupWindow, SessionGroupWindow), printed as case classes
_GROUP_WINDOWS = {"TumblingGroupWindow": ("size",), "SlidingGroupWindow": ("size", "slide"),
                  "SessionGroupWindow": ("gap",)}


def _interval(value: str) -> str:
    """A legacy window's time interval is printed in milliseconds (`5000`); shown as the window TVF shows it
    (`5 s`) so both syntaxes of one window read alike. Row counts (`10.rows`) are kept as printed."""
    if value.isdigit():
        ms = int(value)
        return f"{ms // 1000} s" if ms % 1000 == 0 else f"{ms} ms"
    return value


def _group_window(k: str, spec: str) -> dict[str, str]:
    """`SessionGroupWindow('w$, ts, 5000)` -> {"gap": "5 s"}: the alias and time field are not the window."""
    inner = spec[spec.index("(") + 1:spec.rindex(")")] if "(" in spec and spec.endswith(")") else ""
    values = split_top(inner)[2:]
    return {n: _interval(v) for n, v in zip(_GROUP_WINDOWS[k], values, strict=False)}


def _window(spec: str) -> str:
    """`TUMBLE(time_col=[ts], size=[10 s])` -> `TUMBLE(size=[10 s])`: the time column / slice end are where
    the window is computed (they differ between the local and global phase), not what it is. A legacy group
    window (`GROUP BY SESSION(ts, INTERVAL '5' SECOND)`, `SessionGroupWindow('w$, ts, 5000)`) the same way:
    `SessionGroupWindow(gap=[5 s])`."""
    k = spec.split("(", 1)[0].strip()
    a = _group_window(k, spec) if k in _GROUP_WINDOWS else args(spec)
    kept = [f"{n}=[{a[n]}]" for n in ("size", "slide", "step", "offset", "gap", "max_size") if n in a]
    return f"{k}({', '.join(kept)})"


def meaning(description: str) -> list[tuple[str, str, str]]:
    """(aspect, value compared, value shown) of an operator's description; empty for kinds not compared."""
    k, a = kind(description), args(description)
    fam = family(k)
    out: list[tuple[str, str, str]] = []
    if fam in ("group aggregate", "local aggregate", "window aggregate", "local window aggregate"):
        out.append(("grouping keys", a.get("groupBy", ""), f"[{a.get('groupBy', '')}]"))
        aggs = _aggregates(a.get("select", ""))
        out.append(("aggregates", ", ".join(_ALIAS.sub("", x) for x in aggs), ", ".join(aggs)))
        if "window" in a:
            w = _window(a["window"])
            out.append(("window", w, w))
    elif fam == "rank":
        for n, label in (("rankType", "rank type"), ("rankRange", "rank range"), ("partitionBy", "partition by"),
                         ("orderBy", "order by")):
            if n in a:
                out.append((label, a[n], a[n]))
    elif fam == "deduplicate":
        for n, label in (("keep", "keep"), ("key", "key"), ("order", "order")):
            if n in a:
                out.append((label, a[n], a[n]))
    elif fam == "join":
        for n, label in (("joinType", "join type"), ("where", "join condition")):
            if n in a:
                out.append((label, a[n], a[n]))
    return out


def compare(old: str, new: str) -> list[tuple[str, str, str]]:
    """(aspect, old shown, new shown) for every aspect whose meaning differs (same kind family only)."""
    if family(kind(old)) != family(kind(new)) or family(kind(old)) is None:
        return [("operator", strip_counters(old), strip_counters(new))] if kind(old) != kind(new) else []
    before = {x[0]: x for x in meaning(old)}
    after = {x[0]: x for x in meaning(new)}
    return [(asp, before[asp][2], after[asp][2]) for asp in before
            if asp in after and before[asp][1] != after[asp][1]]


def writers_of(metadata: Any, old: GraphSide, hasher: str, version: Any) -> dict[bytes, int]:
    """As `check.evaluate` traces them: the old graph's IDs under the rules of the release that wrote it."""
    old_version = version.or_older_writer_of(metadata.version)
    ids = [compute_operator_ids(old.graph, h, old_version) for h in dict.fromkeys(("v2", hasher))]
    return misrouting.old_writers(metadata, ids)


def writers(facts: SavepointFacts, old: GraphSide, hasher: str, version: Any) -> dict[bytes, int]:
    """`writers_of` for one check, computed once and kept on its `SavepointFacts`."""
    if facts.old_writers is None:
        facts.old_writers = writers_of(facts.metadata, old, hasher, version)
    return facts.old_writers


def check(facts: SavepointFacts, sim: Any, side: GraphSide, old: GraphSide | None, hasher: str,
          version: Any, skip: set[str] | frozenset[str] = frozenset()) -> list[Finding]:
    """Every SQL state the simulation restores whose writer meant something else by it: a `MeaningChanged` and the
    `Loss` of its meaning each. `skip`: operator IDs another rule already reports (`sql_state_rules`: Flink refuses
    them, so there is no meaning to continue)."""
    if not side.sql_state or sim.failure is not None or sim.assignment is None:
        return []
    restored = [(nid, r) for nid, r in sorted(sim.assignment.operators.items())
                if r.old is not None and r.old.state_size > 0 and str(nid) in side.sql_state]
    if not restored:
        return []
    if old is None or not old.sql_state:
        return [Note(f"{len(restored)} SQL operator(s) restore savepoint state; without the old query's "
                     f"exported graph the gate cannot tell whether the state still means the same (a group "
                     f"key, aggregate, window or top-N changed under a kept operator ID): pass --old-graph "
                     f"to check SQL meaning")]
    out: list[Finding] = []
    written_by = writers(facts, old, hasher, version)
    graph = side.graph
    for nid, r in restored:
        op = r.old
        w = written_by.get(op.operator_id)
        if op.operator_id_hex in skip or w is None or str(w) not in old.sql_state:
            continue
        od = str(old.sql_state[str(w)].get("description") or "")
        nd = str(side.sql_state[str(nid)].get("description") or "")
        diffs = compare(od, nd)
        if not diffs:
            continue
        recv = graph.by_id[nid]
        names = tuple(state_names(op))
        writer = {"node_id": w, "name": old.graph.by_id[w].name, "uid": old.graph.by_id[w].uid,
                  "description": strip_counters(od)}
        receiver = {"node_id": nid, "name": recv.name, "uid": recv.uid, "description": strip_counters(nd)}
        out.append(MeaningChanged(op, names, writer, receiver, strip_counters(od), strip_counters(nd), tuple(diffs),
                                  op.name or recv.name))
        out.append(Loss(op.operator_id_hex, op.name or recv.name, op.uid, op.state_size,
                        f"restored but wrong: this state was written for {'; '.join(f'{a}' for _, a, _ in diffs)} "
                        f"and the new query reads it as {'; '.join(f'{b}' for _, _, b in diffs)} "
                        f"({', '.join(asp for asp, _, _ in diffs)} changed); the results mix both meanings. Start "
                        f"this operator without state (a new operator ID, or a fresh start) or keep the old query",
                        names, op, orphaned=False))
    return out

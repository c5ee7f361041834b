"""What a SQL user can do to keep a lost state, and only what a real restore proved.

A SQL query has no `uid()` / `setUidHash()`: the DataStream remedies (`upgrade_gate.gate.remedies`) cannot be
applied to a planner's operator. What a SQL user can change is the script: a `SET` option, which INSERTs run
together. Each remedy here was applied by real Flink 1.20.5 and 2.3.0 to the savepoint of the loss it answers
(`tests/fixtures/restores/<release>/sql-remedy-*`, flink_bridge/sql_scenarios.py; same job A, outcome RUNNING
with the lost operator's state restored), and the gate proposes it with the SQL to apply and that scenario:

* a plain query moved to a compiled plan (`EXECUTE PLAN`: uids `<ExecNode id>_<type>`): with
  `SET 'table.exec.uid.generation' = 'DISABLED'` the plan's operators get the plain query's topology hashes
  back (checked here too: the gate recomputes the plan graph's IDs without uids);
* a statement set that gains an INSERT (the shared source feeds one more operator: every ID downstream moves):
  the old statement set unchanged, the new INSERT as a job of its own. A statement set already run from a
  compiled plan keeps its uids when an INSERT is added and the plan recompiled (measured as well).

Candidates Flink refused are named, never proposed (`REFUTED`): `table.optimizer.reuse-source-enabled` =
false for the statement set (a second source moves the IDs too), a join's added equality as a non-key
condition (the new column changes the operators before the join), mini-batch with one-phase aggregation (the
MiniBatchAssigner alone moves the ID). Every other SQL loss says plainly that no remedy keeps the state, and
what is lost: a changed state shape (`sql_state_rules`: Flink cannot migrate `RowData` state), mini-batch, the
aggregation phase strategy, a changed join key. Causes are read from the exported graphs (the planner's
operator descriptions, `sql_explain`), never from operator names: their `[N]` counters differ between two
translations of the same query.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any

from hashing.graph import StreamGraph
from hashing.operator_ids import compute_operator_ids
from upgrade_gate.gate import sql_explain
from upgrade_gate.gate.annotations import SqlRemedy

__all__ = ["PLAN_KEEPS_UIDS", "PROVEN", "REFUTED", "plan_uid", "propose", "proposer", "text",
           "without_uids"]

# A compiled plan's uid: `<ExecNode id>_<transformation>` (ExecNodeBase#createTransformationUid, the default
# `table.exec.uid.format`), e.g. `6_group-aggregate`.
_PLAN_UID = re.compile(r"^\d+_[a-z][a-z0-9-]*$")


# cause -> the scenario that proved the remedy (a restore that kept the state on 1.20.5 and 2.3.0)
PROVEN = {
    "query-to-plan": "sql-remedy-query-to-plan-uids-disabled",
    "statement-set-gains-insert": "sql-remedy-statement-set-new-insert-own-job",
}
# measured: a statement set run from a compiled plan (uids `<ExecNode id>_<type>`) that gains an INSERT in a
# recompiled plan keeps every old operator's uid (the new INSERT's ExecNodes take the next ids): state restored
PLAN_KEEPS_UIDS = "sql-remedy-plan-statement-set-gains-insert"
# cause -> candidates real Flink refused on both releases (the state still did not map): never proposed
REFUTED = {
    "statement-set-gains-insert": ("sql-remedy-statement-set-no-source-reuse",),
    "join-condition": ("sql-remedy-join-condition-non-equi",),
    "mini-batch": ("sql-remedy-mini-batch-one-phase",),
}
UIDS_DISABLED = "SET 'table.exec.uid.generation' = 'DISABLED';"


def plan_uid(uid: str | None) -> bool:
    return bool(uid) and bool(_PLAN_UID.match(uid or ""))


def without_uids(graph: StreamGraph) -> StreamGraph:
    """The graph as Flink builds it with `table.exec.uid.generation` = DISABLED: the same plan, no uids."""
    return StreamGraph.of(graph.name, [dataclasses.replace(n, uid=None) for n in graph.nodes], list(graph.edges),
                          chaining_enabled=graph.chaining_enabled, max_parallelism=graph.max_parallelism,
                          chain_operators_with_different_max_parallelism=graph
                          .chain_operators_with_different_max_parallelism)


def _cause(loss: dict[str, Any], side: Any, old: Any, writer: int | None, pairs: dict[int, int],
           records_uids: bool, ids_without_uids: set[str]) -> SqlRemedy | None:
    """The proven remedy or the honest "none" for one lost SQL state whose operator ID moved. `records_uids`:
    the savepoint names each state's uid (metadata v5+), so a missing one means the writer had none.
    `ids_without_uids`: the operator IDs of the new graph with its uids removed (`without_uids`)."""
    new_uids = [n.uid for n in side.graph.nodes if str(n.id) in (side.sql_state or {})]
    old_uid = loss.get("uid")
    known = records_uids
    if old is not None and writer is not None:
        old_uid, known = old.graph.by_id[writer].uid, True
    if new_uids and all(plan_uid(u) for u in new_uids) and known and not plan_uid(old_uid):
        if loss["operator_id"] not in ids_without_uids:
            return SqlRemedy(
                "query-to-plan", False,
                f"no remedy keeps this state: the new job runs a compiled plan whose operators get uids, and even "
                f"with {UIDS_DISABLED} its topology hashes are not the plain query's (the plan's query or settings "
                f"differ from the old job's). Lost: {_lost(loss)}")
        return SqlRemedy(
            "query-to-plan", True,
            "the new job runs a compiled plan (EXECUTE PLAN): its operators get uids `<ExecNode id>_<type>`, while "
            "the savepoint's state is under the IDs Flink hashed from the plain query's topology. With uid "
            "generation disabled the plan's operators get topology hashes again, and the gate computed that this "
            "one is the lost state's ID (later query edits then move IDs as in plain SQL)",
            apply=f"{UIDS_DISABLED}\nEXECUTE PLAN '<plan>.json';", proven_by=PROVEN["query-to-plan"])
    if old is None or writer is None or str(writer) not in (old.sql_state or {}):
        return None
    counterpart = pairs.get(writer)
    moved = sql_explain.causes(side, counterpart, old, writer) if counterpart is not None else set()
    if sql_explain.FAN_OUT in moved:
        kept = _reading_its_sources(old, writer)
        new = [s for s in _reading_its_sources(side, counterpart) if s not in kept] if counterpart is not None else []
        return SqlRemedy(
            "statement-set-gains-insert", True,
            f"the new INSERT ({', '.join(new) or 'the added statement'}) reads the same source in the same job: "
            f"the source now feeds more operators and every operator ID downstream moves. Keep the statement set "
            f"as it was ({', '.join(kept)}) and submit the new INSERT as a job of its own (it starts without state "
            f"either way). Not a remedy: SET 'table.optimizer.reuse-source-enabled' = 'false' (real Flink still "
            f"lost the state: a second source moves the IDs as well). A statement set that runs from a compiled "
            f"plan keeps its operators' uids when an INSERT is added and the plan recompiled (measured: "
            f"{PLAN_KEEPS_UIDS}); moving this plain-SQL job to such a plan loses its state once "
            f"(sql-query-to-plan)",
            apply="EXECUTE STATEMENT SET BEGIN\n  <the INSERTs of the old job, unchanged>\nEND;\n"
                  "-- and, as a job of its own:\n<the new INSERT>;",
            proven_by=PROVEN["statement-set-gains-insert"])
    lost = _lost(loss)
    if sql_explain.JOIN_CONDITION in moved:
        return SqlRemedy("join-condition", False,
                         f"no remedy keeps this state: the new join condition changes the join key, so the join "
                         f"and its buffers get another ID. Keeping the old key and testing the added equality as a "
                         f"non-key condition (`a - b = 0`) was tried with real Flink and still lost the state: the "
                         f"new condition needs a column the old job's inputs did not carry, so the operators "
                         f"before the join changed too. Lost: {lost}")
    if sql_explain.MINI_BATCH in moved:
        return SqlRemedy("mini-batch", False,
                         f"no remedy keeps this state: switching mini-batch adds or removes a MiniBatchAssigner "
                         f"before the aggregate, so its ID moves. Mini-batch with one-phase aggregation (no "
                         f"LocalGroupAggregate) was tried with real Flink and still lost the state: the "
                         f"MiniBatchAssigner alone moves the ID. Lost: {lost}. The state is kept only by keeping "
                         f"table.exec.mini-batch.enabled as it was")
    if sql_explain.AGG_PHASE in moved:
        return SqlRemedy("agg-phase", False,
                         f"no remedy keeps this state: the other aggregation phase strategy adds or removes a "
                         f"LocalGroupAggregate before the aggregate, so its ID moves. Lost: {lost}. The state is kept "
                         f"only by keeping table.optimizer.agg-phase-strategy as it was")
    return None


def _reading_its_sources(side: Any, nid: int) -> list[str]:
    """The INSERTs that read the sources upstream of node `nid` (a statement set shares one source)."""
    seen, todo, sources = {nid}, [nid], []
    while todo:
        n = todo.pop()
        ins = side.graph.in_edges.get(n, [])
        if not ins:
            sources.append(n)
        for e in ins:
            if e.source not in seen:
                seen.add(e.source)
                todo.append(e.source)
    return list(dict.fromkeys(s for src in sorted(sources) for s in sql_explain.statements(side, src)))


def _lost(loss: dict[str, Any]) -> str:
    sql = loss.get("sql") or {}
    what = sql.get("state") or ", ".join(loss.get("state_names") or []) or "its state"
    where = f" of {sql['operator']}" if sql.get("operator") else f" of {loss.get('name') or loss['operator_id']}"
    stmt = f" ({sql['statement']})" if sql.get("statement") else ""
    return f"{loss.get('bytes', 0)} bytes: {what}{where}{stmt}"


def propose(loss: dict[str, Any], side: Any, old: Any, writer: int | None, pairs: dict[int, int],
            shape_changed: bool, records_uids: bool = False, ids_without_uids: set[str] | None = None) -> SqlRemedy:
    """The remedy for one lost SQL state (`loss` as in `CheckResult.losses`)."""
    if shape_changed:
        return SqlRemedy("shape", False,
                         f"no remedy keeps this state: its shape changed (a key or state row of another type), and "
                         f"Flink cannot migrate SQL RowData state. Lost: {_lost(loss)}. Start the job without it "
                         f"(allowNonRestoredState drops it) or keep the old query")
    found = _cause(loss, side, old, writer, pairs, records_uids, ids_without_uids or set())
    if found is not None:
        return found
    hint = "" if old is not None else " (pass --old-graph: with the old query's graph the gate can tell more)"
    return SqlRemedy("unknown", False,
                     f"no remedy proven for this change: no script change is known to give this operator its old "
                     f"ID back. Lost: {_lost(loss)}{hint}")


def proposer(side: Any, old: Any, writers: dict[bytes, int] | None, metadata: Any, shape_errors: set[str],
             hasher: str = "v2", version: Any = None) -> Callable[[dict[str, Any]], SqlRemedy | None]:
    """The remedy of each loss of a SQL job's state that Flink would not restore (or refuses), `None` for a loss it
    has none for. With the old graph only states its planner operators wrote; without it every lost state of the SQL
    job. `loss`: its JSON, `sql` included (what the remedy text names)."""
    by_hex = {op.operator_id_hex: op.operator_id for op in metadata.operator_states}
    pairs = sql_explain.pair(old, side) if old is not None and old.sql_state else {}
    plain: set[str] | None = None

    def remedy(loss: dict[str, Any]) -> SqlRemedy | None:
        nonlocal plain
        if not side.sql_state or "restored but wrong" in str(loss.get("reason")):
            return None  # a kept ID with another meaning: sql_meaning says what to do
        oid = loss["operator_id"]
        w = (writers or {}).get(by_hex.get(oid, b""))
        if old is not None and oid not in shape_errors and (w is None or str(w) not in (old.sql_state or {})):
            return None  # written by a source or sink of the old job, not a planner operator
        if plain is None and any(plan_uid(n.uid) for n in side.graph.nodes):
            ids = compute_operator_ids(without_uids(side.graph), hasher, version)
            plain = {p.generated.hex() for p in ids.pairs.values()}
        return propose(loss, side, old, w, pairs, oid in shape_errors, metadata.version >= 5, plain or set())

    return remedy


def text(remedy: dict[str, Any]) -> str:
    """One paragraph for tables: what to do (or that nothing keeps the state) and the restore that proved it."""
    return remedy["text"] + (f" (proven by a real restore: {remedy['proven_by']})" if remedy.get("proven_by") else "")

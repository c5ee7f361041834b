"""The restore simulator agrees with real Flink 1.20.5 and 2.3.0 restores on every recorded scenario.

`tests/fixtures/restores/` holds what real Flink did (flink_bridge/generate_restores.py): job A's
savepoint, job B's graph as Flink built it, and the outcome of restoring B from A, without and (if
that failed) with allowNonRestoredState: RUNNING or the error chain, and per subtask what the user
functions got back. We compare: success/failure, Flink's exact message (the pointer is the one
Flink printed), and, for every subtask of every reporting operator, list elements per state name,
union elements, broadcast presence, keyed entries, key-group range and max parallelism.
"""

from __future__ import annotations

import gc
import json
import re
from pathlib import Path

import pytest

from hashing.readers import load_graph
from tests.restore_support import AMBIGUOUS, KEYS, Scenario, disagreements, root_error, scenarios
from upgrade_gate.flink.state_meta import read_state_schemas
from upgrade_gate.flink.state_meta.logical_types import display
from upgrade_gate.gate.check import CheckResult, savepoint_pointer
from upgrade_gate.storage.check_inputs import check_upgrade
from upgrade_gate.storage.savepoints import load_savepoint
from upgrade_gate.vocabulary import Verdict

ALL = [s for s in scenarios() if not s.name.startswith("sql-")]
# SQL jobs (flink_bridge/sql_scenarios.py): no user function to ask, so what Flink restored is which
# operators its state backend got state handles for (RecordingBackend), keyed by operator ID.
SQL = [s for s in scenarios() if s.name.startswith("sql-")]


def test_enough_real_scenarios() -> None:
    for release in ("1.20.5", "2.3.0"):
        names = {s.name for s in ALL if s.release == release}
        assert len(names) >= 20, (release, sorted(names))


@pytest.mark.parametrize("sc", ALL, ids=str)
def test_simulator_agrees_with_flink(sc: Scenario) -> None:
    runs = [(False, sc.outcome["restore"])]
    if "restore_allow_non_restored_state" in sc.outcome:
        runs.append((True, sc.outcome["restore_allow_non_restored_state"]))
    for allow, run in runs:
        res = sc.check(allow)
        assert res.restore_succeeds == (run["status"] == "RUNNING"), (allow, res.flink_error, root_error(run))
        if run["status"] != "RUNNING":
            assert res.flink_error == root_error(run), allow
            continue
        assert run["reports_complete"]
        skip = frozenset({"keyed"}) if sc.name in AMBIGUOUS else frozenset()
        assert disagreements(res, run, skip) == [], allow


@pytest.mark.parametrize("sc", ALL, ids=str)
def test_verdict_matches_what_the_functions_got_back(sc: Scenario) -> None:
    """SAFE only if every keyed entry came back; a real loss of keyed entries is never called SAFE.

    Keyed state that went to the wrong operator is STATE_MISROUTED, which outranks STATE_LOSS
    (map-inserted-before-uidless-keyed and uid-hash-unknown-id-no-uid were STATE_LOSS before)."""
    run = sc.outcome["restore"]
    if run["status"] != "RUNNING" or "keyed" not in run["restored"]:
        return  # the misroute-* jobs have no "keyed" operator: test_restore_misrouting checks them
    res = sc.check(False)
    restored_keys = sum(s.get("keyed_entries", 0) for s in run["restored"].get("keyed", []))
    if res.verdict == Verdict.SAFE:
        assert restored_keys == len(KEYS)
    if restored_keys < len(KEYS):
        assert res.verdict in (Verdict.STATE_LOSS, Verdict.STATE_MISROUTED) and res.losses


def test_job_a_had_every_key_in_state() -> None:
    for sc in ALL:
        snap = sc.outcome["savepoint"].get("snapshot") or {}
        for op in ("keyed", "branch-a", "branch-b"):  # fed by the fast sequence (the union job's sources are slow)
            if op in snap:
                assert sum(s["keyed_entries"] for s in snap[op]) == len(KEYS), (sc, op)


def test_pointer_is_printed_as_flink_prints_it() -> None:
    """Flink prints the savepoint directory qualified as `file:/abs/dir` (no `_metadata`, no `//`)."""
    for sc in ALL:
        assert re.fullmatch(r"file:/[^:]*/savepoint-[0-9a-f]{6}-[0-9a-f]{12}", sc.pointer), sc.pointer
    sc = ALL[0]
    assert savepoint_pointer(load_savepoint(str(sc.savepoint))) == f"file:{sc.savepoint}"


def test_ambiguous_pin_is_flagged_and_flink_picked_one_claimant() -> None:
    for sc in (s for s in ALL if s.name in AMBIGUOUS):
        res = sc.check(False)
        assert res.verdict == Verdict.STATE_LOSS and any("not deterministic" in w for w in res.warnings)
        keyed = sum(s["keyed_entries"] for s in sc.outcome["restore"]["restored"]["keyed"])
        assert keyed in (0, len(KEYS))  # all of it or none of it, depending on Flink's vertex order


def _plain(error: str | None) -> str | None:
    """Flink prints serializers as `class@hashCode`; RowDataSerializer's hash mixes enum identity hashes
    (LogicalType#hashCode), so it differs between JVMs: compared without it."""
    return re.sub(r"@[0-9a-f]+\b", "", error) if error is not None else None


def sql_check(sc: Scenario, allow: bool) -> CheckResult:
    """As `Scenario.check`; the loaded graph carries its `sql_state` as the CLI's does."""
    return check_upgrade(load_savepoint(str(sc.savepoint)), load_graph(sc.dir / "graph-b.json"),
                         flink_version=sc.flink_version, allow_non_restored_state=allow, pointer=sc.pointer)


def _simulated_receivers(res: object) -> set[str]:
    sim = res.simulation  # type: ignore[attr-defined]
    assert sim.assignment is not None
    return {r.pair.generated.hex() for r in sim.assignment.operators.values()
            if r.old is not None and r.old.state_size > 0}


def test_enough_real_sql_scenarios() -> None:
    for release in ("1.20.5", "2.3.0"):
        names = {s.name for s in SQL if s.release == release}
        assert len(names) >= 15, (release, sorted(names))
    assert {s.name for s in SQL if s.release == "2.3.0"} >= {"sql-plan-from-1.20", "sql-replanned-from-1.20"}


@pytest.mark.parametrize("sc", SQL, ids=str)
def test_gate_agrees_with_flink_on_sql(sc: Scenario) -> None:
    """Verdict, Flink's error text and which operators got state back, with and without allowNonRestoredState."""
    runs = [(False, sc.outcome["restore"])]
    if "restore_allow_non_restored_state" in sc.outcome:
        runs.append((True, sc.outcome["restore_allow_non_restored_state"]))
    for allow, run in runs:
        res = sql_check(sc, allow)
        real_ok = run["status"] == "RUNNING"
        assert res.restore_succeeds == real_ok, (allow, res.flink_error, root_error(run))
        if not real_ok:
            assert res.verdict == Verdict.RESTORE_FAILS
            assert _plain(res.flink_error) == _plain(root_error(run)), allow
            continue
        assert _simulated_receivers(res) == set(run["restored_operators"]), allow
        if not allow:
            assert res.verdict == Verdict.SAFE, (res.verdict, res.losses)


@pytest.mark.parametrize("sc", [s for s in SQL if s.name.startswith("sql-keyless-")], ids=str)
def test_keyless_sql_state_behind_a_global_exchange_restores_where_it_was(sc: Scenario) -> None:
    """An unchanged key-less window aggregate or window join: the planner keys its state by the empty key behind a
    GLOBAL exchange (no keyBy edge), and real Flink restored it into the same operator. Not misrouting."""
    assert sc.outcome["restore"]["status"] == "RUNNING"
    res = sql_check(sc, False)
    assert res.verdict == Verdict.SAFE and not res.misrouted, res.misrouted
    spec = json.loads((sc.dir / "graph-b.json").read_text())
    keyed = {nid for nid, e in spec["sql_state"].items() if e.get("key") is not None}
    into = {e["partitioner"] for e in spec["edges"] if str(e["target"]) in keyed}
    assert keyed and into == {"GLOBAL"}, into


MIGRATION = "org.apache.flink.util.StateMigrationException"


def _join_rows(spec_file: Path, side: str) -> str:
    """The join side's input row type as the exported graph states it (`leftType` / `rightType`)."""
    spec = json.loads(spec_file.read_text())
    [row] = [e["types"][side] for e in spec["sql_state"].values() if side in (e.get("types") or {})]
    return display(row["logical_types"])


@pytest.mark.parametrize("sc", [s for s in SQL if s.name in ("sql-join-row-gains-column",
                                                             "sql-left-join-row-gains-column")], ids=str)
def test_a_join_whose_stored_rows_gain_a_column_fails_as_flink_did(sc: Scenario) -> None:
    """The new query projects one more field of the left input (of an inner and of a left outer join): the join's
    left-records state holds the old rows, Flink refuses it (StateMigrationException), and the gate says so naming
    the operator, the state, the old row (read from the savepoint) and the new one (the new graph's left input),
    with Flink's message."""
    run = sc.outcome["restore"]
    assert run["status"] == "FAILED" and run["error_chain"][-1]["class"] == MIGRATION
    res = sql_check(sc, False)
    assert res.verdict == Verdict.RESTORE_FAILS and _plain(res.flink_error) == _plain(root_error(run))
    [loss] = res.losses
    assert loss["name"].startswith("Join[") and loss["state_names"] == ["left-records"]
    [op] = [o for o in read_state_schemas(load_savepoint(str(sc.savepoint))) if o.operator_id == loss["operator_id"]]
    [left] = [st for st in op.states if st.name == "left-records"]
    old_row = next(s for r, s in left.serializers if r == "VALUE_SERIALIZER").nested[0]  # MapState<row, count>
    old, new = display(old_row.logical_types or ()), _join_rows(sc.dir / "graph-b.json", "leftType")
    assert old == _join_rows(sc.dir / "graph-a.json", "leftType") and old != new
    assert f"was {old} and the new query makes it {new}" in loss["reason"] and _plain(root_error(run)) in \
        _plain(loss["reason"])


@pytest.mark.parametrize("sc", [s for s in SQL if s.name == "sql-join-same-columns-reordered"], ids=str)
def test_a_join_selecting_the_same_columns_in_another_order_keeps_its_rows(sc: Scenario) -> None:
    """The mirror case: the same fields in another order in the SELECT leave the join's input rows as they were;
    Flink restored the join's state and the gate says SAFE."""
    assert sc.outcome["restore"]["status"] == "RUNNING" and sc.outcome["restore"]["restored_operators"]
    for side in ("leftType", "rightType"):
        assert _join_rows(sc.dir / "graph-a.json", side) == _join_rows(sc.dir / "graph-b.json", side)
    assert sql_check(sc, False).verdict == Verdict.SAFE


# the state an aggregate keeps its accumulators in -> the exported field holding that row (sql_state `types`):
# a window TVF aggregate's processor (WindowAggOperator), a legacy group window, a (mini-batch) group aggregate
_ACC_ROWS = {"window-aggs": ("windowProcessor.accSerializer", "accumulatorTypes"), "accState": ("function.accTypes",)}


def _acc_rows(sc: Scenario) -> list[tuple[str, str, str, str | None]]:
    """Per restored accumulator state: (operator ID, state, the old row from the savepoint, the new graph's row)."""
    res = sql_check(sc, False)
    assert res.simulation.assignment is not None
    node = {r.old.operator_id_hex: str(r.pair.node_id) for r in res.simulation.assignment.operators.values()
            if r.old is not None}
    spec = json.loads((sc.dir / "graph-b.json").read_text())
    out = []
    for op in read_state_schemas(load_savepoint(str(sc.savepoint))):
        for st in (st for st in op.states if st.name in _ACC_ROWS and op.operator_id in node):
            old = next(s for r, s in st.serializers if r == "VALUE_SERIALIZER")
            types = (spec["sql_state"].get(node[op.operator_id]) or {}).get("types") or {}
            new = next((types[f] for f in _ACC_ROWS[st.name] if f in types), None)
            out.append((op.operator_id, st.name, display(old.logical_types or ()),
                        display(new["logical_types"]) if new is not None else None))
    return out


_GAINS = ("sql-window-row-gains-field", "sql-mini-batch-second-aggregate", "sql-two-phase-second-aggregate")


@pytest.mark.parametrize("sc", [s for s in SQL if s.name in _GAINS], ids=str)
def test_a_window_or_mini_batch_aggregate_gaining_an_aggregate_fails_as_flink_did(sc: Scenario) -> None:
    """A window TVF aggregate and a mini-batch aggregate (one phase, and the global aggregate of two phases) gaining
    SUM(amount) keep their operator ID; Flink refuses the accumulator row (StateMigrationException). The export reads
    the new row where those operators keep it (WindowAggOperator's window processor, KeyedMapBundleOperator's
    MiniBatchGroupAggFunction or MiniBatchGlobalGroupAggFunction), and the gate says RESTORE_FAILS with Flink's
    message, naming the state and the old row (from the savepoint) and the new one."""
    run = sc.outcome["restore"]
    assert run["status"] == "FAILED" and run["error_chain"][-1]["class"] == MIGRATION
    res = sql_check(sc, False)
    assert res.verdict == Verdict.RESTORE_FAILS and _plain(res.flink_error) == _plain(root_error(run))
    [loss] = res.losses
    [(oid, state, old, new)] = _acc_rows(sc)
    assert loss["operator_id"] == oid and loss["state_names"] == [state]
    assert (old, new) == ("ROW<BIGINT>", "ROW<BIGINT, BIGINT>"), (old, new)
    assert f"was {old} and the new query makes it {new}" in loss["reason"]


@pytest.mark.parametrize("sc", [s for s in SQL if s.outcome["restore"]["status"] == "RUNNING" and "join" not in s.name
                                and any(k in s.name for k in ("window", "mini-batch", "session", "phase"))], ids=str)
def test_an_unchanged_accumulator_row_is_compared_and_restores(sc: Scenario) -> None:
    """The mirror cases Flink restored (window TVF and legacy group windows whose size or gap changed, unchanged
    session and key-less windows, unchanged one- and two-phase mini-batch aggregates): every accumulator state is
    compared with the new graph's row, which is the savepoint's, so their SAFE is a comparison and not a row the
    export did not carry."""
    rows = _acc_rows(sc)
    assert rows and all(new == old for _, _, old, new in rows), rows


def test_a_refused_restore_leaves_no_reference_cycle() -> None:
    """A fleet task checks thousands of jobs one after another. A check that leaves a reference cycle
    (a kept exception's traceback holds the frames, whose locals hold the graph and the savepoint) keeps
    the whole job alive until the cyclic GC runs, which cost 7 % of a fleet pass (docs/performance.md,
    "Rows as columns"). Every job Flink refused is freed as soon as its result is dropped."""
    refused = [s for s in ALL if s.outcome["restore"]["status"] != "RUNNING"]
    assert len(refused) >= 10
    for sc in refused:
        savepoint, graph = load_savepoint(str(sc.savepoint)), load_graph(sc.dir / "graph-b.json")
        gc.collect()
        gc.disable()
        try:
            res = check_upgrade(savepoint, graph, flink_version=sc.flink_version, allow_non_restored_state=False,
                                pointer=sc.pointer)
            assert not res.restore_succeeds, sc
            del res
            left = gc.collect()
        finally:
            gc.enable()
        assert left == 0, sc

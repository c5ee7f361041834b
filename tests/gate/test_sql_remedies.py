"""SQL remedies are proposed only where real Flink proved them (issue #19).

Each loss scenario (tests/fixtures/restores/<release>/sql-*, a SQL change Flink refused) is checked with the old
query's graph. Where the gate proposes a remedy, its `sql-remedy-*` scenario applied exactly that SQL to the same
savepoint (job A is the same script) and real Flink 1.20.5 / 2.3.0 restored the lost operator's state: the
gate then says SAFE too. Candidates Flink refused are never proposed; a changed state shape, mini-batch, the
aggregation phase and a changed join key say plainly that no remedy keeps the state, and what is lost.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from tests.gate.test_restore_flink_agreement import sql_check
from tests.gate.test_sql_meaning import with_old
from tests.restore_support import Scenario, scenarios
from upgrade_gate.gate import sql_remedies
from upgrade_gate.vocabulary import Verdict

RELEASES = ("1.20.5", "2.3.0")
BY = {(s.release, s.name): s for s in scenarios() if s.name.startswith("sql-")}
# loss scenario -> the remedy scenario that applied the gate's proposal
PROVEN = {"sql-query-to-plan": "sql-remedy-query-to-plan-uids-disabled",
          "sql-statement-set-gains-insert": "sql-remedy-statement-set-new-insert-own-job"}
# loss scenario -> cause, for the losses no remedy keeps
NO_REMEDY = {"sql-second-aggregate": "shape", "sql-group-key-other-type": "shape", "sql-join-key-other-type": "shape",
             "sql-dedup-ordering": "shape", "sql-mini-batch-on": "mini-batch", "sql-one-to-two-phase": "agg-phase",
             "sql-join-condition": "join-condition"}
CASES = [(r, n) for r in RELEASES for n in PROVEN]


def _restored(sc: Scenario) -> dict[str, object]:
    return sc.outcome["restore"]["restored_operators"] if sc.outcome["restore"]["status"] == "RUNNING" else {}


def _statements(sql: str) -> list[str]:
    return [" ".join(s.split()) for s in sql.split(";") if s.strip()]


@pytest.mark.parametrize(("release", "name"), CASES, ids=lambda x: str(x))
def test_the_proposed_remedy_is_the_one_flink_restored_with(release: str, name: str) -> None:
    loss_sc, fix_sc = BY[(release, name)], BY[(release, PROVEN[name])]
    res = with_old(loss_sc)
    assert res.verdict == Verdict.RESTORE_FAILS and loss_sc.outcome["restore"]["status"] == "FAILED"
    [loss] = res.losses
    remedy = loss["sql_remedy"]
    assert remedy["keeps_state"] and remedy["proven_by"] == PROVEN[name]
    assert res.remedies == ()  # no setUidHash(): a SQL user cannot apply it
    # the remedy ran on the very savepoint of the loss, and Flink gave the lost operator its state back
    assert fix_sc.outcome["savepoint"]["fixture"] == loss_sc.outcome["savepoint"]["fixture"]
    assert loss["operator_id"] in _restored(fix_sc)
    assert (fix_sc.dir / "a.sql").read_text() == (loss_sc.dir / "a.sql").read_text()
    # ... and the gate agrees with Flink on the remedied job
    fixed = with_old(fix_sc)
    assert fixed.verdict == Verdict.SAFE and not fixed.losses
    # the SQL the gate proposes is what the remedy scenario applied
    applied = _statements((fix_sc.dir / "b.sql").read_text())
    proposed = [s for s in _statements(remedy["apply"]) if "<" not in s]
    assert all(s in applied for s in proposed), (proposed, applied)
    if name == "sql-query-to-plan":
        assert proposed == ["SET 'table.exec.uid.generation' = 'DISABLED'"]
        assert any(s.startswith("EXECUTE PLAN") for s in applied)
        assert _statements((loss_sc.dir / "b.sql").read_text()) == [s for s in applied if s not in proposed]
    else:  # the old statement set as it was; the new INSERT left out of it (to run as a job of its own)
        assert applied == _statements((loss_sc.dir / "a.sql").read_text())
        new = [s for s in _statements((loss_sc.dir / "b.sql").read_text()) if "by_region" in s and "INSERT" in s]
        assert new and "INSERT INTO by_region" in remedy["text"] and not any("by_region" in s for s in applied)


def test_a_savepoint_that_names_uids_needs_no_old_graph_for_the_plan_remedy() -> None:
    """A 2.x savepoint records each state's uid (none: plain SQL); a 1.20 savepoint cannot tell, so the gate
    does not guess and asks for the old graph."""
    with_uids = sql_check(BY[("2.3.0", "sql-query-to-plan")], False)
    assert with_uids.losses[0]["sql_remedy"]["proven_by"] == PROVEN["sql-query-to-plan"]
    [loss] = sql_check(BY[("1.20.5", "sql-query-to-plan")], False).losses
    assert not loss["sql_remedy"]["keeps_state"] and "--old-graph" in loss["sql_remedy"]["text"]


@pytest.mark.parametrize("release", RELEASES)
def test_refuted_candidates_failed_in_flink_and_are_never_proposed(release: str) -> None:
    refuted = {n for names in sql_remedies.REFUTED.values() for n in names}
    for name in refuted:
        run = BY[(release, name)].outcome
        assert run["restore"]["status"] == "FAILED" and run["restore_allow_non_restored_state"]["restored_operators"] \
            == {}  # the state did not map: Flink refused it, and dropping it is all allowNonRestoredState does
    checked = [*PROVEN, *PROVEN.values(), *NO_REMEDY, *refuted]
    proposed = [loss["sql_remedy"] for name in checked for loss in with_old(BY[(release, name)]).losses
                if loss.get("sql_remedy")]
    assert proposed
    assert not {p["proven_by"] for p in proposed} & refuted
    assert not any("reuse-source-enabled' = 'false'" in (p["apply"] or "") for p in proposed)
    # every remedy that promises to keep state names a scenario in which Flink did keep it
    for p in proposed:
        if p["keeps_state"]:
            assert _restored(BY[(release, p["proven_by"])])


@pytest.mark.parametrize(("release", "name"), [(r, n) for r in RELEASES for n in NO_REMEDY], ids=lambda x: str(x))
def test_no_remedy_is_said_plainly_with_what_is_lost(release: str, name: str) -> None:
    sc = BY[(release, name)]
    assert sc.outcome["restore"]["status"] == "FAILED"
    res = with_old(sc)
    [loss] = res.losses
    remedy = loss["sql_remedy"]
    assert remedy["cause"] == NO_REMEDY[name]
    assert not remedy["keeps_state"] and remedy["apply"] is None and remedy["proven_by"] is None
    assert remedy["text"].startswith("no remedy keeps this state")
    assert loss["bytes"] > 0 and f"Lost: {loss['bytes']} bytes" in remedy["text"]
    assert "INSERT INTO" in remedy["text"] or remedy["cause"] == "shape"  # the statement, where the gate knows it
    if NO_REMEDY[name] in sql_remedies.REFUTED:  # the candidate Flink refused is named, not proposed
        assert "tried with real Flink" in remedy["text"]


def test_the_table_lists_the_sql_to_apply() -> None:
    sc = BY[("2.3.0", "sql-statement-set-gains-insert")]
    out = subprocess.run([sys.executable, "-m", "upgrade_gate.cli.main", "check", "--savepoint", str(sc.savepoint),
                          "--graph", str(sc.dir / "graph-b.json"), "--old-graph", str(sc.dir / "graph-a.json"),
                          "--flink-version", "2.3"], capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and out.stdout.startswith("VERDICT: RESTORE_FAILS")
    section = out.stdout.split("SQL remedies", 1)[1]
    assert "EXECUTE STATEMENT SET BEGIN" in section and "proven by a real restore" in " ".join(section.split())
    assert "setUidHash" not in out.stdout
    html = subprocess.run([*out.args, "--format", "html"], capture_output=True, text=True, timeout=120).stdout
    assert "EXECUTE STATEMENT SET BEGIN" in html and "GroupAggregate on key (user_id) of INSERT INTO totals" in html


@pytest.mark.parametrize("release", RELEASES)
def test_uid_generation_disabled_gives_the_plan_the_ids_flink_gave_it(release: str) -> None:
    """The gate checks the plan remedy by computing the plan graph's IDs without uids: they are the IDs of the
    graph Flink built with the option set (the remedy scenario's graph-b) and hold the state Flink restored."""
    from hashing.operator_ids import compute_operator_ids
    from hashing.readers import load_graph

    line = ".".join(release.split(".")[:2])

    def ids(graph: Any) -> set[str]:
        return {p.generated.hex() for p in compute_operator_ids(graph, "v2", line).pairs.values()}

    plan = load_graph(BY[(release, "sql-query-to-plan")].dir / "graph-b.json").graph
    fixed = BY[(release, PROVEN["sql-query-to-plan"])]
    flink_built = load_graph(fixed.dir / "graph-b.json").graph
    assert all(n.uid is None for n in flink_built.nodes) and all(sql_remedies.plan_uid(n.uid) for n in plan.nodes)
    assert ids(sql_remedies.without_uids(plan)) == ids(flink_built)
    assert set(_restored(fixed)) <= ids(flink_built)


@pytest.mark.parametrize("release", RELEASES)
def test_a_statement_set_run_from_a_plan_keeps_its_state_when_an_insert_is_added(release: str) -> None:
    """What the statement-set remedy says about compiled plans is measured: the recompiled plan keeps the old
    operators' uids, Flink restored the aggregate, and the gate says SAFE."""
    sc = BY[(release, sql_remedies.PLAN_KEEPS_UIDS)]
    assert sc.outcome["restore"]["status"] == "RUNNING" and _restored(sc)
    assert "by_region" in (sc.dir / "plan-set-agg-region.json").read_text()  # two sinks in one plan
    assert "by_region" not in (sc.dir / "plan-set-agg.json").read_text()
    assert with_old(sc).verdict == sql_check(sc, False).verdict == Verdict.SAFE
    [loss] = with_old(BY[(release, "sql-statement-set-gains-insert")]).losses
    assert sql_remedies.PLAN_KEEPS_UIDS in loss["sql_remedy"]["text"]

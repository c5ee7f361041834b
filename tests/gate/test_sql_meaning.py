"""SQL state restored under another meaning, and SQL findings in the query's terms (issue #19).

Every real Flink 1.20.5 / 2.3.0 SQL restore (tests/fixtures/restores/<release>/sql-*, flink_bridge/sql_scenarios.py)
is checked with `--old-graph` = the old query's exported graph (graph-a.json). Seven edits (`MEANING_CHANGES`, and
`WINDOW_EDITS`: a session gap in both syntaxes, a legacy tumbling window's size) keep the operator ID and the state
rows, so Flink restores (outcome.json: RUNNING, the operator's state restored) and the new query
continues from state written under the old meaning: those must be STATE_MISROUTED (`detected_by: sql-meaning`).
Every other scenario keeps the verdict the gate gives without the old graph, which
test_restore_flink_agreement.py::test_gate_agrees_with_flink_on_sql holds to what Flink did.
"""

from __future__ import annotations

import difflib
import json
import re
import subprocess
import sys

import pytest

from hashing.readers import load_graph
from tests.gate.test_restore_flink_agreement import sql_check
from tests.restore_support import Scenario, scenarios
from upgrade_gate.gate import sql_explain, sql_meaning
from upgrade_gate.gate.check import CheckResult
from upgrade_gate.gate.inputs import GraphSide
from upgrade_gate.storage.check_inputs import check_upgrade, read_side
from upgrade_gate.storage.savepoints import load_savepoint
from upgrade_gate.vocabulary import Verdict

# scenarios with the old query's graph (the two 1.20 -> 2.3 plan migrations have none)
SQL = [s for s in scenarios() if s.name.startswith("sql-") and (s.dir / "graph-a.json").exists()]
BY = {(s.release, s.name): s for s in SQL}
RELEASES = ("1.20.5", "2.3.0")
MEANING_CHANGES = {"sql-group-key-same-type": "grouping keys", "sql-count-to-sum": "aggregates",
                   "sql-window-size": "window", "sql-topn-n": "rank range"}
# window edits read from the window's arguments: a session window's gap as a legacy group window (`GROUP BY
# SESSION(ts, INTERVAL ...)`) and as the window TVF, a legacy tumbling window's size -> the argument named
WINDOW_EDITS = {"sql-session-gap-legacy": "gap", "sql-session-gap-tvf": "gap", "sql-window-size-legacy": "size"}


def with_old(sc: Scenario, allow: bool = False) -> CheckResult:
    return check_upgrade(load_savepoint(str(sc.savepoint)), load_graph(sc.dir / "graph-b.json"),
                         flink_version=sc.flink_version, allow_non_restored_state=allow, pointer=sc.pointer,
                         old_graph=load_graph(sc.dir / "graph-a.json"))


def _words(description: str) -> list[str]:
    return re.findall(r"[\w*$]+", re.sub(r"^\[\d+\]:", "", description))


def test_every_release_has_the_four_meaning_changes() -> None:
    for release in RELEASES:
        for name in MEANING_CHANGES:
            sc = BY[(release, name)]
            assert sc.outcome["restore"]["status"] == "RUNNING"  # Flink accepted it: this is what makes it silent
            assert sc.outcome["restore"]["restored_operators"]


@pytest.mark.parametrize("sc", [s for s in SQL if s.name in MEANING_CHANGES], ids=str)
def test_a_kept_id_with_another_meaning_is_misrouted(sc: Scenario) -> None:
    res = with_old(sc)
    assert res.verdict == Verdict.STATE_MISROUTED and res.restore_succeeds
    [m] = res.misrouted
    assert m["detected_by"] == "sql-meaning" and m["counterpart"] is None
    assert m["operator_id"] in sc.outcome["restore"]["restored_operators"]  # the state Flink really restored
    assert m["bytes"] > 0 and m["receiver"]["node_id"] is not None
    # the old and new meaning, from the fixture graphs' own descriptions of writer and receiver
    old_desc = json.loads((sc.dir / "graph-a.json").read_text())["sql_state"][str(m["writer"]["node_id"])]
    new_desc = json.loads((sc.dir / "graph-b.json").read_text())["sql_state"][str(m["receiver"]["node_id"])]
    a, b = _words(old_desc["description"]), _words(new_desc["description"])
    # the first edit of the description (a grouping key also reappears in the select list)
    _, i1, i2, j1, j2 = next(op for op in difflib.SequenceMatcher(a=a, b=b).get_opcodes() if op[0] != "equal")
    removed, added = a[i1:i2], b[j1:j2]
    line = next(e for e in m["evidence"] if e.startswith(MEANING_CHANGES[sc.name] + ": "))
    before, after = line.split(": ", 1)[1].split(" -> ")
    assert all(w in before for w in removed) and all(w in after for w in added), (line, removed, added)
    assert not any(w in after for w in removed if w not in added)
    # the query edit is what the gate names: the old words are in a.sql, the new ones in b.sql
    a_sql, b_sql = (sc.dir / "a.sql").read_text(), (sc.dir / "b.sql").read_text()
    assert any(w in a_sql for w in removed if w != "*") and any(w in b_sql for w in added)
    assert "old: " + sql_meaning.strip_counters(old_desc["description"]) in m["evidence"]
    # what is at risk, in words: a loss entry of the same state, and the query's statement
    [loss] = [x for x in res.losses if x["operator_id"] == m["operator_id"]]
    assert loss["bytes"] == m["bytes"] and "restored but wrong" in loss["reason"] and before in loss["reason"]
    assert m["sql"]["statement"] == loss["sql"]["statement"]
    sink = re.search(r"INSERT INTO (\w+)", b_sql)
    assert sink is not None and m["sql"]["statement"] == f"INSERT INTO {sink.group(1)}"
    assert m["sql"]["why"].startswith("its operator ID did not change")


def _interval(script: str) -> str:
    """The session gap or window size a script writes (`INTERVAL '5' SECOND`), as the gate shows it (`5 s`)."""
    m = re.search(r"(?:SESSION|TUMBLE)\(.*?INTERVAL '(\d+)' SECONDS?\)", script, re.S)
    assert m is not None, script
    return f"{m.group(1)} s"


@pytest.mark.parametrize("sc", [s for s in SQL if s.name in WINDOW_EDITS], ids=str)
def test_a_session_gap_or_legacy_window_change_is_read_as_a_meaning_change(sc: Scenario) -> None:
    """Flink 1.20.5 and 2.3.0 keep the window's operator ID and restore its state (sessions merged under the old
    gap continue under the new one; 10 s windows under 20 s) in both syntaxes: with the old graph the gate
    reports the gap or size, as it does a window TVF's size."""
    run = sc.outcome["restore"]
    assert run["status"] == "RUNNING" and run["restored_operators"]
    res = with_old(sc)
    assert res.verdict == Verdict.STATE_MISROUTED and res.restore_succeeds
    [m] = res.misrouted
    assert m["detected_by"] == "sql-meaning" and m["operator_id"] in run["restored_operators"]
    old_gap, new_gap = _interval((sc.dir / "a.sql").read_text()), _interval((sc.dir / "b.sql").read_text())
    assert old_gap != new_gap
    arg = WINDOW_EDITS[sc.name]
    line = next(e for e in m["evidence"] if e.startswith("window: "))
    before, after = line.split(": ", 2)[1].split(" -> ")
    assert before.endswith(f"({arg}=[{old_gap}])") and after.endswith(f"({arg}=[{new_gap}])"), line
    [loss] = [x for x in res.losses if x["operator_id"] == m["operator_id"]]
    assert "restored but wrong" in loss["reason"] and before in loss["reason"]
    assert sql_check(sc, False).verdict == Verdict.SAFE  # without the old graph: nothing to compare, one warning


@pytest.mark.parametrize("sc", [s for s in SQL if s.name not in MEANING_CHANGES and s.name not in WINDOW_EDITS],
                         ids=str)
def test_the_same_meaning_keeps_its_verdict(sc: Scenario) -> None:
    """Aliases, sink renames, plans, source options, parallelism: the verdict Flink's outcome gives stays."""
    real_ok = sc.outcome["restore"]["status"] == "RUNNING"
    res, before = with_old(sc), sql_check(sc, False)
    assert res.verdict == before.verdict == (Verdict.SAFE if real_ok else Verdict.RESTORE_FAILS)
    assert res.restore_succeeds == real_ok
    assert not [m for m in res.misrouted if m["detected_by"] == "sql-meaning"]
    assert not any("restores into" in w and "check by hand" in w for w in res.warnings)  # planner counters ignored
    if "restore_allow_non_restored_state" in sc.outcome:  # what is left when the user skips the refused state
        allowed = with_old(sc, True)
        assert not [m for m in allowed.misrouted if m["detected_by"] == "sql-meaning"]


@pytest.mark.parametrize("name", sorted(MEANING_CHANGES))
def test_without_the_old_graph_one_warning_asks_for_it(name: str) -> None:
    for release in RELEASES:
        res = sql_check(BY[(release, name)], False)
        assert res.verdict == Verdict.SAFE  # nothing to compare: as before
        assert len([w for w in res.warnings if "pass --old-graph to check SQL meaning" in w]) == 1


def test_a_datastream_check_gets_no_sql_warning() -> None:
    sc = next(s for s in scenarios() if s.name == "identical")
    assert not any("SQL" in w for w in sc.check(False).warnings)


def _side(sc: Scenario, which: str) -> GraphSide:
    return read_side(load_graph(sc.dir / f"graph-{which}.json"))


@pytest.mark.parametrize("release", RELEASES)
def test_a_filter_before_the_aggregate_is_named_and_keeps_the_id(release: str) -> None:
    """Flink restores the aggregate (the filter is fused into the Calc before it): the explanation names the
    statement, the operator and the new filter, and says the ID did not change."""
    sc = BY[(release, "sql-filter-before-aggregate")]
    res = with_old(sc)
    assert res.verdict == Verdict.SAFE
    [(nid, _)] = [(n, r) for n, r in res.simulation.assignment.operators.items()
                  if r.old is not None and r.old.state_size > 0]
    sql = sql_explain.explain(_side(sc, "b"), nid, _side(sc, "a"), id_changed=False)
    assert sql is not None
    assert (sql["statement"], sql["operator"]) == ("INSERT INTO totals", "GroupAggregate on key (user_id)")
    assert "accumulators" in sql["state"]
    assert sql["why"].startswith("its operator ID did not change")
    assert "a filter was added upstream: Calc(" in sql["why"] and "(amount > 10)" in sql["why"]
    assert "amount > 10" in (sc.dir / "b.sql").read_text()


@pytest.mark.parametrize("release", RELEASES)
def test_mini_batch_on_explains_the_lost_aggregate(release: str) -> None:
    res = with_old(BY[(release, "sql-mini-batch-on")])
    assert res.verdict == Verdict.RESTORE_FAILS
    [loss] = res.losses
    sql = loss["sql"]
    assert (sql["statement"], sql["operator"]) == ("INSERT INTO totals", "GroupAggregate on key (user_id)")
    assert sql["why"].startswith("its operator ID changed because")
    assert "GroupAggregate -> GlobalGroupAggregate" in sql["why"]
    assert "mini-batch is now on" in sql["why"] and "two phases" in sql["why"]


@pytest.mark.parametrize("release", RELEASES)
def test_one_to_two_phase_explains_the_optimizer_choice(release: str) -> None:
    res = with_old(BY[(release, "sql-one-to-two-phase")])
    [loss] = res.losses
    sql = loss["sql"]
    assert sql["statement"] == "INSERT INTO totals" and "two phases" in sql["why"]
    assert "mini-batch" not in sql["why"]  # the old job already ran mini-batch: only the phase strategy changed


@pytest.mark.parametrize("release", RELEASES)
def test_a_second_insert_reading_the_source_explains_the_id_change(release: str) -> None:
    res = with_old(BY[(release, "sql-statement-set-gains-insert")])
    [loss] = res.losses
    assert loss["sql"]["statement"] == "INSERT INTO totals"
    assert "Source: clicks' now feeds 2 operators (was 1)" in loss["sql"]["why"]


def test_a_refused_state_is_named_in_query_terms_without_the_old_graph() -> None:
    """A sql_state_rules loss (Flink refuses the key) is explained from the new graph alone."""
    res = sql_check(BY[("2.3.0", "sql-group-key-other-type")], False)
    [loss] = res.losses
    assert loss["sql"] == {"statement": "INSERT INTO totals", "operator": "GroupAggregate on key (url)",
                           "state": "the aggregates' accumulators per key", "why": None}


def test_planner_counters_never_pair_operators() -> None:
    assert sql_meaning.strip_counters("[78]:GroupAggregate(groupBy=[user_id])") == "GroupAggregate(groupBy=[user_id])"
    assert sql_meaning.strip_counters("GroupAggregate[78]") == "GroupAggregate"
    sc = BY[("2.3.0", "sql-identical")]
    pairs = sql_explain.pair(_side(sc, "a"), _side(sc, "b"))
    a, b = _side(sc, "a"), _side(sc, "b")
    assert [(a.graph.by_id[o].name.split("[")[0], b.graph.by_id[n].name.split("[")[0]) for o, n in pairs.items()] \
        == [("GroupAggregate", "GroupAggregate")]


def test_cli_table_json_and_html_say_which_statement() -> None:
    sc = BY[("2.3.0", "sql-count-to-sum")]
    base = [sys.executable, "-m", "upgrade_gate.cli.main", "check", "--savepoint", str(sc.savepoint), "--graph",
            str(sc.dir / "graph-b.json"), "--old-graph", str(sc.dir / "graph-a.json"), "--flink-version", "2.3"]
    table = subprocess.run(base, capture_output=True, text=True, timeout=120)
    assert table.returncode == 1, table.stderr
    assert table.stdout.startswith("VERDICT: STATE_MISROUTED")
    flat = " ".join(table.stdout.split())
    assert "COUNT(*) AS c -> SUM(amount) AS c" in flat
    assert "of INSERT INTO totals" in flat
    out = json.loads(subprocess.run([*base, "--format", "json"], capture_output=True, text=True,
                                    timeout=120).stdout)
    [m] = out["misrouted"]
    assert m["detected_by"] == "sql-meaning" and m["sql"]["operator"] == "GroupAggregate on key (user_id)"
    html = subprocess.run([*base, "--format", "html"], capture_output=True, text=True, timeout=120).stdout
    assert "of <b>INSERT INTO totals</b>" in html

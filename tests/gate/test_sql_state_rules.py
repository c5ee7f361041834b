"""The SQL state rule, directly: real savepoints and exported graphs of real Flink 1.20.5 and 2.3.0 SQL jobs
(tests/fixtures/restores/<release>/sql-*, flink_bridge/sql_scenarios.py). The end-to-end agreement with
what Flink did is tests/gate/test_restore_flink_agreement.py::test_gate_agrees_with_flink_on_sql."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from hashing.readers import load_graph
from tests.gate.test_restore_flink_agreement import sql_check
from tests.restore_support import RESTORES, Scenario, scenarios
from upgrade_gate.flink.state_meta import read_state_schemas
from upgrade_gate.gate import sql_state_rules
from upgrade_gate.storage.savepoints import load_savepoint
from upgrade_gate.vocabulary import Verdict

SQL = {(s.release, s.name): s for s in scenarios() if s.name.startswith("sql-")}
RELEASES = ("1.20.5", "2.3.0")


def _errors(sc: Scenario) -> list[sql_state_rules.SqlStateError]:
    res = sql_check(sc, True)
    assert res.simulation.assignment is not None
    spec = json.loads((sc.dir / "graph-b.json").read_text())
    return sql_state_rules.sql_state_errors(load_savepoint(str(sc.savepoint)),
                                            res.simulation.assignment.operators.values(), spec["sql_state"])


@pytest.mark.parametrize("release", RELEASES)
def test_a_second_aggregate_changes_the_accumulator_row(release: str) -> None:
    [err] = _errors(SQL[(release, "sql-second-aggregate")])
    assert (err.state, err.old, err.new) == ("accState", "RowDataSerializer<LongSerializer>",
                                             "RowDataSerializer<LongSerializer, LongSerializer>")
    assert err.message.startswith("For heap backends, the new state serializer")


@pytest.mark.parametrize("release", RELEASES)
def test_a_grouping_key_of_another_type_changes_the_key_serializer(release: str) -> None:
    [err] = _errors(SQL[(release, "sql-group-key-other-type")])
    assert (err.state, err.old, err.new) == ("key", "RowDataSerializer<IntSerializer>",
                                             "RowDataSerializer<StringDataSerializer>")
    assert err.message.startswith("The new key serializer")


@pytest.mark.parametrize("release", RELEASES)
def test_a_join_on_a_key_of_another_type_changes_the_join_key_serializer(release: str) -> None:
    [err] = _errors(SQL[(release, "sql-join-key-other-type")])
    assert (err.state, err.old, err.new) == ("key", "RowDataSerializer<IntSerializer>",
                                             "RowDataSerializer<StringDataSerializer>")
    assert err.operator.startswith("Join[")


@pytest.mark.parametrize("release", RELEASES)
def test_keep_first_to_keep_last_deduplication_changes_the_state_from_a_flag_to_the_row(release: str) -> None:
    [err] = _errors(SQL[(release, "sql-dedup-ordering")])
    assert (err.state, err.old) == ("deduplicate-state", "BooleanSerializer")
    assert err.new.startswith("RowDataSerializer<IntSerializer, StringDataSerializer, LongSerializer")


@pytest.mark.parametrize("name", ["sql-identical", "sql-count-to-sum", "sql-group-key-same-type", "sql-topn-n"])
def test_same_rows_are_not_flagged(name: str) -> None:
    for release in RELEASES:
        assert _errors(SQL[(release, name)]) == []


def test_the_savepoint_holds_the_rows_the_rule_compares() -> None:
    """What the rule reads is the state-meta reader's view of Flink's RowDataSerializer snapshots."""
    sc = SQL[("2.3.0", "sql-identical")]
    [op] = [o for o in read_state_schemas(load_savepoint(str(sc.savepoint))) if o.key_serializer is not None]
    assert op.key_serializer.class_name.endswith("RowDataSerializer$RowDataSerializerSnapshot")
    assert "accState" in {s.name for s in op.states}


def test_a_datastream_graph_carries_no_sql_state() -> None:
    """Only exported SQL graphs carry `sql_state`; a DataStream check is unchanged."""
    graph = RESTORES / "1.20.5" / "identical" / "graph-b.json"
    assert load_graph(graph).sql_state is None
    res = next(s for s in scenarios() if s.name == "identical").check(False)
    assert res.verdict == Verdict.SAFE


def test_check_names_the_sql_operator_and_what_is_lost() -> None:
    sc = SQL[("1.20.5", "sql-second-aggregate")]
    res = sql_check(sc, False)
    assert res.verdict == Verdict.RESTORE_FAILS and not res.restore_succeeds
    [loss] = [x for x in res.losses if x["state_names"] == ["accState"]]
    assert loss["name"].startswith("GroupAggregate[") and loss["bytes"] > 0
    assert load_graph(sc.dir / "graph-b.json").graph.name == "b.sql"


def test_cli_check_of_an_exported_sql_graph_fails_naming_the_state() -> None:
    """What a user runs: `upgrade-gate check` with the exported graph (its `sql_state`) and the savepoint."""
    sc = SQL[("2.3.0", "sql-second-aggregate")]
    proc = subprocess.run([sys.executable, "-m", "upgrade_gate.cli.main", "check", "--savepoint", str(sc.savepoint),
                           "--graph", str(sc.dir / "graph-b.json"), "--flink-version", "2.3", "--format", "json"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    out = json.loads(proc.stdout)
    assert out["verdict"] == "RESTORE_FAILS" and out["restore_succeeds"] is False
    assert out["flink_error"].startswith("For heap backends, the new state serializer")
    assert [x["state_names"] for x in out["losses"]] == [["accState"]]

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
    assert (err.state, err.old, err.new) == ("accState", "ROW<BIGINT>", "ROW<BIGINT, BIGINT>")
    assert err.message.startswith("For heap backends, the new state serializer")


@pytest.mark.parametrize("release", RELEASES)
def test_a_grouping_key_of_another_type_changes_the_key_serializer(release: str) -> None:
    [err] = _errors(SQL[(release, "sql-group-key-other-type")])
    assert (err.state, err.old, err.new) == ("key", "ROW<INT>", "ROW<STRING>")
    assert err.message.startswith("The new key serializer")


@pytest.mark.parametrize("release", RELEASES)
def test_a_join_on_a_key_of_another_type_changes_the_join_key_serializer(release: str) -> None:
    [err] = _errors(SQL[(release, "sql-join-key-other-type")])
    assert (err.state, err.old, err.new) == ("key", "ROW<INT>", "ROW<STRING>")
    assert err.operator.startswith("Join[")


@pytest.mark.parametrize("release", RELEASES)
def test_keep_first_to_keep_last_deduplication_changes_the_state_from_a_flag_to_the_row(release: str) -> None:
    [err] = _errors(SQL[(release, "sql-dedup-ordering")])
    assert (err.state, err.old) == ("deduplicate-state", "BooleanSerializer")
    assert err.new.startswith("RowDataSerializer<IntSerializer, StringDataSerializer, LongSerializer")


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("name", ["sql-join-row-gains-column", "sql-left-join-row-gains-column"])
def test_a_join_side_projecting_one_more_field_changes_its_record_rows(release: str, name: str) -> None:
    """Only the side that gained the field; the rows as the savepoint's MapState<row, count> (an outer side's
    MapState<row, Tuple2<count, matches>>) and the new graph's `leftType` hold them
    (tests/gate/test_restore_flink_agreement.py compares them with the fixtures)."""
    [err] = _errors(SQL[(release, name)])
    assert (err.state, err.old, err.new) == ("left-records", "ROW<INT, STRING>", "ROW<INT, STRING, BIGINT>")
    assert err.operator.startswith("Join[")
    assert err.message == ("For heap backends, the new state serializer (org.apache.flink.api.common.typeutils.base."
                           "MapSerializer) must not be incompatible with the old state serializer (org.apache.flink."
                           "api.common.typeutils.base.MapSerializer).")


@pytest.mark.parametrize("name", ["sql-identical", "sql-count-to-sum", "sql-group-key-same-type", "sql-topn-n",
                                  "sql-join-identical", "sql-join-same-columns-reordered",
                                  "sql-session-identical-legacy", "sql-session-identical-tvf",
                                  "sql-keyless-window-join-identical"])
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


# -- the rows' logical types (issue 15): what Flink's RowDataSerializerSnapshot compares ---------------------
TYPE_SCENARIOS = sorted(n for _, n in SQL if n.startswith("sql-type-"))


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("name", TYPE_SCENARIOS)
def test_type_changes_are_refused_exactly_when_flink_refused_them(release: str, name: str) -> None:
    """Same serializers, other logical types: the verdict Flink's restore had (RUNNING or the state error)."""
    sc = SQL[(release, name)]
    refused = sc.outcome["restore"]["status"] != "RUNNING"
    res = sql_check(sc, False)
    assert (res.verdict == Verdict.RESTORE_FAILS) == refused, (res.verdict, res.flink_error)
    assert bool(_errors(sc)) == refused


LTZ = "TIMESTAMP(3) WITH LOCAL TIME ZONE NOT NULL"  # the proctime column the keep-last row holds


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize(("name", "state", "old", "new"), [
    ("sql-type-varchar-to-string", "deduplicate-state",
     f"ROW<INT, VARCHAR(3), BIGINT, {LTZ}>", f"ROW<INT, STRING, BIGINT, {LTZ}>"),
    ("sql-type-not-null-to-nullable", "deduplicate-state",
     f"ROW<INT, STRING, {LTZ}, BIGINT NOT NULL>", f"ROW<INT, STRING, {LTZ}, BIGINT>"),
    ("sql-type-decimal-precision", "accState", "ROW<DECIMAL(10, 2)>", "ROW<DECIMAL(12, 2)>"),
    ("sql-type-timestamp-precision", "accState", "ROW<TIMESTAMP(3)>", "ROW<TIMESTAMP(6)>"),
])
def test_the_refusal_names_the_field_types(release: str, name: str, state: str, old: str, new: str) -> None:
    """What the user reads: the state and its row's field types before and after (the serializers are the same)."""
    sc = SQL[(release, name)]
    [err] = _errors(sc)
    assert (err.state, err.old, err.new) == (state, old, new)
    assert err.message.startswith("For heap backends, the new state serializer")
    [loss] = [x for x in sql_check(sc, False).losses if x["state_names"] == [state]]
    assert f"was {old} and the new query makes it {new}" in loss["reason"]


def test_a_graph_without_logical_types_is_compared_by_serializers() -> None:
    """A graph exported before `logical_types` existed: only the serializers are compared (the DECIMAL
    precision change then goes unseen, as before), never an error from the missing types."""
    sc = SQL[("2.3.0", "sql-type-decimal-precision")]
    spec = json.loads((sc.dir / "graph-b.json").read_text())

    def strip(tree: object) -> None:
        if isinstance(tree, dict):
            tree.pop("logical_types", None)
            for v in tree.values():
                strip(v)

    strip(spec["sql_state"])
    res = sql_check(sc, True)
    assert res.simulation.assignment is not None
    assert sql_state_rules.sql_state_errors(load_savepoint(str(sc.savepoint)),
                                            res.simulation.assignment.operators.values(), spec["sql_state"]) == []

"""Every lost state carries its role and what losing it does to the data (issue #33, first part).

The state names are the ones real Flink 1.20.5 and 2.3.0 wrote into the committed savepoints (a FLIP-27 source's
`SourceReaderState` and its coordinator, a SQL aggregate's keyed state, a DataStream operator's list states); the
table of connector state names cites the class each name comes from (`upgrade_gate/gate/state_roles.py`). What a
user reads: the role in the JSON, the consequence in data terms in the table, the HTML report and the alert.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

import pytest

from tests.restore_support import Scenario, scenarios
from upgrade_gate.gate.state_roles import (
    FILE_SOURCE,
    KAFKA_SOURCE,
    KAFKA_STARTING_OFFSETS,
    KNOWN_STATES,
    Role,
    SourceStart,
    consequence,
    role_of,
)
from upgrade_gate.report.check_table import render_table
from upgrade_gate.report.html import render_html
from upgrade_gate.storage.check_inputs import check_upgrade
from upgrade_gate.storage.savepoints import load_savepoint

RELEASES = ("1.20.5", "2.3.0")
BY_NAME = {(s.release, s.name): s for s in scenarios()}


def _check(sc: Scenario, *, old: bool = False) -> dict:  # type: ignore[type-arg]
    res = check_upgrade(load_savepoint(str(sc.savepoint)), sc.dir / "graph-b.json", flink_version=sc.flink_version,
                        allow_non_restored_state=True, old_graph=sc.dir / "graph-a.json" if old else None)
    return {"json": res.to_json(), "table": " ".join(render_table(res).split()),
            "html": html.unescape(render_html(res))}


@pytest.mark.parametrize("release", RELEASES)
def test_a_dropped_source_says_it_reads_again_from_its_startup_position(release: str) -> None:
    out = _check(BY_NAME[(release, "source-uid-removed")])
    [loss] = out["json"]["losses"]
    assert loss["state_names"] == ["SourceReaderState", "coordinator"]
    assert loss["role"] == Role.SOURCE_POSITION
    assert loss["state_roles"] == {"SourceReaderState": "source position", "coordinator": "source enumerator"}
    said, name = loss["consequence"], loss["name"] or loss["operator_id"]  # a 1.x savepoint records no names
    # NumberSequenceSource: where it starts again is its own configuration, which the graph does not show
    assert said.startswith(f"source '{name}' forgets how far it read and starts wherever its configured startup "
                           f"mode says")
    assert "from the beginning, records it already read are read again" in said and "from the latest" in said
    assert "What the data goes through" in out["table"] and f"- {name} (source position): {said}" in out["table"]
    assert 'data-role="source position"' in out["html"] and said in out["html"]


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("old", [False, True])
def test_lost_sql_aggregate_state_is_sql_state_with_or_without_the_old_graph(release: str, old: bool) -> None:
    out = _check(BY_NAME[(release, "sql-mini-batch-on")], old=old)
    [loss] = out["json"]["losses"]
    assert loss["state_names"] == ["keyed"] and loss["role"] == Role.SQL_STATE
    assert "starts empty: aggregates, joins, deduplication and top-N are computed from new records only" in \
        loss["consequence"]


@pytest.mark.parametrize("release", RELEASES)
def test_a_removed_operators_own_list_states_are_its_own_state(release: str) -> None:
    [loss] = _check(BY_NAME[(release, "stateful-operator-removed")])["json"]["losses"]
    assert loss["role"] == Role.USER_STATE
    assert set(loss["state_roles"].values()) == {"operator state"}
    assert loss["consequence"].startswith(f"'{loss['name'] or loss['operator_id']}' starts without this state")


@pytest.mark.parametrize("release", RELEASES)
def test_misrouted_state_names_its_role_too(release: str) -> None:
    sc = BY_NAME[(release, "misroute-sources-swapped-no-uids")]
    res = check_upgrade(load_savepoint(str(sc.savepoint)), sc.dir / "graph-b.json", flink_version=sc.flink_version,
                        old_graph=sc.dir / "graph-a.json")
    assert res.misrouted and all(m["role"] for m in res.misrouted)
    assert {m["role"] for m in res.misrouted} <= {str(r) for r in Role}


@pytest.mark.parametrize("release, old, owner", [("2.3.0", False, "keyed"), ("1.20.5", True, "keyed"),
                                                 ("1.20.5", False, "3a434c34ffe2fe820735436a4ca97107")])
def test_the_consequence_of_misrouted_keyed_state_names_its_owner_not_its_receiver(release: str, old: bool,
                                                                                  owner: str) -> None:
    """A map inserted before a uid-less keyed operator takes its ID and receives its keyed state: the table row is the
    receiver ('inserted'), but the operator that goes without the state is its owner, 'keyed' (named by the 2.x
    savepoint, or by --old-graph), else its operator id (a 1.x savepoint names no operator)."""
    doc = _check(BY_NAME[(release, "map-inserted-before-uidless-keyed")], old=old)["json"]
    loss = next(x for x in doc["losses"] if x["name"] == "inserted")
    assert loss["consequence"].startswith(f"'{owner}' starts without this state"), loss["consequence"]


def test_the_table_of_connector_states() -> None:
    """Each name a connector declares maps to its role, whatever the operator; a name nobody knows is never called
    harmless on a source; a coordinator is a source's enumerator unless its operator reads input."""
    expected = {"SourceReaderState": Role.SOURCE_POSITION, "writer_raw_states": Role.SINK_WRITER,
                "streaming_committer_raw_states": Role.SINK_COMMITTER, "bucket-states": Role.SINK_WRITER,
                "topic-partition-offset-states": Role.SOURCE_POSITION, "Kinesis-Stream-Shard-State":
                    Role.SOURCE_POSITION, "offset-states": Role.SOURCE_POSITION,
                "iceberg-files-committer-state": Role.SINK_COMMITTER, "next-transactional-id-hint": Role.SINK_COMMITTER}
    for name, role in expected.items():
        assert role_of(name, source=False, sql=False) is role and KNOWN_STATES[name].cite
    assert role_of("my-offsets", source=True, sql=False) is Role.SOURCE_UNKNOWN
    assert role_of("my-offsets", source=False, sql=False) is Role.USER_STATE
    assert role_of("coordinator", source=None, sql=False) is Role.SOURCE_ENUMERATOR
    assert role_of("coordinator", source=False, sql=False) is Role.USER_STATE
    assert role_of("raw keyed", source=False, sql=False) is Role.TIMERS
    assert role_of("keyed", source=False, sql=True) is Role.SQL_STATE


def test_the_fleet_counts_blocked_jobs_by_the_role_at_risk() -> None:
    from spark_jobs.fleet_check import check_parsed, summarize
    from upgrade_gate.storage.objects import read_graph

    rows = []
    for name in ("source-uid-removed", "stateful-operator-removed", "identical"):
        sc = BY_NAME[("2.3.0", name)]
        row = check_parsed(load_savepoint(str(sc.savepoint)), read_graph(str(sc.dir / "graph-b.json")), hasher="v2",
                           matching="fixed", allow_non_restored_state=True, flink_version="2.3")
        rows.append({**row, "job": name, "error": None})
    doc = summarize(rows)
    assert doc["jobs_by_role_at_risk"] == {"source position": 1, "operator state": 1}
    assert list(doc["jobs_by_role_at_risk"]) == ["source position", "operator state"]  # most consequential first
    assert json.loads(rows[0]["losses"])[0]["role"] == "source position"


@pytest.mark.parametrize("role", [Role.SOURCE_POSITION, Role.SOURCE_ENUMERATOR])
def test_where_a_source_starts_again_is_as_specific_as_its_connector_says(role: Role) -> None:
    """A FileSource has no startup mode (it reads its paths again: tests/gate/test_file_connector_consequences.py
    shows the duplicates real Flink committed); a KafkaSource starts at its configured starting offsets when the
    export's connector field names them; otherwise the dependency on the configured startup mode is named plainly."""
    said = {start: consequence(role, "src", start=SourceStart(*start) if start else None) for start in
            [None, (FILE_SOURCE, None), (KAFKA_SOURCE, None), *((KAFKA_SOURCE, k) for k in KAFKA_STARTING_OFFSETS)]}
    assert "reads every file under its paths again from the start" in said[(FILE_SOURCE, None)]
    assert "duplicates downstream" in said[(FILE_SOURCE, None)] and "skipped" not in said[(FILE_SOURCE, None)]
    for unknown in (None, (KAFKA_SOURCE, None)):
        assert "starts wherever its configured startup mode says" in said[unknown]
        assert "read again" in said[unknown] and "skipped" in said[unknown]
    assert "read again" in said[(KAFKA_SOURCE, "earliest")] and "skipped" not in said[(KAFKA_SOURCE, "earliest")]
    assert "skipped" in said[(KAFKA_SOURCE, "latest")] and "read again" not in said[(KAFKA_SOURCE, "latest")]
    assert "committed offsets" in said[(KAFKA_SOURCE, "committed")]
    assert len(set(said.values())) == len(said) - 1  # only the two unknowns read alike


def test_the_connector_field_of_the_source_a_lost_position_was_rekeyed_away_from_decides_the_wording(
        tmp_path: Path) -> None:
    """The plumbing: the connector class and starting offsets come from the export's `connector` field of the new
    source the 2.3.0 savepoint's uid and name tie the lost state to (what the field says is the user's graph's)."""
    sc = BY_NAME[("2.3.0", "source-uid-removed")]
    doc = json.loads((sc.dir / "graph-b.json").read_text())
    [source] = [n for n in doc["nodes"] if n.get("factory") == "source"]
    source["connector"] = {"class": KAFKA_SOURCE, "starting_offsets": "latest"}
    graph = tmp_path / "graph-b.json"
    graph.write_text(json.dumps(doc))
    res = check_upgrade(load_savepoint(str(sc.savepoint)), graph, flink_version=sc.flink_version,
                        allow_non_restored_state=True)
    [loss] = res.to_json()["losses"]
    assert loss["consequence"] == consequence(Role.SOURCE_POSITION, loss["name"],
                                              start=SourceStart(KAFKA_SOURCE, "latest"))
    assert "skipped (never processed)" in loss["consequence"]

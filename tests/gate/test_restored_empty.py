"""The restored-but-empty warning (issue #33) on savepoints real Flink 1.20.5 and 2.3.0 wrote.

Flink reports `isRestored() == true` to every operator of a restored job, also to one that gets no state
(measured on a real cluster: tests/flink/test_restored_but_empty.py). The gate warns for each stateful operator
of the new job that gets none, when the restore restores some state; never for one that gets its state back, and
never for a job started from nothing.
"""

from __future__ import annotations

import pytest

from hashing.versions import FlinkVersion
from tests.restore_support import Scenario, scenarios
from upgrade_gate.gate.check import check
from upgrade_gate.gate.inputs import CheckOptions
from upgrade_gate.gate.upgrade_modes import RestorePath
from upgrade_gate.report.check_table import render_table
from upgrade_gate.storage.check_inputs import read_check_inputs
from upgrade_gate.storage.savepoints import load_savepoint

RELEASES = ("1.20.5", "2.3.0")
BY_NAME = {(s.release, s.name): s for s in scenarios()}
HAZARD = "starts empty in a restored job: Flink reports isRestored() == true to it"


def _check(sc: Scenario, restore_path: RestorePath | None = None) -> dict:  # type: ignore[type-arg]
    options = CheckOptions(flink_version=FlinkVersion.parse(sc.flink_version), allow_non_restored_state=True,
                           restore_path=restore_path or RestorePath.SAVEPOINT)
    inputs = read_check_inputs(load_savepoint(str(sc.savepoint)), sc.dir / "graph-b.json", options=options)
    return check(inputs).to_json()


def _warned(report: dict) -> list[str]:  # type: ignore[type-arg]
    return [w for w in report["warnings"] if HAZARD in w]


@pytest.mark.parametrize("release", RELEASES)
def test_the_operator_a_lost_state_was_rekeyed_away_from_is_warned_once(release: str) -> None:
    """The warning is said once, as a warning: the lost state's consequence (the table's "What the data goes
    through" cell, the JSON `consequence`) says what the data goes through and does not repeat it."""
    sc = BY_NAME[(release, "uid-removed")]
    report = _check(sc)
    assert report["verdict"] == "STATE_LOSS"
    assert _warned(report) == [f"'keyed' {HAZARD}, so code that expects restored state (a source enumerator, a sink "
                               f"committer, a function that reads what it restored) finds none and may fail after "
                               f"the restore"]
    [loss] = report["losses"]
    assert HAZARD not in loss["consequence"]
    options = CheckOptions(flink_version=FlinkVersion.parse(sc.flink_version), allow_non_restored_state=True)
    table = render_table(check(read_check_inputs(load_savepoint(str(sc.savepoint)), sc.dir / "graph-b.json",
                                                 options=options)))
    assert " ".join(table.split()).count(HAZARD) == 1


@pytest.mark.parametrize("release", RELEASES)
def test_a_source_that_lost_its_position_is_warned(release: str) -> None:
    assert [w.split(" starts")[0] for w in _warned(_check(BY_NAME[(release, "source-uid-removed")]))] == \
        ["'Source: numbers'"]


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("name", ["identical", "rescale-up", "stateless-operator-removed", "stateful-operator-removed"])
def test_no_warning_when_every_stateful_operator_gets_its_state_back(release: str, name: str) -> None:
    """stateful-operator-removed: its state is lost, but no operator of the new job has its uid or name, and no
    stateful one goes without state."""
    assert _warned(_check(BY_NAME[(release, name)])) == []


@pytest.mark.parametrize("release", RELEASES)
def test_no_warning_for_a_job_started_from_nothing(release: str) -> None:
    report = _check(BY_NAME[(release, "uid-removed")], RestorePath.EMPTY)
    assert report["losses"] and _warned(report) == []

"""What the report says about operators that had finished before the snapshot (FLIP-147),
upgrade_gate/flink/assignment/finished_state.py `explain`, on the savepoints real Flink 1.20.5 and 2.3.0
took after a bounded source ran out (tests/fixtures/checkpoints/*/finished-*)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hashing.operator_ids import compute_operator_ids
from hashing.readers import load_graph
from hashing.versions import FlinkVersion
from upgrade_gate.flink.assignment.finished_state import explain
from upgrade_gate.flink.simulation import simulate
from upgrade_gate.storage.savepoints import load_savepoint

ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "checkpoints"


def _explained(release: str, scenario: str) -> tuple[list[str], dict]:
    """The sentences for job B restored from job A's snapshot, from the assignment the gate simulates."""
    d = ROOT / release / scenario
    outcome = json.loads((d / "outcome.json").read_text())
    graph = load_graph(d / "graph-b.json").graph
    metadata = load_savepoint(str((d / outcome["fixture"]).resolve()))
    ids = compute_operator_ids(graph, "v2", FlinkVersion.parse(release[:4].rstrip(".")))
    sim = simulate(metadata, graph, ids, outcome["pointer"], allow_non_restored_state=False, matching="fixed")
    assert sim.assignment is not None
    return explain(sim.assignment.operators, graph), outcome


@pytest.mark.parametrize("release", ["1.20.5", "2.3.0"])
def test_finished_operators_are_explained_as_flink_restored_them(release: str) -> None:
    sentences, outcome = _explained(release, "finished-identical")
    text = " ".join(sentences)
    assert "'Source: bounded'" in text and "'tag'" in text and "had finished before this snapshot" in text
    assert "Nothing is restored into them" in text and "not run or emit again" in text
    # what Flink did: the finished vertex came back FINISHED and its probe got nothing back
    assert all(s == "FINISHED" for n, s in outcome["restore"]["vertices"].items() if "bounded" in n)
    assert "tag" not in outcome["restore"]["restored"]


@pytest.mark.parametrize("release", ["1.20.5", "2.3.0"])
def test_an_operator_fed_only_by_finished_ones_is_said_to_finish(release: str) -> None:
    sentences, outcome = _explained(release, "finished-operator-added-unchained")
    assert any("'added' is fed only by finished operators" in s for s in sentences)
    assert outcome["restore"]["vertices"]["added"] == "FINISHED"


def test_nothing_is_said_when_nothing_had_finished() -> None:
    sentences, _ = _explained("2.3.0", "ckpt-no-claim")
    assert sentences == []

"""Channel state across job vertices (upgrade_gate/flink/assignment/channel_state.py `ChannelTopology`),
on the unaligned checkpoints real Flink 1.20.5 and 2.3.0 wrote and restored (tests/fixtures/checkpoints/).

Each rule is run directly on the real `_metadata` and job graphs and must raise (or not) exactly what
Flink raised: FLINK-31963's gating (an exchange chained on both sides is never looked at, the job runs
and its in-flight records are dropped), `SubtaskStateMapper.UNSUPPORTED` for a rescaled FORWARD/RESCALE
exchange, and the task failures at the same parallelism (fewer subpartitions; records replayed into a
keyed exchange that was not keyed).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from hashing.operator_ids import compute_operator_ids
from hashing.readers import load_graph
from hashing.versions import FlinkVersion
from upgrade_gate.flink.assignment.channel_state import (
    ChannelTopology,
    channel_indexes,
    check_channel_state,
    dropped_channel_state,
    explain,
)
from upgrade_gate.flink.assignment.errors import RestoreFailure
from upgrade_gate.flink.assignment.job import execution_job_vertices
from upgrade_gate.flink.assignment.load_validation import load_and_validate
from upgrade_gate.flink.assignment.state_assignment import match_vertex
from upgrade_gate.flink.assignment.task_state_assignment import OperatorRestore, TaskStateAssignment
from upgrade_gate.storage.savepoints import load_savepoint

ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "checkpoints"
RELEASES = ("1.20.5", "2.3.0")


def _matched(release: str, scenario: str) -> tuple[list[list[OperatorRestore]], dict, Path]:
    d = ROOT / release / scenario
    outcome = json.loads((d / "outcome.json").read_text())
    metadata = load_savepoint(str((d / outcome["fixture"]).resolve()))
    graph = load_graph(d / "graph-b.json").graph
    ids = compute_operator_ids(graph, "v2", FlinkVersion.parse(release[:4].rstrip(".")))
    vertices = execution_job_vertices(ids, graph.by_id)
    local = dict(load_and_validate(metadata, vertices, outcome["pointer"], False).kept)
    return [match_vertex(v, local, "fixed", "v2") for v in vertices], outcome, d


def _run(release: str, scenario: str, with_old_graph: bool = True) -> tuple[RestoreFailure | None, dict, list]:
    """What the channel-state rules raise for job B restored from job A's checkpoint (None: it runs)."""
    per_vertex, outcome, d = _matched(release, scenario)
    graph = load_graph(d / "graph-b.json").graph
    topology = ChannelTopology.of(per_vertex, graph, load_graph(d / "graph-a.json").graph if with_old_graph else None)
    tasks = [TaskStateAssignment(r[0].vertex, r) for r in per_vertex if r]
    try:
        for task in tasks:
            if task.has_non_finished_state and not task.is_fully_finished:
                check_channel_state(task, topology)
        topology.raise_task_failures()
    except RestoreFailure as failure:
        return failure, outcome, tasks
    return None, outcome, tasks


def _flink_error(outcome: dict) -> str | None:
    chain = outcome["restore"].get("error_chain") or []
    return chain[-1]["message"] if chain else None


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("scenario", ["unaligned-identical", "unaligned-rescale-up", "unaligned-rescale-down",
                                      "unaligned-operator-added-downstream", "unaligned-exchange-now-chained",
                                      "unaligned-operator-added-upstream", "unaligned-partitioner-rescale",
                                      "unaligned-partitioner-rescale-rescaled"])
def test_rules_raise_what_flink_raised(release: str, scenario: str) -> None:
    failure, outcome, _ = _run(release, scenario)
    assert (failure.message if failure else None) == _flink_error(outcome)


@pytest.mark.parametrize("release", RELEASES)
def test_records_replayed_into_a_now_keyed_exchange_fail_the_keyed_operator(release: str) -> None:
    failure, outcome, _ = _run(release, "unaligned-partitioner-keyby")
    assert failure is not None and failure.java_class == "java.lang.IllegalArgumentException"
    # which replayed record fails first is a race between subtasks: the numbers differ run to run
    assert re.sub(r"\d+", "N", failure.message) == re.sub(r"\d+", "N", _flink_error(outcome) or "")
    # without the old job's graph the change of partitioner cannot be seen
    assert _run(release, "unaligned-partitioner-keyby", with_old_graph=False)[0] is None


@pytest.mark.parametrize("release", RELEASES)
def test_an_exchange_chained_on_both_sides_is_dropped_and_said_so(release: str) -> None:
    failure, outcome, tasks = _run(release, "unaligned-exchange-now-chained")
    assert failure is None and outcome["restore"]["status"] == "RUNNING"
    per_vertex, _, d = _matched(release, "unaligned-exchange-now-chained")
    graph = load_graph(d / "graph-b.json").graph
    dropped = dropped_channel_state(tasks, ChannelTopology.of(per_vertex, graph))
    assert len(dropped) == 2  # the source's output buffers and the slow operator's input buffers
    operators = {r.node_id: r for restores in per_vertex for r in restores}
    vertices = [r[0].vertex.vertex for r in per_vertex]
    assert any("cannot be restored" in s and "lost" in s for s in explain(operators, vertices, graph))


@pytest.mark.parametrize("release", RELEASES)
def test_the_report_says_in_flight_records_are_replayed(release: str) -> None:
    per_vertex, _, d = _matched(release, "unaligned-rescale-up")
    operators = {r.node_id: r for restores in per_vertex for r in restores}
    text = " ".join(explain(operators, [r[0].vertex.vertex for r in per_vertex], load_graph(d / "graph-b.json").graph))
    assert "unaligned checkpoint" in text and "replays them before any new input" in text
    assert "redistributed by the exchange's partitioner" in text and "cannot be restored" not in text


def test_merged_handles_name_their_channels() -> None:
    """v6 merged handles keep (partition, subpartition) in serializedChannelOffsets: Flink 2.3's source
    subtask 1 had buffers for both downstream subtasks of the rebalance, the slow operator for one channel."""
    per_vertex, _, _ = _matched("2.3.0", "unaligned-identical")
    by_name = {r.old.name: r.old for restores in per_vertex for r in restores if r.old is not None}
    out = by_name["Source: numbers"].subtask_states[1].result_subpartition_state
    assert [ix for h in out for ix in channel_indexes(h)] == [(0, 0), (0, 1)]
    ins = by_name["slow"].subtask_states[0].input_channel_state
    assert all(gate == 0 and channel in (0, 1) for h in ins for gate, channel in channel_indexes(h))
    assert channel_indexes(type("Garbage", (), {"serialized_channel_offsets": b"\x7f\xff\xff\xff\x00"})()) == []

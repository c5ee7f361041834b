"""The gate's consequences for the file connector, against what real Flink did to the records (issue #33), offline.

The savepoints, v2's graphs and the counts under tests/fixtures/file-connector/<release>/<scenario>/ were recorded by
`python -m flink_bridge.file_connector --record` (the runs tests/flink/test_file_connector_restores.py repeats live):
FileSource -> map -> FileSink on Flink 1.20.5 and 2.3.0, a savepoint part-way, v2 with the source's or the sink's uid
changed restored with allowNonRestoredState and run to the end, then the input and the part files counted. Here the
gate (`upgrade-gate check`, as a user runs it) reads each recorded savepoint and graph, and what it says a lost state
does to the data must be what the counts show.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli
from upgrade_gate.gate.state_roles import FILE_SOURCE, stopped_savepoint
from upgrade_gate.storage.savepoints import load_savepoint

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "file-connector"
RELEASES = ("1.20.5", "2.3.0")


def _exported(graph: Path, tmp: Path) -> Path:
    """v2's graph with the `connector` class `upgrade-gate export` writes on its FileSource node (ConnectorDumper:
    the source's class name; the recorded graphs were dumped without it)."""
    doc = json.loads(graph.read_text())
    for node in doc["nodes"]:
        if node.get("factory") == "source":
            node["connector"] = {"class": FILE_SOURCE}
    path = tmp / graph.name
    path.write_text(json.dumps(doc))
    return path


def _recorded(release: str, scenario: str, tmp: Path | None = None) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """What was counted, and the gate's losses by state name (each with the operator it names); with `tmp`, v2's
    graph as the export writes it (`_exported`)."""
    d = FIXTURES / release / scenario
    outcome = json.loads((d / "outcome.json").read_text())
    graph = d / "graph-v2.json" if tmp is None else _exported(d / "graph-v2.json", tmp)
    proc = run_cli("check", "--savepoint", str(d / "savepoint"), "--graph", str(graph),
                   "--allow-non-restored-state", "--flink-version", release.rsplit(".", 1)[0], "--format", "json")
    report = json.loads(proc.stdout)
    assert report["verdict"] == "STATE_LOSS" and report["restore_succeeds"] is True, proc.stdout[-2000:]
    losses = {n: {**x, "who": x["name"] or x["operator_id"]} for x in report["losses"] for n in x["state_names"]}
    return outcome, losses


@pytest.mark.parametrize("release", RELEASES)
def test_source_read_again_means_every_record_read_before_is_committed_twice(release: str, tmp_path: Path) -> None:
    """A FileSource has no startup mode: what the gate says (everything read again, nothing skipped) is what the
    counts show; without the export's connector class it names the startup-mode dependency instead."""
    outcome, losses = _recorded(release, "checkpoint-stop-source", tmp_path)
    c = outcome["counts"]
    assert 0 < c["duplicates"] == outcome["v1_tagged"] and c["missing"] == 0, c
    loss = losses["SourceReaderState"]
    assert loss["role"] == "source position"
    # the class is the new source's, which the lost state was re-keyed away from: found by the uid and name a 2.x
    # savepoint records; a 1.x savepoint records neither (an --old-graph would name the class), so it stays unknown
    said = loss["consequence"]
    if release == "2.3.0":
        assert said == (
            f"source '{loss['who']}' forgets how far it read and reads every file under its paths again from the "
            f"start (a FileSource has no startup mode: its enumerator lists its paths again): records it already read "
            f"are read again (duplicates downstream)")
    else:
        assert "starts wherever its configured startup mode says" in said
    _, unknown = _recorded(release, "checkpoint-stop-source")
    assert "starts wherever its configured startup mode says" in unknown["SourceReaderState"]["consequence"]


@pytest.mark.parametrize("release", RELEASES)
def test_after_stop_with_savepoint_a_sink_that_rolled_on_the_savepoint_loses_nothing(release: str) -> None:
    outcome, losses = _recorded(release, "checkpoint-stop-sink")
    c = outcome["counts"]
    assert (c["missing"], c["duplicates"], c["uncommitted_files"]) == (0, 0, 0), c
    committer = losses["streaming_committer_raw_states"]
    assert committer["role"] == "sink committer"
    assert "so no committed output is lost" in committer["consequence"]
    assert "those records are never committed" not in committer["consequence"]


@pytest.mark.parametrize("release", RELEASES)
def test_after_stop_with_savepoint_a_size_rolled_part_file_is_never_committed(release: str) -> None:
    outcome, losses = _recorded(release, "size-stop-sink")
    c = outcome["counts"]
    assert c["uncommitted_files"] == 1 and 0 < c["missing"] == c["uncommitted_records"] == outcome["v1_tagged"], c
    writer = losses["writer_raw_states"]
    assert writer["role"] == "sink writer"
    assert f"sink '{writer['who']}' loses its in-progress output: records in part files it had not rolled at the " \
           f"stop-with-savepoint" in writer["consequence"]


@pytest.mark.parametrize("release", RELEASES)
def test_after_a_savepoint_without_stop_the_pending_files_are_never_committed(release: str) -> None:
    outcome, losses = _recorded(release, "checkpoint-trigger-sink")
    c = outcome["counts"]
    assert c["uncommitted_files"] >= 1 and 0 < c["missing"] <= c["uncommitted_records"] and c["duplicates"] == 0, c
    committer = losses["streaming_committer_raw_states"]
    assert committer["role"] == "sink committer"
    assert f"sink '{committer['who']}' forgets output it had not committed yet: those records are never committed " \
           f"(pending files stay pending" in committer["consequence"]


@pytest.mark.parametrize("release", RELEASES)
def test_the_savepoint_says_how_it_was_taken(release: str) -> None:
    """`flink stop` writes a synchronous savepoint (post-checkpoint action SUSPEND), a plain savepoint NONE: what the
    gate reads to word a sink's consequence (`state_roles.stopped_savepoint`)."""
    actions = {s: load_savepoint(str(FIXTURES / release / s / "savepoint")).properties
               for s in ("checkpoint-stop-sink", "checkpoint-trigger-sink")}
    assert {s: (p.post_checkpoint_action if p else None) for s, p in actions.items()} == {
        "checkpoint-stop-sink": "SUSPEND", "checkpoint-trigger-sink": "NONE"}
    assert [stopped_savepoint(p.post_checkpoint_action if p else None) for p in actions.values()] == [True, False]
    assert stopped_savepoint(None) is None

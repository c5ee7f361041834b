"""The file connector through an upgrade that re-keys its source or its sink, on real Flink 1.20.5 and 2.3.0 (issue
#33, "State has meaning"): what the gate says losing the state does to the data, against the records on disk.

`flink_bridge.file_connector` runs job v1 (FileSource -> map -> FileSink, numbered lines r000000..r001999) on a
MiniCluster until about a third of the input is read, takes a savepoint, starts v2 (the source's or the sink's uid
changed) from it with allowNonRestoredState and runs it to the end of its bounded input, then counts the input, the
records in committed part files, duplicates, missing records and part files never committed. The gate
(`upgrade-gate check`, as a user runs it) is given the same savepoint and v2's graph (the exporter's SpecDumper).

What real Flink showed, and the gate now says: a re-keyed FileSource reads everything again (each record v1 had read
is committed twice); a re-keyed FileSink after stop-with-savepoint loses nothing when it rolls on every checkpoint
(Flink committed the savepoint's files before v1 stopped), and loses its whole unrolled part file when it rolls on
size (checkpoints before the savepoint do not help); after a savepoint without stop, its pending files are never
committed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from flink_bridge.file_connector import SCENARIOS, run
from tests.conftest import run_cli
from upgrade_gate.storage.savepoints import load_savepoint

pytestmark = pytest.mark.flink
RELEASES = ("1.20", "2.3")
INPUT = 2000


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], dict[str, Any]]:
    """Every scenario on both releases (one MiniCluster per release), with the gate's JSON for its savepoint."""
    root = tmp_path_factory.mktemp("file-connector")
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for version in RELEASES:
        # about 50 s a release on 2 shared cores; once, under a load of 23, a JVM printed nothing for 600 s
        for doc in run(version, SCENARIOS, root / version, timeout=300):
            pointer = str(doc["savepoint"]).removeprefix("file:")
            graph = Path(pointer).parent.parent / "graph-v2.json"
            proc = run_cli("check", "--savepoint", pointer, "--graph", str(graph), "--allow-non-restored-state",
                           "--flink-version", version, "--format", "json")
            assert proc.returncode in (0, 1), proc.stderr
            doc["gate"] = json.loads(proc.stdout)
            doc["checkpoint_id"] = load_savepoint(pointer).checkpoint_id
            found[(version, str(doc["scenario"]))] = doc
    # what was measured, kept beside the runs for a post-mortem (docs/guide.md quotes these counts)
    (root / "outcomes.json").write_text(json.dumps({f"{v}/{s}": d for (v, s), d in found.items()}, indent=1))
    return found


def _loss(doc: dict[str, Any], state: str) -> tuple[dict[str, Any], str]:
    """The gate's loss that names `state`, and the operator it names (a 1.x savepoint records no operator names: the
    gate then names the operator by its id)."""
    (loss,) = [x for x in doc["gate"]["losses"] if state in x["state_names"]]
    return loss, loss["name"] or loss["operator_id"]


@pytest.mark.parametrize("version", RELEASES)
def test_a_rekeyed_file_source_reads_everything_again_as_the_gate_says(
        outcomes: dict[tuple[str, str], dict[str, Any]], version: str) -> None:
    doc = outcomes[(version, "checkpoint-stop-source")]
    c = doc["counts"]
    assert doc["v2_status"] == "FINISHED" and c["input_records"] == INPUT
    # every record v1 had read (and committed at its stop) is committed again by v2, none is missing
    assert c["missing"] == 0 and c["uncommitted_files"] == 0
    assert 0 < c["duplicates"] == doc["v1_tagged"] < INPUT, c
    assert doc["gate"]["verdict"] == "STATE_LOSS"
    loss, name = _loss(doc, "SourceReaderState")
    assert loss["role"] == "source position"
    assert loss["state_roles"] == {"SourceReaderState": "source position", "coordinator": "source enumerator"}
    # v2's graph names the FileSource (ConnectorDumper, as the export writes it); the 1.x savepoint records no uid
    # or name, so which new source the lost state belonged to is not known there and the startup mode is named
    if version.startswith("2."):
        assert loss["consequence"].startswith(f"source '{name}' forgets how far it read and reads every file under "
                                              "its paths again from the start (a FileSource has no startup mode")
    else:
        assert "starts wherever its configured startup mode says" in loss["consequence"]
    assert "records it already read are read again (duplicates downstream)" in loss["consequence"]


@pytest.mark.parametrize("version", RELEASES)
def test_a_rekeyed_file_sink_that_rolls_on_checkpoints_loses_nothing_after_stop_with_savepoint(
        outcomes: dict[tuple[str, str], dict[str, Any]], version: str) -> None:
    doc = outcomes[(version, "checkpoint-stop-sink")]
    c = doc["counts"]
    assert doc["v2_status"] == "FINISHED"
    assert (c["committed_records"], c["duplicates"], c["missing"], c["uncommitted_files"]) == (INPUT, 0, 0, 0), c
    # the state is still dropped (the verdict stands), but the gate no longer says records are never committed
    assert doc["gate"]["verdict"] == "STATE_LOSS"
    committer, name = _loss(doc, "streaming_committer_raw_states")
    assert committer["role"] == "sink committer"
    assert committer["consequence"].startswith(
        f"sink '{name}' forgets committables, but this savepoint was taken by stop-with-savepoint: Flink had the sink "
        f"commit them before the old job stopped, so no committed output is lost")
    writer, name = _loss(doc, "writer_raw_states")
    assert writer["role"] == "sink writer" and writer["consequence"].startswith(f"sink '{name}' loses")
    assert "a sink that rolls on every checkpoint had handed all of it to its committer" in writer["consequence"]


@pytest.mark.parametrize("version", RELEASES)
def test_a_rekeyed_file_sink_that_rolls_on_size_loses_its_whole_open_part_file(
        outcomes: dict[tuple[str, str], dict[str, Any]], version: str) -> None:
    doc = outcomes[(version, "size-stop-sink")]
    c = doc["counts"]
    assert doc["v2_status"] == "FINISHED"
    assert doc["checkpoint_id"] > 2, "v1 took checkpoints before the savepoint"
    # everything v1 wrote stays in one hidden in-progress part file, never committed: checkpoints did not help
    assert c["uncommitted_files"] == 1 and 0 < c["missing"] == c["uncommitted_records"] == doc["v1_tagged"], c
    assert c["duplicates"] == 0 and c["committed_records"] == INPUT - c["missing"]
    writer, name = _loss(doc, "writer_raw_states")
    assert writer["role"] == "sink writer"
    assert writer["consequence"].startswith(
        f"sink '{name}' loses its in-progress output: records in part files it had not rolled at the "
        "stop-with-savepoint (with a size or time rolling policy, everything written since the part file was opened, "
        "across checkpoints) and in open transactions are never committed")


@pytest.mark.parametrize("version", RELEASES)
def test_a_rekeyed_file_sink_after_a_savepoint_without_stop_never_commits_its_pending_files(
        outcomes: dict[tuple[str, str], dict[str, Any]], version: str) -> None:
    doc = outcomes[(version, "checkpoint-trigger-sink")]
    c = doc["counts"]
    assert doc["v1_status"] == "CANCELED" and doc["v2_status"] == "FINISHED"
    # the savepoint's pending file was never committed; what v1 wrote after the savepoint v2 read again
    assert c["duplicates"] == 0 and c["uncommitted_files"] >= 1
    assert 0 < c["missing"] <= c["uncommitted_records"], c
    committer, name = _loss(doc, "streaming_committer_raw_states")
    assert committer["role"] == "sink committer"
    assert committer["consequence"].startswith(
        f"sink '{name}' forgets output it had not committed yet: those records are never committed "
        "(pending files stay pending")

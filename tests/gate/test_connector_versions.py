"""Connector serializer versions (issue #33): the gate reads the version headers of split and enumerator state and
compares them with what the new job's connector reads, and agrees with real restores of a connector-only upgrade.

`python -m flink_bridge.generate_connector_versions` (ConnectorVersions.java) wrote one savepoint per written
version pair with each release and restored them with a source whose split or enumerator serializer is newer (an
upgrade), older (a downgrade) or the same: tests/fixtures/savepoints/connector-versions/outcomes.json. The written
versions and the expected verdicts come from there; the new connector's version is given the two ways a user gives
it: the graph export's `connector` field, or a savepoint the new job version wrote.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest

from upgrade_gate.cli.main import main
from upgrade_gate.flink.connector_state import ConnectorState, read_connector_versions
from upgrade_gate.storage.savepoints import load_savepoint

ROOT = Path(__file__).resolve().parent.parent / "fixtures" / "savepoints" / "connector-versions"
OUTCOMES: list[dict[str, Any]] = json.loads((ROOT / "outcomes.json").read_text())
GRAPH = json.loads((ROOT / "graph.json").read_text())
CONNECTOR = "ugate.savepoints.ConnectorVersions$VersionedSequenceSource"
WRITTEN = {(o["release"], o["savepoint"]): o["written"] for o in OUTCOMES}


def _check(args: list[str]) -> tuple[int, dict[str, Any], str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["check", *args, "--format", "json"])
    return code, (json.loads(out.getvalue()) if code in (0, 1) else {}), err.getvalue()


def _flink(release: str) -> str:
    return ".".join(release.split(".")[:2])


def _graph_with(tmp_path: Path, connector: dict[str, Any]) -> Path:
    """The job's graph with the export's `connector` field on its source (what `upgrade-gate export` records)."""
    doc = json.loads(json.dumps(GRAPH))
    doc["nodes"][0]["connector"] = connector
    path = tmp_path / "graph.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("key", sorted(WRITTEN), ids="/".join)
def test_the_headers_read_are_the_versions_the_source_wrote(key: tuple[str, str]) -> None:
    release, case = key
    found = {w.state: w.versions for w in read_connector_versions(load_savepoint(str(ROOT / release / case)))}
    assert found == {ConnectorState.SPLITS: (WRITTEN[key]["split"],),
                     ConnectorState.ENUMERATOR: (WRITTEN[key]["enumerator"],)}


def _restored_by(outcome: dict[str, Any]) -> str:
    """The fixture the restoring job version wrote itself: its savepoint holds the versions it writes."""
    [case] = [c for (r, c), w in WRITTEN.items() if r == outcome["release"] and w == outcome["restored_with"]]
    return case


@pytest.mark.parametrize("how", ["export", "new-job savepoint"])
@pytest.mark.parametrize("outcome", OUTCOMES,
                         ids=lambda o: f"{o['release']}-{o['savepoint']}-{o['change'].replace(' ', '-')}")
def test_verdict_agrees_with_the_real_restore(outcome: dict[str, Any], how: str, tmp_path: Path) -> None:
    """A downgrade Flink failed at task start is RESTORE_FAILS naming the state, versions and connector; an upgrade
    that restored is SAFE with a warning that the new connector must read the old version; same versions: SAFE."""
    release, new = outcome["release"], outcome["restored_with"]
    args = ["--savepoint", str(ROOT / release / outcome["savepoint"]), "--flink-version", _flink(release)]
    if how == "export":
        args += ["--graph", str(_graph_with(tmp_path, {"class": CONNECTOR, "split_serializer": new["split"],
                                                        "enumerator_serializer": new["enumerator"]}))]
    else:
        args += ["--graph", str(ROOT / "graph.json"),
                 "--new-job-savepoint", str(ROOT / release / _restored_by(outcome))]
    code, doc, err = _check(args)
    assert code in (0, 1), err
    rows = {r["state"]: r for r in doc["serializer_versions"]}
    assert {s: rows[s]["written"] for s in rows} == {"splits": [outcome["written"]["split"]],
                                                     "enumerator": [outcome["written"]["enumerator"]]}
    assert {s: (rows[s]["reader"], rows[s]["reader_from"]) for s in rows} == {
        "splits": (new["split"], how), "enumerator": (new["enumerator"], how)}
    if outcome["status"] == "FAILED":
        assert (code, doc["verdict"], doc["restore_succeeds"]) == (1, "RESTORE_FAILS", False)
        # where Flink failed: SourceOperator#open (splits) or SourceCoordinator#resetToCheckpoint (enumerator)
        state, name, when, role = (("splits", "SourceReaderState", "at task start", "source position")
                                   if "SourceOperator" in outcome["error"] else
                                   ("enumerator", "coordinator", "shortly after the job starts", "source enumerator"))
        assert rows[state]["outcome"] == "reader older"
        assert [r["outcome"] for s, r in rows.items() if s != state] == ["same"]
        assert f"fails {when}" in doc["flink_error"] and name in doc["flink_error"]
        assert f"version {outcome['written']['split' if state == 'splits' else state]}" in doc["flink_error"]
        assert CONNECTOR in doc["flink_error"] or how != "export"
        [loss] = doc["losses"]
        assert loss["state_names"] == [name] and loss["role"] == role
    else:
        assert outcome["status"] == "RUNNING" and outcome["first_number_after_restore"] > 0  # position restored
        assert doc["verdict"] in ("SAFE",) and doc["restore_succeeds"], doc["losses"]
        changed = [r for r in rows.values() if r["outcome"] != "same"]
        for r in changed:
            assert r["outcome"] == "reader newer"
            assert any(f"must read version {r['written'][0]}" in w for w in doc["warnings"])


def test_an_unknown_connector_is_named_unknown_never_safe_by_default() -> None:
    """No export field, no new-job savepoint: the versions are shown and the connector named as unknown."""
    code, doc, err = _check(["--savepoint", str(ROOT / "2.3.0" / "split-v2"), "--graph", str(ROOT / "graph.json"),
                             "--flink-version", "2.3"])
    assert code == 0, err
    assert {r["outcome"] for r in doc["serializer_versions"]} == {"unknown"}
    assert all(r["connector"] is None and r["reader"] is None for r in doc["serializer_versions"])
    # one note with the state types not compared, rendered as a note, never as a pass without saying so
    [said] = [w for w in doc["warnings"] if "connector serializer versions not compared" in w]
    assert said.startswith("state types not compared")
    assert "unknown connector" in said and "SourceReaderState" not in said and "splits v2" in said
    assert doc["state_types_compared"] is False  # the verdict says it compared less


@pytest.mark.parametrize("bad, said", [
    ("v2", "connector must be an object"),
    ({"split_serializer": "2"}, "connector.split_serializer must be a non-negative integer"),
    ({"split_version": 2}, "unknown field 'split_version'"),
    ({"class": "org.apache.flink.connector.kafka.source.KafkaSource", "starting_offsets": "newest"},
     "connector.starting_offsets must be one of earliest, latest, committed, timestamp, specified or null"),
])
def test_a_bad_connector_field_is_exit_2_naming_the_graph(bad: Any, said: str, tmp_path: Path) -> None:
    graph = _graph_with(tmp_path, bad)
    code, _, err = _check(["--savepoint", str(ROOT / "2.3.0" / "split-v1"), "--graph", str(graph),
                           "--flink-version", "2.3"])
    assert code == 2
    assert err.count("\n") == 1 and str(graph) in err and "node 1" in err and said in err
    assert "Traceback" not in err


SINKS: dict[str, dict[str, int]] = json.loads((ROOT / "sinks.json").read_text())


@pytest.mark.parametrize("release", sorted(SINKS))
def test_a_file_sinks_writer_and_committer_headers_are_read(release: str) -> None:
    """A real FileSink savepoint: the writer state's header is the version FileSink#getWriterStateSerializer()
    reported in that run. Its row-format part file was still in progress (DefaultRollingPolicy does not roll on a
    checkpoint), so the committer's state is Flink's CommittableCollectorSerializer layout holding no committable:
    no committable version, and nothing unread."""
    found = {w.state: w for w in read_connector_versions(load_savepoint(str(ROOT / release / "file-sink")))}
    writer, committer = found[ConnectorState.WRITER_STATE], found[ConnectorState.COMMITTABLES]
    assert (writer.state_name, writer.versions) == ("writer_raw_states", (SINKS[release]["writer_state_serializer"],))
    assert (committer.state_name, committer.versions, committer.elements, committer.unread) == (
        "streaming_committer_raw_states", (), 0, None)
    assert found[ConnectorState.SPLITS].versions == (1,)


def test_the_table_shows_each_connector_state_and_the_downgrade(tmp_path: Path) -> None:
    """What a person reading `check` in a terminal sees for the recorded 2.3.0 split downgrade."""
    graph = _graph_with(tmp_path, {"class": CONNECTOR, "split_serializer": 1, "enumerator_serializer": 1})
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(["check", "--savepoint", str(ROOT / "2.3.0" / "split-v2"), "--graph", str(graph),
                     "--flink-version", "2.3", "--format", "table"])
    text = " ".join(out.getvalue().split())
    assert code == 1 and "Connector serializer versions" in text
    assert (f"Source: numbers: SourceReaderState (splits) written v2, new connector reads v1 (export, {CONNECTOR}): "
            f"reader older") in text
    assert "Source: numbers: coordinator (enumerator) written v1, new connector reads v1" in text


COMMITS: list[dict[str, Any]] = json.loads((ROOT / "committables.json").read_text())
COMMIT_GRAPH = json.loads((ROOT / "graph-commit.json").read_text())
SINK = "ugate.savepoints.ConnectorVersions$VersionedCommitSink"


def _commit_graph_with(tmp_path: Path, release: str, committable: int) -> Path:
    """The committing job's graph as the export writes it: every connector node with the versions it reads (the
    writer state's is FileSink's own, as recorded in that run: sinks.json)."""
    doc = json.loads(json.dumps(COMMIT_GRAPH))
    by_id = {n["id"]: n for n in doc["nodes"]}
    by_id[1]["connector"] = {"class": CONNECTOR, "split_serializer": 1, "enumerator_serializer": 1}
    by_id[4]["connector"] = {"class": SINK, "writer_state_serializer": SINKS[release]["writer_state_serializer"],
                             "committable_serializer": committable}
    by_id[5]["connector"] = {"class": SINK, "committable_serializer": committable}
    path = tmp_path / "graph-commit.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("case", sorted({(o["release"], o["savepoint"]) for o in COMMITS}), ids="/".join)
def test_the_committable_version_nested_in_the_committer_state_is_read(case: tuple[str, str]) -> None:
    """Inside Flink's CommittableCollectorSerializer layout (version 2 in 1.20.5 and 2.3.0 alike) the committable's
    own header is the version the sink's committable serializer reported when Flink wrote the savepoint."""
    release, name = case
    [written] = {o["written"]["committable"] for o in COMMITS if (o["release"], o["savepoint"]) == case}
    found = {w.state: w for w in read_connector_versions(load_savepoint(str(ROOT / release / name)))}
    committer = found[ConnectorState.COMMITTABLES]
    assert (committer.state_name, committer.versions, committer.unread) == (
        "streaming_committer_raw_states", (written,), None)
    assert committer.uid in (None, "Sink Committer: files") and committer.elements >= 1


@pytest.mark.parametrize("how", ["export", "new-job savepoint"])
@pytest.mark.parametrize("outcome", COMMITS,
                         ids=lambda o: f"{o['release']}-{o['savepoint']}-{o['change'].replace(' ', '-')}")
def test_committable_verdict_agrees_with_the_real_restore(outcome: dict[str, Any], how: str, tmp_path: Path) -> None:
    """A FileSink whose committable serializer was downgraded: Flink failed the restore (the committer could not read
    a committable written with a newer version), the gate says RESTORE_FAILS on the committer's state; an upgrade or
    the same version restored and ran, the gate says SAFE (the upgrade with a warning)."""
    release, new = outcome["release"], outcome["restored_with"]["committable"]
    args = ["--savepoint", str(ROOT / release / outcome["savepoint"]), "--flink-version", _flink(release)]
    if how == "export":
        args += ["--graph", str(_commit_graph_with(tmp_path, release, new))]
    else:
        [case] = {o["savepoint"] for o in COMMITS if o["written"]["committable"] == new}
        args += ["--graph", str(ROOT / "graph-commit.json"), "--new-job-savepoint", str(ROOT / release / case)]
    code, doc, err = _check(args)
    assert code in (0, 1), err
    [row] = [r for r in doc["serializer_versions"] if r["state"] == "committables"]
    assert (row["written"], row["reader"], row["reader_from"]) == ([outcome["written"]["committable"]], new, how)
    assert [r["outcome"] for r in doc["serializer_versions"] if r["state"] != "committables"] == ["same"] * 3
    if outcome["status"] == "FAILED":
        # Flink's root cause: the connector's serializer refused the committable's version inside
        # CommittableCollectorSerializer (recorded in committables.json)
        assert "CommittableCollectorSerializer" in outcome["error"] and "Unknown version" in outcome["error"]
        assert (code, doc["verdict"], doc["restore_succeeds"], row["outcome"]) == (
            1, "RESTORE_FAILS", False, "reader older")
        assert "streaming_committer_raw_states" in doc["flink_error"] and "CommittableCollectorSerializer" in \
            doc["flink_error"]
        [loss] = doc["losses"]
        assert loss["state_names"] == ["streaming_committer_raw_states"] and loss["role"] == "sink committer"
    else:
        assert outcome["status"] == "RUNNING" and outcome["serializer_threw"] is None
        assert (code, doc["verdict"], doc["restore_succeeds"]) == (0, "SAFE", True), doc["losses"]
        if new > outcome["written"]["committable"]:
            assert row["outcome"] == "reader newer"
            assert any(f"must read version {outcome['written']['committable']}" in w for w in doc["warnings"])
        else:
            assert row["outcome"] == "same"


@pytest.mark.parametrize("key", sorted(WRITTEN), ids="/".join)
def test_versions_read_once_answer_for_the_same_handles_under_a_repairs_new_id(key: tuple[str, str]) -> None:
    """A repair's re-check reads the repaired savepoint, whose operators hold the original's very state handles
    under new IDs (`apply_plan`): the versions it finds in the memo are those a fresh read gives, with the
    operator's new ID, name and uid; and what the memo holds is reused, not read again."""
    from upgrade_gate.repair.rewrite import apply_plan

    release, case = key
    metadata = load_savepoint(str(ROOT / release / case))
    memo: dict[int, Any] = {}
    first = read_connector_versions(metadata, memo=memo)
    assert first == read_connector_versions(metadata) and memo
    source = next(op for op in metadata.operator_states if op.operator_id_hex == first[0].operator_id)
    new_id = bytes(16)
    repaired = apply_plan(metadata, [(source.operator_id, new_id, "renamed source", "new-uid")], [])

    def refuse(ref: Any, limit: int) -> Any:
        raise AssertionError(f"{ref.source} read again")

    again = read_connector_versions(repaired, refuse, memo=memo)
    fresh = read_connector_versions(repaired)
    assert again == fresh
    assert {w.operator_id for w in again if w.state is not ConnectorState.ENUMERATOR} == {new_id.hex()}
    renamed = next(op for op in repaired.operator_states if op.operator_id == new_id)
    # a v5 `_metadata` (Flink 2.x) carries names and uids; Flink 1.20's has none to rename
    assert {(w.name, w.uid) for w in again} == {(renamed.name or None, renamed.uid or None)}
    assert release.startswith("1.") or (renamed.name, renamed.uid) == ("renamed source", "new-uid")

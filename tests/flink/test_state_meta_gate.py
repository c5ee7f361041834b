"""The Kryo 2 -> 5 rule on real savepoints: which states a 1.20 -> 2.x upgrade restores corrupted.

The rule runs in the gate's restore chain exactly as a check runs it (`check.restore_pass`), on the
state-schema fixtures (StateSchemas.java): POJOs with HashMap/ArrayList fields
(keyed value, operator list and broadcast state), a generic HashMap value state and a class with a
registered custom Kryo serializer block; POJOs of
primitives, tuples, rows, enums and Long state do not; an opaque Kryo class is a note. The prediction is
compared with what real Flink did when it restored those savepoints (restores.json).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hashing.readers import load_graph
from hashing.versions import FlinkVersion
from upgrade_gate.flink.state_meta import read_state_schemas
from upgrade_gate.gate import findings
from upgrade_gate.gate.check import restore_pass
from upgrade_gate.gate.inputs import CheckInputs, CheckOptions, side_of
from upgrade_gate.gate.state_schema_rules import crosses_kryo_upgrade, kryo_misreads
from upgrade_gate.storage.savepoints import load_savepoint

ROOT = Path(__file__).resolve().parent.parent / "fixtures" / "savepoints" / "state-schemas"
OTHER_JOB = Path(__file__).resolve().parent.parent / "fixtures" / "restores" / "2.3.0" / "identical" / "graph-b.json"
CORRUPTED = {"pojo-collections", "generic-hashmap", "pojo-list", "rules-pojo", "kryo-custom-serializer"}
SAFE = {"long-value", "pojo-primitives", "tuple", "row", "enum", "long-list", "pojo-map", "reducing-sum", "ttl-value"}


def _findings(savepoint: Path, version: str, graph_file: Path | None = None) -> findings.Findings:
    """The gate's restore chain (the Kryo rule is one of its links), as a check runs it, against the fixture
    job's own graph (StateSchemas.GraphMain, exported by `upgrade-gate export` with Flink `version`)."""
    metadata = load_savepoint(str(savepoint))
    release = {"1.20": "1.20.5", "2.3": "2.3.0"}[version]
    graph = load_graph(graph_file or ROOT / f"graph-{release}.json").graph
    inputs = CheckInputs(metadata, side_of(graph), CheckOptions(flink_version=FlinkVersion.parse(version),
                                                                allow_non_restored_state=True))
    return restore_pass(inputs, inputs.graph, findings.SavepointFacts(metadata), str(savepoint)).found


def _corrupted(found: findings.Findings) -> list[findings.Loss]:
    return [loss for loss in found.losses if "CORRUPTED" in loss.reason]


@pytest.mark.parametrize("case", ["hashmap-canonical-p2", "rocksdb-canonical-p1", "rocksdb-native-p1"])
def test_1_20_savepoint_on_2_3_names_every_corrupted_state(case: str) -> None:
    found = _findings(ROOT / "1.20.5" / case, "2.3")
    corrupted = _corrupted(found)
    assert found.losses == tuple(corrupted) and not found.lost_states  # the job restores: only corruption
    named = {n for loss in corrupted for n in loss.names}
    assert named == CORRUPTED and not named & SAFE
    assert all(not loss.orphaned for loss in corrupted)  # restored, not lost: no pin can route it back
    text = " ".join(loss.reason for loss in corrupted)
    assert "java.util.HashMap" in text and "java.util.ArrayList" in text and "State Processor API" in text
    assert "field counts" in text and "field history" in text
    assert "custom Kryo serializer (ugate.savepoints.StateSchemas$Tagged registered with serializer " \
           "ugate.savepoints.TaggedKryoSerializer)" in text
    notes = [w for w in found.warnings if "kryo-opaque" in w]
    assert len(notes) == 1 and "StateSchemas$Opaque" in notes[0] and "StateSchemas$Tagged registered" in notes[0]


@pytest.mark.parametrize(("release", "version"), [("1.20.5", "1.20"), ("2.3.0", "2.3")])
def test_no_finding_without_crossing_the_kryo_line(release: str, version: str) -> None:
    found = _findings(ROOT / release / "hashmap-canonical-p2", version)
    assert not _corrupted(found) and not [w for w in found.warnings if "Kryo" in w]


def test_state_the_new_job_drops_is_not_called_corrupted() -> None:
    """Checked against another job, every operator's state is dropped (a loss): none is also "corrupted"."""
    found = _findings(ROOT / "1.20.5" / "hashmap-canonical-p2", "2.3", OTHER_JOB)
    assert found.losses and not _corrupted(found)


def test_pure_judgement_and_crossing() -> None:
    metadata = load_savepoint(str(ROOT / "1.20.5" / "hashmap-canonical-p2"))
    assert crosses_kryo_upgrade(metadata, 2) and not crosses_kryo_upgrade(metadata, 1)
    assert not crosses_kryo_upgrade(load_savepoint(str(ROOT / "2.3.0" / "hashmap-canonical-p2")), 2)
    judged = kryo_misreads(read_state_schemas(metadata))
    blocking = {(m.state.name, m.path) for m in judged if m.blocking}
    assert ("pojo-collections", "counts") in blocking and ("pojo-collections", "history") in blocking
    assert ("generic-hashmap", "") in blocking and ("rules-pojo", "counts") in blocking
    assert ("kryo-custom-serializer", "") in blocking
    assert {m.state.name for m in judged if not m.blocking} == {"kryo-opaque"}
    assert all(m.to_json()["kryo_type"] for m in judged)


# which part of the job (StateSchemas.job's `skip` names) holds each state
PART = {"rules-pojo": "broadcast", "pojo-list": "operator", "union-longs": "operator"}
RESTORES = json.loads((ROOT / "restores.json").read_text()) if (ROOT / "restores.json").is_file() else []


def _part(state: str) -> str:
    return PART.get(state, "keyed")


@pytest.mark.parametrize("outcome", RESTORES, ids=lambda o: f"{o['savepoint']}-on-{o['restored_on']}-"
                                                           f"skip-{'+'.join(o['skipped']) or 'none'}")
def test_prediction_agrees_with_what_flink_did(outcome: dict) -> None:  # type: ignore[type-arg]
    """Recorded by `generate_savepoints --state-schema-restores`: real Flink restored each savepoint (whole,
    and part by part) and checked every value. Running: exactly the predicted states are wrong. Failed:
    a predicted state is in the part that was restored."""
    release = outcome["restored_on"].rsplit(".", 1)[0]
    predicted = {n for loss in _corrupted(_findings(ROOT / outcome["savepoint"], release)) for n in loss.names}
    restored_parts = {"keyed", "broadcast", "operator"} - set(outcome["skipped"])
    if outcome["status"] == "RUNNING":
        wrong = {s for s, r in outcome["states"].items() if r != "OK"}
        checked = {s for s in outcome["states"]}
        assert wrong == predicted & checked, outcome
        assert {_part(s) for s in checked} <= restored_parts
    else:
        assert outcome["status"].startswith("FAILED"), outcome
        assert {_part(s) for s in predicted} & restored_parts, outcome


def test_recorded_outcomes_cover_silent_corruption_and_failure() -> None:
    """The record holds what the issue reports: wrong values with the job RUNNING, and failed restores."""
    assert RESTORES, "run python -m flink_bridge.generate_savepoints --state-schema-restores"
    silent = {s for o in RESTORES if o["status"] == "RUNNING" for s, r in o["states"].items() if r.startswith("BAD")}
    assert {"generic-hashmap", "kryo-custom-serializer"} <= silent
    assert any(o["status"].startswith("FAILED") for o in RESTORES)
    controls = [o for o in RESTORES if o["restored_on"] == o["savepoint"].split("/")[0]]
    assert controls and all(set(o["states"].values()) == {"OK"} for o in controls)


@pytest.mark.parametrize("case", ["hashmap-canonical-p2", "rocksdb-native-p1"])
def test_check_says_state_corrupted_crossing_to_2x_and_safe_within_1x(case: str) -> None:
    """What a user runs: `upgrade-gate check` of the 1.20 savepoint against the job exported for 2.3 blocks
    with STATE_CORRUPTED and names the five states; the same savepoint on 1.20 stays SAFE."""
    savepoint = ROOT / "1.20.5" / case
    on_2x = subprocess.run([sys.executable, "-m", "upgrade_gate", "check", "--savepoint", str(savepoint), "--graph",
                            str(ROOT / "graph-2.3.0.json"), "--flink-version", "2.3", "--format", "json"],
                           capture_output=True, text=True, timeout=120)
    assert on_2x.returncode == 1, on_2x.stderr
    doc = json.loads(on_2x.stdout)
    assert doc["verdict"] == "STATE_CORRUPTED" and doc["restore_succeeds"]
    named = {n for x in doc["losses"] if x.get("corrupted") for n in x["state_names"]}
    assert named == CORRUPTED
    on_1x = subprocess.run([sys.executable, "-m", "upgrade_gate", "check", "--savepoint", str(savepoint), "--graph",
                            str(ROOT / "graph-1.20.5.json"), "--flink-version", "1.20", "--format", "json"],
                           capture_output=True, text=True, timeout=120)
    assert on_1x.returncode == 0 and json.loads(on_1x.stdout)["verdict"] == "SAFE", on_1x.stdout[-2000:]

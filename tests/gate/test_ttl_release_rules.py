"""State TTL turned on, turned off or its duration changed: the gate says what real Flink of the new job's release
did (upgrade_gate/gate/release_rules.py).

`python -m flink_bridge.generate_savepoints --ttl-changes` (TtlChanges.java) let job A (TTL off, or 1 day, on a
ValueState, a ListState and a MapState) write a savepoint on Flink 1.20.5 and 2.3.0, HashMap and RocksDB, and
restored it with a job B of the same release whose one state had TTL turned on, off or set to 2 days, reading every
key's values back: RUNNING with each state OK, or Flink's exception. B also wrote a savepoint from scratch: the pair
`check --new-job-savepoint` compares. Expected values are those recordings, never written by hand.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import pytest

from hashing.versions import FlinkVersion
from upgrade_gate.cli.main import main
from upgrade_gate.flink.state_meta import read_state_schemas
from upgrade_gate.gate.release_rules import TTL_RULES, TtlOutcome
from upgrade_gate.gate.state_schema_diff import TTL_OFF, TTL_ON, TtlContext, diff_schemas
from upgrade_gate.storage.savepoints import load_savepoint

ROOT = Path(__file__).resolve().parent.parent / "fixtures" / "savepoints" / "state-schemas" / "ttl"
OUTCOMES = json.loads((ROOT / "outcomes.json").read_text())
GRAPH = ROOT / "graph.json"


def _line(release: str) -> str:
    return ".".join(release.split(".")[:2])


def _restored(outcome: dict) -> bool:  # type: ignore[type-arg]
    """Flink's verdict on the scenario: RUNNING *and* every value read back as written (a reset or wrong value
    would be a restore that lost state, not a successful one)."""
    return outcome["status"] == "RUNNING" and set(outcome["states"].values()) == {"OK"}


def _check(*argv: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["check", *argv, "--format", "json"])
    assert code in (0, 1), err.getvalue()
    return code, json.loads(out.getvalue())


def _id(o: dict) -> str:  # type: ignore[type-arg]
    return f"{o['release']}-{o['backend']}-{o['scenario']}"


@pytest.mark.parametrize("outcome", OUTCOMES, ids=_id)
def test_gate_verdict_agrees_with_the_real_restore(outcome: dict) -> None:  # type: ignore[type-arg]
    """What a user runs: the running job's savepoint, the new job's graph, a savepoint of the new job, its backend
    and release. SAFE exactly where Flink restored every value; RESTORE_FAILS with Flink's own error otherwise."""
    code, doc = _check("--savepoint", str(ROOT / outcome["old_savepoint"]), "--graph", str(GRAPH),
                       "--new-job-savepoint", str(ROOT / outcome["new_savepoint"]),
                       "--flink-version", _line(outcome["release"]), "-D", f"state.backend.type={outcome['backend']}")
    if _restored(outcome):
        assert (code, doc["verdict"]) == (0, "SAFE"), doc["losses"]
    else:
        recorded = re.sub(r"@[0-9a-f]+", "", outcome["status"].removeprefix("FAILED: "))
        assert (code, doc["verdict"], doc["flink_error"]) == (1, "RESTORE_FAILS", recorded)
        [change] = [c for c in doc["schema_changes"] if c["compatibility"] == "INCOMPATIBLE"]
        assert change["state"] == outcome["state_kind"]
        assert outcome["scenario"] in change["changes"][0]["evidence"]


@pytest.mark.parametrize("outcome", OUTCOMES, ids=_id)
def test_schema_diff_agrees_without_a_known_backend(outcome: dict) -> None:  # type: ignore[type-arg]
    """Without the backend every backend's recording must agree; the recorded ones do, so the diff still says what
    Flink did, and a TTL switch is named as such on the state B changed."""
    old = read_state_schemas(load_savepoint(str(ROOT / outcome["old_savepoint"])))
    new = read_state_schemas(load_savepoint(str(ROOT / outcome["new_savepoint"])))
    diffs, _notes = diff_schemas(old, new, None, TtlContext(FlinkVersion.parse(_line(outcome["release"]))))
    assert any(d.blocking for d in diffs) is not _restored(outcome)
    if outcome["change"] == "duration":
        assert diffs == []  # a savepoint records no TTL duration: nothing to compare, and Flink restores it
    else:
        [d] = diffs
        assert d.state == outcome["state_kind"]
        assert d.changes[0].what == (TTL_ON if outcome["change"] == "off-on" else TTL_OFF)


def test_every_table_entry_names_a_recorded_restore_that_agrees() -> None:
    """The table and the recordings are the same facts: each entry's scenario exists, restores where the entry
    says so, and every recording is in the table."""
    recorded = {f"{o['release']}/{o['backend']}/{o['scenario']}": o for o in OUTCOMES}
    for (line, change, kind, backend), rule in TTL_RULES.items():
        o = recorded[rule.scenario]
        assert (_line(o["release"]), o["change"], o["state_kind"], o["backend"]) == (line, change, kind, backend)
        assert (rule.outcome is TtlOutcome.RESTORES) is _restored(o), rule
    assert sorted(r.scenario for r in TTL_RULES.values()) == sorted(recorded)


def test_the_recordings_are_the_issues_facts() -> None:
    """Flink 1.20 refuses turning TTL on or off for every state kind and backend; 2.3 restores every switch with
    the values intact (FLINK-37295); a changed duration restores on both."""
    by = {(o["release"], o["change"]): set() for o in OUTCOMES}
    for o in OUTCOMES:
        by[(o["release"], o["change"])].add(_restored(o))
    assert len(OUTCOMES) == 2 * 2 * 3 * 3
    assert by[("1.20.5", "off-on")] == by[("1.20.5", "on-off")] == {False}
    assert by[("2.3.0", "off-on")] == by[("2.3.0", "on-off")] == {True}
    assert by[("1.20.5", "duration")] == by[("2.3.0", "duration")] == {True}


def test_a_release_without_a_recorded_restore_stays_conservative() -> None:
    """2.1 was not recorded: a TTL switch blocks there and says it was not verified; so does 2.3 restoring a
    savepoint that 1.20 wrote (the recordings are same-release restores)."""
    pair = ["--savepoint", str(ROOT / "2.3.0/rocksdb/1d-1d-1d"), "--graph", str(GRAPH),
            "--new-job-savepoint", str(ROOT / "2.3.0/rocksdb/off-1d-1d"), "-D", "state.backend.type=rocksdb"]
    code, doc = _check(*pair, "--flink-version", "2.1")
    assert (code, doc["verdict"]) == (1, "RESTORE_FAILS")
    [change] = [c for c in doc["schema_changes"] if c["compatibility"] == "INCOMPATIBLE"]
    assert "not verified on this release" in change["changes"][0]["evidence"]
    code, doc = _check("--savepoint", str(ROOT / "1.20.5/rocksdb/1d-1d-1d"), "--graph", str(GRAPH),
                       "--new-job-savepoint", str(ROOT / "2.3.0/rocksdb/off-1d-1d"), "-D",
                       "state.backend.type=rocksdb", "--flink-version", "2.3")
    assert code == 1
    evidence = [c["changes"][0].get("evidence", "") for c in doc["schema_changes"]]
    assert any("not verified on this release" in e and "another release line" in e for e in evidence), evidence

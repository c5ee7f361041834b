"""Issue 8: the gate flags exactly the restores where real Flink handed an operator another operator's state.

In the `misroute-*` scenarios (flink_bridge/java/restores/.../Misroute.java) every stateful user
function writes its own name into its state and, in `initializeState`/`open`, reports the writers
of the values it got back (`values:<state>`). That is the ground truth: a reporter that received
values written by another operator was misrouted by real Flink 1.20.5 / 2.3.0, silently (the job ran).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.restore_support import Scenario, gate_misrouting, real_misrouting, scenarios
from upgrade_gate.storage.check_inputs import check_upgrade
from upgrade_gate.storage.savepoints import load_savepoint
from upgrade_gate.vocabulary import Verdict

ALL = [s for s in scenarios() if s.name.startswith("misroute-")]
MISROUTING = {"misroute-sources-swapped-no-uids", "misroute-keyed-branches-reordered",
              "misroute-map-inserted-shifts-ids"}


def check(sc: Scenario, allow: bool, old: bool) -> Any:
    return check_upgrade(load_savepoint(str(sc.savepoint)), sc.dir / "graph-b.json", flink_version=sc.flink_version,
                         allow_non_restored_state=allow, pointer=sc.pointer,
                         old_graph=sc.dir / "graph-a.json" if old else None)


def test_every_release_has_the_misrouting_scenarios() -> None:
    for release in ("1.20.5", "2.3.0"):
        names = {s.name for s in ALL if s.release == release}
        assert names >= MISROUTING and {"misroute-identical-no-uids", "misroute-sources-swapped-uids",
                                        "misroute-union-inputs-reordered"} <= names, release


@pytest.mark.parametrize("sc", ALL, ids=str)
def test_real_flink_misrouted_exactly_the_expected_scenarios(sc: Scenario) -> None:
    """Ground truth first: what Flink did, from the values the functions got back."""
    run = sc.outcome["restore"]
    if sc.name in MISROUTING:
        assert run["status"] == "RUNNING" and real_misrouting(run), "Flink restored it silently, with wrong state"
    elif run["status"] == "RUNNING":
        assert not real_misrouting(run)
    allow = sc.outcome.get("restore_allow_non_restored_state")
    if allow:
        assert not real_misrouting(allow)


@pytest.mark.parametrize("sc", ALL, ids=str)
def test_with_old_graph_the_gate_flags_exactly_what_flink_misrouted(sc: Scenario) -> None:
    runs = [(False, sc.outcome["restore"])]
    if "restore_allow_non_restored_state" in sc.outcome:
        runs.append((True, sc.outcome["restore_allow_non_restored_state"]))
    for allow, run in runs:
        res = check(sc, allow, old=True)
        real = real_misrouting(run) if run["status"] == "RUNNING" else set()
        if run["status"] != "RUNNING":
            assert res.verdict == Verdict.RESTORE_FAILS
            continue
        assert gate_misrouting(res, set(run["restored"])) == real, allow
        if real:
            assert res.verdict == Verdict.STATE_MISROUTED and res.to_json()["verdict"] == Verdict.STATE_MISROUTED
            assert all(m["evidence"] and m["counterpart"] for m in res.misrouted)
            assert res.verdict_with_remedies == Verdict.SAFE  # the pins, re-simulated with the misrouting check
            assert any(r["action"].startswith("setUidHash(") for r in res.remedies)
        else:
            assert res.verdict != Verdict.STATE_MISROUTED and not res.misrouted


@pytest.mark.parametrize("sc", ALL, ids=str)
def test_without_old_graph_never_silently_safe(sc: Scenario) -> None:
    """2.x savepoints name their operators: same answer as with the old graph. 1.20 (v4) ones do not: a warning."""
    run = sc.outcome["restore"]
    res = check(sc, False, old=False)
    real = real_misrouting(run) if run["status"] == "RUNNING" else set()
    if sc.release.startswith("2."):
        assert gate_misrouting(res, set(run["restored"])) == real
        assert (res.verdict == Verdict.STATE_MISROUTED) == bool(real)
    elif real:
        assert res.verdict == Verdict.SAFE and any("cannot tell" in w for w in res.warnings)


def test_honest_upgrades_stay_safe() -> None:
    for sc in ALL:
        if sc.name in ("misroute-identical-no-uids", "misroute-sources-swapped-uids"):
            for old in (True, False):
                res = check(sc, False, old)
                assert res.verdict == Verdict.SAFE and not res.misrouted, (sc, old)


def test_union_reorder_changes_the_consumer_id_it_does_not_misroute() -> None:
    """V2 mixes input hashes in in-edge order: the union's consumer gets a fresh id (Flink refuses the savepoint)."""
    for sc in (s for s in ALL if s.name == "misroute-union-inputs-reordered"):
        res = check(sc, False, old=True)
        assert res.verdict == Verdict.RESTORE_FAILS and not res.misrouted
        assert check(sc, True, old=True).verdict == "STATE_LOSS"


def test_misrouted_json_names_writer_receiver_and_counterpart() -> None:
    sc = next(s for s in ALL if s.release == "1.20.5" and s.name == "misroute-sources-swapped-no-uids")
    doc = json.loads(json.dumps(check(sc, False, old=True).to_json()))
    assert doc["verdict"] == "STATE_MISROUTED" and doc["restore_succeeds"] and doc["old_graph"] == "job-a"
    by_writer = {m["writer"]["name"]: m for m in doc["misrouted"]}
    assert by_writer["Source: orders"]["receiver"]["name"] == "Source: payments"
    assert by_writer["Source: orders"]["counterpart"] == {**by_writer["Source: orders"]["counterpart"],
                                                          "name": "Source: orders", "matched_by": "name"}
    assert by_writer["Source: orders"]["state_names"] == ["offsets"]
    assert {o["name"] for o in doc["operators"] if o["state_bytes"]} == {"Source: orders", "Source: payments"}


def test_state_declarations_and_key_types_in_the_spec_pick_the_counterpart(tmp_path) -> None:
    """Two same-named uid-less operators: only the spec's declared state/key type tells them apart."""
    sc = next(s for s in ALL if s.release == "2.3.0" and s.name == "misroute-keyed-branches-reordered")
    specs = {}
    for g in ("graph-a.json", "graph-b.json"):
        doc = json.loads((sc.dir / g).read_text())
        for n in doc["nodes"]:
            if n["name"] in ("branch-a", "branch-b"):
                n["state"] = [{"name": "writer", "kind": "value"}, {"name": n["name"] + "-extra", "kind": "value"}]
                n["key_type"] = "Long"
                n["name"] = "branch"  # same name on both: names cannot decide
        specs[g] = tmp_path / g
        specs[g].write_text(json.dumps(doc))
    res = check_upgrade(load_savepoint(str(sc.savepoint)), specs["graph-b.json"], flink_version=sc.flink_version,
                        pointer=sc.pointer, old_graph=specs["graph-a.json"])
    assert res.verdict == Verdict.STATE_MISROUTED and len(res.misrouted) == 2
    assert {m["counterpart"]["matched_by"] for m in res.misrouted} == {"signature"}
    assert any("state:" in e for m in res.misrouted for e in m["evidence"])
    assert res.verdict_with_remedies == Verdict.SAFE


def test_cli_old_graph(cli) -> None:
    sc = next(s for s in ALL if s.release == "1.20.5" and s.name == "misroute-map-inserted-shifts-ids")
    args = ("check", "--savepoint", str(sc.savepoint), "--graph", str(sc.dir / "graph-b.json"),
            "--flink-version", "1.20")
    p = cli(*args)
    assert p.returncode == 0 and "cannot tell" in p.stdout  # v4 savepoint, no old graph: SAFE, with the warning
    p = cli(*args, "--old-graph", str(sc.dir / "graph-a.json"))
    assert p.returncode == 1
    assert p.stdout.startswith("VERDICT: STATE_MISROUTED   (with the remedies below: SAFE)")
    assert "Misrouted state" in p.stdout and 'uid("inserted")' in p.stdout

"""`upgrade-gate repair` against what real Flink did with the savepoints it wrote.

Each committed scenario (`tests/fixtures/repairs/<release>/<scenario>/`, written by
`flink_bridge/generate_repairs.py` from Flink 1.20.5 and 2.3.0) holds job A's savepoint, what Flink did with it
as it was, and what Flink did with the repaired savepoint: started WITHOUT allowNonRestoredState and run to the
end of its 3,200-number input, checking every restored value against its redundant copy. Here the repair runs
again, as a user runs it (the console script), on the committed savepoint: it must write the very bytes Flink
restored, leave the source as it was, and the gate must say of the original what Flink showed.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tests.conftest import TESTS, run_cli

FIXTURES = TESTS / "fixtures" / "repairs"
SCENARIOS = sorted(p for p in FIXTURES.glob("*/*") if (p / "outcome.json").is_file())
CONTROL = [d for d in SCENARIOS if d.name == "identical"]  # nothing to repair: Flink's own baseline
# states the new job no longer declares: Flink restores them anyway (and keeps carrying them); dropped by name
NAMED_DROPS = [d for d in SCENARIOS if d.name == "states-dropped-by-name"]
JOBS = [d for d in SCENARIOS if not d.name.startswith("sql-") and d not in CONTROL]
SQL = [d for d in SCENARIOS if d.name.startswith("sql-")]


def _outcome(d: Path) -> dict:
    return json.loads((d / "outcome.json").read_text())


def _flink_version(d: Path) -> str:
    return ".".join(d.parent.name.split(".")[:2])


def _repair_args(d: Path, out: Path) -> list[str]:
    args = ["repair", "--savepoint", str(d / "savepoint"), "--graph", str(d / "graph-b.json"),
            "--flink-version", _flink_version(d), "--format", "json", "--output", str(out)]
    for a in _outcome(d)["repair"]["arguments"]:
        args += ["--old-graph", str(d / "graph-a.json")] if a == "--old-graph" else [a]
    return args


def _digests(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def test_the_oracle_covers_both_releases_and_every_scenario() -> None:
    from flink_bridge.generate_repairs import CROSS
    from flink_bridge.generate_repairs import SCENARIOS as NAMES

    want = {(r, n) for r in ("1.20.5", "2.3.0") for n in NAMES if n != CROSS} | {("2.3.0", CROSS)}
    assert {(d.parent.name, d.name) for d in SCENARIOS} == want
    assert len(SCENARIOS) - len(CONTROL) >= 24  # repaired savepoints that real Flink restored


@pytest.mark.parametrize("d", JOBS, ids=lambda d: f"{d.parent.name}/{d.name}")
def test_flink_restored_every_value_of_the_repaired_savepoint(d: Path) -> None:
    o = _outcome(d)
    run = o["restore_repaired"]
    assert run["allow_non_restored_state"] is False
    assert run["status"] == "FINISHED", run.get("error_chain")
    t = run["totals"]
    dropped = "--drop" in o["repair"]["arguments"] and d not in NAMED_DROPS  # the whole "lists" operator
    assert t["bad_keys_restored"] == 0 and t["bad_elements_restored"] == 0 and t["bad_keys_at_end"] == 0
    assert t["numbers_restored"] == o["savepoint"]["numbers"]  # every number job A held, and no other
    assert t["numbers_at_end"] == t["numbers_in_input"]  # nothing lost
    assert t["duplicates"] == 0  # the source did not read again what it had read before the savepoint
    assert t["numbers_restored"] + t["records_received"] == t["numbers_in_input"]  # and skipped nothing
    assert t["timers_restored"] == 97 and t["bad_timers_restored"] == 0  # one timer per key, at its key's time
    args = o["repair"]["arguments"]
    if "--max-parallelism" in args:  # the restored job runs with the new max parallelism, every key in its group
        want = int(args[args.index("--max-parallelism") + 1])
        assert {s["max_parallelism"] for s in run["restored"]["counts"]} == {want}
    if not dropped:  # the operator-state functions got their elements back too ("pairs" unless dropped by name)
        restored = run["restored"]["lists"]
        pairs = (lambda s: 0) if d in NAMED_DROPS else (lambda s: s["subtask"] + 2)
        assert all(s["pairs"] == pairs(s) and s["union"] == 2 for s in restored)


@pytest.mark.parametrize("d", CONTROL, ids=lambda d: d.parent.name)
def test_the_control_needs_no_repair_and_flink_restores_it_whole(d: Path, tmp_path: Path) -> None:
    o = _outcome(d)
    assert o["repair"]["exit_code"] == 0 and o["repair"]["output"]["moves"] == [] and "restore_repaired" not in o
    t = o["restore"]["totals"]
    assert o["restore"]["status"] == "FINISHED" and t["duplicates"] == 0 and t["bad_keys_restored"] == 0
    assert t["numbers_restored"] + t["records_received"] == t["numbers_in_input"] == t["numbers_at_end"]
    res = run_cli(*_repair_args(d, tmp_path / "out"))
    assert res.returncode == 0 and json.loads(res.stdout)["written"] is None and not (tmp_path / "out").exists()


@pytest.mark.parametrize("d", SQL, ids=lambda d: f"{d.parent.name}/{d.name}")
def test_flink_restored_the_repaired_sql_state_into_the_operator_the_plan_named(d: Path) -> None:
    o = _outcome(d)
    run = o["restore_repaired"]
    assert run["allow_non_restored_state"] is False and run["status"] == "RUNNING", run.get("error_chain")
    moved = {m["new_operator_id"] for m in o["repair"]["output"]["moves"]}
    assert moved and moved <= set(run["restored_operators"])  # the planner's new operator got the state back
    assert all(v["keyed"] >= 1 for k, v in run["restored_operators"].items() if k in moved)


@pytest.mark.parametrize("d", NAMED_DROPS, ids=lambda d: d.parent.name)
def test_a_state_dropped_by_name_is_gone_after_the_restore_and_the_others_are_whole(d: Path) -> None:
    """Without the repair Flink restores the states the new job no longer declares (the list state is registered
    again, the keyed state holds all 97 keys); after `--drop lists/pairs --drop counts/sum` it holds neither, and
    every other state is restored value for value."""
    o = _outcome(d)
    plain, repaired = o["restore"], o["restore_repaired"]
    assert plain["status"] == "FINISHED" and plain["totals"]["sum_keys_restored"] == 97
    assert all(s["registered"] == "[pairs, union]" for s in plain["restored"]["lists"])
    assert repaired["status"] == "FINISHED" and repaired["totals"]["sum_keys_restored"] == 0
    assert all(s["registered"] == "[union]" and s["union"] == 2 for s in repaired["restored"]["lists"])
    assert sorted(x["part"] for x in o["repair"]["output"]["drops"]) == ["pairs", "sum"]
    check = run_cli("check", "--savepoint", str(d / "savepoint"), "--graph", str(d / "graph-b.json"),
                    "--flink-version", _flink_version(d))
    assert check.returncode == 0  # nothing is lost: the gate lets the upgrade through either way


@pytest.mark.parametrize("d", [d for d in JOBS + SQL if d not in NAMED_DROPS],
                         ids=lambda d: f"{d.parent.name}/{d.name}")
def test_without_the_repair_flink_refuses_or_loses_data_and_the_gate_says_so(d: Path) -> None:
    o = _outcome(d)
    check = run_cli("check", "--savepoint", str(d / "savepoint"), "--graph", str(d / "graph-b.json"),
                    "--flink-version", _flink_version(d), "--format", "json")
    doc = json.loads(check.stdout)
    assert o["restore"]["status"] == "FAILED" and doc["verdict"] == "RESTORE_FAILS" and check.returncode == 1
    if not o["repair"]["arguments"]:  # what the repair needed, check finds alone: it offers the repair
        assert doc["repair"]["repairable"] and doc["repair"]["command"].startswith("upgrade-gate repair")
    if d in JOBS and "--drop" not in o["repair"]["arguments"]:  # what --allowNonRestoredState did to the data
        t = o["restore_allow_non_restored_state"]["totals"]
        emitted = o["savepoint"]["numbers"] + t["records_received"]  # by job A before the savepoint, then by B
        assert t["numbers_at_end"] < t["numbers_in_input"] or emitted > t["numbers_in_input"]  # lost, or read twice


@pytest.mark.parametrize("d", JOBS + SQL, ids=lambda d: f"{d.parent.name}/{d.name}")
def test_repair_writes_the_bytes_flink_restored_and_never_touches_the_source(d: Path, tmp_path: Path) -> None:
    before = _digests(d / "savepoint")
    out = tmp_path / "repaired"
    res = run_cli(*_repair_args(d, out))
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["repairable"] and doc["verified_verdict"] == "SAFE" and doc["verdict_after"] == "SAFE"
    assert (out / "_metadata").read_bytes() == (d / "repaired" / "_metadata").read_bytes()
    written = {p.name for p in out.iterdir()}
    assert written == {p.name for p in (d / "repaired").iterdir()} | (
        {p.name for p in (d / "savepoint").iterdir()} & written)  # no file missing, none extra
    for name in written:  # a copied state file is the source's, a rewritten one what Flink restored
        want = d / "repaired" / name if (d / "repaired" / name).is_file() else d / "savepoint" / name
        assert (out / name).read_bytes() == want.read_bytes(), name
    assert _digests(d / "savepoint") == before
    recorded = _outcome(d)["repair"]["output"]  # the plan Flink's restore proved is the plan made again
    assert (doc["moves"], doc["drops"]) == (recorded["moves"], recorded["drops"])
    progress = [line for line in res.stderr.splitlines() if line.startswith("repair: ")]
    assert "Traceback" not in res.stderr
    if "--max-parallelism" in _outcome(d)["repair"]["arguments"]:  # the slow part says what it finished
        want = _outcome(d)["repair"]["arguments"]
        to = want[want.index("--max-parallelism") + 1]
        assert any("keyed entries and timers moved from max parallelism" in line and line.endswith(f" to {to}")
                   for line in progress), progress

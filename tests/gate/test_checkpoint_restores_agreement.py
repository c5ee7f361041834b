"""The gate agrees with real Flink 1.20.5 and 2.3.0 on restores that are not from plain savepoints.

`tests/fixtures/checkpoints/<release>/` (flink_bridge/generate_checkpoint_restores.py) holds three
families of real restores, each with the snapshot as Flink left it before any restore:

* `finished-*`: a savepoint (and a retained checkpoint) taken after a bounded source finished (FLIP-147);
* `unaligned-*`: an unaligned checkpoint holding in-flight records, restored rescaled, with another
  partitioner, with the exchange now chained, with an operator added at either end;
* `ckpt-*`: retained incremental RocksDB checkpoints (native format, SSTs under `shared/`), restored in
  NO_CLAIM and CLAIM mode, rescaled, and after a uid change.

For every run (and its allowNonRestoredState retry) the gate must say what Flink did: RUNNING or
Flink's own error, which operators got state back and how much per subtask.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from hashing.keygroups import assign_to_key_group
from hashing.readers import load_graph
from upgrade_gate.gate.check import CheckResult
from upgrade_gate.storage.check_inputs import check_upgrade
from upgrade_gate.storage.savepoints import load_savepoint
from upgrade_gate.storage.state_files import external_files
from upgrade_gate.vocabulary import Verdict

ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "checkpoints"
RELEASES = ("1.20.5", "2.3.0")
KEYS = range(10)  # the probe jobs key by v % 10 (flink_bridge/java/restores/common/ugate/checkpoints/Jobs.java)
SCENARIOS = {
    "finished-identical", "finished-identical-from-checkpoint", "finished-chain-split",
    "finished-operator-added-chained", "finished-operator-added-unchained", "finished-rescaled",
    "unaligned-identical", "unaligned-rescale-up", "unaligned-rescale-down", "unaligned-partitioner-keyby",
    "unaligned-partitioner-rescale", "unaligned-partitioner-rescale-rescaled", "unaligned-exchange-now-chained",
    "unaligned-operator-added-upstream", "unaligned-operator-added-downstream",
    "ckpt-no-claim", "ckpt-rescale", "ckpt-uid-changed", "ckpt-claim",
}


@dataclass(frozen=True)
class Case:
    release: str
    name: str
    dir: Path
    outcome: dict[str, Any]

    def check(self, allow: bool) -> CheckResult:
        return check_upgrade(load_savepoint(str((self.dir / self.outcome["fixture"]).resolve())),
                             load_graph(self.dir / "graph-b.json").graph,
                             flink_version=".".join(self.release.split(".")[:2]), allow_non_restored_state=allow,
                             pointer=self.outcome["pointer"], old_graph=load_graph(self.dir / "graph-a.json"))

    def runs(self) -> list[tuple[bool, dict[str, Any]]]:
        out = [(False, self.outcome["restore"])]
        if "restore_allow_non_restored_state" in self.outcome:
            out.append((True, self.outcome["restore_allow_non_restored_state"]))
        return out

    def __str__(self) -> str:
        return f"{self.release}/{self.name}"




def cases(root: Path = ROOT) -> list[Case]:
    return [Case(f.parent.parent.name, f.parent.name, f.parent, json.loads(f.read_text()))
            for f in sorted(root.glob("*/*/outcome.json"))]


CASES = cases()


def root_error(run: dict[str, Any]) -> str | None:
    chain = run.get("error_chain") or []
    return chain[-1]["message"] if chain else None


def same_error(gate: str | None, flink: str | None) -> bool:
    """Flink's exact text; a replayed record's key group is a race between subtasks, so its numbers are not."""
    if gate and flink and flink.startswith("Key group "):
        return re.sub(r"\d+", "N", gate) == re.sub(r"\d+", "N", flink)
    return gate == flink


def row_for(res: CheckResult, probe: str) -> dict[str, Any] | None:
    return next((r for r in res.operators if r["new_node_id"] is not None and r["new_node_name"] == probe), None)


def simulated(row: dict[str, Any] | None, subtask: int, metric: str) -> int:
    """What the gate says one subtask of a probe gets back: list elements, or keys of its key groups."""
    rescale = (row or {}).get("rescale") or {}
    if not rescale or rescale.get("finished_on_restore"):
        return 0
    sub = next((s for s in rescale["subtasks"] if s["index"] == subtask), None)
    if sub is None:
        return 0
    if metric == "list_elements":
        return sub["operator_state"].get("seen", {}).get("elements", 0)
    ranges = [tuple(p["key_groups"]) for p in sub["keyed_from"]]
    maxp = rescale["max_parallelism"]
    return sum(1 for k in KEYS if any(a <= assign_to_key_group(k, maxp, "long") <= b for a, b in ranges))


def test_every_scenario_was_recorded_for_both_releases() -> None:
    for release in RELEASES:
        assert {c.name for c in CASES if c.release == release} == SCENARIOS, release


def disagreements(case: Case) -> list[str]:
    """Where the gate and Flink differ on one scenario (both runs): verdict, error text, state per subtask."""
    out = []
    for allow, run in case.runs():
        res = case.check(allow)
        if res.restore_succeeds != (run["status"] == "RUNNING"):
            out.append(f"allow={allow}: Flink {run['status']} {root_error(run)!r}, gate {res.flink_error!r}")
            continue
        if run["status"] != "RUNNING":
            if res.verdict != Verdict.RESTORE_FAILS or not same_error(res.flink_error, root_error(run)):
                out.append(f"allow={allow}: Flink {root_error(run)!r}, gate {res.verdict} {res.flink_error!r}")
            continue
        for probe, subtasks in run["restored"].items():
            row = row_for(res, probe)
            for sub in subtasks:
                for metric in ("list_elements", "keyed_entries"):
                    if metric in sub and simulated(row, sub["subtask"], metric) != sub[metric]:
                        out.append(f"allow={allow}: {probe}[{sub['subtask']}].{metric}: Flink {sub[metric]}, "
                                   f"gate {simulated(row, sub['subtask'], metric)}")
    return out


@pytest.mark.parametrize("case", CASES, ids=str)
def test_gate_agrees_with_flink(case: Case) -> None:
    assert disagreements(case) == []


@pytest.mark.parametrize("case", [c for c in CASES if c.outcome["restore"]["status"] == "RUNNING"], ids=str)
def test_safe_means_every_value_came_back(case: Case) -> None:
    """Where the gate says SAFE, each probe's restored values add up to what it held in the snapshot."""
    res = case.check(False)
    if res.verdict != Verdict.SAFE:
        return
    snap = case.outcome["snapshot_reports"]
    for probe, subtasks in case.outcome["restore"]["restored"].items():
        if probe in snap:
            assert sum(s["value_sum"] for s in subtasks) == sum(s["value_sum"] for s in snap[probe]), probe


def test_finished_operators_stay_finished_and_the_report_says_so() -> None:
    for case in (c for c in CASES if c.name.startswith("finished-") and c.outcome["restore"]["status"] == "RUNNING"):
        vertices = case.outcome["restore"]["vertices"]
        assert all(state == "FINISHED" for name, state in vertices.items() if "bounded" in name), case
        assert "tag" not in case.outcome["restore"]["restored"]  # a finished operator gets nothing back
        res = case.check(False)
        assert any("had finished before this snapshot" in w and "'tag'" in w for w in res.warnings), case
        assert row_for(res, "tag")["rescale"]["finished_on_restore"] is True


def test_in_flight_records_are_explained() -> None:
    for case in (c for c in CASES if c.name.startswith("unaligned-") and c.outcome["restore"]["status"] == "RUNNING"):
        warnings = case.check(False).warnings
        assert any("unaligned checkpoint" in w and "in-flight records" in w for w in warnings), case
        lost = any("cannot be restored" in w for w in warnings)
        assert lost == (case.name == "unaligned-exchange-now-chained"), case


def test_claim_mode_lets_flink_delete_the_restored_checkpoint_and_no_claim_never_does() -> None:
    """In CLAIM mode Flink owns the restored checkpoint and deleted it once job B's own checkpoints
    subsumed it: its chk-<n>/ and (1.20) the shared SSTs it referenced, which are exactly files inspect
    lists as needed outside the snapshot's directory. NO_CLAIM never deleted anything."""
    for release in RELEASES:
        by_name = {c.name: c for c in CASES if c.release == release}
        case = by_name["ckpt-claim"]
        deleted = case.outcome["snapshot_files_deleted_by_job_b"]
        restored_chk = case.outcome["pointer"].rstrip("/").rsplit("/", 1)[-1]
        chk_dir = (case.dir / case.outcome["fixture"]).resolve()
        needed = {f.path.split("/shared/", 1)[-1] for f in external_files(load_savepoint(str(chk_dir)), str(chk_dir))}
        assert any(f.startswith(restored_chk + "/") for f in deleted), release
        for f in deleted:
            assert f.startswith(restored_chk + "/") or (f.startswith("shared/") and f[len("shared/"):] in needed), f
        for name in SCENARIOS - {"ckpt-claim"}:
            assert by_name[name].outcome["snapshot_files_deleted_by_job_b"] == [], (release, name)

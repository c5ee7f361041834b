"""Flink tier: re-run real restores now (Flink 1.20.5 and 2.3.0) and check the simulator against them.

The committed outcomes are replayed by test_restore_flink_agreement.py; this tier re-creates them
with the jars, so a change in Flink's behaviour or in our generator shows up. Every scenario runs by
default (about 95 s for both releases on 2 cores: one MiniCluster per release, one job at a time);
UPGRADE_GATE_QUICK_RESTORES=1 runs a representative subset (about 65 s).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from flink_bridge.generate_restores import SCENARIOS, generate
from tests.restore_support import AMBIGUOUS, disagreements, gate_misrouting, real_misrouting, root_error, scenarios
from upgrade_gate.storage.check_inputs import check_upgrade
from upgrade_gate.storage.savepoints import load_savepoint

pytestmark = pytest.mark.flink

SUBSET = ("identical", "uid-removed", "rescale-down", "max-parallelism-changed", "parallelism-above-max-parallelism",
          "map-inserted-before-uidless-keyed", "stateful-operator-removed", "cross-version",
          "misroute-sources-swapped-no-uids", "misroute-map-inserted-shifts-ids")


@pytest.mark.timeout(900)
def test_fresh_restores_agree_with_the_simulator(tmp_path: Path) -> None:
    chosen = list(SUBSET) if os.environ.get("UPGRADE_GATE_QUICK_RESTORES") else list(SCENARIOS)
    generate(["1.20", "2.3"], chosen, tmp_path)
    fresh = list(scenarios(tmp_path))
    assert {(s.release, s.name) for s in fresh} == {(r, n) for r in ("1.20.5", "2.3.0") for n in chosen}
    for sc in fresh:
        runs = [(False, sc.outcome["restore"])]
        if "restore_allow_non_restored_state" in sc.outcome:
            runs.append((True, sc.outcome["restore_allow_non_restored_state"]))
        for allow, run in runs:
            res = sc.check(allow)
            assert res.restore_succeeds == (run["status"] == "RUNNING"), (sc, allow)
            if run["status"] == "RUNNING":
                skip = frozenset({"keyed"}) if sc.name in AMBIGUOUS else frozenset()
                assert disagreements(res, run, skip) == [], (sc, allow)
                if sc.name.startswith("misroute-"):  # misrouting: the writers whose values each function got back
                    traced = check_upgrade(load_savepoint(str(sc.savepoint)), sc.dir / "graph-b.json",
                                           flink_version=sc.flink_version, allow_non_restored_state=allow,
                                           pointer=sc.pointer, old_graph=sc.dir / "graph-a.json")
                    assert gate_misrouting(traced, set(run["restored"])) == real_misrouting(run), (sc, allow)
            else:
                assert res.flink_error == root_error(run), (sc, allow)

"""Flink tier: repair savepoints real Flink writes now, and restore them with real Flink now.

The committed outcomes (test_repair_restores.py) are replayed without a JVM; this tier re-creates a
representative subset with the jars (Flink 1.20.5 and 2.3.0), so a change in Flink's behaviour, in our writer or
in the planner shows up: a renamed FLIP-27 source (its enumerator state must survive) and a max-parallelism
rewrite on RocksDB with timers. About 60 s for both releases on 2 cores.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flink_bridge.generate_repairs import main as generate

pytestmark = pytest.mark.flink

SUBSET = ("source-uid-renamed", "max-parallelism-256-to-128-long-keys-rocksdb")


@pytest.mark.timeout(900)
def test_fresh_repairs_restore_completely_in_real_flink(tmp_path: Path) -> None:
    assert generate(["--scenarios", *SUBSET, "--out", str(tmp_path)]) == 0
    for release in ("1.20.5", "2.3.0"):
        for name in SUBSET:
            o = json.loads((tmp_path / release / name / "outcome.json").read_text())
            assert o["restore"]["status"] == "FAILED"  # Flink refuses the savepoint as it is
            assert o["repair"]["exit_code"] == 0, o["repair"]["output"]
            run = o["restore_repaired"]
            assert run["status"] == "FINISHED" and run["allow_non_restored_state"] is False, run.get("error_chain")
            t = run["totals"]
            assert t["bad_keys_restored"] == t["bad_elements_restored"] == t["bad_timers_restored"] == 0
            assert t["numbers_restored"] == o["savepoint"]["numbers"] and t["timers_restored"] == 97
            assert t["numbers_at_end"] == t["numbers_in_input"]
            # The source continues where it was. Now and then Flink's own split hand-over lets a source read a few
            # numbers again in a run whose source state the repair did not touch: 2 once in about 60 restores under a
            # load of 10+, 3 in a CI run on 2026-11-27 (1.20.5, the max-parallelism rewrite, which copies the source's
            # state as it is). A lost enumerator state reads whole splits again (400 numbers each, hundreds in the
            # unrepaired runs), so a handful is Flink's at-least-once hand-over, not a repair that lost a position.
            slack = 10
            assert t["duplicates"] <= slack, t
            assert t["numbers_restored"] + t["records_received"] <= t["numbers_in_input"] + slack, t

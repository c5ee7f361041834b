"""A blocked check's repair offer plans from what the check already did (issue 34: a fleet job's CPU).

`plan_repair(before=result)` finds the check's restore pass and simulations on the facts the result carries
(`gate.check.restore_pass`), and the re-check of the repaired savepoint takes the serialization proxies the check
read (`rules.state_schema.renamed_schemas`). Whatever it reuses, the plan must be the plan made from scratch: the
scenarios are the real-Flink restore oracle's (`tests/fixtures/restores/`), a Flink 1.20 savepoint checked for
Flink 2.3 crossing the Kryo line, so the proxies are read.
"""

from __future__ import annotations

import json

import pytest

from hashing.versions import FlinkVersion
from tests.conftest import TESTS
from upgrade_gate.flink.assignment.load_validation import has_state
from upgrade_gate.flink.metadata.model import CheckpointMetadata
from upgrade_gate.flink.state_meta import read_state_schemas
from upgrade_gate.gate.check import check
from upgrade_gate.gate.findings import SavepointFacts
from upgrade_gate.gate.inputs import CheckInputs, CheckOptions, GraphSide, side_of
from upgrade_gate.gate.rules.state_schema import renamed_schemas
from upgrade_gate.repair.offer import repair_offer
from upgrade_gate.repair.plan import plan_repair
from upgrade_gate.repair.rewrite import apply_plan
from upgrade_gate.storage.objects import read_graph
from upgrade_gate.storage.savepoints import load_savepoint
from upgrade_gate.vocabulary import Verdict

RESTORES = TESTS / "fixtures" / "restores"


def _scenario(release: str, name: str) -> tuple[CheckpointMetadata, GraphSide]:
    d = RESTORES / release / name
    o = json.loads((d / "outcome.json").read_text())
    return load_savepoint(str((d / o["savepoint"]["fixture"]).resolve())), side_of(read_graph(str(d / "graph-b.json")))


def _planned(doc: dict) -> dict:
    return {k: v for k, v in doc.items() if k != "verdict_before"}


@pytest.mark.parametrize("allow", [False, True], ids=["plain", "allowNonRestoredState"])
@pytest.mark.parametrize(("release", "name"), [("1.20.5", "uid-removed"),
                                               ("1.20.5", "map-inserted-before-uidless-keyed"),
                                               ("2.3.0", "sources-swapped-no-uids")])
def test_the_plan_from_the_checks_own_passes_is_the_plan_from_scratch(release: str, name: str, allow: bool) -> None:
    metadata, side = _scenario(release, name)
    options = CheckOptions("v2", "fixed", FlinkVersion.parse("2.3"), allow, rescale_detail=False, with_migration=False)
    checked = check(CheckInputs(metadata, side, options))
    assert checked.verdict is not Verdict.SAFE and checked.facts is not None
    made = set(checked.passes)

    reused = plan_repair(metadata, side, flink_version="2.3", before=checked)
    fresh_metadata, fresh_side = _scenario(release, name)
    fresh = plan_repair(fresh_metadata, fresh_side, flink_version="2.3")

    # the verdict before is the caller's check's (with its allowNonRestoredState); everything planned is the same
    assert reused.to_json()["verdict_before"] is checked.verdict
    assert reused.needed and _planned(reused.to_json()) == _planned(fresh.to_json())
    assert reused.offer() == fresh.offer()
    if not allow:  # the plan's pass is the check's first one: no new pass was made
        assert set(checked.passes) == made
    else:  # without allowNonRestoredState the plan judges another restore, and says so in its own pass
        assert len(checked.passes) == len(made) + 1


def test_a_repaired_savepoint_gets_the_proxies_read_of_the_original_under_its_new_names() -> None:
    metadata, _ = _scenario("1.20.5", "uid-removed")
    facts = SavepointFacts(metadata)
    facts.state_schemas = read_state_schemas(metadata, tolerant=True)
    stateful = [op for op in metadata.operator_states if has_state(op)]
    assert len(stateful) >= 2 and facts.state_schemas
    moved, dropped = stateful[0], stateful[-1]
    repaired = apply_plan(metadata, [(moved.operator_id, bytes(range(16)), "moved", "moved-uid")],
                          [(dropped.operator_id, None)])

    derived = renamed_schemas(facts, repaired)

    assert derived == read_state_schemas(repaired, tolerant=True)
    assert bytes(range(16)).hex() in {s.operator_id for s in derived}
    assert dropped.operator_id_hex not in {s.operator_id for s in derived}


def test_state_rewritten_by_the_repair_is_read_again() -> None:
    metadata, _ = _scenario("1.20.5", "uid-removed")
    facts = SavepointFacts(metadata)
    assert renamed_schemas(facts, metadata) is None  # nothing read yet: nothing to reuse
    facts.state_schemas = read_state_schemas(metadata, tolerant=True)
    keyed = next(op for op in metadata.operator_states
                 if any(s.managed_keyed_state for s in op.subtask_states.values()))
    without_keyed = apply_plan(metadata, [], [(keyed.operator_id, "keyed")])
    assert renamed_schemas(facts, without_keyed) is None


@pytest.mark.parametrize(("release", "name"), [("1.20.5", "uid-removed"),
                                               ("1.20.5", "map-inserted-before-uidless-keyed"),
                                               ("2.3.0", "sources-swapped-no-uids")])
def test_the_offer_from_the_verdict_only_recheck_is_the_offer_of_the_whole_plan(release: str, name: str) -> None:
    """`repair_offer` re-checks the repaired savepoint for its verdict only (no operator rows, no roles): what a
    check's `repair` field says must be what the whole plan says."""
    metadata, side = _scenario(release, name)
    options = CheckOptions("v2", "fixed", FlinkVersion.parse("2.3"), False, rescale_detail=False,
                           with_migration=False)
    offer = repair_offer(check(CheckInputs(metadata, side, options)), metadata, side, flink_version="2.3")
    whole = plan_repair(*_scenario(release, name), flink_version="2.3")
    assert whole.after is not None and whole.after.operators  # the whole re-check, rows and all
    assert offer is not None
    assert {k: v for k, v in offer.items() if k != "command"} == whole.offer()

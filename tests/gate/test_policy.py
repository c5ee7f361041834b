"""allowNonRestoredState never lets state loss through by itself; only a loss waived by name does, and only until
its waiver expires; `fail_on` sets which verdicts block (docs/guide.md, "Recording an intended loss")."""

from __future__ import annotations

import json
from datetime import date
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from upgrade_gate.gate.policy import GatePolicy, blocks, decide
from upgrade_gate.gate.waivers import Waiver
from upgrade_gate.storage.check_inputs import check_upgrade
from upgrade_gate.vocabulary import Verdict

TAGGER = {"operator_id": "f3461f7cdc9907d12524af739f910f5d", "name": "tagger", "uid": "tagger", "bytes": 195,
          "state_names": ["seen"]}
COUNTER = {"operator_id": "0da08f51eaa85fc298e176a139b3649a", "name": "counter", "uid": "counter", "bytes": 1252,
           "state_names": ["keyed"]}


def check(verdict: str, *losses: dict) -> dict:
    return {"verdict": verdict, "losses": list(losses), "operators": []}


def test_safe_passes_without_acceptance():
    d = decide(check("SAFE"))
    assert d.passes and d.reason == "SAFE"


def test_state_loss_blocks_unless_every_loss_is_named():
    assert not decide(check("STATE_LOSS", TAGGER)).passes
    assert not decide(check("STATE_LOSS", TAGGER), ["counter"]).passes
    assert not decide(check("STATE_LOSS", TAGGER, COUNTER), ["tagger"]).passes
    d = decide(check("STATE_LOSS", TAGGER, COUNTER), ["tagger"])
    assert d.unaccepted == ("counter",) and d.reason == "STATE_LOSS not accepted for counter"


def test_a_named_loss_passes_by_uid_name_or_operator_id():
    for accept in (["tagger"], "tagger", "  tagger , other", [TAGGER["operator_id"]]):
        d = decide(check("STATE_LOSS", TAGGER), accept)
        assert d.passes, accept
        assert d.reason == "STATE_LOSS accepted explicitly for tagger"


def test_a_restore_failure_is_never_accepted():
    assert not decide(check("RESTORE_FAILS", TAGGER), ["tagger"]).passes
    assert not decide(check("RESTORE_FAILS"), ["tagger"]).passes


def test_uid_is_found_through_the_operator_rows_when_the_loss_lacks_it():
    loss = {k: v for k, v in TAGGER.items() if k != "uid"} | {"name": "Map"}
    result = {"verdict": "STATE_LOSS", "losses": [loss],
              "operators": [{"operator_id": TAGGER["operator_id"], "uid": "tagger"}]}
    assert decide(result, ["tagger"]).passes


def test_every_verdict_but_safe_blocks_and_severity_orders_them():
    assert [v for v in Verdict if blocks(v)] == [Verdict.STATE_LOSS, Verdict.STATE_MISROUTED, Verdict.STATE_CORRUPTED,
                                                 Verdict.RESTORE_FAILS]
    assert Verdict.worst_first() == (Verdict.RESTORE_FAILS, Verdict.STATE_CORRUPTED, Verdict.STATE_MISROUTED,
                                     Verdict.STATE_LOSS, Verdict.SAFE)
    assert Verdict.mildest_first() == tuple(reversed(Verdict.worst_first()))


def test_corrupted_state_cannot_be_accepted_by_name():
    d = decide(check("STATE_CORRUPTED", TAGGER), accept_state_loss="tagger")
    assert not d.passes and d.reason == "STATE_CORRUPTED"


# ---- thresholds and waivers, on the check JSON of real-Flink fixtures --------------------------------------------
# (tests/fixtures/restores/<release>/<scenario>: savepoints and graphs real Flink wrote and restored)


RESTORES = Path(__file__).resolve().parents[1] / "fixtures" / "restores"
DAY = date(2026, 11, 27)


@cache
def real_check(release: str, scenario: str, allow: bool = True, old_graph: bool = False) -> dict[str, Any]:
    """The product's own check JSON of a real-Flink restore scenario."""
    case = RESTORES / release / scenario
    savepoint = (case / json.loads((case / "outcome.json").read_text())["savepoint"]["fixture"]).resolve()
    extra = {"old_graph": str(case / "graph-a.json")} if old_graph else {}
    return check_upgrade(str(savepoint), case / "graph-b.json", flink_version=release.rsplit(".", 1)[0],
                         allow_non_restored_state=allow, **extra).to_json()


def waiver(operator: str, expires: date | None = date(2026, 12, 31), **kw: Any) -> Waiver:
    return Waiver(operator, "the keyed operator was removed on purpose", "platform team", expires,
                  origin=".upgrade-gate.yaml #1", **kw)


LOSS = ("2.3.0", "uid-removed")  # Flink 2.3 drops the state of the operator whose uid `keyed` went away


def test_the_real_fixtures_are_what_these_tests_assume():
    assert real_check(*LOSS)["verdict"] == "STATE_LOSS"
    assert [(x["uid"], x["state_names"]) for x in real_check(*LOSS)["losses"]] == [("keyed", ["keyed"])]
    assert real_check(*LOSS, allow=False)["verdict"] == "RESTORE_FAILS"
    assert real_check("2.3.0", "misroute-sources-swapped-no-uids", old_graph=True)["verdict"] == "STATE_MISROUTED"


def test_fail_on_blocks_only_at_or_above_its_level():
    loss = real_check(*LOSS)
    misrouted = real_check("2.3.0", "misroute-sources-swapped-no-uids", False, True)
    refused = real_check(*LOSS, allow=False)
    passes = {(name, level): decide(c, fail_on=level, today=DAY).passes
              for name, c in (("loss", loss), ("misrouted", misrouted), ("refused", refused))
              for level in ("STATE_LOSS", "STATE_MISROUTED", "RESTORE_FAILS")}
    assert passes == {("loss", "STATE_LOSS"): False, ("loss", "STATE_MISROUTED"): True,
                      ("loss", "RESTORE_FAILS"): True,
                      ("misrouted", "STATE_LOSS"): False, ("misrouted", "STATE_MISROUTED"): False,
                      ("misrouted", "RESTORE_FAILS"): True,
                      ("refused", "STATE_LOSS"): False, ("refused", "STATE_MISROUTED"): False,
                      ("refused", "RESTORE_FAILS"): False}
    d = decide(loss, fail_on="RESTORE_FAILS", today=DAY)
    assert d.line == "passes: STATE_LOSS is below --fail-on RESTORE_FAILS"
    assert d.to_json()["verdict"] == "STATE_LOSS" and d.to_json()["fail_on"] == "RESTORE_FAILS"


def test_a_waiver_lets_a_real_state_loss_through_by_uid_or_operator_id():
    loss = real_check(*LOSS)
    lost_id = loss["losses"][0]["operator_id"]
    for name in ("keyed", lost_id):
        d = decide(loss, waivers=[waiver(name)], today=DAY)
        assert d.passes and d.effective is Verdict.SAFE and d.accepted == ("keyed",), name
        assert d.line.startswith(f"passes: STATE_LOSS waived for {name} (.upgrade-gate.yaml #1, by platform team, "
                                 "until 2026-12-31)")
        assert d.to_json()["waived"][0]["reason"] == "the keyed operator was removed on purpose"


def test_an_expired_waiver_blocks_again_and_is_named():
    loss = real_check(*LOSS)
    w = waiver("keyed", expires=date(2026, 11, 26))
    assert decide(loss, waivers=[w], today=date(2026, 11, 26)).passes  # the expiry day itself still applies
    d = decide(loss, waivers=[w], today=DAY)
    assert not d.passes and d.expired == (w,) and d.unaccepted == ("keyed",)
    assert d.line == ("blocks: STATE_LOSS is at or above --fail-on STATE_LOSS; not waived: keyed; expired waiver "
                      "keyed (.upgrade-gate.yaml #1, by platform team, expired after 2026-11-26)")
    assert d.to_json()["expired"] == [w.to_json()]


def test_a_waiver_of_one_state_covers_only_that_state():
    loss = real_check("1.20.5", "source-uid-removed")  # the source loses its reader state and its coordinator's
    op = loss["losses"][0]["operator_id"]
    assert loss["losses"][0]["state_names"] == ["SourceReaderState", "coordinator"]
    d = decide(loss, waivers=[waiver(op, state="SourceReaderState")], today=DAY)
    assert not d.passes and d.unaccepted == (f"{op}/coordinator",)
    both = [waiver(op, state="SourceReaderState"), waiver(op, state="coordinator")]
    assert decide(loss, waivers=both, today=DAY).passes


def test_misrouted_state_and_a_refused_restore_cannot_be_waived():
    misrouted = real_check("2.3.0", "misroute-sources-swapped-no-uids", False, True)
    d = decide(misrouted, waivers=[waiver("Source: payments")], today=DAY)
    assert not d.passes and d.effective is Verdict.STATE_MISROUTED
    assert d.not_waivable and all("is STATE_MISROUTED, and only STATE_LOSS can be waived" in n for n in d.not_waivable)
    refused = real_check(*LOSS, allow=False)
    d = decide(refused, waivers=[waiver("keyed")], today=DAY)
    assert not d.passes and d.effective is Verdict.RESTORE_FAILS
    assert "no waiver lets a refused restore through" in d.line


def test_accept_state_loss_is_a_waiver_without_expiry():
    loss = real_check(*LOSS)
    assert decide(loss, ["keyed"], today=date(2999, 1, 1)) == decide(loss, waivers=[Waiver("keyed", "accept_state_loss",
                                                                                           "this run", None)],
                                                                    today=date(2999, 1, 1))
    assert decide(loss, "keyed").passes and decide(loss, "keyed").reason == "STATE_LOSS accepted explicitly for keyed"


@pytest.mark.parametrize(("job", "passes"), [("ledger-rollup", True), ("orders", False), (None, False)])
def test_a_waiver_for_one_job_applies_to_that_job_only(job, passes):
    gating = GatePolicy((waiver("keyed", job="ledger-rollup"),), today=DAY)
    assert gating.decide(real_check(*LOSS), job=job).passes is passes


def test_a_uid_names_the_loss_of_a_savepoint_that_records_no_uids():
    """Flink 1.20 savepoints carry operator ids only: the waiver's uid matches through the id Flink derives from it."""
    loss = real_check("1.20.5", "uid-removed")
    assert (loss["losses"][0]["uid"], loss["losses"][0]["name"]) == (None, None)
    d = decide(loss, waivers=[waiver("keyed")], today=DAY)
    assert d.passes and d.accepted == (loss["losses"][0]["operator_id"],)
    assert not decide(loss, waivers=[waiver("lists")], today=DAY).passes


def test_a_waiver_that_matches_nothing_at_risk_is_named_as_stale():
    """A waiver whose loss is gone (or whose name is misspelt) would otherwise sit in the file until it silently
    waives some later, unintended loss of that name: the decision names it, in its line and its JSON."""
    loss = real_check(*LOSS)
    stale, used = waiver("old-dedup"), waiver("keyed")
    d = decide(loss, waivers=[used, stale], today=DAY)
    assert d.passes and d.unmatched == (stale,)
    assert d.line.endswith("; waiver old-dedup (.upgrade-gate.yaml #1, by platform team, until 2026-12-31) matches "
                           "nothing at risk (stale?)")
    assert d.to_json()["unmatched"] == [stale.to_json()]
    other_state = waiver("keyed", state="not-this-one")
    assert decide(loss, waivers=[other_state], today=DAY).unmatched == (other_state,)
    # a waiver that names misrouted state cannot apply, and says so: it is not also called stale
    misrouted = real_check("2.3.0", "misroute-sources-swapped-no-uids", False, True)
    assert decide(misrouted, waivers=[waiver("Source: payments")], today=DAY).unmatched == ()
    # a check scoped to one job does not call another job's (job-less) waiver stale; its own job's, it does
    scoped = GatePolicy((stale, waiver("gone", job="ledger-rollup")), today=DAY).decide(loss, job="ledger-rollup")
    assert [w.operator for w in scoped.unmatched] == ["gone"]
    assert decide(real_check("2.3.0", "rescale-up"), waivers=[used], today=DAY).unmatched == (used,)

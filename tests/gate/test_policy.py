"""allowNonRestoredState never lets state loss through by itself; only a loss accepted by name does."""

from __future__ import annotations

from upgrade_gate.gate.policy import blocks, decide
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

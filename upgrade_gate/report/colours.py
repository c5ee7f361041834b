"""Verdict colours: one table, so a verdict reads alike wherever it is coloured (the check's HTML report, the fleet
page and the Airflow views built on them)."""

from __future__ import annotations

from typing import Any

from upgrade_gate.vocabulary import Verdict

__all__ = ["UNKNOWN_COLOUR", "VERDICT_COLOURS", "colour"]

# One colour per verdict, used by every badge, bar, graph highlight and the fleet table. The fleet's
# gate words (PASS/BLOCK) and an unchecked job (ERROR) borrow the colour of what they mean.
VERDICT_COLOURS: dict[str, str] = {Verdict.SAFE: "#2e7d32", Verdict.STATE_LOSS: "#e65100",
                                   Verdict.STATE_MISROUTED: "#8e24aa", Verdict.STATE_CORRUPTED: "#ad1457",
                                   Verdict.RESTORE_FAILS: "#c62828"}
_ALIASES = {"PASS": Verdict.SAFE, "BLOCK": Verdict.RESTORE_FAILS}
UNKNOWN_COLOUR = "#757575"


def colour(verdict: Any) -> str:
    v = str(verdict or "")
    return VERDICT_COLOURS.get(_ALIASES.get(v, v), UNKNOWN_COLOUR)

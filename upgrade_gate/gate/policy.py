"""Gate policy, in one function: may this upgrade go ahead?

`allowNonRestoredState` alone never lets an upgrade through: it only turns "Flink refuses the
savepoint" into "Flink starts and silently drops state", which is the surprise the gate exists to
prevent. A run may still drop state on purpose (an operator was removed and its state is
obsolete) by naming it in `accept_state_loss`: operator uids, names or operator ids. The upgrade
passes only if the verdict is STATE_LOSS (Flink will start) and *every* lost operator is named;
one unnamed loss, misrouted state or a restore that would fail still blocks.

Used by the single-job gate, the rolling upgrade, the fleet scan and the alerts alike: nothing
else decides whether a verdict blocks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from upgrade_gate.vocabulary import Verdict

__all__ = ["GateDecision", "blocks", "decide"]


@dataclass(frozen=True)
class GateDecision:
    passes: bool
    verdict: Verdict
    accepted: tuple[str, ...] = ()
    unaccepted: tuple[str, ...] = ()

    @property
    def reason(self) -> str:
        if self.verdict is Verdict.SAFE:
            return str(Verdict.SAFE)
        if self.passes:
            return f"STATE_LOSS accepted explicitly for {', '.join(self.accepted)}"
        if self.verdict is Verdict.STATE_LOSS:
            return f"STATE_LOSS not accepted for {', '.join(self.unaccepted)}"
        return str(self.verdict)


def blocks(verdict: str) -> bool:
    """Does this verdict, with no loss accepted, stop the upgrade (and so raise an alert)?"""
    return Verdict(verdict).blocks


def _names(value: str | Iterable[str] | None) -> set[str]:
    if not value:
        return set()
    items = value.split(",") if isinstance(value, str) else value
    return {str(v).strip() for v in items if str(v).strip()}


def decide(check: Mapping[str, Any], accept_state_loss: str | Iterable[str] | None = None) -> GateDecision:
    """Does a `check` result (its JSON form: `CheckResult.to_json()`, a fleet row, an XCom) let the
    upgrade through, given the losses accepted by name?"""
    verdict = Verdict(str(check.get("verdict")))
    if not verdict.blocks:
        return GateDecision(True, verdict)
    accept = _names(accept_state_loss)
    uids = {o.get("operator_id"): o.get("uid") for o in check.get("operators", []) if isinstance(o, dict)}
    accepted, unaccepted = [], []
    for loss in check.get("losses", []):
        if not isinstance(loss, dict):
            continue
        uid = loss.get("uid") or uids.get(loss.get("operator_id"))
        keys = {loss.get("operator_id"), loss.get("name"), uid} - {None, ""}
        label = str(uid or loss.get("name") or loss.get("operator_id"))
        (accepted if keys & accept else unaccepted).append(label)
    passes = verdict is Verdict.STATE_LOSS and bool(accepted) and not unaccepted
    return GateDecision(passes, verdict, tuple(accepted), tuple(unaccepted))

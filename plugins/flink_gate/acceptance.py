"""Explicitly accepted state loss: the only way a non-SAFE verdict may pass the gate.

`allowNonRestoredState` alone never lets an upgrade through: it only turns "Flink refuses the
savepoint" into "Flink starts and silently drops state", which is the surprise the gate exists
to prevent. A run may still drop state on purpose (an operator was removed and its state is
obsolete) by naming it in `accept_state_loss`: a list of operator uids, names or operator ids.
The upgrade passes only if the verdict is STATE_LOSS (Flink will start) and *every* lost
operator is named; one unnamed loss, or a restore that would fail, still blocks.

No Airflow import: used by the rollout, the upgrade step and tests alike.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class GateDecision:
    passes: bool
    verdict: str
    accepted: tuple[str, ...] = ()
    unaccepted: tuple[str, ...] = ()

    @property
    def reason(self) -> str:
        if self.verdict == "SAFE":
            return "SAFE"
        if self.passes:
            return f"STATE_LOSS accepted explicitly for {', '.join(self.accepted)}"
        if self.verdict == "STATE_LOSS":
            return f"STATE_LOSS not accepted for {', '.join(self.unaccepted)}"
        return self.verdict


def _names(value: str | Iterable[str] | None) -> set[str]:
    if not value:
        return set()
    items = value.split(",") if isinstance(value, str) else value
    return {str(v).strip() for v in items if str(v).strip()}


def decide(check: dict[str, Any], accept_state_loss: str | Iterable[str] | None = None) -> GateDecision:
    """Does the core's `check` result (design §4.2) let the upgrade through, given the accepted losses?"""
    verdict = str(check.get("verdict"))
    if verdict == "SAFE":
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
    passes = verdict == "STATE_LOSS" and bool(accepted) and not unaccepted
    return GateDecision(passes, verdict, tuple(accepted), tuple(unaccepted))

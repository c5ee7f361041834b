"""A waiver: a state loss the team intends, recorded in the repository with a reason, an owner and an expiry.

Read from `.upgrade-gate.yaml` by `upgrade_gate.storage.waivers`; judged by `upgrade_gate.gate.policy.decide`, the
one place that says whether an upgrade goes ahead (docs/guide.md, "Recording an intended loss"). Only a loss can be
waived: dropped state is a choice a team can make, while state restored into the wrong operator, misread bytes or a
refused restore are never what anyone intended.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date
from typing import Any

__all__ = ["Waiver", "accepting"]


@dataclass(frozen=True, slots=True)
class Waiver:
    """One intended loss. `operator`: a uid, a name or an operator id (as `accept_state_loss` names them);
    `state`: only this state of the operator, else every state it loses; `expires`: the last day the waiver applies
    (None only for a run's own `accept_state_loss`, which lives as long as that run); `job`: only this fleet job, else
    any; `origin`: where it was written, so a blocked gate can point at the entry."""

    operator: str
    reason: str
    who: str
    expires: date | None
    state: str | None = None
    job: str | None = None
    origin: str = ""

    def expired(self, today: date) -> bool:
        """After its expiry day the waiver no longer applies (it applies on the day itself)."""
        return self.expires is not None and today > self.expires

    def for_job(self, job: str | None) -> bool:
        """A waiver for one job applies to that job only: a check that names no job (the CLI without `--job`)
        gets the waivers without `job`, so one job's intended loss never waives another's."""
        return self.job is None or self.job == job

    def to_json(self) -> dict[str, Any]:
        return {"operator": self.operator, "state": self.state, "job": self.job, "reason": self.reason,
                "who": self.who, "expires": self.expires.isoformat() if self.expires else None,
                "origin": self.origin}

    def label(self, *, expired: bool = False) -> str:
        """How a report names it: what it waives, where it is written, who owns it and its last day."""
        what = f"{self.operator}/{self.state}" if self.state else self.operator
        until = f", {'expired after' if expired else 'until'} {self.expires.isoformat()}" if self.expires else ""
        return f"{what} ({self.origin}, by {self.who}{until})" if self.origin else what


def accepting(names: str | Iterable[str] | None) -> tuple[Waiver, ...]:
    """A run's `accept_state_loss` (operator uids, names or ids, a list or a comma-separated string) as waivers
    without expiry, so the Airflow parameter and the file are decided by the same code."""
    if not names:
        return ()
    items = names.split(",") if isinstance(names, str) else names
    return tuple(Waiver(n, "accept_state_loss", "this run", None) for n in
                 dict.fromkeys(str(v).strip() for v in items) if n)

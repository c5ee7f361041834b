"""Gate policy, in one function: may this upgrade go ahead?

`allowNonRestoredState` alone never lets an upgrade through: it only turns "Flink refuses the
savepoint" into "Flink starts and silently drops state", which is the surprise the gate exists to
prevent. A team may still drop state on purpose (an operator was removed and its state is obsolete)
by waiving that loss (`upgrade_gate.gate.waivers`): in `.upgrade-gate.yaml`, with a reason, an owner
and an expiry, or for one Airflow run in `accept_state_loss` (waivers without expiry). A STATE_LOSS
whose every lost state is waived counts as SAFE; one unwaived loss, misrouted or corrupted state or
a restore that would fail is never waived (docs/guide.md, "Recording an intended loss").

`fail_on` is the team's threshold (`--fail-on`): the upgrade blocks only when the verdict left after
the waivers is at least that severe (`Verdict.severity`), so a team can start by blocking only
refused restores and misrouting, and tighten to STATE_LOSS later.

Used by the CLI, the single-job gate, the rolling upgrade, the fleet scan and the alerts alike:
nothing else decides whether a verdict blocks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

from hashing.murmur import uid_hash
from upgrade_gate.gate.waivers import Waiver, accepting
from upgrade_gate.vocabulary import Verdict

__all__ = ["DEFAULT_FAIL_ON", "DEFAULT_POLICY", "FAIL_ON_LEVELS", "GateDecision", "GatePolicy", "blocks", "decide"]

DEFAULT_FAIL_ON = Verdict.STATE_LOSS
FAIL_ON_LEVELS: tuple[Verdict, ...] = tuple(v for v in Verdict.mildest_first() if v.blocks)


@dataclass(frozen=True)
class GateDecision:
    """`verdict`: the check's; `effective`: what is left once the waivers are applied (SAFE when every loss is
    waived); `accepted` / `unaccepted`: the lost operators (or `operator/state`) waived and not waived;
    `waived`: the waivers that applied; `expired`: waivers that would have applied but are past their day;
    `not_waivable`: waivers that name state no waiver can cover, with why; `unmatched`: live waivers meant for this
    check that name nothing it found at risk (stale: the loss they were written for is gone, or they are misspelt),
    so a team notices them before they silently waive some later, unintended loss."""

    passes: bool
    verdict: Verdict
    accepted: tuple[str, ...] = ()
    unaccepted: tuple[str, ...] = ()
    effective: Verdict | None = None
    fail_on: Verdict = DEFAULT_FAIL_ON
    waived: tuple[Waiver, ...] = ()
    expired: tuple[Waiver, ...] = ()
    not_waivable: tuple[str, ...] = ()
    unmatched: tuple[Waiver, ...] = ()

    @property
    def left(self) -> Verdict:
        return self.verdict if self.effective is None else self.effective

    @property
    def reason(self) -> str:
        """Why, in a few words (the rolling upgrade's record, the stop reason)."""
        if self.verdict is Verdict.SAFE:
            return str(Verdict.SAFE)
        if self.accepted and self.left is Verdict.SAFE:
            return f"STATE_LOSS accepted explicitly for {', '.join(self.accepted)}"
        if self.passes:
            return f"{self.verdict} is below the threshold {self.fail_on}"
        if self.verdict is Verdict.STATE_LOSS:
            expired = f"; expired: {'; '.join(w.label(expired=True) for w in self.expired)}" if self.expired else ""
            return f"STATE_LOSS not accepted for {', '.join(self.unaccepted)}{expired}"
        return str(self.verdict)

    @property
    def line(self) -> str:
        """The one line a report adds under its verdict: what the gate decided, and why."""
        if self.passes:
            if self.verdict is Verdict.SAFE:
                head = f"passes: {self.verdict}"
            elif self.left is Verdict.SAFE:
                head = f"passes: {self.verdict} waived for {', '.join(w.label() for w in self.waived)}"
            else:
                head = f"passes: {self.left} is below --fail-on {self.fail_on}"
        else:
            head = f"blocks: {self.left} is at or above --fail-on {self.fail_on}"
            if self.unaccepted and self.verdict is Verdict.STATE_LOSS:
                head += f"; not waived: {', '.join(self.unaccepted)}"
        extra = ([f"expired waiver {w.label(expired=True)}" for w in self.expired] + list(self.not_waivable)
                 + [f"waiver {w.label()} matches nothing at risk (stale?)" for w in self.unmatched])
        return "; ".join([head, *extra])

    def to_json(self) -> dict[str, Any]:
        """The `gate` object of `check --format json`."""
        return {"passes": self.passes, "verdict": str(self.left), "fail_on": str(self.fail_on),
                "decision": self.line, "waived": [w.to_json() for w in self.waived],
                "expired": [w.to_json() for w in self.expired], "unwaived": list(self.unaccepted),
                "not_waivable": list(self.not_waivable), "unmatched": [w.to_json() for w in self.unmatched]}


@dataclass(frozen=True)
class GatePolicy:
    """A team's policy as one value a front end carries to where it decides (a Spark executor, one job of a
    rollout): its waivers, its threshold, and the day, fixed once so every job of a run is judged on the same day."""

    waivers: tuple[Waiver, ...] = ()
    fail_on: Verdict = DEFAULT_FAIL_ON
    today: date | None = None

    def decide(self, check: Mapping[str, Any], *, job: str | None = None) -> GateDecision:
        return decide(check, waivers=self.waivers, fail_on=self.fail_on, today=self.today, job=job)


DEFAULT_POLICY = GatePolicy()  # no waivers, any non-SAFE verdict blocks, judged on the day it is decided


def blocks(verdict: str) -> bool:
    """Does this verdict, with no loss accepted, stop the upgrade (and so raise an alert)?"""
    return Verdict(verdict).blocks


def _keys(row: Mapping[str, Any], uids: Mapping[Any, Any]) -> set[str]:
    uid = row.get("uid") or uids.get(row.get("operator_id"))
    return {str(k) for k in (row.get("operator_id"), row.get("name"), uid) if k}


def _misrouted_keys(row: Mapping[str, Any]) -> set[str]:
    """Every name a misrouted state goes by: its operator id, and the writer's and receiver's names and uids."""
    keys = _keys(row, {})
    for side in ("writer", "receiver"):
        part = row.get(side)
        if isinstance(part, dict):
            keys |= {str(part[k]) for k in ("name", "uid") if part.get(k)}
    return keys


def _rows(check: Mapping[str, Any], key: str) -> list[dict[str, Any]]:
    return [r for r in check.get(key, []) if isinstance(r, dict)]


def decide(check: Mapping[str, Any], accept_state_loss: str | Iterable[str] | None = None, *,
           waivers: Iterable[Waiver] = (), fail_on: Verdict | str = DEFAULT_FAIL_ON, today: date | None = None,
           job: str | None = None) -> GateDecision:
    """Does a `check` result (its JSON form: `CheckResult.to_json()`, a fleet row, an XCom) let the upgrade through,
    given the intended losses (`waivers`, and a run's `accept_state_loss`), the threshold `fail_on` and the day
    (`today`, the UTC date unless given)? `job` selects the waivers of one fleet job."""
    verdict = Verdict(str(check.get("verdict")))
    fail_on = Verdict(str(fail_on))
    today = today or datetime.now(UTC).date()
    candidates = [w for w in (*accepting(accept_state_loss), *waivers) if w.for_job(job)]
    live = [w for w in candidates if not w.expired(today)]
    stale = [w for w in candidates if w.expired(today)]
    uids = {o.get("operator_id"): o.get("uid") for o in _rows(check, "operators")}
    misrouted = _rows(check, "misrouted")
    misrouted_ids = {r.get("operator_id") for r in misrouted}

    # a waiver names an operator by uid, name or id; a uid also by the id Flink derives from it
    # (`StreamGraphHasherV2#generateUserSpecifiedHash`), since savepoints before Flink 2.0 record no uids
    names = {w: {w.operator, uid_hash(w.operator).hex()} for w in candidates}

    def covering(pool: list[Waiver], keys: set[str], state: str | None) -> list[Waiver]:
        return [w for w in pool if names[w] & keys and (w.state is None or w.state == state)]

    accepted, unaccepted, not_waivable = [], [], []
    used: dict[Waiver, None] = {}
    expired: dict[Waiver, None] = {}
    for loss in _rows(check, "losses"):
        keys = _keys(loss, uids)
        label = str(loss.get("uid") or uids.get(loss.get("operator_id")) or loss.get("name") or loss.get("operator_id"))
        if loss.get("corrupted") or loss.get("operator_id") in misrouted_ids:
            kind = Verdict.STATE_CORRUPTED if loss.get("corrupted") else Verdict.STATE_MISROUTED
            not_waivable += [f"waiver {w.label()} cannot be applied: {label} is {kind}, and only STATE_LOSS "
                             f"can be waived" for w in covering(live, keys, None)]
            unaccepted.append(label)
            continue
        states = [str(s) for s in loss.get("state_names") or []] or [None]
        missing = []
        for state in states:
            found = covering(live, keys, state)
            used.update(dict.fromkeys(found))
            if not found:
                missing.append(state)
                expired.update(dict.fromkeys(covering(stale, keys, state)))
        if not missing:
            accepted.append(label)
        else:
            unaccepted.append(label if missing == states else ", ".join(f"{label}/{s}" for s in missing))
    named: dict[Waiver, None] = {}  # live waivers that name something at risk, applied or not
    for loss in _rows(check, "losses"):
        keys, states = _keys(loss, uids), {str(s) for s in loss.get("state_names") or []}
        named.update(dict.fromkeys(w for w in live if names[w] & keys and (w.state is None or not states
                                                                           or w.state in states)))
    for row in misrouted:
        keys = _misrouted_keys(row)
        label = str(row.get("uid") or row.get("name") or row.get("operator_id"))
        hits = [w for w in live if names[w] & keys]
        named.update(dict.fromkeys(hits))
        not_waivable += [f"waiver {w.label()} cannot be applied: {label} is {Verdict.STATE_MISROUTED}, and only "
                         f"STATE_LOSS can be waived" for w in hits]
    # a waiver without `job:` in a check scoped to one job may be meant for another job of the fleet: not stale here
    unmatched = tuple(w for w in live if w not in named and w not in used and (w.job is not None or job is None))
    if verdict is Verdict.RESTORE_FAILS and used:
        not_waivable.append("the restore is refused (RESTORE_FAILS): no waiver lets a refused restore through")
    all_waived = verdict is Verdict.STATE_LOSS and bool(accepted) and not unaccepted
    effective = Verdict.SAFE if all_waived else verdict
    return GateDecision(effective.severity < fail_on.severity, verdict, tuple(accepted), tuple(unaccepted),
                        effective, fail_on, tuple(used), tuple(expired), tuple(dict.fromkeys(not_waivable)),
                        unmatched)

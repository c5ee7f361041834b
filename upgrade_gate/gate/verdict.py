"""`decide`: the one place a check's verdict is made, from the findings that carry their own.

Precedence (`Verdict.severity`), worst first: RESTORE_FAILS > STATE_CORRUPTED > STATE_MISROUTED > STATE_LOSS > SAFE.
Misrouting outranks loss because it is silent twice over: the job runs, and an operator works on another
operator's data; corruption outranks both (the state arrives where it belongs and is wrong); a refused restore
outranks everything, because nothing else happens. Alerts, reports and the fleet read the verdict a check
decided; none of them re-derives it.
"""

from __future__ import annotations

from collections.abc import Iterable

from upgrade_gate.gate.findings import Finding
from upgrade_gate.vocabulary import Verdict

__all__ = ["decide"]


def decide(findings: Iterable[Finding]) -> Verdict:
    worst = Verdict.SAFE
    for f in findings:
        if f.verdict.severity > worst.severity:
            worst = f.verdict
    return worst

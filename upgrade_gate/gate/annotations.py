"""What the gate adds to a finding after the rule chain, as values attached to frozen findings, never edits of their
JSON: a SQL operator's query terms (`Loss.sql`, `Misrouted.sql`, `MeaningChanged.sql`, `Loss.sql_remedy`:
`upgrade_gate.gate.sql_explain`, `upgrade_gate.gate.sql_remedies`) and what each state does for the job and what
losing it does to the data (`roles`: `upgrade_gate.gate.state_roles`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["SqlContext", "SqlRemedy", "StateRoles"]


@dataclass(frozen=True, slots=True)
class SqlContext:
    """Which statement and operator a state belongs to: `statement` the sink(s) downstream (`INSERT INTO totals`),
    `operator` its kind and key, `state` what that kind keeps, `why` (None without the old query's graph) whether and
    why its operator ID changed."""

    statement: str | None
    operator: str
    state: str
    why: str | None

    def to_json(self) -> dict[str, Any]:
        return {"statement": self.statement, "operator": self.operator, "state": self.state, "why": self.why}


@dataclass(frozen=True)
class SqlRemedy:
    cause: str  # query-to-plan | statement-set-gains-insert | join-condition | mini-batch | agg-phase | shape | unknown
    keeps_state: bool
    text: str  # what to do, or that nothing keeps the state and what is lost
    apply: str | None = None  # the SQL to apply (None: no remedy)
    proven_by: str | None = None  # the sql-remedy-* scenario whose real restore kept the state

    def to_json(self) -> dict[str, Any]:
        return {"cause": self.cause, "keeps_state": self.keeps_state, "text": self.text, "apply": self.apply,
                "proven_by": self.proven_by}


@dataclass(frozen=True, slots=True)
class StateRoles:
    """The role of each state a finding names (`states`: (name, role)), the most consequential of them (`role`),
    and what losing them does to the data, one sentence per role (`consequence`)."""

    role: str
    consequence: str
    states: tuple[tuple[str, str], ...]

    def to_json(self) -> dict[str, Any]:
        return {"role": self.role, "consequence": self.consequence, "state_roles": dict(self.states)}

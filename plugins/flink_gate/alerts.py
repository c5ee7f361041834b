"""The alert a blocked upgrade sends: one payload, rendered as JSON, Slack text and e-mail.

Built only from the core's `CheckResult.to_json()` (the `check` contract, docs/design.md), so
every channel says the same thing: the job, the verdict, the operators and state names at risk with
their bytes, the remedies, Flink's own error when the restore would fail, and a link to the
report. A SAFE verdict has no alert (`build_alert` returns None): an upgrade that passes is quiet.

Job, operator and state names are chosen by whoever wrote the job, so each channel quotes them
in its own syntax: Slack text is mrkdwn-escaped (`slack_escape`: `<!channel>` or `<url|text>` in a
name must not ping a channel or draw a link), the e-mail is HTML-escaped, and the webhook JSON
carries the exact names (its receivers get data, not markup).

No Airflow import here: the notifiers and the tests share this module.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any

from upgrade_gate.gate import policy
from upgrade_gate.report.sizes import human_bytes
from upgrade_gate.vocabulary import Verdict


def slack_escape(text: str) -> str:
    """Slack's escaping of message text: `&`, `<`, `>` as `&amp;`, `&lt;`, `&gt;` (and nothing else).

    Slack parses `<...>` as a control sequence (a mention, `<!channel>`, or a link `<url|label>`);
    escaped, it shows the characters as typed. `&` first, so an escape is not escaped twice."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


@dataclass(frozen=True)
class OperatorAtRisk:
    operator_id: str
    name: str
    lost_bytes: int
    state_names: tuple[str, ...]
    reason: str
    consequence: str = ""  # what the data goes through: the check's `losses[].consequence` (gate.state_roles)


@dataclass(frozen=True)
class GateAlert:
    job: str
    verdict: str
    run_id: str
    dag_id: str
    savepoint: str
    report_url: str
    flink_error: str | None
    bytes_at_risk: int
    operators: tuple[OperatorAtRisk, ...]
    remedies: tuple[str, ...]
    extra: dict[str, Any] = field(default_factory=dict)
    # `repair` of the check (upgrade_gate/repair/offer.py): a new savepoint that would make the upgrade SAFE
    repair: dict[str, Any] | None = None

    @property
    def repair_text(self) -> str | None:
        r = self.repair
        if not r:
            return None
        if r.get("repairable"):
            return (f"Repairable without changing the job (a new savepoint; this one is not modified): "
                    f"{r.get('command')}")
        return f"A repair of the savepoint needs a decision first: {(r.get('needs') or ['see the report'])[0]}"

    @property
    def title(self) -> str:
        what = Verdict(self.verdict).outcome if self.verdict in Verdict.__members__ else Verdict.STATE_LOSS.outcome
        return f"[upgrade gate] {self.job}: {self.verdict} — the upgrade {what}; it was blocked"

    def to_payload(self) -> dict[str, Any]:
        """The generic webhook body (stable field names: receivers script against them)."""
        return {
            "event": "flink_upgrade_blocked",
            "title": self.title,
            "job": self.job,
            "verdict": self.verdict,
            "dag_id": self.dag_id,
            "run_id": self.run_id,
            "savepoint": self.savepoint,
            "flink_error": self.flink_error,
            "bytes_at_risk": self.bytes_at_risk,
            "operators": [{"operator_id": o.operator_id, "name": o.name, "lost_bytes": o.lost_bytes,
                           "state_names": list(o.state_names), "reason": o.reason, "consequence": o.consequence}
                          for o in self.operators],
            "remedies": list(self.remedies),
            "repair": self.repair,
            "report_url": self.report_url,
            "text": self.to_text(),
        }

    def to_slack_text(self) -> str:
        """`to_text` as Slack mrkdwn: every character a name holds is shown, nothing is parsed."""
        return slack_escape(self.to_text())

    def to_text(self) -> str:
        """Plain text for the task log and the webhook's `text` field (exact, unescaped names)."""
        lines = [self.title, f"Savepoint: {self.savepoint}"]
        if self.flink_error:
            lines.append(f"Flink would say: {self.flink_error}")
        lines.append(f"State at risk: {_human_bytes(self.bytes_at_risk)} in {len(self.operators)} operator(s)")
        for o in self.operators:
            states = ", ".join(o.state_names) if o.state_names else "(state names not recorded)"
            lines.append(f"  • {o.name} [{o.operator_id}]: {_human_bytes(o.lost_bytes)} — states: {states}"
                         + (f" — {o.reason}" if o.reason else ""))
            if o.consequence:
                lines.append(f"    what the data goes through: {o.consequence}")
        if self.remedies:
            lines.append("Remedies:")
            lines.extend(f"  • {r}" for r in self.remedies)
        if self.repair_text:
            lines.append(self.repair_text)
        lines.append(f"Report: {self.report_url}")
        return "\n".join(lines)

    def to_html(self) -> str:
        """E-mail body."""
        rows = "".join(
            f"<tr><td>{html.escape(o.name)}</td><td><code>{html.escape(o.operator_id)}</code></td>"
            f"<td>{html.escape(', '.join(o.state_names))}</td><td>{int(o.lost_bytes)}</td>"
            f"<td>{html.escape(o.reason)}</td><td>{html.escape(o.consequence)}</td></tr>" for o in self.operators)
        remedies = "".join(f"<li>{html.escape(r)}</li>" for r in self.remedies)
        err = f"<p>Flink would say: <code>{html.escape(self.flink_error)}</code></p>" if self.flink_error else ""
        return (f"<h2>{html.escape(self.title)}</h2><p>Savepoint: <code>{html.escape(self.savepoint)}</code></p>{err}"
                f"<table border='1' cellpadding='4'><tr><th>operator</th><th>id</th><th>states</th>"
                f"<th>bytes at risk</th><th>why</th><th>what the data goes through</th></tr>{rows}</table>"
                f"<h3>Remedies</h3><ul>{remedies}</ul>"
                + (f"<p>{html.escape(self.repair_text)}</p>" if self.repair_text else "")
                + f"<p><a href='{html.escape(self.report_url)}'>Full report</a></p>")


def _human_bytes(n: int) -> str:
    """Human size, with the exact count beside it above a KiB (people compare alerts with `inspect`)."""
    return human_bytes(n) if n < 1024 else f"{human_bytes(n)} ({n} B)"


def _text(item: Any) -> str:
    """A remedy or loss may be a string or an object; show objects by their most telling field."""
    if isinstance(item, str):
        return item
    if isinstance(item, dict) and item.get("action"):  # upgrade_gate.gate.remedies.Remedy.to_json()
        where = item.get("node_name") or item.get("operator_id") or "?"
        why = f" ({item['reason']})" if item.get("reason") else ""
        return f"{where}: {item['action']}{why}"
    if isinstance(item, dict):
        for key in ("text", "message", "description", "remedy", "summary"):
            if isinstance(item.get(key), str):
                return item[key]
        return ", ".join(f"{k}={v}" for k, v in item.items() if v not in (None, [], {}))
    return str(item)


def _names(val: Any) -> list[str]:
    if isinstance(val, dict):
        return [str(k) for k in val]
    if isinstance(val, list):
        return [v if isinstance(v, str) else str(v.get("name", v)) if isinstance(v, dict) else str(v) for v in val]
    return [val] if isinstance(val, str) else []


def operators_at_risk(result: dict[str, Any]) -> tuple[OperatorAtRisk, ...]:
    """Operators whose state the upgrade would drop (or that make the restore fail).

    `losses[]` is the authority (one entry per lost piece: bytes, state names, reason); the
    `operators[]` rows only add names and catch a lost byte count without a loss entry."""
    names_by_id = {str(o.get("operator_id")): o for o in result.get("operators", []) if isinstance(o, dict)}
    grouped: dict[str, dict[str, Any]] = {}
    for loss in result.get("losses", []):
        if not isinstance(loss, dict):
            continue
        oid = str(loss.get("operator_id"))
        g = grouped.setdefault(oid, {"name": loss.get("name") or names_by_id.get(oid, {}).get("name") or "?",
                                     "bytes": 0, "states": [], "reasons": [], "consequences": []})
        g["bytes"] += int(loss.get("bytes", loss.get("lost_bytes", 0)) or 0)
        g["states"].extend(_names(loss.get("state_names") or loss.get("states")))
        if loss.get("reason"):
            g["reasons"].append(str(loss["reason"]))
        if loss.get("consequence"):
            g["consequences"].append(str(loss["consequence"]))
    for oid, op in names_by_id.items():
        lost = int(op.get("lost_bytes") or 0)
        if lost and oid not in grouped:
            grouped[oid] = {"name": op.get("name") or "?", "bytes": lost, "states": _names(op.get("state_names")),
                            "reasons": [], "consequences": []}
    return tuple(OperatorAtRisk(oid, str(g["name"]), int(g["bytes"]), tuple(dict.fromkeys(g["states"])),
                                "; ".join(dict.fromkeys(g["reasons"])), "; ".join(dict.fromkeys(g["consequences"])))
                 for oid, g in grouped.items())


def build_alert(result: dict[str, Any], *, job: str, run_id: str, dag_id: str, savepoint: str,
                report_url: str) -> GateAlert | None:
    """The alert for a check result, or None when the upgrade may go ahead: SAFE, or its `gate` decision
    (`upgrade_gate.gate.policy.decide` with the run's waivers) passes."""
    verdict = str(result.get("verdict"))
    decided = result.get("gate")
    if not policy.blocks(verdict) or (isinstance(decided, dict) and decided.get("passes") is True):
        return None
    ops = operators_at_risk(result)
    return GateAlert(job=job, verdict=verdict, run_id=run_id, dag_id=dag_id, savepoint=savepoint,
                     report_url=report_url, flink_error=result.get("flink_error"),
                     bytes_at_risk=sum(o.lost_bytes for o in ops), operators=ops,
                     remedies=tuple(_text(r) for r in result.get("remedies", [])), repair=result.get("repair"))


WORST_SHOWN = 10  # jobs named in a fleet digest; the summary page lists every one


@dataclass(frozen=True)
class FleetDigest:
    """One alert for a whole fleet scan (issue 32: a 1,000-job scan sent 290 alerts, one per blocked job):
    counts by verdict, the worst jobs first (the most severe verdict, then the most state at risk), and the
    link to the summary page, which searches, filters and pages every job. Rendered by the same notifiers as
    `GateAlert` (the same attributes), so each channel gets one message per scan."""

    EVENT = "flink_fleet_scan_blocked"

    run_id: str
    dag_id: str
    jobs: int
    blocked: int
    verdicts: dict[str, int]
    bytes_at_risk: int
    worst: tuple[dict[str, Any], ...]
    report_url: str
    repairable: int = 0
    unchecked: int = 0
    roles: dict[str, int] = field(default_factory=dict)  # role of the state at risk -> blocked jobs (gate.state_roles)

    @property
    def job(self) -> str:
        return "fleet scan"

    @property
    def verdict(self) -> str:
        return f"{self.blocked} of {self.jobs} jobs BLOCKED"

    @property
    def title(self) -> str:
        counts = ", ".join(f"{v} {n}" for v, n in sorted(self.verdicts.items()) if v != "SAFE" and n)
        return (f"[upgrade gate] fleet scan: {self.blocked} of {self.jobs} jobs BLOCKED ({counts}), "
                f"{_human_bytes(self.bytes_at_risk)} at risk")

    def to_payload(self) -> dict[str, Any]:
        return {"event": self.EVENT, "title": self.title, "dag_id": self.dag_id, "run_id": self.run_id,
                "jobs": self.jobs, "blocked": self.blocked, "verdicts": dict(self.verdicts),
                "bytes_at_risk": self.bytes_at_risk, "repairable": self.repairable, "unchecked": self.unchecked,
                "roles": dict(self.roles), "worst": [dict(w) for w in self.worst], "report_url": self.report_url,
                "text": self.to_text()}

    def to_text(self) -> str:
        lines = [self.title]
        if self.roles:
            lines.append("At risk: " + ", ".join(f"{role} in {n} job(s)" for role, n in self.roles.items()))
        if self.repairable:
            lines.append(f"{self.repairable} of them repairable by `upgrade-gate repair` (see each job's report)")
        if self.unchecked:
            lines.append(f"{self.unchecked} job(s) could not be checked")
        lines.append(f"Worst {len(self.worst)}:" if self.blocked > len(self.worst) else "Blocked:")
        for w in self.worst:
            lines.append(f"  • {w['job']}: {w['verdict']}, {_human_bytes(int(w.get('bytes_at_risk') or 0))} at risk"
                         f" — {w.get('report_url', '')}")
        lines.append(f"Summary (every job, searchable): {self.report_url}")
        return "\n".join(lines)

    def to_slack_text(self) -> str:
        return slack_escape(self.to_text())

    def to_html(self) -> str:
        rows = "".join(
            f"<tr><td><a href='{html.escape(str(w.get('report_url', '')))}'>{html.escape(str(w['job']))}</a></td>"
            f"<td>{html.escape(str(w['verdict']))}</td><td>{_human_bytes(int(w.get('bytes_at_risk') or 0))}</td></tr>"
            for w in self.worst)
        return (f"<h2>{html.escape(self.title)}</h2><table border='1' cellpadding='4'><tr><th>job</th><th>verdict</th>"
                f"<th>at risk</th></tr>{rows}</table>"
                f"<p><a href='{html.escape(self.report_url)}'>Fleet summary: every job</a></p>")

    @classmethod
    def from_payload(cls, payload: dict[str, Any]) -> FleetDigest:
        return cls(run_id=payload["run_id"], dag_id=payload["dag_id"], jobs=int(payload["jobs"]),
                   blocked=int(payload["blocked"]), verdicts=dict(payload["verdicts"]),
                   bytes_at_risk=int(payload["bytes_at_risk"]), worst=tuple(payload["worst"]),
                   report_url=payload["report_url"], repairable=int(payload.get("repairable") or 0),
                   unchecked=int(payload.get("unchecked") or 0), roles=dict(payload.get("roles") or {}))


def worst_jobs(rows: list[dict[str, Any]], limit: int = WORST_SHOWN) -> list[dict[str, Any]]:
    """The blocked fleet rows, worst first: the most severe verdict (`Verdict.severity`), then the most bytes."""

    def severity(row: dict[str, Any]) -> int:
        try:
            return Verdict(str(row["verdict"])).severity
        except ValueError:  # ERROR: the job could not be checked
            return 0

    blocked = [r for r in rows if severity(r) > 0]  # SAFE is 0; so is a job that could not be checked
    return sorted(blocked, key=lambda r: (-severity(r), -int(r.get("bytes_at_risk") or 0), str(r["job"])))[:limit]


def alert_from_payload(payload: dict[str, Any]) -> GateAlert | FleetDigest:
    """Re-create an alert from its webhook payload (the notifiers get it through XCom)."""
    if payload.get("event") == FleetDigest.EVENT:
        return FleetDigest.from_payload(payload)
    ops = tuple(OperatorAtRisk(o["operator_id"], o["name"], int(o["lost_bytes"]), tuple(o["state_names"]),
                               o.get("reason", ""), o.get("consequence", "")) for o in payload["operators"])
    return GateAlert(job=payload["job"], verdict=payload["verdict"], run_id=payload["run_id"],
                     dag_id=payload["dag_id"], savepoint=payload["savepoint"], report_url=payload["report_url"],
                     flink_error=payload.get("flink_error"), bytes_at_risk=int(payload["bytes_at_risk"]),
                     operators=ops, remedies=tuple(payload["remedies"]), repair=payload.get("repair"))

"""A check as SARIF 2.1.0 (OASIS Static Analysis Results Interchange Format): `check --format sarif`, for GitHub code
scanning (`github/codeql-action/upload-sarif`) and every tool that reads the standard.

Rule ids are `risks.RULES`' (one per kind of finding), never renamed. `partialFingerprints` are a hash of the rule id,
the savepoint operator ID and the state names only, never a path or a size, so the same finding is the same alert
across runs, branches and checkouts: code scanning closes it when it goes away and does not reopen a dismissed one.
Every result is located on the file the user changed (the graph spec or the FlinkDeployment). `level` follows the
verdict: a blocking finding is an `error`, a warning a `warning`, the rest a `note`.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from pathlib import PurePath
from typing import Any
from urllib.parse import quote

from upgrade_gate.report.risks import RULES, Risk, risks, summary_line

__all__ = ["FINGERPRINT", "SCHEMA_URI", "fingerprint", "render_sarif"]

SCHEMA_URI = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
# the format's version, as the schema's address names it (a bare "2.1.0" would read as a Flink release:
# tests/test_release_table.py)
SARIF_VERSION = SCHEMA_URI.split("/sarif/v", 1)[1].split("/", 1)[0]
FINGERPRINT = "upgradeGateFinding/v1"
_VOLATILE = re.compile(r"\S*[/\\]\S*|\d+(?:\.\d+)?")  # paths and numbers: not part of a warning's identity


def fingerprint(r: Risk) -> str:
    """sha256 of what identifies a finding: rule id, operator ID, state names (a configuration finding: its key; a
    warning: its words without paths and numbers)."""
    if r.operator_id is not None:
        what = [r.operator_id, *sorted(r.state_names)]
    elif r.rule.startswith("config-"):
        what = [r.name or ""]
    elif r.rule == "gate-warning":
        what = [" ".join(_VOLATILE.sub("", r.message).split())]
    else:
        what = []
    return hashlib.sha256("\0".join((r.rule, *what)).encode("utf-8")).hexdigest()


def _uri(file: str) -> str:
    """A path as a URI reference: relative paths stay relative (to the repository root, where code scanning
    resolves them), absolute ones become `file://` URIs."""
    p = PurePath(file)
    return p.as_uri() if p.is_absolute() else quote(p.as_posix())


def _rule(rule_id: str) -> dict[str, Any]:
    info = RULES[rule_id]
    return {"id": rule_id, "name": "".join(w.capitalize() for w in rule_id.split("-")),
            "shortDescription": {"text": info.title}, "fullDescription": {"text": info.description},
            "defaultConfiguration": {"level": info.level}}


def _result(r: Risk, index: int, file: str | None) -> dict[str, Any]:
    where = f"{r.label} [{r.operator_id}]: " if r.operator_id else ""
    result: dict[str, Any] = {
        "ruleId": r.rule, "ruleIndex": index, "level": "error" if r.verdict.blocks else r.level,
        "message": {"text": f"{where}{r.message}"
                    + (f"\n{r.details}" if r.details and r.details != r.message else "")},
        "partialFingerprints": {FINGERPRINT: fingerprint(r)},
        "properties": {"verdict": str(r.verdict), "operator_id": r.operator_id, "operator": r.name,
                       "state_names": list(r.state_names), "bytes": r.nbytes, "role": r.role,
                       "consequence": r.consequence}}
    if file:
        result["locations"] = [{"physicalLocation": {"artifactLocation": {"uri": _uri(file)}}}]
    return result


def render_sarif(doc: Mapping[str, Any], file: str | None) -> dict[str, Any]:
    """The SARIF log of a check's JSON document `doc`; `file`: the path every result is located on."""
    found = risks(doc)
    used = list(RULES)  # every rule, so a rule keeps its index from run to run
    index = {rule: i for i, rule in enumerate(used)}
    return {"$schema": SCHEMA_URI, "version": SARIF_VERSION, "runs": [{
        "tool": {"driver": {"name": "upgrade-gate", "rules": [_rule(rule) for rule in used]}},
        "results": [_result(r, index[r.rule], file) for r in found],
        "properties": {"verdict": str(doc["verdict"]), "summary": summary_line(doc), "graph": doc["graph"],
                       "savepoint": doc["savepoint"]}}]}

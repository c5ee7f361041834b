"""A check as JUnit XML: `check --format junit`, for CI systems that render test reports (GitLab's
`artifacts:reports:junit`, Jenkins' JUnit plugin).

One test suite per check (named after the new job's graph), one test case for the restore itself (failing with
Flink's error when Flink refuses it), one per operator of the new job and one per savepoint operator the new job
does not take; an operator whose state is at risk fails with its consequence as the message and the details as text.
Written with junitparser, a maintained library for the format, so the attributes and statistics (`tests`,
`failures`) are the ones those tools read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from junitparser import Error, Failure, JUnitXml, TestCase, TestSuite

from upgrade_gate.report.risks import RULES, Risk, by_operator, risks, summary_line

__all__ = ["render_junit", "render_junit_jobs"]


def _case(name: str, classname: str, group: list[Risk] | None) -> TestCase:
    case = TestCase(name, classname=classname, time=0)
    if group:
        worst = group[0]
        failure = Failure(worst.consequence or worst.message, worst.verdict.value)
        failure.text = "\n\n".join(f"{RULES[r.rule].title} ({r.verdict}): {r.message}"
                                     + (f"\n{r.details}" if r.details else "") for r in group)
        case.result = [failure]
    return case


def _suite(doc: Mapping[str, Any], name: str | None = None) -> TestSuite:
    """One check's test suite, named `name` (a manifest's job) or after the new job's graph."""
    found = risks(doc)
    groups = {g[0].operator_id: g for g in by_operator(found)}
    job = name or doc["graph"]
    suite = TestSuite(job)
    suite.add_property("verdict", str(doc["verdict"]))
    suite.add_property("summary", summary_line(doc))
    suite.add_property("savepoint", doc["savepoint"])
    refused = [r for r in found if r.verdict.blocks and r.operator_id is None]
    suite.add_testcase(_case("restore", job, refused or None))
    seen: set[str] = set()
    for o in doc["operators"]:
        oid = o["operator_id"]
        if o["new_node_id"] is not None:  # an operator of the new job (restored, or new and empty)
            name = f"operator {o['new_node_name'] or oid} [{o['new_operator_id'] or oid}]"
        elif oid in groups:  # a savepoint operator the new job does not take, with state at risk
            name = f"savepoint operator {o['name'] or oid} [{oid}] (not in the new job)"
        else:
            continue
        seen.add(oid)
        suite.add_testcase(_case(name, job, groups.get(oid)))
    for oid, group in groups.items():  # at risk, but named by no operator row (a state schema by its uid)
        if oid not in seen:
            suite.add_testcase(_case(f"savepoint operator {group[0].label} [{oid}]", job, group))
    suite.update_statistics()
    return suite


def _document(suites: list[TestSuite]) -> str:
    xml = JUnitXml("upgrade-gate check")
    for suite in suites:
        xml.add_testsuite(suite)
    xml.update_statistics()
    body = xml.tostring()
    text = body.decode("utf-8") if isinstance(body, bytes) else str(body)
    if not text.startswith("<?xml"):
        text = '<?xml version="1.0" encoding="utf-8"?>\n' + text
    return text + "\n"


def render_junit(doc: Mapping[str, Any]) -> str:
    """The JUnit XML document for a check's JSON document `doc`."""
    return _document([_suite(doc)])


def render_junit_jobs(jobs: list[tuple[str, Mapping[str, Any] | None, str | None]]) -> str:
    """`check --manifest --format junit`: one test suite per job (name, its check's JSON, or the error that kept it
    from being checked: an `<error>`, as CI tools show a test that could not run)."""
    suites = []
    for name, doc, error in jobs:
        if doc is not None:
            suites.append(_suite(doc, name))
            continue
        suite = TestSuite(name)
        case = TestCase("input", classname=name, time=0)
        case.result = [Error(error or "not checked", "bad input")]
        suite.add_testcase(case)
        suite.update_statistics()
        suites.append(suite)
    return _document(suites)

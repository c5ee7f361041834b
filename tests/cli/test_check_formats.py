"""`upgrade-gate check` in a pull request: Markdown, GitHub annotations, JUnit XML, SARIF and the JSON schema, each on
real-Flink fixtures and read back the way the consuming tool reads it (docs/guide.md, "In a pull request").

The cases are restores real Flink ran (tests/fixtures/restores/<release>/<scenario>/outcome.json):
* BLOCKED: 1.20.5 misroute-map-inserted-shifts-ids with --old-graph: Flink restored RUNNING, with stage-b's buffer
  in stage-a (the gate: STATE_MISROUTED, repairable);
* FAILS: 2.3.0 uid-removed: Flink refused the savepoint ("Cannot map checkpoint/savepoint state for operator ...");
* SAFE: 2.3.0 chaining-disabled-uids: Flink restored every state (the gate: SAFE, state types not compared).
What each format must say is read from the same check's `--format json` (the product's own output on those
fixtures) and from Flink's recorded outcome, never written by hand.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft4Validator, Draft202012Validator

from tests.restore_support import RESTORES, root_error
from upgrade_gate.cli.main import main
from upgrade_gate.report.github import escape_data, escape_property
from upgrade_gate.report.markdown import MAX_CHARS, render_markdown
from upgrade_gate.report.risks import RULES
from upgrade_gate.report.sizes import human_bytes

REPO = Path(__file__).resolve().parents[2]
CHECK_SCHEMA = REPO / "docs" / "schemas" / "check-result.schema.json"
FORMATS = ("table", "json", "html", "markdown", "github", "junit", "sarif")


def _case(release: str, scenario: str, savepoint: str | None = None, old: bool = False) -> list[str]:
    d = RESTORES / release / scenario
    outcome = json.loads((d / "outcome.json").read_text())
    sp = savepoint or str((d / outcome["savepoint"]["fixture"]).resolve())
    argv = ["--savepoint", sp, "--graph", str(d / "graph-b.json"), "--flink-version", release.rsplit(".", 1)[0]]
    return argv + (["--old-graph", str(d / "graph-a.json")] if old else [])


BLOCKED = _case("1.20.5", "misroute-map-inserted-shifts-ids", old=True)
FAILS = _case("2.3.0", "uid-removed")
SAFE = _case("2.3.0", "chaining-disabled-uids")


def _outcome(release: str, scenario: str) -> dict[str, Any]:
    return json.loads((RESTORES / release / scenario / "outcome.json").read_text())


def check(argv: list[str], fmt: str) -> tuple[int, str]:
    """`upgrade-gate check ARGV --format FMT` in this process: (exit code, stdout)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(["check", *argv, "--format", fmt])
    return code, out.getvalue()


def doc_of(argv: list[str]) -> dict[str, Any]:
    return json.loads(check(argv, "json")[1])


def at_risk(doc: dict[str, Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    for x in (*doc["losses"], *doc["misrouted"]):
        out[x["operator_id"]] = max(out.get(x["operator_id"], 0), x["bytes"])
    return out


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The command in a fresh interpreter, with exactly the GitHub variables given (none of the caller's)."""
    base = {k: v for k, v in os.environ.items() if k not in ("GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY")}
    return subprocess.run([sys.executable, "-m", "upgrade_gate.cli.main", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=300, env={**base, "COLUMNS": "120", **(env or {})})


# -- the plan line and Markdown ---------------------------------------------------------------------------------

PLAN = re.compile(r"^operators (?:not mapped|\+(\d+) \u2212(\d+) ~(\d+)) \u00b7 "
                  r"(no state at risk|state at risk (.+) in (\d+) operators?) \u00b7 "
                  r"(BLOCKED \((\w+)\)|SAFE( \(state types not compared\))?)$")


def test_markdown_opens_with_the_plan_line_and_names_every_operator_at_risk() -> None:
    doc = doc_of(BLOCKED)
    code, text = check(BLOCKED, "markdown")
    assert code == 1
    lines = text.splitlines()
    plan = PLAN.match(lines[1].strip("*"))
    assert plan, lines[1]
    risky = at_risk(doc)
    added = sum(1 for o in doc["operators"] if o.get("note", "").startswith("new operator"))
    assert int(plan[1]) == added and plan[5] == human_bytes(sum(risky.values())) and int(plan[6]) == len(risky)
    assert plan[8] == doc["verdict"] == "STATE_MISROUTED"
    # real Flink restored stage-b's buffer into stage-a: the comment names both states, their role and their size
    assert _outcome("1.20.5", "misroute-map-inserted-shifts-ids")["restore"]["restored"]["stage-a"][0][
        "values:buffer"] == ["stage-b"]
    rows = [line for line in lines if line.startswith("| ") and "`" in line]
    assert len(rows) == len(risky)
    for m in doc["misrouted"]:
        row = next(r for r in rows if m["operator_id"] in r)
        assert m["role"] in row and ", ".join(m["state_names"]) in row and human_bytes(risky[m["operator_id"]]) in row
        assert f"restored into '{m['receiver']['name']}'" in row
    assert f"### \u26d4 {doc['verdict']}" in text and "some state lands on an operator that did not write it" in text
    assert doc["repair"]["repairable"] and doc["repair"]["command"] in text  # the repair, ready to copy


def test_markdown_of_a_safe_check_says_which_state_types_were_not_compared() -> None:
    doc = doc_of(SAFE)
    code, text = check(SAFE, "markdown")
    assert code == 0 and doc["verdict"] == "SAFE" and doc["state_types_compared"] is False
    plan = PLAN.match(text.splitlines()[1].strip("*"))
    assert plan and plan[4] == "no state at risk" and plan[9]
    caveat = next(w for w in doc["warnings"] if w.startswith("state types not compared"))
    assert caveat in text and "State at risk" not in text and "--new-job-savepoint" in text


def test_a_long_markdown_table_is_cut_below_githubs_comment_limit_and_says_how_much() -> None:
    doc = doc_of(FAILS)
    # the real check's loss, repeated under 3,000 IDs: far more rows than a comment holds
    loss = doc["losses"][0]
    doc["losses"] = [{**loss, "operator_id": f"{i:032x}"} for i in range(3000)]
    text = render_markdown(doc, doc["repair"])
    assert len(text) <= MAX_CHARS
    shown = sum(1 for line in text.splitlines() if line.startswith("| ") and "`" in line)
    left = re.search(r"\*(\d+) more operator\(s\) at risk not shown", text)
    assert left and 0 < shown < 3000 and shown + int(left[1]) == 3000
    # the sections around the table survive the cut: Flink's error, the fix
    fix = doc["repair"]["command"] if doc["repair"] and doc["repair"]["repairable"] else doc["remedies"][0]["action"]
    assert doc["flink_error"] in text and fix in text


# -- GitHub workflow commands ---------------------------------------------------------------------------------------

COMMAND = re.compile(r"^::(error|warning|notice)(?: ([^:]*))?::(.*)$")


def _unescape(text: str) -> str:
    return text.replace("%0D", "\r").replace("%0A", "\n").replace("%3A", ":").replace("%2C", ",").replace("%25", "%")


def annotations(text: str) -> list[tuple[str, dict[str, str], str]]:
    """(command, properties, message) of each workflow command, unescaped as the runner reads them."""
    out = []
    for line in text.splitlines():
        m = COMMAND.match(line)
        if m:
            props = dict(p.split("=", 1) for p in m[2].split(",")) if m[2] else {}
            out.append((m[1], {k: _unescape(v) for k, v in props.items()}, _unescape(m[3])))
    return out


def test_github_annotates_each_operator_at_risk_on_the_changed_graph_file() -> None:
    doc = doc_of(BLOCKED)
    code, text = check(BLOCKED, "github")
    assert code == 1
    found = annotations(text)
    errors = [a for a in found if a[0] == "error"]
    graph = BLOCKED[BLOCKED.index("--graph") + 1]
    assert {props["file"] for _, props, _ in found} == {graph}
    named = sorted(oid for oid in at_risk(doc) for _, _, message in errors if oid in message.splitlines()[0])
    assert named == sorted(at_risk(doc)) and len(errors) == len(at_risk(doc))
    assert all(props["title"].startswith(RULES["state-misrouted"].title) for _, props, _ in errors)
    assert text.splitlines()[-1] == PLAN.match(text.splitlines()[-1])[0]  # the log ends with the plan line
    assert not any(a[0] == "notice" for a in found)


def test_github_says_flinks_refusal_and_a_safe_check_is_one_notice() -> None:
    run = _outcome("2.3.0", "uid-removed")["restore"]
    flink = root_error(run)
    assert run["status"] == "FAILED" and flink
    code, text = check(FAILS, "github")
    refused = [a for a in annotations(text) if a[1].get("title") == RULES["restore-refused"].title]
    # Flink's own words after its pointer (the recorded run restored from another directory)
    said = flink[flink.index("Cannot map"):flink.index("to the new program")]
    assert code == 1 and len(refused) == 1 and said in refused[0][2]
    code, text = check(SAFE, "github")
    found = annotations(text)
    assert code == 0 and [a[0] for a in found] == ["notice"] and "SAFE" in found[0][2]
    assert "state types not compared" in found[0][2]


def test_workflow_command_escaping_is_the_actions_toolkits() -> None:
    # @actions/core command.ts: escapeData % \r \n, escapeProperty also : and ,
    assert escape_data("50% done\r\nnext: a,b") == "50%25 done%0D%0Anext: a,b"
    assert escape_property("50% done\r\nnext: a,b") == "50%25 done%0D%0Anext%3A a%2Cb"


def test_in_github_actions_the_default_is_annotations_and_the_summary_gets_the_comment(tmp_path: Path) -> None:
    summary = tmp_path / "step-summary.md"
    summary.write_text("# earlier step\n", encoding="utf-8")
    p = cli("check", *BLOCKED, env={"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)})
    assert p.returncode == 1, p.stderr
    assert [a[0] for a in annotations(p.stdout)] == ["error", "error"]
    written = summary.read_text(encoding="utf-8")
    assert written.startswith("# earlier step\n<!-- upgrade-gate check -->\n")  # appended, not replaced
    assert written.removeprefix("# earlier step\n") == check(BLOCKED, "markdown")[1]
    p = cli("check", *BLOCKED)  # outside GitHub Actions: the terminal table, as before
    assert p.returncode == 1 and p.stdout.startswith("VERDICT: STATE_MISROUTED")


def test_an_unwritable_step_summary_is_bad_input_named_in_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-dir" / "summary.md"
    p = cli("check", *SAFE, "--format", "github", env={"GITHUB_STEP_SUMMARY": str(missing)})
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert p.stderr.strip().count("\n") == 0 and str(missing) in p.stderr


# -- JUnit XML ------------------------------------------------------------------------------------------------------

def _suite(text: str) -> ET.Element:
    root = ET.fromstring(text.encode("utf-8"))
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    assert len(suites) == 1
    return suites[0]


def test_junit_fails_the_operators_at_risk_and_passes_the_rest() -> None:
    doc = doc_of(BLOCKED)
    code, text = check(BLOCKED, "junit")
    suite = _suite(text)
    cases = suite.findall("testcase")
    assert code == 1 and suite.get("name") == doc["graph"]
    new_ops = [o for o in doc["operators"] if o["new_node_id"] is not None]
    assert len(cases) == 1 + len(new_ops) + sum(1 for o in doc["operators"] if o["new_node_id"] is None
                                                 and o["operator_id"] in at_risk(doc))
    restore = cases[0]
    assert restore.get("name") == "restore" and restore.find("failure") is None  # Flink restored: RUNNING
    failed = {c.get("name"): c.find("failure") for c in cases if c.find("failure") is not None}
    assert int(suite.get("failures")) == len(failed) == len(at_risk(doc))
    for m in doc["misrouted"]:
        # the state sits in the new operator that took its ID: that test case fails with the consequence
        failure = next(f for n, f in failed.items() if m["operator_id"] in n)
        assert failure.get("type") == "STATE_MISROUTED" and m["receiver"]["name"] in failure.get("message")
        assert m["evidence"][0] in failure.text


def test_junit_restore_case_fails_with_flinks_error() -> None:
    flink = root_error(_outcome("2.3.0", "uid-removed")["restore"])
    doc = doc_of(FAILS)
    code, text = check(FAILS, "junit")
    restore = _suite(text).find("testcase[@name='restore']")
    failure = restore.find("failure")
    assert code == 1 and failure is not None and failure.get("type") == "RESTORE_FAILS"
    assert doc["flink_error"] in failure.text and flink[flink.index("Cannot map"):flink.index("to the new")] in \
        failure.text
    (loss,) = doc["losses"]  # the lost savepoint operator is a test case of its own, failing with its consequence
    lost = [c for c in _suite(text).findall("testcase") if loss["operator_id"] in c.get("name")]
    assert len(lost) == 1 and lost[0].find("failure").get("message") == loss["consequence"]
    assert int(_suite(check(SAFE, "junit")[1]).get("failures")) == 0


# -- SARIF ----------------------------------------------------------------------------------------------------------

# OASIS SARIF 2.1.0 errata01, the spec's own schema (docs/schemas/README.md)
SARIF = Draft4Validator(json.loads((REPO / "docs" / "schemas" / "sarif-schema-2.1.0.json").read_text("utf-8")))


def test_sarif_is_valid_sarif_2_1_0_with_one_error_per_state_at_risk() -> None:
    doc = doc_of(BLOCKED)
    code, text = check(BLOCKED, "sarif")
    log = json.loads(text)
    assert code == 1 and not list(SARIF.iter_errors(log)), [e.message for e in SARIF.iter_errors(log)][:3]
    (run,) = log["runs"]
    assert [r["id"] for r in run["tool"]["driver"]["rules"]] == list(RULES)
    errors = [r for r in run["results"] if r["level"] == "error"]
    misrouted = {m["operator_id"] for m in doc["misrouted"]}
    assert {r["properties"]["operator_id"] for r in errors if r["ruleId"] == "state-misrouted"} == misrouted
    graph = BLOCKED[BLOCKED.index("--graph") + 1]
    uris = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in run["results"]}
    assert uris == {Path(graph).as_uri()}  # an absolute path as a file URI (a relative one stays relative)
    for r in run["results"]:
        assert run["tool"]["driver"]["rules"][r["ruleIndex"]]["id"] == r["ruleId"]
    for fmt_case in (SAFE, FAILS):
        other = json.loads(check(fmt_case, "sarif")[1])
        assert not list(SARIF.iter_errors(other))
    levels = {r["ruleId"]: r["level"] for r in json.loads(check(SAFE, "sarif")[1])["runs"][0]["results"]}
    assert levels == {"state-types-not-compared": "note"}


def test_sarif_fingerprints_do_not_change_with_the_checkout(tmp_path: Path) -> None:
    """The same check from another directory (a CI runner's checkout): same alerts, so code scanning keeps them."""
    d = RESTORES / "1.20.5" / "misroute-map-inserted-shifts-ids"
    savepoint = Path(BLOCKED[BLOCKED.index("--savepoint") + 1])
    other = tmp_path / "elsewhere"
    shutil.copytree(savepoint, other / "savepoint")
    shutil.copy(d / "graph-a.json", other / "graph-a.json")
    shutil.copy(d / "graph-b.json", other / "graph-b.json")
    moved = ["--savepoint", str(other / "savepoint"), "--graph", str(other / "graph-b.json"), "--old-graph",
             str(other / "graph-a.json"), "--flink-version", "1.20"]

    def prints(argv: list[str]) -> list[tuple[str, str]]:
        results = json.loads(check(argv, "sarif")[1])["runs"][0]["results"]
        return sorted((r["ruleId"], r["partialFingerprints"]["upgradeGateFinding/v1"]) for r in results)

    assert prints(BLOCKED) == prints(moved)
    assert len({fp for _, fp in prints(BLOCKED)}) == len(prints(BLOCKED))  # one alert per finding


# -- the JSON schema ------------------------------------------------------------------------------------------------

def _schema() -> Draft202012Validator:
    schema = json.loads(CHECK_SCHEMA.read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


@pytest.fixture(scope="module")
def fixture_checks(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, dict[str, Any]]]:
    """Every `check --format json` the committed real-Flink fixtures produce (tests/check_outputs.py's cases), run
    once for the tests below: (case name, document); cases that are bad input (exit 2) left out."""
    from tests.check_outputs import SCHEMA_GRAPH, cases

    graph = tmp_path_factory.mktemp("schema-graph") / "evolving.json"
    graph.write_text(json.dumps(SCHEMA_GRAPH))
    out = []
    for name, argv in cases(graph):
        code, text = check(argv, "json")
        if code != 2:  # a scenario without an old graph: nothing to validate
            out.append((name, json.loads(text)))
    return out


def test_every_fixture_check_matches_the_published_json_schema(fixture_checks: list[tuple[str, Any]]) -> None:
    validator, started, bad = _schema(), time.monotonic(), []
    for name, doc in fixture_checks:
        assert doc["schema_version"] == "1"
        bad += [f"{name}: {e.json_path}: {e.message[:200]}" for e in list(validator.iter_errors(doc))[:1]]
    assert not bad, bad[:5]
    assert len(fixture_checks) > 1800, len(fixture_checks)
    print(f"{len(fixture_checks)} check outputs validated in {time.monotonic() - started:.1f} s")


def test_every_fixture_check_renders_in_every_pull_request_format(fixture_checks: list[tuple[str, Any]]) -> None:
    """The same documents as Markdown within GitHub's limit, parseable workflow commands ending with the plan line,
    well-formed JUnit XML with a failure for every operator at risk, and schema-valid SARIF."""
    from upgrade_gate.report.github import render_github
    from upgrade_gate.report.junit import render_junit
    from upgrade_gate.report.sarif import render_sarif

    for name, doc in fixture_checks:
        text = render_markdown(doc, doc["repair"])
        assert len(text) <= MAX_CHARS and PLAN.match(text.splitlines()[1].strip("*")), name
        commands = render_github(doc, "graph.json").splitlines()
        assert PLAN.match(commands[-1]) and all(COMMAND.match(c) for c in commands[:-1]), name
        suite = _suite(render_junit(doc))
        assert int(suite.get("failures")) >= len(at_risk(doc)), name
        errors = list(SARIF.iter_errors(render_sarif(doc, "graph.json")))
        assert not errors, (name, errors[0].message)


def test_the_json_schema_catches_a_renamed_field() -> None:
    validator, doc = _schema(), doc_of(BLOCKED)
    assert not list(validator.iter_errors(doc))
    renamed = {**doc, "misrouted": [{**{("receiver_node" if k == "receiver" else k): v for k, v in m.items()}}
                                    for m in doc["misrouted"]]}
    assert list(validator.iter_errors(renamed))
    assert list(validator.iter_errors({("outcome" if k == "verdict" else k): v for k, v in doc.items()}))


# -- exit codes and --output ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_keeps_the_exit_codes_and_writes_to_output(tmp_path: Path, fmt: str) -> None:
    out = tmp_path / f"report.{fmt}"
    code, printed = check([*BLOCKED, "--output", str(out)], fmt)
    assert code == 1 and out.stat().st_size > 0 and printed == ""
    code, _ = check([*SAFE, "--output", str(tmp_path / "safe")], fmt)
    assert code == 0
    bad = tmp_path / "missing-dir" / "report"
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert main(["check", *SAFE, "--format", fmt, "--output", str(bad)]) == 2
    assert str(bad) in err.getvalue() and err.getvalue().count("\n") == 1

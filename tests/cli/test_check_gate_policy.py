"""`upgrade-gate check --fail-on` and the waivers file (`.upgrade-gate.yaml`), end to end in a subprocess as a user
runs them, on savepoints and graphs real Flink wrote (docs/guide.md, "Recording an intended loss")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.restore_support import RESTORES

R23 = RESTORES / "2.3.0"
SP = str(R23 / "savepoints" / "uids-p2")
# Flink 2.3 starts the new job with --allowNonRestoredState and drops the state of the operator whose uid `keyed`
# went away (tests/fixtures/restores/2.3.0/uid-removed): STATE_LOSS
LOSS = ("check", "--savepoint", SP, "--graph", str(R23 / "uid-removed" / "graph-b.json"), "--allow-non-restored-state")
MISROUTED_CASE = R23 / "misroute-sources-swapped-no-uids"


def gate_line(table: str) -> str:
    """The table's GATE line under the verdict, unwrapped (it is wrapped to the terminal like every paragraph)."""
    first, *rest = table.splitlines()[1:]
    said = [first]
    for line in rest:
        if not line.startswith("  "):
            break
        said.append(line.strip())
    return " ".join(said)


def waivers_file(path: Path, operator: str = "keyed", expires: str = "2999-12-31", extra: str = "") -> Path:
    path.write_text(f"waivers:\n  - operator: {operator}\n    reason: the keyed operator was removed on purpose\n"
                    f"    who: platform team\n    expires: {expires}\n{extra}")
    return path


@pytest.mark.parametrize(("fail_on", "code"), [(None, 1), ("STATE_LOSS", 1), ("STATE_MISROUTED", 0),
                                               ("RESTORE_FAILS", 0)])
def test_fail_on_sets_the_exit_code_and_the_output_still_says_the_verdict(cli, tmp_path, fail_on, code) -> None:
    p = cli(*LOSS, *(["--fail-on", fail_on] if fail_on else []), cwd=tmp_path)
    assert p.returncode == code, p.stderr
    verdict, gate = p.stdout.splitlines()[0], gate_line(p.stdout)
    assert verdict.startswith("VERDICT: STATE_LOSS")
    level = fail_on or "STATE_LOSS"
    assert gate == (f"GATE: passes: STATE_LOSS is below --fail-on {level}" if code == 0
                    else f"GATE: blocks: STATE_LOSS is at or above --fail-on {level}; not waived: keyed")


def test_fail_on_restore_fails_still_blocks_a_refused_restore(cli, tmp_path) -> None:
    p = cli(*LOSS[:-1], "--fail-on", "RESTORE_FAILS", "--format", "json", cwd=tmp_path)
    assert p.returncode == 1
    doc = json.loads(p.stdout)
    assert doc["verdict"] == "RESTORE_FAILS"
    assert doc["gate"] | {"decision": None} == {"passes": False, "verdict": "RESTORE_FAILS", "fail_on": "RESTORE_FAILS",
                                                "decision": None, "waived": [], "expired": [], "unwaived": ["keyed"],
                                                "unmatched": [],
                                                "not_waivable": []}


def test_a_waiver_in_the_current_directory_lets_the_real_loss_through(cli, tmp_path) -> None:
    waivers_file(tmp_path / ".upgrade-gate.yaml")
    p = cli(*LOSS, "--format", "json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["verdict"] == "STATE_LOSS"  # the verdict is still reported as it is
    gate = doc["gate"]
    assert gate["passes"] and gate["verdict"] == "SAFE" and gate["unwaived"] == [] and gate["expired"] == []
    assert [(w["operator"], w["who"], w["expires"]) for w in gate["waived"]] == [("keyed", "platform team",
                                                                                  "2999-12-31")]
    # --no-waivers ignores the file: blocked again
    assert cli(*LOSS, "--no-waivers", cwd=tmp_path).returncode == 1


def test_the_same_waiver_expired_blocks_and_is_named(cli, tmp_path) -> None:
    path = waivers_file(tmp_path / "policy.yaml", expires="2020-01-31")
    p = cli(*LOSS, "--waivers", str(path), cwd=tmp_path)
    assert p.returncode == 1
    gate = gate_line(p.stdout)
    assert gate == (f"GATE: blocks: STATE_LOSS is at or above --fail-on STATE_LOSS; not waived: keyed; expired waiver "
                    f"keyed ({path} #1, by platform team, expired after 2020-01-31)")
    doc = json.loads(cli(*LOSS, "--waivers", str(path), "--format", "json", cwd=tmp_path).stdout)
    assert [w["expires"] for w in doc["gate"]["expired"]] == ["2020-01-31"] and not doc["gate"]["passes"]


def test_a_waiver_on_a_misrouted_operator_does_not_help(cli, tmp_path) -> None:
    path = waivers_file(tmp_path / "policy.yaml", operator="'Source: payments'")
    p = cli("check", "--savepoint", str(R23 / "savepoints" / "mr-sources-no-uids"),
            "--graph", str(MISROUTED_CASE / "graph-b.json"), "--old-graph", str(MISROUTED_CASE / "graph-a.json"),
            "--waivers", str(path), "--format", "json", cwd=tmp_path)
    assert p.returncode == 1, p.stderr
    doc = json.loads(p.stdout)
    assert doc["verdict"] == "STATE_MISROUTED" and not doc["gate"]["passes"]
    # the waiver names the receiver of one misrouted state and the writer of the other (the two sources swapped)
    said = f"waiver Source: payments ({path} #1, by platform team, until 2999-12-31) cannot be applied: "
    why = "is STATE_MISROUTED, and only STATE_LOSS can be waived"
    assert doc["gate"]["not_waivable"] == [f"{said}Source: orders {why}", f"{said}Source: payments {why}"]


def test_the_html_report_says_the_gate_decision_in_one_line(cli, tmp_path) -> None:
    p = cli(*LOSS, "--fail-on", "RESTORE_FAILS", "--format", "html", cwd=tmp_path)
    assert p.returncode == 0
    assert '<p id="gate"><b>Gate:</b> passes: STATE_LOSS is below --fail-on RESTORE_FAILS</p>' in p.stdout


@pytest.mark.parametrize(("text", "message"), [
    ("waivers:\n  - operator: keyed\n    reason: r\n    who: me\n", "waiver 1 (keyed): expires is required"),
    ("waivers:\n  - operator: keyed\n    reason: r\n    who: me\n    expires: 2026-13-01\n",
     "invalid YAML at line 5 column 14: cannot read '2026-13-01' as timestamp"),
    ("waivers:\n  - operator: keyed\n    reason: r\n    who: me\n    expires: soon\n",
     "waiver 1 (keyed): expires must be an ISO date (YYYY-MM-DD), found 'soon'"),
    ("waivers:\n  - operator: keyed\n    reason: r\n    who: me\n    expires: 2026-12-01\n    expire: 2027-01-01\n",
     "waiver 1 (keyed): unknown key 'expire' (known: operator, reason, who, expires, state, job)"),
    ("fail_on: SAFE\n", "fail_on is 'SAFE'; expected one of STATE_LOSS, STATE_MISROUTED, STATE_CORRUPTED, "
                        "RESTORE_FAILS"),
    ("waivers: [\n", "invalid YAML"),
])
def test_a_malformed_waivers_file_exits_2_with_one_line(cli, tmp_path, text, message) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(text)
    p = cli(*LOSS, "--waivers", str(path), cwd=tmp_path)
    assert p.returncode == 2 and p.stdout == ""
    assert len(p.stderr.splitlines()) == 1 and "Traceback" not in p.stderr, p.stderr
    assert p.stderr.startswith(f"upgrade-gate: error: {path}: ") and message in p.stderr, p.stderr


def test_the_file_fail_on_is_the_default_threshold_and_the_flag_wins(cli, tmp_path) -> None:
    (tmp_path / ".upgrade-gate.yaml").write_text("fail_on: RESTORE_FAILS\n")
    assert cli(*LOSS, cwd=tmp_path).returncode == 0
    assert cli(*LOSS, "--fail-on", "STATE_LOSS", cwd=tmp_path).returncode == 1


def test_a_waiver_for_one_job_applies_only_with_that_job_named(cli, tmp_path) -> None:
    path = waivers_file(tmp_path / "policy.yaml", extra="    job: orders-enrichment\n")
    assert cli(*LOSS, "--waivers", str(path), cwd=tmp_path).returncode == 1
    assert cli(*LOSS, "--waivers", str(path), "--job", "payments", cwd=tmp_path).returncode == 1
    assert cli(*LOSS, "--waivers", str(path), "--job", "orders-enrichment", cwd=tmp_path).returncode == 0


def test_a_waivers_path_that_is_no_file_exits_2_with_one_line(cli, tmp_path) -> None:
    for path, problem in ((tmp_path / "missing.yaml", "no such file"), (tmp_path, "is a directory")):
        p = cli(*LOSS, "--waivers", str(path), cwd=tmp_path)
        assert p.returncode == 2 and p.stdout == "" and len(p.stderr.splitlines()) == 1, p.stderr
        assert p.stderr.startswith(f"upgrade-gate: error: {path}: {problem}"), p.stderr


def test_fail_on_names_the_levels_it_takes(cli, tmp_path) -> None:
    p = cli(*LOSS, "--fail-on", "SAFE", cwd=tmp_path)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.splitlines()[-1] == ("upgrade-gate: error: argument --fail-on: invalid choice: 'SAFE' (choose from "
                                         "'STATE_LOSS', 'STATE_MISROUTED', 'STATE_CORRUPTED', 'RESTORE_FAILS')")

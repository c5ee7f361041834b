"""The GitHub Action (`action.yml`) and the GitLab CI template (`ci/gitlab/upgrade-gate.gitlab-ci.yml`).

No GitHub runner or GitLab runner runs here, so each is run as its runner would run it: the action's `run:` steps
in order with bash (`bash --noprofile --norc -eo pipefail`, GitHub's composite `shell: bash`), with the files a
runner sets (`GITHUB_OUTPUT`, `GITHUB_STEP_SUMMARY`, `RUNNER_TEMP`), a fresh virtualenv standing in for
`actions/setup-python`, and the install step installing this package into it; the template's script with bash
`-eo pipefail`, as GitLab's runner does. Both against the committed real-Flink fixtures. Every flag they pass must
be one `check`'s parser knows.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO
from tests.restore_support import RESTORES
from upgrade_gate.cli.commands import check as check_command

ACTION = REPO / "action.yml"
GITLAB = REPO / "ci" / "gitlab" / "upgrade-gate.gitlab-ci.yml"
R23 = RESTORES / "2.3.0"
SP = R23 / "savepoints" / "uids-p2"
SAFE_GRAPH = R23 / "rescale-up" / "graph-b.json"
BLOCKED_GRAPH = R23 / "uid-removed" / "graph-b.json"
# what `pip install` of the action needs: the package's own files (tests and fixtures are not installed)
PACKAGE = ("hashing/", "upgrade_gate/", "flink_bridge/", "spark_jobs/", "pyproject.toml", "setup.py",
           "requirements.txt", "action.yml")


def _check_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    check_command.add_arguments(parser)
    return parser


def _flags_used(script: str) -> list[tuple[str, str | None]]:
    """(flag, its literal value or None) of every `upgrade-gate check` command in a shell script."""
    out: list[tuple[str, str | None]] = []
    for command in re.findall(r"upgrade-gate check ([^\n|]*)", script):
        words = shlex.split(command.replace("\\\n", " "), comments=True)
        for i, word in enumerate(words):
            if word.startswith("-") and word not in ("--",):
                value = words[i + 1] if i + 1 < len(words) else None
                out.append((word, value if value and not value.startswith(("-", "$", '"$')) else None))
    return out


def _assert_real_flags(script: str) -> None:
    parser = _check_parser()
    known = parser._option_string_actions
    formats = set(known["--format"].choices or ())
    used = _flags_used(script)
    assert used, script
    for flag, value in used:
        assert flag in known, f"{flag} is not a flag of upgrade-gate check"
        if flag == "--format" and value:
            assert value in formats, value


# ---- GitHub Action ------------------------------------------------------------------------------------------------
def _action() -> dict[str, Any]:
    return yaml.safe_load(ACTION.read_text(encoding="utf-8"))


def test_the_action_declares_its_inputs_and_outputs() -> None:
    action = _action()
    assert action["runs"]["using"] == "composite"
    assert set(action["inputs"]) == {"graph", "savepoint", "manifest", "format", "fail-on", "args", "python-version"}
    assert set(action["outputs"]) == {"verdict", "exit-code", "report"}
    for step in action["runs"]["steps"]:
        assert "${{" not in step.get("run", ""), "inputs reach scripts through env only (no script injection)"
    _assert_real_flags("\n".join(s.get("run", "") for s in action["runs"]["steps"]))


def _expand(value: str, scope: dict[str, str]) -> str:
    """A runner's `${{ ... }}` substitution, for the expressions the action uses; any other one fails the test."""
    def one(m: re.Match[str]) -> str:
        assert m.group(1) in scope, f"expression not understood here: {m.group(1)}"
        return scope[m.group(1)]
    return re.sub(r"\$\{\{\s*([^}]+?)\s*\}\}", one, str(value))


def _outputs(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text(encoding="utf-8").splitlines() if "=" in line)


@pytest.fixture(scope="module")
def runner(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """What setup-python and the checkout leave: a fresh Python, and the action's files at `github.action_path`."""
    root = tmp_path_factory.mktemp("runner")
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, capture_output=True, text=True,
                           check=True).stdout.splitlines()
    action_path = root / "action"
    for name in files:
        if name.startswith(PACKAGE) and (REPO / name).is_file():
            (action_path / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, action_path / name)
    subprocess.run([sys.executable, "-m", "venv", str(root / "python")], check=True, timeout=300)
    return {"root": root, "action_path": action_path, "bin": root / "python" / "bin"}


def _run_action(runner: dict[str, Path], work: Path, inputs: dict[str, str]) -> tuple[int, dict[str, str], str]:
    """Every `run:` step of the action in order, as a runner runs a composite action; the last step's exit code,
    the step outputs and the job summary."""
    action = _action()
    work.mkdir()
    out, summary, temp = work / "github_output", work / "step_summary", work / "runner_temp"
    out.touch()
    summary.touch()
    temp.mkdir()
    scope = {f"inputs.{k}": str(v.get("default", "")) for k, v in action["inputs"].items()}
    scope.update({f"inputs.{k}": v for k, v in inputs.items()})
    scope["github.action_path"] = str(runner["action_path"])
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(PATH=f"{runner['bin']}{os.pathsep}{env.get('PATH', '')}", GITHUB_OUTPUT=str(out),
               GITHUB_STEP_SUMMARY=str(summary), RUNNER_TEMP=str(temp))
    code = 0
    for step in action["runs"]["steps"]:
        if "run" not in step:
            assert step["uses"].startswith("actions/setup-python@")  # the fresh virtualenv stands in for it
            continue
        step_env = {k: _expand(v, scope) for k, v in (step.get("env") or {}).items()}
        script = work / "step.sh"
        script.write_text(step["run"], encoding="utf-8")
        done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)], cwd=work,
                              env={**env, **step_env}, capture_output=True, text=True, timeout=900)
        code = done.returncode
        if step.get("id"):
            scope.update({f"steps.{step['id']}.outputs.{k}": v for k, v in _outputs(out).items()})
        if step.get("name", "").startswith("Install"):
            assert code == 0, done.stdout + done.stderr
    return code, _outputs(out), summary.read_text(encoding="utf-8")


def test_the_action_blocks_a_breaking_change_and_reports_why(runner: dict[str, Path], tmp_path: Path) -> None:
    code, outputs, summary = _run_action(runner, tmp_path / "blocked",
                                         {"graph": str(BLOCKED_GRAPH), "savepoint": str(SP), "format": "table"})
    assert code == 1
    assert outputs["verdict"] == "RESTORE_FAILS" and outputs["exit-code"] == "1"
    assert Path(outputs["report"]).read_text(encoding="utf-8").startswith("VERDICT: RESTORE_FAILS")
    assert "### Flink Upgrade Gate: RESTORE_FAILS" in summary


def test_the_action_passes_a_safe_manifest(runner: dict[str, Path], tmp_path: Path) -> None:
    manifest = tmp_path / "upgrade-gate.jobs.yaml"
    manifest.write_text(f"jobs:\n  - name: orders\n    graph: {SAFE_GRAPH}\n    savepoint: {SP}\n"
                        f"    flink_version: \"2.3\"\n", encoding="utf-8")
    code, outputs, summary = _run_action(runner, tmp_path / "safe", {"manifest": str(tmp_path), "format": "json",
                                                                     "args": ""})
    assert code == 0
    assert outputs["verdict"] == "SAFE" and outputs["exit-code"] == "0"
    assert '"verdict": "SAFE"' in Path(outputs["report"]).read_text(encoding="utf-8")
    assert "### Flink Upgrade Gate: SAFE" in summary


def _waivers_in_a_spaced_path(tmp_path: Path) -> Path:
    """A real policy file whose path has a space: a value a word-splitting `args` would cut in two."""
    folder = tmp_path / "team policy"
    folder.mkdir()
    policy = folder / ".upgrade-gate.yaml"
    policy.write_text("waivers: []\n", encoding="utf-8")
    return policy


def test_the_action_splits_args_as_a_shell_would(runner: dict[str, Path], tmp_path: Path) -> None:
    """A quoted value with a space reaches the gate whole (split on spaces, `--waivers` would get half a path and
    the step would end 2, bad input); the verdict is the blocked graph's own."""
    policy = _waivers_in_a_spaced_path(tmp_path)
    code, outputs, _ = _run_action(runner, tmp_path / "quoted", {
        "graph": str(BLOCKED_GRAPH), "savepoint": str(SP), "format": "json",
        "args": f"--flink-version 2.3 --waivers {shlex.quote(str(policy))}"})
    assert (code, outputs["exit-code"], outputs["verdict"]) == (1, "1", "RESTORE_FAILS")


def test_the_action_refuses_args_it_cannot_split(runner: dict[str, Path], tmp_path: Path) -> None:
    code, outputs, _ = _run_action(runner, tmp_path / "unbalanced", {
        "graph": str(SAFE_GRAPH), "savepoint": str(SP), "args": "--waivers 'never closed"})
    assert (code, outputs["exit-code"], outputs["verdict"]) == (2, "2", "BAD_INPUT")


# ---- GitLab CI template -------------------------------------------------------------------------------------------
def _template() -> dict[str, Any]:
    return yaml.safe_load(GITLAB.read_text(encoding="utf-8"))


def test_the_gitlab_template_is_a_hidden_job_keeping_a_junit_report() -> None:
    job = _template()[".upgrade-gate"]
    assert job["artifacts"]["when"] == "always" and job["artifacts"]["reports"]["junit"] == "upgrade-gate-junit.xml"
    assert {"UPGRADE_GATE_GRAPH", "UPGRADE_GATE_SAVEPOINT", "UPGRADE_GATE_MANIFEST", "UPGRADE_GATE_ARGS",
            "UPGRADE_GATE_FAIL_ON"} <= set(job["variables"])
    _assert_real_flags("\n".join(job["script"]))


def _run_gitlab_script(tmp_path: Path, **variables: str) -> subprocess.CompletedProcess[str]:
    """The script as GitLab's runner runs it (bash -eo pipefail, the job's variables in the environment), with this
    checkout's `upgrade-gate` on PATH in place of `before_script`'s install."""
    job = _template()[".upgrade-gate"]
    script = tmp_path / "script.sh"
    script.write_text("\n".join(job["script"]), encoding="utf-8")
    env = {**os.environ, **{k: str(v) for k, v in job["variables"].items()}, **variables,
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize(("graph", "expected"), [(SAFE_GRAPH, 0), (BLOCKED_GRAPH, 1)])
def test_the_gitlab_script_keeps_the_exit_code(tmp_path: Path, graph: Path, expected: int) -> None:
    done = _run_gitlab_script(tmp_path, UPGRADE_GATE_GRAPH=str(graph), UPGRADE_GATE_SAVEPOINT=str(SP))
    assert done.returncode == expected, done.stdout + done.stderr
    assert done.stdout.startswith(f"VERDICT: {'SAFE' if expected == 0 else 'RESTORE_FAILS'}")
    assert (tmp_path / "upgrade-gate-junit.xml").stat().st_size > 0


def test_the_gitlab_script_splits_args_as_a_shell_would(tmp_path: Path) -> None:
    policy = _waivers_in_a_spaced_path(tmp_path)
    done = _run_gitlab_script(tmp_path, UPGRADE_GATE_GRAPH=str(BLOCKED_GRAPH), UPGRADE_GATE_SAVEPOINT=str(SP),
                              UPGRADE_GATE_ARGS=f"--flink-version 2.3 --waivers {shlex.quote(str(policy))}")
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.startswith("VERDICT: RESTORE_FAILS")
    refused = _run_gitlab_script(tmp_path, UPGRADE_GATE_GRAPH=str(SAFE_GRAPH), UPGRADE_GATE_SAVEPOINT=str(SP),
                                 UPGRADE_GATE_ARGS="--waivers 'never closed")
    assert refused.returncode == 2 and "cannot be split" in refused.stderr

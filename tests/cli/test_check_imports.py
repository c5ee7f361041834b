"""A check loads what it uses, and nothing else (docs/performance.md, "A check's own cost").

Most of a `check`'s CPU time used to be imports it never needed: every other sub-command (the exporter's
subprocess and archive modules, the repair engine), Rich for a table nobody asked for, an HTTP and TLS stack for
local files. Every Airflow task and every CI call pays that per process. This runs the real command in a fresh
interpreter and looks at what it loaded; the CPU figure itself is measured by `python -m bench.bench_check`,
never here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CASE = REPO / "tests" / "fixtures" / "restores" / "2.3.0" / "chaining-disabled-uids"
PROBE = """
import json, sys
from upgrade_gate.cli.main import main
code = main(sys.argv[2:])
with open(sys.argv[1], "w") as f:
    json.dump({"code": code, "modules": sorted(sys.modules)}, f)
"""
NEVER_FOR_A_LOCAL_CHECK = ("http.client", "ssl", "flink_bridge.exporter", "upgrade_gate.repair.run",
                           "upgrade_gate.cli.commands.repair", "upgrade_gate.cli.commands.export",
                           "upgrade_gate.cli.commands.inspect", "upgrade_gate.cli.commands.ids",
                           "upgrade_gate.cli.commands.mapping", "upgrade_gate.cli.commands.deployment",
                           "upgrade_gate.cli.commands.lint", "upgrade_gate.cli.commands.check_manifest",
                           "upgrade_gate.cli.commands.apply", "kubernetes", "urllib3",
                           "yaml")  # the graph is JSON: PyYAML only for a YAML document (hashing.yaml_loader)


def _loaded(tmp_path: Path, fmt: str) -> tuple[int, set[str]]:
    out = tmp_path / f"modules-{fmt}.json"
    argv = ["check", "--savepoint", str(CASE.parent / "savepoints" / "uids-p2"), "--graph", str(CASE / "graph-b.json"),
            "--flink-version", "2.3", "--format", fmt, "--output", str(tmp_path / f"report.{fmt}")]
    # a fixed width: on a narrow terminal a table becomes blocks of lines, drawn without Rich
    subprocess.run([sys.executable, "-c", PROBE, str(out), *argv], cwd=REPO, check=True,
                   env={**os.environ, "COLUMNS": "120"})
    seen = json.loads(out.read_text())
    return seen["code"], set(seen["modules"])


@pytest.mark.parametrize("fmt", ["json", "table", "html", "markdown", "github", "junit", "sarif"])
def test_a_local_check_loads_no_other_command_and_no_network_stack(tmp_path: Path, fmt: str) -> None:
    code, modules = _loaded(tmp_path, fmt)
    assert code == 0 and (tmp_path / f"report.{fmt}").stat().st_size > 0  # the check itself still works
    never = set(NEVER_FOR_A_LOCAL_CHECK)  # the HTML report's State section is upgrade_gate.report.states, no command
    assert not modules & never, sorted(modules & never)
    assert ("rich" in modules) == (fmt == "table"), "Rich is for tables only"
    assert ("jinja2" in modules) == (fmt == "html"), "Jinja2 is for the HTML report only"
    assert ("junitparser" in modules) == (fmt == "junit"), "junitparser is for JUnit XML only"
    for renderer in ("markdown", "github", "junit", "sarif"):  # each format's renderer for it only (without
        # $GITHUB_STEP_SUMMARY, which the conftest clears, github writes no markdown)
        assert (f"upgrade_gate.report.{renderer}" in modules) == (fmt == renderer), renderer


def test_help_still_lists_every_command() -> None:
    done = subprocess.run([sys.executable, "-m", "upgrade_gate.cli.main", "--help"], cwd=REPO, capture_output=True,
                          text=True, check=True)
    for name in ("ids", "inspect", "mapping", "check", "lint", "repair", "export"):
        assert f"    {name} " in done.stdout or f"    {name}\n" in done.stdout, done.stdout

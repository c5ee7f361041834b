"""Shared test helpers: where the real-Flink fixtures live and how to run the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
FLINK_FIXTURES = TESTS / "fixtures" / "flink"
FLINK_RELEASES = ("1.20.5", "2.3.0")

# `upgrade-gate check` prints GitHub workflow commands by default inside GitHub Actions (docs/guide.md, "In a pull
# request") and appends to $GITHUB_STEP_SUMMARY: tests that mean the terminal table must get it wherever they run.
# The tests of that default set these variables themselves (tests/cli/test_check_formats.py).
for _name in ("GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY"):
    os.environ.pop(_name, None)


def graph_fixture_files() -> list[Path]:
    return sorted(FLINK_FIXTURES.glob("*/graphs/*.json"))


def load_json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run the installed console script the way a user does."""
    exe = Path(sys.executable).with_name("upgrade-gate")
    return subprocess.run([str(exe), *args], capture_output=True, text=True, cwd=cwd or REPO, timeout=300)


@pytest.fixture
def cli():
    return run_cli

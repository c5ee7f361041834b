"""The `upgrade-gate-lint` pre-commit hook (`.pre-commit-hooks.yaml`), run by the real pre-commit tool.

A temporary git repository uses this repository as its hook source (`repo:` this checkout, `rev:` its HEAD
commit), exactly as a user's `.pre-commit-config.yaml` names a published one: pre-commit clones it, installs the
package into its own virtualenv and runs `upgrade-gate lint` on the staged graph specs. The hook is what HEAD
holds, so commit a change to the hook before running this test.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.restore_support import RESTORES

PRE_COMMIT = Path(sys.executable).with_name("pre-commit")
UIDLESS = RESTORES / "2.3.0" / "identical-no-uids" / "graph-a.json"
PINNED = RESTORES / "2.3.0" / "identical" / "graph-a.json"


def _git(repo: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, env=env, timeout=600)


@pytest.fixture(scope="module")
def pre_commit_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One hook environment for the module: pre-commit installs it once per `rev` (about 20 s here)."""
    return tmp_path_factory.mktemp("pre-commit-home")


@pytest.fixture
def user_repo(tmp_path: Path, pre_commit_home: Path) -> tuple[Path, dict[str, str]]:
    rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GIT_DIR", "GIT_WORK_TREE")}
    env.update(PRE_COMMIT_HOME=str(pre_commit_home), GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com",
               PATH=f"{PRE_COMMIT.parent}{os.pathsep}{env.get('PATH', '')}")
    repo = tmp_path / "jobs"
    (repo / "graphs").mkdir(parents=True)
    assert _git(repo, "init", "-q", env=env).returncode == 0
    (repo / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {REPO}\n    rev: {rev.strip()}\n    hooks:\n      - id: upgrade-gate-lint\n",
        encoding="utf-8")
    done = subprocess.run([str(PRE_COMMIT), "install"], cwd=repo, capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    return repo, env


def test_a_commit_adding_a_uidless_stateful_operator_is_refused(user_repo: tuple[Path, dict[str, str]]) -> None:
    repo, env = user_repo
    shutil.copy(UIDLESS, repo / "graphs" / "orders.json")
    shutil.copy(UIDLESS, repo / "notes.json")  # not a graph spec by the hook's default pattern: not linted
    _git(repo, "add", "-A", env=env)
    refused = _git(repo, "commit", "-q", "-m", "orders job", env=env)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    out = refused.stdout + refused.stderr
    assert "Flink stateful operators without a uid" in out and "Failed" in out
    assert "graphs/orders.json: node 49 'Source: numbers' keeps state without a uid" in out
    assert "notes.json" not in out.replace("graphs/orders.json", "")
    assert _git(repo, "rev-parse", "--verify", "HEAD", env=env).returncode != 0  # nothing was committed

    shutil.copy(PINNED, repo / "graphs" / "orders.json")  # every stateful operator has a uid now
    _git(repo, "add", "-A", env=env)
    passed = _git(repo, "commit", "-q", "-m", "orders job with uids", env=env)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "Flink stateful operators without a uid" in passed.stdout + passed.stderr


def test_the_files_pattern_is_the_users_to_set(user_repo: tuple[Path, dict[str, str]]) -> None:
    repo, env = user_repo
    config = repo / ".pre-commit-config.yaml"
    config.write_text(config.read_text(encoding="utf-8") + "        files: ^flink/.*\\.json$\n", encoding="utf-8")
    (repo / "flink").mkdir()
    shutil.copy(UIDLESS, repo / "flink" / "orders.json")
    shutil.copy(UIDLESS, repo / "graphs" / "orders.json")  # the default pattern's place, no longer linted
    _git(repo, "add", "-A", env=env)
    done = subprocess.run([str(PRE_COMMIT), "run", "--all-files"], cwd=repo, capture_output=True, text=True, env=env,
                          timeout=600)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "flink/orders.json: node 49" in done.stdout and "graphs/orders.json" not in done.stdout

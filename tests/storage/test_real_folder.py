"""The folder a savepoint's relative state handles resolve against (`CheckpointMetadata.base_dir`) is the
folder's real path, however the user named it: through symlinks, `..`, a relative path. `real_folder` asks
the kernel (/proc/self/fd) instead of `os.path.realpath`; it must answer exactly as `realpath` would."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.conftest import REPO
from upgrade_gate.storage.savepoints import load_savepoint, real_folder

SAVEPOINT = REPO / "tests" / "fixtures" / "restores" / "1.20.5" / "savepoints" / "uids-p2"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """real/a b/ünïcode/sp (a copy of a real Flink savepoint), reached by several links."""
    real = tmp_path / "real" / "a b" / "ünïcode"
    real.mkdir(parents=True)
    shutil.copytree(SAVEPOINT, real / "sp")
    (tmp_path / "link-to-real").symlink_to(tmp_path / "real")
    (tmp_path / "relative-link").symlink_to("real/a b")
    (tmp_path / "chain").symlink_to(tmp_path / "relative-link")
    return tmp_path


@pytest.mark.parametrize("named", [
    "real/a b/ünïcode/sp",
    "link-to-real/a b/ünïcode/sp",
    "relative-link/ünïcode/sp",
    "chain/ünïcode/../ünïcode/sp",
    "real/a b/ünïcode/sp/./",
])
def test_the_folder_is_named_as_realpath_names_it(tree: Path, named: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tree)
    expected = os.path.realpath(named)
    assert real_folder(Path(named)) == expected
    assert real_folder(tree / named) == expected


def test_a_folder_that_cannot_be_opened_is_answered_by_realpath(tree: Path) -> None:
    missing = tree / "link-to-real" / "no-such-folder"
    assert real_folder(missing) == os.path.realpath(missing) == str(tree / "real" / "no-such-folder")


def test_a_savepoint_read_through_a_symlink_resolves_against_its_real_folder(tree: Path) -> None:
    """What a user notices: the pointer Flink would print and the folder relative state files are read from are
    the savepoint's real folder, not the link they typed."""
    metadata = load_savepoint(str(tree / "chain" / "ünïcode" / "sp"))
    assert metadata.base_dir == str(tree / "real" / "a b" / "ünïcode" / "sp")

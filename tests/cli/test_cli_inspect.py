"""`upgrade-gate inspect` in both formats, on real Flink savepoints."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.metadata_support import fixture_dirs, fixture_id, flink_view
from upgrade_gate.flink.metadata import to_json
from upgrade_gate.report.sizes import human_bytes
from upgrade_gate.storage.savepoints import load_savepoint

DIRS = [d for d in fixture_dirs() if d.name in ("hashmap-canonical-p2", "checkpoint-finished-tasks")]


def _cli(*args: str, columns: int = 100) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": str(columns)}
    return subprocess.run([sys.executable, "-m", "upgrade_gate", *args], capture_output=True, text=True, timeout=60,
                          env=env)


@pytest.mark.parametrize("d", DIRS, ids=fixture_id)
def test_json_matches_flinks_reading(d) -> None:  # type: ignore[no-untyped-def]
    proc = _cli("inspect", str(d), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    view = flink_view(d)
    assert doc["version"] == view["version"] and doc["checkpoint_id"] == view["checkpoint_id"]
    for ours, flink in zip(doc["operators"], view["operators"], strict=True):
        ours = {k: v for k, v in ours.items() if k not in ("states", "states_incomplete")}  # state meta: additive
        flink = {**flink, "subtasks": [{k: v for k, v in s.items() if k not in ("handles", "state_size")}
                                      for s in flink["subtasks"]]}
        assert ours == flink


@pytest.mark.parametrize("d", DIRS, ids=fixture_id)
def test_table_shows_operators_and_key_groups(d) -> None:  # type: ignore[no-untyped-def]
    proc = _cli("inspect", str(d / "_metadata"), "--format", "table", columns=200)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    doc = to_json(load_savepoint(str(d)))
    for op in doc["operators"]:
        assert op["operator_id"] in out and human_bytes(op["state_bytes"]) in out
        for s in op["subtasks"]:
            for h in s["managed_keyed"]:
                assert f"{h['key_groups'][0]}-{h['key_groups'][1]}" in out
    assert "keyed" in out
    if d.name == "checkpoint-finished-tasks":
        assert "FULLY FINISHED" in out and "finished" in out
    if d.name == "hashmap-canonical-p2":
        assert "split-list(split_distribute)" in out and "union-list(union)" in out and "coordinator(" in out


def test_detail_flag_and_bad_format() -> None:
    d = DIRS[0]
    proc = _cli("inspect", str(d), "--detail")
    subtasks = [s for op in json.loads(proc.stdout)["operators"] for s in op["subtasks"]]
    assert proc.returncode == 0 and subtasks and all("handles" in s for s in subtasks)
    assert _cli("inspect", str(d), "--format", "xml").returncode == 2


def test_local_job_prefix_picks_newest_complete_savepoint(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import os
    import shutil

    old, new = DIRS[0], DIRS[-1]
    shutil.copytree(old, tmp_path / "job" / "savepoint-old")
    shutil.copytree(new, tmp_path / "job" / "savepoint-new")
    (tmp_path / "job" / "savepoint-incomplete").mkdir()
    os.utime(tmp_path / "job" / "savepoint-old" / "_metadata", (1_000_000, 1_000_000))
    proc = _cli("inspect", f"file://{tmp_path / 'job'}")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["checkpoint_id"] == flink_view(new)["checkpoint_id"]
    assert json.loads(proc.stdout)["operators"][0]["operator_id"] == flink_view(new)["operators"][0]["operator_id"]

"""Builds under `.work/` made on first use are safe when two processes make them at once.

Two Airflow tasks exporting jars on a fresh worker, or the two test tiers of `make test`, compile the same Java
tool at the same moment; without `flink_bridge.dist.work_lock` one deleted the other's classes half-way and its
export failed with a missing class.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from flink_bridge.dist import WORK_DIR

pytestmark = pytest.mark.flink

COMPILE = ("from flink_bridge.jvm import compile_tool; import sys; "
           "print(compile_tool('streamgraph', '2.3'), file=sys.stderr)")


def test_two_processes_compiling_one_tool_both_get_whole_classes(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "flink").symlink_to(WORK_DIR / "flink")  # the jars, shared read-only; the classes are built anew
    env = {**os.environ, "UPGRADE_GATE_WORK": str(work)}
    procs = [subprocess.Popen([sys.executable, "-c", COMPILE], env=env, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=600)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    classes = {Path(o.strip().splitlines()[-1]) for o in outs}
    assert len(classes) == 1
    built = next(iter(classes))
    assert (built / ".digest").is_file() and any(built.rglob("*.class"))
    assert (work / "locks" / "jvm-2.3.0-streamgraph.lock").is_file()

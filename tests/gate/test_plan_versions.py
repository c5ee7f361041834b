"""Which compiled plans a Flink release executes (FLIP-190), against real Flink 1.19.3 .. 2.3.0.

tests/fixtures/plan_versions/acceptance.json (flink_bridge/plan_versions.py): every release compiled the same SQL
job and ran every release's plan with `EXECUTE PLAN`. The gate's rule must give Flink's answer for each pair, with
Flink's own error text where it refuses, and `export --compiled-plan` must refuse a plan the target release
cannot run before it starts a JVM.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hashing.errors import InputError
from hashing.versions import PATCH_RELEASES
from upgrade_gate.gate import plan_versions

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "plan_versions"
ACCEPTANCE = json.loads((FIXTURES / "acceptance.json").read_text())
PAIRS = [(by, plan, run) for by, rows in ACCEPTANCE["executed_by"].items() for plan, run in rows.items()]


def _line(release: str) -> str:
    return ".".join(release.split(".")[:2])


def test_every_installed_release_was_measured_both_ways() -> None:
    releases = set(ACCEPTANCE["plans"])
    assert releases >= set(PATCH_RELEASES.values())  # a new release in hashing/versions.py is measured here too
    assert all(set(rows) == releases for rows in ACCEPTANCE["executed_by"].values())


@pytest.mark.parametrize(("target", "compiled_by", "run"), PAIRS, ids=lambda x: x if isinstance(x, str) else "")
def test_the_rule_gives_what_flink_did(target: str, compiled_by: str, run: dict[str, str]) -> None:
    plan = json.loads((FIXTURES / ACCEPTANCE["plans"][compiled_by]["file"]).read_text())
    version = plan_versions.plan_flink_version(plan)
    assert version == _line(compiled_by)  # the plan names the release that compiled it
    said = plan_versions.check(version, target)
    assert said.accepted == (run["status"] == "RUNNING"), (compiled_by, target, run)
    assert said.measured
    if not said.accepted:
        assert said.flink_error == run["error"]
        assert f"Flink {_line(target)}" in said.reason and f"compiled by Flink {version}" in said.reason


def test_a_newer_release_keeps_the_old_exec_node_versions() -> None:
    """2.3 writes new ExecNode versions (sink_2) and still runs 1.19's sink_1 plans: why old plans keep working."""
    old = set(ACCEPTANCE["plans"]["1.19.3"]["exec_nodes"])
    new = set(ACCEPTANCE["plans"]["2.3.0"]["exec_nodes"])
    assert "stream-exec-sink_1" in old and "stream-exec-sink_2" in new and old != new
    assert ACCEPTANCE["executed_by"]["2.3.0"]["1.19.3"]["status"] == "RUNNING"


def test_outside_the_measured_range_it_says_so() -> None:
    said = plan_versions.check("1.17", "2.3")
    assert said.accepted and not said.measured and "not measured" in said.reason
    with pytest.raises(InputError):
        plan_versions.plan_flink_version({"nodes": []})


def test_export_refuses_a_plan_the_target_cannot_run(tmp_path: Path) -> None:
    plan = FIXTURES / "plan-2.3.0.json"
    out = subprocess.run([sys.executable, "-m", "upgrade_gate.cli.main", "export", "--compiled-plan", str(plan),
                          "--flink-version", "1.20", "-o", str(tmp_path / "spec.json")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and not (tmp_path / "spec.json").exists()
    assert "Unknown Flink version '2.3'" in out.stderr and "Compile the plan with Flink 1.20" in out.stderr


def test_export_checks_the_plan_a_script_executes(tmp_path: Path) -> None:
    (tmp_path / "job.json").write_text((FIXTURES / "plan-2.2.1.json").read_text())
    script = tmp_path / "job.sql"
    script.write_text("CREATE TABLE t (a INT) WITH ('connector' = 'datagen');\nEXECUTE PLAN 'job.json';\n")
    out = subprocess.run([sys.executable, "-m", "upgrade_gate.cli.main", "export", "--sql", str(script),
                          "--flink-version", "2.1"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "Unknown Flink version '2.2'" in out.stderr and "job.json" in out.stderr

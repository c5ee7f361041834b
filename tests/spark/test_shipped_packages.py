"""The zip a spark-submit or cluster driver ships to its executors (`spark_jobs.common.package_zip`).

An executor's Python imports our packages from that zip; with sources alone it compiled every module in
every worker. These tests import from the zip in a fresh interpreter that has nothing else of the repository
on its path, as an executor does."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from spark_jobs import common

_IMPORT = ("import sys; import spark_jobs.fleet_gate, upgrade_gate.gate.check; "
           "print(upgrade_gate.gate.check.__file__); print(spark_jobs.fleet_gate.gate_job.__code__.co_filename)")


def _run_from(zip_path: Path, tmp_path: Path) -> list[str]:
    out = subprocess.run([sys.executable, "-c", _IMPORT], cwd=tmp_path, env={"PYTHONPATH": str(zip_path)},
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def test_executors_import_the_shipped_packages_from_bytecode_without_compiling(tmp_path: Path) -> None:
    target = tmp_path / "packages.zip"
    common.package_zip(target)
    names = zipfile.ZipFile(target).namelist()
    sources = [n for n in names if n.endswith(".py")]
    assert sources and all(n[:-3] + ".pyc" in names for n in sources)
    assert not (tmp_path / "packages.zip.scratch.pyc").exists()
    loaded_from, code_file = _run_from(target, tmp_path)
    assert loaded_from == f"{target}/upgrade_gate/gate/check.pyc"  # the bytecode, not the source, was imported
    assert code_file == "spark_jobs/fleet_gate.py"  # tracebacks name the module as it is in the repository


def test_bytecode_of_another_python_falls_back_to_the_source(tmp_path: Path) -> None:
    """A worker of another Python version cannot use our bytecode; zipimport then compiles the source."""
    target = tmp_path / "packages.zip"
    common.package_zip(target)
    foreign = tmp_path / "foreign.zip"
    with zipfile.ZipFile(target) as src, zipfile.ZipFile(foreign, "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename.endswith(".pyc"):
                data = b"\x00\x00" + data[2:]  # another magic number
            dst.writestr(info, data)
    loaded_from, _ = _run_from(foreign, tmp_path)
    assert loaded_from == f"{foreign}/upgrade_gate/gate/check.py"

"""Export the job-graph spec (design §4.1) of a user's Flink job, using real Flink.

Users have jars, SQL scripts and compiled plans, not spec JSON. The Java side
(`flink_bridge/java/common/streamgraph/ExportMain.java`, sharing `SpecDumper` with the oracle,
so exported specs have exactly the fields the fixtures have) builds the StreamGraph the way
Flink itself does, without running the job:

* `jar`: `PackagedProgram` + `PackagedProgramUtils.getPipelineFromProgram`, as `flink info`
  does: `main()` runs until `execute()`, which captures the graph and aborts;
* `sql`: a SQL-client style script; its INSERTs become one statement set attached to the env;
* `compiled-plan`: a FLIP-190 plan, translated by the planner (`Planner#translatePlan`);
* `pyflink`: a PyFlink DataStream program, run in its own virtual environment with the full
  `apache-flink` package (created on first use) until it calls `execute()`
  (`flink_bridge/pyflink_capture.py`).

Problems in the user's input become `InputError`s naming the file; bugs in the tool do not.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from flink_bridge.dist import WORK_DIR, FlinkDistError, ensure_flink, release_of
from flink_bridge.jvm import compile_tool, run_tool
from hashing.errors import InputError

TOOL = "streamgraph"
EXPORT_MAIN = "upgradegate.bridge.ExportMain"
KINDS = {"jar": "jar", "sql": "sql", "compiled-plan": "plan", "pyflink": "pyflink"}
CAPTURE = Path(__file__).resolve().parent / "pyflink_capture.py"


def pyflink_python(release: str) -> Path:
    """The interpreter of a virtual environment with `apache-flink==release`, created on first use."""
    venv = WORK_DIR / "pyflink" / release
    python = venv / "bin" / "python"
    if (venv / ".installed").is_file():
        return python
    print(f"[export] creating the PyFlink {release} environment in {venv} (about a minute) ...", file=sys.stderr)
    ensure_flink(release)  # its apache-flink-libraries archive is reused from the cache
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    proc = subprocess.run([str(python), "-m", "pip", "install", "-q", "--find-links", str(WORK_DIR / "cache" / "flink"),
                           f"apache-flink=={release}"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise FlinkDistError(f"installing apache-flink=={release} failed:\n{proc.stderr[-2000:]}")
    (venv / ".installed").touch()
    return python


def _export_pyflink(path: Path, args: Sequence[str], release: str, out: Path) -> None:
    classes = compile_tool(TOOL, release)
    python = pyflink_python(release)
    proc = subprocess.run([str(python), str(CAPTURE), str(out), str(classes), str(path.resolve()), *args],
                          capture_output=True, text=True, timeout=600, cwd=path.resolve().parent)
    if proc.returncode != 0 or not out.is_file():
        raise InputError(f"{path}: the PyFlink program could not be run: {proc.stderr.strip()[-500:]}")


def _check_input(kind: str, path: Path, main_class: str | None) -> None:
    if kind not in KINDS:
        raise InputError(f"{path}: unknown input kind {kind!r}; expected one of {', '.join(KINDS)}")
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    if kind == "jar" and not zipfile.is_zipfile(path):
        raise InputError(f"{path}: not a jar file")
    if main_class is not None and not main_class.strip():
        raise InputError(f"{path}: empty main class name")


def export_spec(kind: str, path: str | Path, *, main_class: str | None = None, args: Sequence[str] = (),
                flink_version: str = "2.3", parallelism: int = 1) -> dict[str, Any]:
    """The §4.1 spec of a job jar (`kind="jar"`), SQL script (`"sql"`) or compiled plan (`"compiled-plan"`).

    `main_class` defaults to the jar manifest's entry point; `args` are the program arguments;
    `parallelism` is the default parallelism the job is built with (Flink's `parallelism.default`,
    1 unless the cluster sets another, as with `flink run -p`).
    """
    path = Path(path)
    _check_input(kind, path, main_class)
    if parallelism < 1:
        raise InputError(f"{path}: parallelism must be at least 1, got {parallelism}")
    try:
        release = release_of(flink_version)
    except FlinkDistError as exc:
        raise InputError(str(exc)) from exc
    ensure_flink(release)
    compile_tool(TOOL, release)
    with tempfile.TemporaryDirectory(prefix="export-") as tmp:
        out = Path(tmp) / "spec.json"
        if kind == "pyflink":
            _export_pyflink(path, args, release, out)
        else:
            argv = [str(out), str(parallelism), KINDS[kind], str(path.resolve())]
            if kind == "jar":
                argv += [main_class or "", *args]
            run_tool(TOOL, release, EXPORT_MAIN, argv)
        result = json.loads(out.read_text(encoding="utf-8"))
    if "error" in result:
        error = result["error"]
        raise InputError(f"{path}: {error['message']}")
    return result["spec"]

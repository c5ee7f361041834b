"""Export the job-graph spec (design §4.1) of a user's Flink job, using real Flink.

Users have jars, SQL scripts and compiled plans, not spec JSON. The Java side
(`flink_bridge/java/common/streamgraph/ExportMain.java`, sharing `SpecDumper` with the oracle,
so exported specs have exactly the fields the fixtures have) builds the StreamGraph the way
Flink itself does, without running the job:

* `jar`: `PackagedProgram` + `PackagedProgramUtils.getPipelineFromProgram`, as `flink info`
  does: `main()` runs until `execute()`, which captures the graph and aborts;
* `sql`: a SQL-client style script; its INSERTs become one statement set attached to the env;
* `compiled-plan`: a FLIP-190 plan, translated by the planner (`Planner#translatePlan`).

Problems in the user's input become `InputError`s naming the file; bugs in the tool do not.
PyFlink programs are not supported (they would need the full `apache-flink` Python package).
"""

from __future__ import annotations

import json
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from flink_bridge.dist import FlinkDistError, ensure_flink, release_of
from flink_bridge.jvm import compile_tool, run_tool
from hashing.errors import InputError

TOOL = "streamgraph"
EXPORT_MAIN = "upgradegate.bridge.ExportMain"
KINDS = {"jar": "jar", "sql": "sql", "compiled-plan": "plan"}


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
        argv = [str(out), str(parallelism), KINDS[kind], str(path.resolve())]
        if kind == "jar":
            argv += [main_class or "", *args]
        run_tool(TOOL, release, EXPORT_MAIN, argv)
        result = json.loads(out.read_text(encoding="utf-8"))
    if "error" in result:
        error = result["error"]
        raise InputError(f"{path}: {error['message']}")
    return result["spec"]

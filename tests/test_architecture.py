"""The package structure the README promises, checked on the source: no import cycle (in `plugins/` and
`spark_jobs/` too), layers that only look down, and real Flink (`flink_bridge`) reachable from one CLI command only.

Layers (upgrade_gate/__init__.py): `hashing` -> `upgrade_gate.flink` -> `upgrade_gate.gate` ->
`upgrade_gate.storage` -> `upgrade_gate.repair` -> `upgrade_gate.report` -> `upgrade_gate.cli`: the gate judges
parsed inputs and never imports storage, which reads them into a `CheckInputs`. `upgrade_gate.vocabulary` (the
shared words) sits just above `upgrade_gate.flink`, whose matching modes it names. Rendering (`upgrade_gate.report`)
reads nothing itself, so it imports neither `upgrade_gate.storage` nor the CLI, and the other front ends
(`plugins/`, `spark_jobs/`, `dags/`) render through it, never through `upgrade_gate.cli`.
Imports are read with `ast`, every one counted: module level, inside functions and under `TYPE_CHECKING` (a cycle
there is still a cycle for a reader).
A second test imports every module first thing in a fresh interpreter, which is how a cycle breaks at run time.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("hashing", "upgrade_gate")
LAYERS = ("hashing", "upgrade_gate.flink", "upgrade_gate.vocabulary", "upgrade_gate.gate", "upgrade_gate.storage",
          "upgrade_gate.repair", "upgrade_gate.report", "upgrade_gate.cli")
# what may import flink_bridge (which runs a JVM): the `export` command, the Airflow jar path's export (the same
# call with the job's settings, flink_gate/job_export.py), and the tools and tests around them
FLINK_BRIDGE_USERS = {"upgrade_gate/cli/commands/export.py", "plugins/flink_gate/job_export.py"}
FLINK_BRIDGE_DIRS = ("flink_bridge/", "tests/", "bench/")
# the project's own top-level import names (plugins/ is on Airflow's path as `flink_gate`)
PROJECT = {"hashing", "upgrade_gate", "flink_bridge", "flink_gate", "plugins", "spark_jobs", "dags", "tests", "bench",
           "demo"}


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for pkg in PACKAGES for p in sorted((REPO / pkg).rglob("*.py"))}


def _imports(path: Path, name: str, known: dict[str, Path]) -> Iterator[tuple[str, int]]:
    """(imported module, line) for every import in the file; `from p import x` is p.x when x is a module."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[:len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            for alias in node.names:
                sub = f"{module}.{alias.name}"
                yield (sub if sub in known else module), node.lineno


# every package of ours whose modules import each other, for the cycle test: plugins/ is on Airflow's path, so
# plugins/flink_gate/steps.py is `flink_gate.steps`
CYCLE_ROOTS = {"hashing": REPO, "upgrade_gate": REPO, "flink_bridge": REPO, "spark_jobs": REPO,
               "flink_gate": REPO / "plugins"}


def _all_modules() -> dict[str, Path]:
    out = {}
    for package, parent in CYCLE_ROOTS.items():
        for path in sorted((parent / package).rglob("*.py")):
            parts = path.relative_to(parent).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _graph(known: dict[str, Path] | None = None) -> dict[str, set[str]]:
    known = _modules() if known is None else known
    return {name: {m for m, _ in _imports(path, name, known) if m in known and m != name}
            for name, path in known.items()}


def _layer(module: str) -> int | None:
    for i, prefix in enumerate(LAYERS):
        if module == prefix or module.startswith(prefix + "."):
            return i
    return None


def test_no_import_cycle_between_modules() -> None:
    """In the core packages, the Spark jobs and the Airflow plugin alike (the plugin's task bodies, upgrade state
    machine and records once formed a cycle: steps -> rollback -> upgrade_records -> steps)."""
    graph = _graph(_all_modules())
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    cycles: list[list[str]] = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append([*path[path.index(nxt):], nxt])
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for start in sorted(graph):
        if start not in state:
            visit(start, [start])
    assert cycles == [], "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_layers_only_import_downwards() -> None:
    known = _modules()
    wrong = []
    for name, path in known.items():
        mine = _layer(name)
        for module, line in _imports(path, name, known):
            top = module.split(".")[0]
            if top not in PROJECT:
                continue  # the standard library and third-party packages
            theirs = _layer(module)
            if mine is None:  # the package roots: upgrade_gate/__init__.py and __main__.py
                ok = name == "upgrade_gate.__main__" and theirs == LAYERS.index("upgrade_gate.cli")
            elif module == "flink_bridge" or module.startswith("flink_bridge."):
                ok = path.relative_to(REPO).as_posix() in FLINK_BRIDGE_USERS
            else:
                ok = theirs is not None and theirs <= mine
            if not ok:
                wrong.append(f"{path.relative_to(REPO)}:{line} ({LAYERS[mine] if mine is not None else name}) "
                             f"imports {module}")
    assert wrong == [], "imports against the layering:\n" + "\n".join(wrong)


def _under(module: str, *prefixes: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def _absolute_imports(path: Path) -> Iterator[tuple[str, int]]:
    """(module, line) of every absolute import in a file outside the core packages (`import m`, `from m import x`)."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            yield from ((a.name, node.lineno) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level:
            yield node.module or "", node.lineno


def test_rendering_reads_nothing_and_is_no_part_of_the_cli() -> None:
    """A renderer gets what it shows as arguments: the caller (a CLI command, an Airflow step) reads the savepoint
    and its state files (`upgrade_gate.storage`), so a page renders the same wherever its data came from."""
    known = _modules()
    wrong = [f"{path.relative_to(REPO)}:{line} imports {module}" for name, path in known.items()
             if _under(name, "upgrade_gate.report") for module, line in _imports(path, name, known)
             if _under(module, "upgrade_gate.storage", "upgrade_gate.cli")]
    assert wrong == [], "rendering that reads or reaches into the CLI:\n" + "\n".join(wrong)


def test_other_front_ends_render_through_the_report_package_not_the_cli() -> None:
    """The Airflow plugin, the DAGs and the Spark jobs are front ends beside the CLI: what they render (the HTML
    report, the fleet page, sizes) comes from `upgrade_gate.report`; `upgrade_gate.cli` is the console script's
    argument parsing and wiring only."""
    wrong = [f"{path.relative_to(REPO).as_posix()}:{line} imports {module}"
             for top in ("plugins", "dags", "spark_jobs") for path in sorted((REPO / top).rglob("*.py"))
             for module, line in _absolute_imports(path) if _under(module, "upgrade_gate.cli")]
    assert wrong == [], "front ends importing the CLI package:\n" + "\n".join(wrong)


def test_only_the_export_command_and_tools_import_flink_bridge() -> None:
    users = []
    tops = [p for p in REPO.iterdir() if not p.name.startswith(".") and not p.name.endswith(".egg-info")]
    files = [p for top in tops for p in ([top] if top.suffix == ".py" else top.rglob("*.py") if top.is_dir() else [])]
    for path in sorted(files):
        rel = path.relative_to(REPO).as_posix()
        if rel.startswith(FLINK_BRIDGE_DIRS):
            continue
        if any(_under(module, "flink_bridge") for module, _ in _absolute_imports(path)):
            users.append(rel)
    assert set(users) <= FLINK_BRIDGE_USERS, f"flink_bridge imported by {sorted(set(users) - FLINK_BRIDGE_USERS)}"


def test_every_module_imports_first_in_a_fresh_interpreter() -> None:
    """Importing a module before anything else of ours is where a cycle fails (a partially initialised
    module): each module is imported with every project module unloaded first."""
    names = sorted(n for n in _modules() if n != "upgrade_gate.__main__")  # __main__ runs the CLI
    script = (
        "import importlib, sys, traceback\n"
        f"names = {names!r}\n"
        "failed = []\n"
        "for name in names:\n"
        "    for loaded in [m for m in sys.modules if m.split('.')[0] in ('hashing', 'upgrade_gate')]:\n"
        "        del sys.modules[loaded]\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except Exception:\n"
        "        failed.append(name + ': ' + traceback.format_exc().strip().splitlines()[-1])\n"
        "print('\\n'.join(failed))\n"
        "sys.exit(1 if failed else 0)\n")
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr


# what reads or writes outside the process: a gate module doing any of this would make the verdict depend on where
# its inputs live (docs/design.md, "The check pipeline": callers build `CheckInputs`, the gate judges)
IO_MODULES = {"boto3", "botocore", "urllib", "http", "socket", "requests", "ssl", "shutil", "tempfile"}
IO_CALLS = {"open", "read_text", "read_bytes", "write_text", "write_bytes", "read_local_file", "read_object"}
# a packaged table of facts shipped inside the package is data, not input
PACKAGED_DATA = {"upgrade_gate/gate/config_rules.py"}


def test_the_gate_does_no_io() -> None:
    """`upgrade_gate.gate` judges what `CheckInputs` holds; state files it may need are read through the caller's
    opener (`CheckInputs.open_state`), never by a gate module naming a file, a bucket or a URL."""
    found = []
    for path in sorted((REPO / "upgrade_gate" / "gate").rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), rel)):
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                found += [f"{rel}:{node.lineno} imports {n}" for n in names if n.split(".")[0] in IO_MODULES]
            elif isinstance(node, ast.Call) and rel not in PACKAGED_DATA:
                f = node.func
                name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
                if name in IO_CALLS:
                    found.append(f"{rel}:{node.lineno} calls {name}")
    assert found == [], "I/O in the gate:\n" + "\n".join(found)


def test_state_meta_looks_down_on_metadata_only() -> None:
    """`upgrade_gate.flink.state_meta` reads with the `_metadata` layer's `BoundedReader` and Java serialization
    reader (metadata/java_serialization.py, the one reader of that grammar), so `metadata` never imports it."""
    known = _modules()
    back = [f"{path.relative_to(REPO)}:{line} imports {module}"
            for name, path in known.items() if name.startswith("upgrade_gate.flink.metadata")
            for module, line in _imports(path, name, known) if module.startswith("upgrade_gate.flink.state_meta")]
    assert back == [], "metadata imports state_meta:\n" + "\n".join(back)


def test_one_reader_of_java_serialization() -> None:
    """Java's object serialization grammar (`ObjectInputStream`'s TC_* type codes) is parsed in one module, which
    the `_metadata` trailer and the state meta logical types both use (issue #28: each grammar parsed once)."""
    reader = REPO / "upgrade_gate" / "flink" / "metadata" / "java_serialization.py"
    others = sorted(str(p.relative_to(REPO)) for pkg in PACKAGES for p in (REPO / pkg).rglob("*.py")
                    if p != reader and "TC_OBJECT" in p.read_text(encoding="utf-8"))
    assert reader.is_file() and others == [], f"another Java serialization reader: {others}"


# ---- one way to each kind of server and file (issue #28) ----------------------------------------
PRODUCT_DIRS = ("hashing", "upgrade_gate", "plugins", "dags", "spark_jobs")
HTTP_CLIENTS = ("http.client", "requests", "urllib.request", "httpx", "aiohttp")
# who may do what: the one REST client, the one S3 HEAD, the one graph reader (and the parsers below it)
ONE_WAY = {
    "speaks HTTP": ("upgrade_gate/storage/remote.py",),
    "calls S3 head_object": ("upgrade_gate/storage/s3.py",),
    "parses a graph document": ("upgrade_gate/storage/objects.py", "hashing/readers/"),
}


def _uses(tree: ast.AST) -> Iterator[tuple[str, int]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if any(n == c or n.startswith(c + ".") for n in names for c in HTTP_CLIENTS):
                yield "speaks HTTP", node.lineno
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr == "head_object":
                yield "calls S3 head_object", node.lineno
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name in ("parse_graph", "load_graph"):
                yield "parses a graph document", node.lineno


def test_one_rest_client_one_s3_head_one_graph_reader() -> None:
    """Flink's REST API is spoken only through `upgrade_gate.storage.remote` (the CLI's discovery and the Airflow
    hook alike), an S3 HEAD is made only by `upgrade_gate.storage.s3.head_object` (one error mapping), and a graph
    document becomes a graph only through `upgrade_gate.storage.objects.read_graph` (the CLI, Airflow and Spark):
    a second copy of any of them drifts from the first in its limits, retries or messages."""
    wrong = []
    for top in PRODUCT_DIRS:
        for path in sorted((REPO / top).rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            for what, line in _uses(ast.parse(path.read_text(encoding="utf-8"), rel)):
                if not rel.startswith(ONE_WAY[what]):
                    wrong.append(f"{rel}:{line} {what}")
    assert wrong == [], "outside its one module:\n" + "\n".join(wrong)

"""The package structure the README promises, checked on the source: no import cycle (in `plugins/` and
`spark_jobs/` too), layers that only look down, and real Flink (`flink_bridge`) reachable from one CLI command only.

Layers (upgrade_gate/__init__.py): `hashing` -> `upgrade_gate.flink` -> `upgrade_gate.storage` ->
`upgrade_gate.gate` -> `upgrade_gate.repair` -> `upgrade_gate.cli`. `upgrade_gate.vocabulary` (the shared words)
sits just above `upgrade_gate.flink`, whose matching modes it names. Imports are read with `ast`, every one counted:
module level, inside functions and under `TYPE_CHECKING` (a cycle there is still a cycle for a reader).
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
LAYERS = ("hashing", "upgrade_gate.flink", "upgrade_gate.vocabulary", "upgrade_gate.storage", "upgrade_gate.gate",
          "upgrade_gate.repair", "upgrade_gate.cli")
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


def test_only_the_export_command_and_tools_import_flink_bridge() -> None:
    users = []
    tops = [p for p in REPO.iterdir() if not p.name.startswith(".") and not p.name.endswith(".egg-info")]
    files = [p for top in tops for p in ([top] if top.suffix == ".py" else top.rglob("*.py") if top.is_dir() else [])]
    for path in sorted(files):
        rel = path.relative_to(REPO).as_posix()
        if rel.startswith(FLINK_BRIDGE_DIRS):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), rel)
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            if any(n == "flink_bridge" or n.startswith("flink_bridge.") for n in names):
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

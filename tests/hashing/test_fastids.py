"""The compiled hasher (`hashing._fastids`, hashing/_fastids.c) against the Python rules it was ported from.

`compute_operator_ids` runs the compiled code whenever it was built; the Python rules remain the
reference and the fallback (docs/performance.md, "Operator IDs"). Both must give the same IDs, in
the same traversal order, the same chains and the same errors, on every committed graph (real
Flink's conformance graphs, the real restore scenarios' graphs, the shipped example) and on random
graphs that exercise every chaining rule (`UPGRADE_GATE_FASTIDS_GRAPHS`, default 3,000).
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable
from pathlib import Path

import mmh3
import pytest

import hashing.hashers as hashers
from hashing.errors import FlinkError
from hashing.graph import (
    ChainingStrategy,
    ExchangeMode,
    Factory,
    Partitioner,
    StreamEdge,
    StreamGraph,
    StreamNode,
)
from hashing.hashers import stream_graph_hashes
from hashing.operator_ids import compute_operator_ids
from hashing.readers import parse_graph

REPO = Path(__file__).resolve().parents[2]
RANDOM_GRAPHS = int(os.environ.get("UPGRADE_GATE_FASTIDS_GRAPHS", "3000"))


def _committed_graphs() -> list[tuple[str, dict]]:
    """(name, spec document) of every graph the repository commits."""
    docs: list[tuple[str, dict]] = []
    for path in sorted((REPO / "tests" / "fixtures" / "flink").glob("*/graphs/*.json")):
        doc = json.loads(path.read_text(encoding="utf-8"))
        docs.append((str(path.relative_to(REPO)), doc["spec"]))
    for path in sorted((REPO / "tests" / "fixtures" / "restores").glob("**/graph-*.json")):
        docs.append((str(path.relative_to(REPO)), json.loads(path.read_text(encoding="utf-8"))))
    for path in sorted((REPO / "hashing" / "examples").glob("*.json")):
        docs.append((str(path.relative_to(REPO)), json.loads(path.read_text(encoding="utf-8"))))
    return docs


COMMITTED = _committed_graphs()


def _outcome(fn: Callable[[], object]) -> object:
    """A result to compare, or the error raised (type and message): Flink's, or a cyclic graph's."""
    try:
        return fn()
    except FlinkError as err:
        return ("FlinkError", str(err))
    except (KeyError, RecursionError) as err:
        return (type(err).__name__, str(err))


def _hashes(make: Callable[[], StreamGraph], compiled: bool) -> object:
    """V2 and V3 hashes in traversal order, and the chainable edges, from a graph built just for this call."""
    graph = make()

    def run() -> object:
        v2, v3 = stream_graph_hashes(graph, v2=True, v3=True, compiled=compiled)
        from hashing.chaining import chainable_edges
        return list(v2.items()), list(v3.items()), chainable_edges(graph)  # type: ignore[union-attr]

    return _outcome(run)


def _ids(make: Callable[[], StreamGraph], monkeypatch: pytest.MonkeyPatch, compiled: bool) -> object:
    """What `compute_operator_ids` returns under V2 and V3 (pairs, job vertices), compiled or not."""
    with monkeypatch.context() as m:
        if not compiled:
            m.setattr(hashers, "_fastids", None)
        out = []
        for hasher in ("v2", "v3"):
            out.append(_outcome(lambda h=hasher: compute_operator_ids(make(), h, "2.3").to_json()))
        return out


def test_the_compiled_hasher_is_built_and_used():
    # `pip install -e .` (the Makefile's venv target) compiles it; without it fleets hash ~6x slower
    assert hashers.COMPILED, "hashing._fastids was not built: run `pip install -e .` with a C compiler"
    graph = parse_graph(COMMITTED[0][1], COMMITTED[0][0]).graph
    assert hashers._fastids.hash_graph(graph.nodes, graph.edges, True, True, True, True) is not None


def test_murmur3_128_equals_guava_as_mmh3_computes_it():
    rng = random.Random(5)
    for n in [*range(0, 70), 255, 256, 1000, 4096]:
        data = rng.randbytes(n)
        assert hashers._fastids.murmur3_128(data) == mmh3.hash_bytes(data, 0, True), n


@pytest.mark.parametrize("name,doc", COMMITTED, ids=[n for n, _ in COMMITTED])
def test_committed_graphs_identical(name: str, doc: dict, monkeypatch: pytest.MonkeyPatch):
    def make() -> StreamGraph:
        return parse_graph(doc, name).graph

    assert _hashes(make, True) == _hashes(make, False)
    compiled, python = _ids(make, monkeypatch, True), _ids(make, monkeypatch, False)
    assert compiled == python


def test_at_least_250_committed_graphs():
    # 70 conformance graphs per release (1.20.5, 2.3.0), 134 restore-scenario graphs, the example
    assert len(COMMITTED) >= 250, len(COMMITTED)


UIDS = ["src", "map", "sink", "käse", "\ud800lone", "x" * 40, "", "dup", "dup"]


def _random_graph(rng: random.Random) -> tuple[Callable[[], StreamGraph], bool]:
    """A random DAG over every strategy, factory, partitioner and exchange mode (ids not in topological
    order, parallel edges and unions included); a few carry a cycle (readers refuse those, but the hashers
    must still agree on them). Returns the graph's builder and whether it has a cycle."""
    n = rng.randint(1, 40)
    ids = rng.sample(range(-50, 500), n)
    nodes = []
    for nid in ids:
        nodes.append(StreamNode(
            id=nid, name=f"op{nid}", parallelism=rng.choice([1, 1, 1, 2, 4]),
            max_parallelism=rng.choice([None, None, 128, 256]),
            uid=(rng.choice(UIDS) if rng.random() < 0.03 else f"u{nid}") if rng.random() < 0.25 else None,
            chaining_strategy=rng.choice([ChainingStrategy.ALWAYS] * 5 + list(ChainingStrategy)),
            slot_sharing_group=rng.choice(["default"] * 6 + ["other", None]),
            # few yielding operators: the Python rules walk back to the chain head once per yielding
            # operator on the way, as Flink's do, which is exponential in a long yielding chain
            factory=rng.choice([Factory.OPERATOR] * 12 + list(Factory))))
    edges = []
    for _ in range(rng.randint(0, 2 * n)):
        a, b = sorted(rng.sample(range(n), 2)) if n > 1 else (0, 0)
        if a == b:
            continue
        edges.append(StreamEdge(
            ids[a], ids[b], rng.choice([Partitioner.FORWARD] * 6 + list(Partitioner)),
            rng.choice([ExchangeMode.UNDEFINED] * 4 + list(ExchangeMode)), rng.choice([0, 0, 0, 1, 2])))
    cyclic = n > 2 and bool(edges) and rng.random() < 0.02
    if cyclic:
        edges.append(StreamEdge(edges[0].target, edges[0].source))
    if rng.random() < 0.3:
        rng.shuffle(edges)
    chaining, diff_max = rng.random() < 0.9, rng.random() < 0.7
    return (lambda: StreamGraph.of("random", nodes, edges, chaining_enabled=chaining,
                                   chain_operators_with_different_max_parallelism=diff_max)), cyclic


def test_random_graphs_identical(monkeypatch: pytest.MonkeyPatch):
    rng = random.Random(411)
    errors = 0
    for i in range(RANDOM_GRAPHS):
        make, cyclic = _random_graph(rng)
        compiled = _hashes(make, True)
        assert compiled == _hashes(make, False), f"random graph {i}"
        errors += isinstance(compiled, tuple) and compiled[0] == "FlinkError"
        if i % 10 == 0 and not cyclic:  # the whole entry point, pairs and job vertices included, on every tenth graph
            assert _ids(make, monkeypatch, True) == _ids(make, monkeypatch, False), f"random graph {i}"
    assert 0 < errors < RANDOM_GRAPHS // 4  # uid collisions were exercised, not only errors


def test_a_subclassed_node_goes_to_the_python_rules():
    # the compiled code reads StreamNode's slots directly; another type could compute a field, so it declines
    class Renamed(StreamNode):
        __slots__ = ()

    nodes = [Renamed(1, "a", 1), Renamed(2, "b", 1)]
    graph = StreamGraph.of("sub", nodes, [StreamEdge(1, 2)])
    assert hashers._fastids.hash_graph(graph.nodes, graph.edges, True, True, True, True) is None
    plain = StreamGraph.of("plain", [StreamNode(1, "a", 1), StreamNode(2, "b", 1)], [StreamEdge(1, 2)])
    assert compute_operator_ids(graph, "v3").to_json()["nodes"] == compute_operator_ids(plain, "v3").to_json()["nodes"]


_EXECUTOR_PROBE = """
import sys, pyspark.files
# a cluster host has the third-party libraries, not this repository's editable install (its import hook)
sys.meta_path[:] = [f for f in sys.meta_path if "__editable__" not in getattr(f, "__module__", "")]
sys.path.insert(0, sys.argv[1])  # our packages as a cluster executor gets them: a zip (spark_jobs.common)
pyspark.files.SparkFiles._is_running_on_worker = True
pyspark.files.SparkFiles._root_directory = sys.argv[2]
import hashing.hashers as h
import upgrade_gate.flink.metadata.fast_reader as r
print(h.IMPLEMENTATION, r.IMPLEMENTATION, sys.modules["hashing"].__file__.startswith(sys.argv[1]),
      sys.modules["upgrade_gate"].__file__.startswith(sys.argv[1]))
"""


@pytest.mark.parametrize("shipped", [True, False], ids=["extension-shipped", "nothing-shipped"])
def test_a_zipped_executor_runs_the_shipped_extension_else_python(shipped: bool, tmp_path: Path) -> None:
    """On a cluster the executors import our code from a zip, which cannot hold an extension: the files the
    driver ships with `addFile` (`common.COMPILED_EXTENSIONS`: the hasher, the `_metadata` subtask loop, ...)
    are loaded from SparkFiles; without them the Python rules and the Python loop run, and nothing fails."""
    import subprocess
    import sys
    import zipfile

    from spark_jobs.common import COMPILED_EXTENSIONS, SHIPPED_PACKAGES, compiled_extension_file, compiled_hasher_file

    packages = tmp_path / "packages.zip"
    with zipfile.ZipFile(packages, "w") as zf:
        for pkg in SHIPPED_PACKAGES:
            for path in (REPO / pkg).rglob("*.py"):
                zf.write(path, path.relative_to(REPO).as_posix())
    files = tmp_path / "files"
    files.mkdir()
    assert compiled_hasher_file() is not None  # built by `pip install -e .`, as test_the_compiled_hasher_... says
    assert "upgrade_gate.flink.metadata._fastsubtasks" in COMPILED_EXTENSIONS
    for module in COMPILED_EXTENSIONS:  # what common._ship_packages ships
        extension = compiled_extension_file(module)
        assert extension is not None, module
        if shipped:
            (files / extension.name).write_bytes(extension.read_bytes())
    out = subprocess.run([sys.executable, "-c", _EXECUTOR_PROBE, str(packages), str(files)], capture_output=True,
                         text=True, cwd=tmp_path, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
                         check=True).stdout.split()
    assert out == ["compiled" if shipped else "python"] * 2 + ["True", "True"]

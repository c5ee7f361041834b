"""Hostile documents through the real CLI, for every kind of input a user hands over: exit 2, one line naming
the file, no traceback, under 2 s of CPU in 200 MB of address space.

The graph reader's hardening (tests/hashing/test_graph_hostile.py) is the shared reader's now
(`hashing.documents`), so the same hostile table (`tests/hostile_inputs.py`) runs against each input kind:
a graph file (`ids`), a Kubernetes operator resource (`inspect k8s:FILE`, `check --current`, `check
--deployment`) and a Flink configuration file (`check --flink-config`). Before, a FIFO blocked the resource
reader forever, `/dev/zero` was read to a MemoryError, deep nesting and a 5,000-digit integer gave
tracebacks and a 700-byte billion-laughs file ran for minutes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.hostile_inputs import CASES, REPO, Case, assert_one_line, report, run_measured

SAVEPOINT = REPO / "tests" / "fixtures" / "restores" / "1.20.5" / "savepoints" / "uids-p2"
GRAPH = REPO / "tests" / "fixtures" / "restores" / "1.20.5" / "identical" / "graph-b.json"
K8S = REPO / "tests" / "fixtures" / "k8s"

# kind -> (file name, command line with {file})
KINDS: dict[str, tuple[str, tuple[str, ...]]] = {
    "graph": ("graph.yaml", ("ids", "{file}")),
    "k8s-inspect": ("resource.yaml", ("inspect", "k8s:{file}")),
    "current": ("current.yaml", ("check", "--current", "{file}", "--graph", str(GRAPH))),
    "deployment": ("new.yaml", ("check", "--deployment", "{file}", "--savepoint", str(SAVEPOINT), "--graph",
                                str(GRAPH))),
    "flink-config": ("config.yaml", ("check", "--savepoint", str(SAVEPOINT), "--graph", str(GRAPH), "--flink-config",
                                     "{file}")),
}
# where a kind says it otherwise: a configuration directory is read like FLINK_CONF_DIR; a 1 MB file limit
# refuses the many-values file by its size first
OTHERWISE = {("flink-config", "directory"): "no config.yaml or flink-conf.yaml in this directory",
             ("flink-config", "many-values"): "larger than the"}


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_hostile_document_is_one_line_exit_2(tmp_path: Path, kind: str, case: Case) -> None:
    name, command = KINDS[kind]
    path = tmp_path / name
    if case.make is not None:
        case.make(path)
    else:
        assert case.content is not None
        path.write_bytes(case.content)
    res = run_measured(*(part.format(file=path) for part in command))
    report("documents", f"{kind}/{case.id}", res)
    assert_one_line(res, f"{path}: ", OTHERWISE.get((kind, case.id), case.expect))
    assert res.stdout == ""


def test_the_cases_are_real_and_valid_documents_still_work(tmp_path: Path) -> None:
    """The billion-laughs file is a few hundred bytes, and each kind still reads a valid document."""
    from tests.hostile_inputs import BILLION_LAUGHS

    assert len(BILLION_LAUGHS) < 700
    res = run_measured("inspect", f"k8s:{K8S / 'orders-current.yaml'}")  # valid; its savepoint is on S3 (absent)
    assert res.returncode == 2 and "orders-current.yaml" not in res.stderr.split(":", 2)[1]
    config = tmp_path / "config.yaml"
    config.write_text("state:\n  backend:\n    type: rocksdb\nparallelism.default: 2\n")
    res = run_measured("check", "--savepoint", str(SAVEPOINT), "--graph", str(GRAPH), "--flink-config", str(config),
                       "--flink-version", "1.20", "--format", "json")
    assert res.returncode == 0, res.stderr


def test_a_resource_with_wrong_types_everywhere_is_one_line(tmp_path: Path) -> None:
    """Fields of the wrong type (a list as the metadata, a number as the jar, infinite timestamps, a name with
    a newline) are checked before use: one line naming the file, never an AttributeError."""
    path = tmp_path / "odd.yaml"
    path.write_text("kind: FlinkDeployment\nmetadata: [a, b]\nspec:\n  job: {jarURI: 7, parallelism: .inf}\n"
                    "status:\n  jobStatus:\n    savepointInfo:\n      lastSavepoint: {location: \"a\\nb\", "
                    "timeStamp: .inf}\n      savepointHistory: 5\n    upgradeSnapshotReference: {name: [x]}\n")
    for args in (("inspect", f"k8s:{path}"), ("check", "--deployment", str(path), "--current", str(path),
                                               "--graph", str(GRAPH))):
        res = run_measured(*args)
        report("documents", f"wrong-types/{args[0]}", res)
        assert_one_line(res, f"{path}: ")

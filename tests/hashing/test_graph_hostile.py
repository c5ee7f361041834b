"""Hostile graph files through the real CLI: exit 2, one line naming the file, bounded time and memory.

Graph files come from users (through S3, into Airflow workers and Spark executors). Each case below
is a file a careless or malicious user could hand over; `upgrade-gate ids FILE` and `upgrade-gate
check --savepoint S --graph FILE` must both answer with exit code 2 and one stderr line that names
the file and the problem, no traceback, within 2 s of CPU time, in an address space capped at 200 MB.
"""

from __future__ import annotations

import json
import os
import resource
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SAVEPOINT = REPO / "tests" / "fixtures" / "savepoints" / "2.3.0" / "hashmap-canonical-p2"
MAX_CPU_S = 2.0
MAX_AS_BYTES = 200 * 1024 * 1024
WALL_TIMEOUT_S = 30  # a shared 2-core machine; a FIFO that blocks would hang here, not pass


def _plan(*nodes: dict) -> bytes:
    return json.dumps({"nodes": [{"pact": "Operator", "type": "Map", "parallelism": 1, **n} for n in nodes]}).encode()


def _spec(nodes: list, edges: list | None = None) -> bytes:
    return json.dumps({"name": "j", "nodes": nodes, "edges": edges or []}).encode()


BILLION_LAUGHS = ("a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
                  + "".join(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 10))
                  + "nodes:\n  - id: 1\n    name: *a9\nedges: []\n")
MERGE_BOMB = ("a0: &a0 {x0: 1, y0: 2}\n"
              + "".join(f"a{i}: &a{i} {{<<: [*a{i - 1}, *a{i - 1}], x{i}: 1}}\n" for i in range(1, 25))
              + "nodes:\n  - id: 1\n    <<: *a24\n")

# (test id, file name, content, what the one line must also say)
FILE_CASES: list[tuple[str, str, bytes, str]] = [
    ("json-deep-100000", "deep.json", b"[" * 100_000 + b"]" * 100_000, "nested deeper than 100 levels"),
    ("json-deep-in-field", "deepfield.json",
     b'{"nodes": [{"id": 1, "state": ' + b"[" * 500 + b"]" * 500 + b"}]}", "nested deeper than 100 levels"),
    ("yaml-deep-flow", "deep.yaml", b"nodes: " + b"[" * 100_000 + b"]" * 100_000, "nested deeper than 100 levels"),
    ("yaml-deep-block", "deepblock.yaml", "".join(" " * i + "- \n" for i in range(2000)).encode(),
     "nested deeper than 100 levels"),
    ("json-int-5000-digits", "bigint.json", b'{"nodes": [{"id": ' + b"9" * 5000 + b"}]}", "digits"),
    ("yaml-int-5000-digits", "bigint.yaml", b"nodes:\n  - id: " + b"9" * 5000 + b"\n", "a number of 5000 characters"),
    ("yaml-hex-int", "hexint.yaml", b"nodes:\n  - id: 0x" + b"f" * 90 + b"\n", "out of range"),
    ("yaml-base60-int", "base60.yaml", b"nodes:\n  - id: 1" + b":59" * 200_000 + b"\n", "a number of"),
    ("id-beyond-java-int", "bigid.json", _spec([{"id": 2**31}]), "out of range [-2147483648, 2147483647]"),
    ("edge-type-number-beyond-int", "typenum.json",
     _spec([{"id": 1}, {"id": 2}], [{"source": 1, "target": 2, "type_number": 2**40}]), "type_number"),
    ("plan-id-beyond-java-int", "planid.json", _plan({"id": 2**31}), "outside Java's int range"),
    ("plan-parallelism-huge", "planpar.json", _plan({"id": 1, "parallelism": 10**30}), "parallelism"),
    ("plan-cycle", "cycle.json",
     _plan({"id": 1, "predecessors": [{"id": 2}]}, {"id": 2, "predecessors": [{"id": 1}]}), "cycle: 1 -> 2 -> 1"),
    ("plan-self-loop", "selfloop.json", _plan({"id": 7, "predecessors": [{"id": 7}]}), "node 7 is its own predecessor"),
    ("spec-self-loop", "specloop.json", _spec([{"id": 1}], [{"source": 1, "target": 1}]), "makes a cycle"),
    ("spec-cycle", "speccycle.json", _spec([{"id": 1}, {"id": 2}], [{"source": 1, "target": 2},
                                                                   {"source": 2, "target": 1}]), "cycle: 1 -> 2 -> 1"),
    ("list-as-node-id", "listid.json", _spec([{"id": [1]}]), "id must be an integer"),
    ("dict-as-uid", "dictuid.json", _spec([{"id": 1, "uid": {"a": 1}}]), "uid must be a string"),
    ("list-as-plan-predecessor", "listpred.json", _plan({"id": 1, "predecessors": [{"id": [1]}]}),
     "predecessor #0"),
    ("list-as-ship-strategy", "listship.json",
     _plan({"id": 1}, {"id": 2, "predecessors": [{"id": 1, "ship_strategy": ["HASH"]}]}), "ship_strategy"),
    ("dict-as-partitioner", "dictpart.json",
     _spec([{"id": 1}, {"id": 2}], [{"source": 1, "target": 2, "partitioner": {"a": 1}}]), "partitioner"),
    ("dict-as-graph-name", "dictname.json", json.dumps({"name": {"a": 1}, "nodes": [{"id": 1}]}).encode(),
     "name must be a string"),
    ("unknown-field-with-newline", "newline.json", _spec([{"id": 1, "a\nb": 1}]), "unknown field(s) 'a\\nb'"),
    ("huge-uid-hash", "uidhash.json", _spec([{"id": 1, "uid_hash": "x" * 1_000_000}]), "uid_hash"),
    ("uid-hash-with-newline", "uidhashnl.json", _spec([{"id": 1, "uid_hash": "ab\ncd"}]),
     "uid_hash must be 32 hex characters, got 'ab\\ncd'"),
    ("yaml-int-key", "intkey.yaml", b"nodes:\n  - id: 1\n    1: 2\n", "mapping key 1 is not a string"),
    ("yaml-bool-key", "boolkey.yaml", b"nodes:\n  - id: 1\n    on: 2\n", "mapping key True is not a string"),
    ("yaml-null-key", "nullkey.yaml", b"nodes:\n  - id: 1\n    ~: 2\n", "mapping key None is not a string"),
    ("yaml-list-key", "listkey.yaml", b"nodes:\n  - {id: 1, [1, 2]: x}\n", "must be a string, not a list"),
    ("yaml-duplicate-key", "dupkey.yaml", b"nodes: []\nnodes:\n  - id: 1\n", "duplicate key 'nodes'"),
    ("yaml-billion-laughs", "laughs.yaml", BILLION_LAUGHS.encode(), "anchors (&name) are not supported"),
    ("yaml-merge-bomb", "merge.yaml", MERGE_BOMB.encode(), "anchors (&name) are not supported"),
    ("yaml-alias-only", "alias.yaml", b"nodes:\n  - id: 1\n    name: *a\n", "invalid YAML"),
    ("yaml-merge-key", "mergekey.yaml", b"nodes:\n  - <<: {id: 1}\n", "merge keys"),
    ("yaml-python-tag", "tag.yaml", b"nodes: !!python/object/apply:os.system [echo hi]\n", "tag"),
    ("yaml-bad-timestamp", "ts.yaml", b"nodes:\n  - id: 1\n    name: 2020-13-45\n", "as timestamp"),
    ("yaml-two-documents", "twodocs.yaml", b"nodes: [{id: 1}]\n---\nnodes: [{id: 2}]\n", "single document"),
    ("not-utf8", "latin1.json", b'{"nodes": [{"id": 1, "name": "\xe9"}]}', "not UTF-8"),
    ("empty", "empty.json", b"", "empty file"),
]


def _fifo(tmp: Path) -> Path:
    path = tmp / "graph-fifo.json"
    os.mkfifo(path)
    return path


def _socket(tmp: Path) -> Path:
    path = tmp / "graph.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.close()  # the socket file stays behind, which is all `stat` needs
    return path


def _symlink_to_dev_zero(tmp: Path) -> Path:
    path = tmp / "zero.json"
    path.symlink_to("/dev/zero")
    return path


def _directory(tmp: Path) -> Path:
    path = tmp / "graphs.json"
    path.mkdir()
    return path


SPECIAL_CASES: list[tuple[str, Callable[[Path], Path], str]] = [
    ("fifo", _fifo, "is a FIFO (named pipe), not a regular file"),
    ("dev-zero", lambda tmp: Path("/dev/zero"), "is a character device, not a regular file"),
    ("symlink-to-dev-zero", _symlink_to_dev_zero, "is a character device, not a regular file"),
    ("unix-socket", _socket, "is a socket, not a regular file"),
    ("directory", _directory, "is a directory, not a regular file"),
]


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MAX_AS_BYTES, MAX_AS_BYTES))


def _run_cli(*args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    """The CLI as a user runs it, in 200 MB of address space; returns the result and its CPU seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run([sys.executable, "-m", "upgrade_gate", *args], capture_output=True, text=True,
                          cwd=REPO, timeout=WALL_TIMEOUT_S, preexec_fn=_limit_memory)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return proc, cpu


def _assert_refused(path: Path, expected: str) -> None:
    for args in (("ids", str(path)), ("check", "--savepoint", str(SAVEPOINT), "--graph", str(path))):
        proc, cpu = _run_cli(*args)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2, (args[0], proc.returncode, proc.stderr[-2000:])
        assert "Traceback" not in proc.stderr and "MemoryError" not in proc.stderr, proc.stderr[-2000:]
        assert len(lines) == 1, (args[0], proc.stderr[:2000])
        assert lines[0].startswith(f"upgrade-gate: error: {path}: "), lines[0][:500]
        assert expected in lines[0], (expected, lines[0][:500])
        assert len(lines[0]) < 1000, lines[0][:500]
        assert proc.stdout == ""
        assert cpu < MAX_CPU_S, f"{args[0]} took {cpu:.2f} s of CPU"


@pytest.mark.parametrize("name, content, expected", [c[1:] for c in FILE_CASES], ids=[c[0] for c in FILE_CASES])
def test_hostile_file_is_refused_in_one_line(tmp_path: Path, name: str, content: bytes, expected: str) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    _assert_refused(path, expected)


@pytest.mark.parametrize("make, expected", [c[1:] for c in SPECIAL_CASES], ids=[c[0] for c in SPECIAL_CASES])
def test_special_file_is_refused_unopened(tmp_path: Path, make: Callable[[Path], Path], expected: str) -> None:
    """A FIFO would block `open` forever and /dev/zero never ends: both are refused after `stat`."""
    _assert_refused(make(tmp_path), expected)


def test_the_bomb_is_small_and_the_cases_are_real(tmp_path: Path) -> None:
    """The billion-laughs file is a few hundred bytes, and PyYAML alone would expand it (9**9 items)."""
    import yaml

    assert len(BILLION_LAUGHS) < 600
    doc = yaml.safe_load(BILLION_LAUGHS)  # shares the aliased lists: cheap to load, explosive to walk
    assert len(doc["a9"]) == 9 and doc["a9"][0] is doc["a8"]
    # a valid graph in the same place still works, so the refusals above are about the content
    good = tmp_path / "good.yaml"
    good.write_text("nodes:\n  - {id: 1, name: src}\n  - {id: 2, name: map}\nedges:\n  - {source: 1, target: 2}\n")
    proc, _ = _run_cli("ids", str(good))
    assert proc.returncode == 0, proc.stderr


@pytest.mark.timeout(20)
@pytest.mark.parametrize("make, expected", [c[1:] for c in SPECIAL_CASES], ids=[c[0] for c in SPECIAL_CASES])
def test_read_object_refuses_special_files(tmp_path: Path, make: Callable[[Path], Path], expected: str) -> None:
    """The Spark jobs and the Airflow hook read graphs through `read_object`: same refusal, also as file://."""
    from upgrade_gate.storage import StorageError, read_object

    path = make(tmp_path)
    for name in (str(path), f"file://{path}"):
        with pytest.raises(StorageError) as caught:
            read_object(name, max_bytes=1 << 20, what="graph specs")
        assert str(caught.value) == f"{name}: {expected}; expected graph specs"


@pytest.mark.parametrize("name, content, expected", [c[1:] for c in FILE_CASES if c[1].endswith(".yaml")],
                         ids=[c[0] for c in FILE_CASES if c[1].endswith(".yaml")])
def test_read_graph_refuses_hostile_yaml(tmp_path: Path, name: str, content: bytes, expected: str) -> None:
    """The one graph reader of the CLI, the Airflow gate and the Spark fleet jobs
    (`upgrade_gate.storage.objects.read_graph`) raises the same one-line InputError."""
    from hashing.errors import InputError
    from upgrade_gate.storage.objects import read_graph

    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(InputError) as caught:
        read_graph(str(path))
    assert str(caught.value).startswith(f"{path}: ") and expected in str(caught.value)
    assert len(str(caught.value).splitlines()) == 1

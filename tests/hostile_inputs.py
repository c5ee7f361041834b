"""Hostile documents shared by the suites of every input kind, and the measured way to run the CLI on them.

Every document a user or a server hands the gate goes through one hardened reader (`hashing.documents`),
so one table of hostile contents is run against every kind of input (graph files, `k8s:` resources,
`--current`/`--deployment`, `--flink-config`): each must end the CLI with exit 2 and one stderr line
naming the file, within 2 s of CPU and 200 MB of address space (`run_measured`).
"""

from __future__ import annotations

import json
import os
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EXE = Path(sys.executable).with_name("upgrade-gate")  # the installed console script, as a user runs it
MAX_CPU_S = 2.0
MAX_AS_BYTES = 200 * 1024 * 1024
REPORT = REPO / ".work" / "hostile-report.jsonl"

BILLION_LAUGHS = ("a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
                  + "".join(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 10))
                  + "kind: *a9\n").encode()


@dataclass(frozen=True)
class Case:
    """A hostile input: contents written to a file of the kind's name, or a special file made in `tmp`."""

    id: str
    content: bytes | None = None
    make: Callable[[Path], None] | None = None  # makes the special file at the given path
    expect: str = ""  # what the one line must also say


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _socket(path: Path) -> None:
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.close()


def _dev_zero(path: Path) -> None:
    path.symlink_to("/dev/zero")


def _huge(path: Path) -> None:
    with open(path, "wb") as f:  # sparse: 64 MiB of nothing, larger than any document limit
        f.truncate(64 * 1024 * 1024)


def _directory(path: Path) -> None:
    path.mkdir()


CASES: list[Case] = [
    Case("fifo", make=_fifo, expect="is a FIFO (named pipe), not a regular file"),
    Case("dev-zero", make=_dev_zero, expect="is a character device, not a regular file"),
    Case("unix-socket", make=_socket, expect="is a socket, not a regular file"),
    Case("directory", make=_directory, expect="is a directory, not a regular file"),
    Case("huge-file", make=_huge, expect="larger than the"),
    Case("json-deep-100000", b"[" * 100_000 + b"]" * 100_000, expect="nested deeper than"),
    Case("yaml-deep-block", "".join(" " * i + "- \n" for i in range(300)).encode(), expect="nested deeper than"),
    Case("int-5000-digits", b"kind: " + b"9" * 5000 + b"\n", expect="a number of 5000 characters"),
    Case("billion-laughs", BILLION_LAUGHS, expect="anchors (&name) are not supported"),
    Case("anchor", b"spec: &s {a: 1}\n", expect="anchors (&name) are not supported"),
    Case("alias", b"kind: FlinkDeployment\nspec: *s\n", expect="aliases (*name) are not supported"),
    Case("merge-key", b"spec:\n  <<: {a: 1}\n", expect="merge keys"),
    Case("python-tag", b"spec: !!python/object/apply:os.system [echo hi]\n", expect="tag"),
    Case("custom-tag", b"spec: !Ref x\n", expect="tag"),
    Case("not-utf8", b"kind: FlinkDeployment\nmetadata: {name: \"\xe9\xff\"}\n", expect="not UTF-8"),
    Case("many-values", b"[" + b"0," * 1_200_000 + b"0]", expect="values, more than the"),
    Case("non-string-key", b"kind: FlinkDeployment\n1: 2\n", expect="is not a string"),
    Case("duplicate-key", b"kind: FlinkDeployment\nkind: FlinkSessionJob\n", expect="duplicate key 'kind'"),
]


@dataclass(frozen=True)
class Measured:
    """One CLI run: its result and what it cost."""

    returncode: int
    stdout: str
    stderr: str
    cpu_s: float
    peak_mb: float
    wall_s: float


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MAX_AS_BYTES, MAX_AS_BYTES))


def run_measured(*args: str, env: dict[str, str] | None = None, wall_timeout: float = 60,
                 limit_memory: bool = True) -> Measured:
    """The console script with `args`, in 200 MB of address space; CPU and peak RSS of that one process
    (`os.wait4`), so a FIFO that blocked would hang here and be killed, never pass."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.monotonic()
        proc = subprocess.Popen([str(EXE), *args], stdout=out, stderr=err, stdin=subprocess.DEVNULL, cwd=REPO,
                                env=env, preexec_fn=_limit_memory if limit_memory else None)
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - start > wall_timeout:
                proc.send_signal(signal.SIGKILL)
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.01)
        wall = time.monotonic() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return Measured(proc.returncode, out.read().decode("utf-8", "replace"), err.read().decode("utf-8", "replace"),
                        usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, wall)


def assert_one_line(res: Measured, names: str, expect: str = "", *, cpu_s: float = MAX_CPU_S) -> str:
    """Exit 2, one stderr line starting with `names` (the input), no traceback, within the CPU budget."""
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2, (res.returncode, res.stderr[-2000:])
    assert "Traceback" not in res.stderr and "MemoryError" not in res.stderr, res.stderr[-2000:]
    assert len(lines) == 1, res.stderr[:2000]
    assert lines[0].startswith(f"upgrade-gate: error: {names}"), lines[0][:500]
    assert expect in lines[0], (expect, lines[0][:500])
    assert len(lines[0]) < 1000, lines[0][:500]
    assert res.cpu_s < cpu_s, f"{res.cpu_s:.2f} s of CPU"
    return lines[0]


def report(suite: str, case: str, res: Measured, **extra: object) -> None:
    """Append what a case cost to `.work/hostile-report.jsonl` (read by people, not by tests)."""
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    with REPORT.open("a") as f:
        f.write(json.dumps({"suite": suite, "case": case, "exit": res.returncode, "cpu_s": round(res.cpu_s, 3),
                            "peak_mb": round(res.peak_mb, 1), "wall_s": round(res.wall_s, 3), **extra}) + "\n")

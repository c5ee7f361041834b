"""Compile and run our small Java helpers against a real Flink distribution.

The helpers (oracle dumpers, the graph exporter, savepoint writers) use Flink's own classes,
so they are compiled per Flink release: `flink_bridge/java/common/<tool>/` holds code that
compiles against every release, `flink_bridge/java/<tool>/flink-<major.minor>/` (or, shared by
a whole major line, `flink-<major>.x/`) the parts whose API differs. Classes are cached in
`.work/jvm/<release>/<tool>/` and rebuilt only when a source file changes (a digest of the
sources is stored beside them).
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import shutil
import signal
import subprocess
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

from flink_bridge.dist import WORK_DIR, classpath, release_of, work_lock

JAVA_SRC = Path(__file__).resolve().parent / "java"
# Tools that compile another tool's sources along with their own (shared, never copied): the
# restore-outcome generator and the file-connector restores dump job graphs with the exporter's SpecDumper.
TOOL_INCLUDES: dict[str, tuple[str, ...]] = {"restores": ("streamgraph",), "filesink": ("streamgraph",)}


class JvmError(RuntimeError):
    """A helper failed to compile or exited non-zero; carries the tail of its output and the exit code."""

    def __init__(self, message: str, returncode: int | None = None) -> None:
        super().__init__(message)
        self.returncode = returncode


class JvmTimeout(JvmError):
    """A helper ran past its time limit; its whole process group was killed."""

    def __init__(self, message: str, timeout: float) -> None:
        super().__init__(message)
        self.timeout = timeout


# Marks our JVMs' command lines (`-Dupgradegate.owner=<pid>`), so a test or an operator can tell
# them from anyone else's java processes (`pgrep -f upgradegate.owner=<pid>`).
OWNER_PROPERTY = "upgradegate.owner"
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


class _Stopped(BaseException):
    """Raised inside the waiting Python code when SIGTERM/SIGHUP arrives, so `finally` kills the group."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL it when we die, even by SIGKILL (Linux PR_SET_PDEATHSIG).

    Its own session keeps it out of our process group, so without this a parent killed outright
    (an orchestrator's timeout) would leave the JVM running.
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass  # not Linux: the timeout and the signal handlers still apply


def _kill_group(proc: subprocess.Popen[str]) -> None:
    """SIGKILL the child's process group (the JVM and anything it started, e.g. PyFlink's gateway)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)


@contextlib.contextmanager
def _signals_raise() -> Iterator[None]:
    """While a child runs, SIGTERM/SIGHUP raise `_Stopped` (SIGINT already raises KeyboardInterrupt).

    Python's default SIGTERM action exits without running `finally`, which is how an interrupted
    export used to leave its JVM running. Only the main thread may install handlers; elsewhere
    (an Airflow worker thread) the caller's own handling applies and the timeout still bounds the run.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def raise_stopped(signum: int, _frame: object) -> None:
        raise _Stopped(signum)

    previous = {}
    for sig in (signal.SIGTERM, signal.SIGHUP):
        previous[sig] = signal.signal(sig, raise_stopped)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run_process(cmd: Sequence[str], *, timeout: float, env: dict[str, str] | None = None,
                cwd: str | Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run `cmd` in its own process group and never leave it behind.

    The group is SIGKILLed when the time limit passes (`JvmTimeout`), when we get SIGINT, SIGTERM
    or SIGHUP (the signal is then raised again for whatever handled it before, so the caller dies
    or reacts as it would have), on any other way out of this function, and when this process
    dies (`_die_with_parent`).
    """
    proc = subprocess.Popen(list(cmd), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            cwd=cwd, start_new_session=True, preexec_fn=_die_with_parent)
    try:
        with _signals_raise():
            try:
                out, err = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                raise JvmTimeout(f"still running after {timeout:g} s; stopped", timeout) from None
    except _Stopped as stop:
        _kill_group(proc)
        # Our handlers are gone again: the signal now does what it did before we ran (kills a
        # plain CLI, runs an orchestrator's own handler).
        signal.raise_signal(stop.signum)
        raise JvmError(f"stopped by signal {stop.signum}") from None
    finally:
        _kill_group(proc)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _version_dir(tool: str, release: str) -> Path:
    """`flink-2.3/` when a release needs its own spelling, else the major line's `flink-2.x/`, else
    the sources of another release of the same major line."""
    major, minor = release.split(".")[:2]
    exact = JAVA_SRC / tool / f"flink-{major}.{minor}"
    if exact.is_dir():
        return exact
    line = JAVA_SRC / tool / f"flink-{major}.x"
    if line.is_dir():
        return line
    # Another release of the same line (1.19 builds with the 1.20 spellings): javac says if not.
    others = sorted(JAVA_SRC.glob(f"{tool}/flink-{major}.*"), key=lambda d: d.name)
    return others[-1] if others else line


def _sources(tool: str, release: str) -> list[Path]:
    dirs = [d for t in (tool, *TOOL_INCLUDES.get(tool, ()))
            for d in (JAVA_SRC / "common" / t, JAVA_SRC / t / "common", _version_dir(t, release))]
    files: list[Path] = []
    for d in dirs:
        if d.is_dir():
            files.extend(sorted(d.rglob("*.java")))
    if not files:
        raise JvmError(f"no Java sources for tool {tool!r} (looked in {', '.join(map(str, dirs))})")
    return files


def compile_tool(tool: str, version: str) -> Path:
    """Compile `tool` for Flink `version`; return the classes directory."""
    release = release_of(version)
    files = _sources(tool, release)
    digest = hashlib.sha256()
    for f in files:
        digest.update(str(f.relative_to(JAVA_SRC)).encode())
        digest.update(f.read_bytes())
    out = WORK_DIR / "jvm" / release / tool
    stamp = out / ".digest"
    with work_lock(f"jvm-{release}-{tool}"):  # another process may be compiling the same tool right now
        if stamp.is_file() and stamp.read_text() == digest.hexdigest():
            return out
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        cmd = ["javac", "-nowarn", "-encoding", "UTF-8", "--release", "17", "-cp", classpath(release), "-d", str(out)]
        proc = subprocess.run(cmd + [str(f) for f in files], capture_output=True, text=True)
        if proc.returncode != 0:
            raise JvmError(f"javac failed for {tool} against Flink {release}:\n{proc.stderr[-4000:]}")
        stamp.write_text(digest.hexdigest())
    return out


def java_command(tool: str, version: str, main_class: str, args: list[str],
                 extra_classpath: list[Path] | None = None, heap: str = "1g",
                 options: tuple[str, ...] = ()) -> list[str]:
    classes = compile_tool(tool, version)
    cp = classpath(version, [classes, *(extra_classpath or [])])
    return ["java", f"-Xmx{heap}", f"-D{OWNER_PROPERTY}={os.getpid()}", "--add-opens=java.base/java.util=ALL-UNNAMED",
            "--add-opens=java.base/java.lang=ALL-UNNAMED", *options, "-cp", cp, main_class, *args]


def flink_conf_dir(name: str, log_level: str = "WARN") -> Path:
    """An empty Flink config dir with quiet console logging, for our MiniCluster runs.

    Empty keeps the user's flink-conf out of our runs; it must still hold config.yaml (Flink
    2.x's MiniCluster refuses to start without one) and flink-conf.yaml (1.x reads that name).
    """
    d = WORK_DIR / "jvm" / name
    d.mkdir(parents=True, exist_ok=True)
    for conf in ("config.yaml", "flink-conf.yaml"):
        (d / conf).touch()
    (d / "log4j.properties").write_text(
        f"rootLogger.level = {log_level}\nrootLogger.appenderRef.console.ref = C\n"
        "appender.console.name = C\nappender.console.type = CONSOLE\nappender.console.target = SYSTEM_ERR\n"
        "appender.console.layout.type = PatternLayout\n"
        "appender.console.layout.pattern = %d{HH:mm:ss} %-5p %c{1} - %m%n\n")
    return d


def run_tool(tool: str, version: str, main_class: str, args: list[str],
             extra_classpath: list[Path] | None = None, timeout: float = 600, heap: str = "1g",
             options: tuple[str, ...] = ()) -> str:
    """Run a helper's main class and return its stdout; raise JvmError with stderr on failure. `options`: extra JVM
    options (before the class path)."""
    cmd = java_command(tool, version, main_class, args, extra_classpath, heap, options)
    env = dict(os.environ)
    env.setdefault("FLINK_CONF_DIR", str(flink_conf_dir("empty-conf")))
    proc = run_process(cmd, timeout=timeout, env=env)
    if proc.returncode != 0:
        raise JvmError(f"{main_class} (Flink {release_of(version)}) exited {proc.returncode}:\n{proc.stderr[-4000:]}",
                       proc.returncode)
    return proc.stdout

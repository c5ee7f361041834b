"""Compile and run our small Java helpers against a real Flink distribution.

The helpers (oracle dumpers, the graph exporter, savepoint writers) use Flink's own classes,
so they are compiled per Flink release: `flink_bridge/java/common/<tool>/` holds code that
compiles against every release, `flink_bridge/java/<tool>/flink-<major.minor>/` (or, shared by
a whole major line, `flink-<major>.x/`) the parts whose API differs. Classes are cached in
`.work/jvm/<release>/<tool>/` and rebuilt only when a source file changes (a digest of the
sources is stored beside them).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from flink_bridge.dist import WORK_DIR, classpath, release_of

JAVA_SRC = Path(__file__).resolve().parent / "java"
# Tools that compile another tool's sources along with their own (shared, never copied): the
# restore-outcome generator dumps job graphs with the exporter's SpecDumper.
TOOL_INCLUDES: dict[str, tuple[str, ...]] = {"restores": ("streamgraph",)}


class JvmError(RuntimeError):
    """A helper failed to compile or exited non-zero; carries the tail of its output."""


def _version_dir(tool: str, release: str) -> Path:
    """`flink-2.3/` when a release needs its own spelling, else the major line's `flink-2.x/`."""
    major, minor = release.split(".")[:2]
    exact = JAVA_SRC / tool / f"flink-{major}.{minor}"
    return exact if exact.is_dir() else JAVA_SRC / tool / f"flink-{major}.x"


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
                 extra_classpath: list[Path] | None = None, heap: str = "1g") -> list[str]:
    classes = compile_tool(tool, version)
    cp = classpath(version, [classes, *(extra_classpath or [])])
    return ["java", f"-Xmx{heap}", "--add-opens=java.base/java.util=ALL-UNNAMED",
            "--add-opens=java.base/java.lang=ALL-UNNAMED", "-cp", cp, main_class, *args]


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
             extra_classpath: list[Path] | None = None, timeout: float = 600, heap: str = "1g") -> str:
    """Run a helper's main class and return its stdout; raise JvmError with stderr on failure."""
    cmd = java_command(tool, version, main_class, args, extra_classpath, heap)
    env = dict(os.environ)
    env.setdefault("FLINK_CONF_DIR", str(flink_conf_dir("empty-conf")))
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    if proc.returncode != 0:
        raise JvmError(f"{main_class} (Flink {release_of(version)}) exited {proc.returncode}:\n{proc.stderr[-4000:]}")
    return proc.stdout

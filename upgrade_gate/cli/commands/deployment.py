"""The new job graph of a Flink Kubernetes Operator spec, exported with the spec's own settings.

`check --deployment NEW.yaml` without `--graph` builds the graph from the spec's jar with what the
operator will run it with (parallelism, `flinkConfiguration` as `-D`, entry class, args, Flink
version), because uid-less operators' IDs depend on those settings. The exporter (`upgrade-gate
export`, real Flink in a JVM) runs as a subprocess: the check itself never starts a JVM.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from functools import cache
from pathlib import Path

from hashing.errors import InputError
from hashing.readers import LoadedGraph
from upgrade_gate.cli.commands.graph_args import load_with_notes
from upgrade_gate.storage.k8s_operator import JobSettings
from upgrade_gate.storage.s3 import local_path

EXPORT_TIMEOUT_S = 900


@cache
def _export_options() -> frozenset[str]:
    """The options this checkout's `export` takes (it gained -D/--config later than -p)."""
    out = subprocess.run([sys.executable, "-m", "upgrade_gate", "export", "--help"], capture_output=True,
                         text=True, timeout=60)
    return frozenset(w.strip("[],") for w in out.stdout.split() if w.startswith(("-", "[-")))


def local_jar(deployment: str, settings: JobSettings, override: str | None) -> Path:
    """The jar to export: `--jar`, else the spec's jarURI when it is a file here."""
    if override:
        jar = local_path(override)
        if not jar.is_file():
            raise InputError(f"--jar {override}: no such file")
        return jar
    uri = settings.jar_uri
    if not uri:
        raise InputError(f"{deployment}: {settings.resource} has no spec.job.jarURI; pass --graph or --jar")
    if uri.startswith("local:"):
        raise InputError(f"{deployment}: spec.job.jarURI {uri} is a path inside the Flink image; pass the built jar "
                         f"with --jar (or an exported graph with --graph)")
    if "://" in uri and not uri.startswith("file:"):
        raise InputError(f"{deployment}: spec.job.jarURI {uri} is not downloaded by the gate; pass the built jar "
                         f"with --jar (or an exported graph with --graph)")
    jar = local_path(uri)
    if not jar.is_file():
        raise InputError(f"{deployment}: spec.job.jarURI {uri}: no such file here; pass --jar or --graph")
    return jar


def export_command(jar: Path, settings: JobSettings, output: Path) -> list[str]:
    cmd = [sys.executable, "-m", "upgrade_gate", "export", "--jar", str(jar), "-o", str(output)]
    if settings.flink_version:
        cmd += ["--flink-version", settings.flink_version]
    if settings.entry_class:
        cmd += ["--main-class", settings.entry_class]
    if settings.parallelism:
        cmd += ["-p", str(settings.parallelism)]
    if "-D" in _export_options():
        for key, value in sorted(settings.flink_configuration.items()):
            cmd += ["-D", f"{key}={value}"]
    if settings.args:
        cmd += ["--", *settings.args]
    return cmd


def export_for_deployment(deployment: str, settings: JobSettings, jar: Path) -> LoadedGraph:
    """Run the exporter on `jar` (see `local_jar`) with the spec's settings and load the graph it wrote
    (the exporter's notes on stderr pass through)."""
    with tempfile.TemporaryDirectory(prefix="upgrade-gate-export-") as tmp:
        output = Path(tmp) / "graph.json"
        cmd = export_command(jar, settings, output)
        print(f"note: exporting the new graph from {jar} with the settings of {settings.resource} in {deployment}",
              file=sys.stderr)
        try:
            proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                  timeout=EXPORT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise InputError(f"{deployment}: exporting the graph from {jar} took over {EXPORT_TIMEOUT_S} s") from None
        sys.stderr.write(proc.stderr)
        if proc.returncode != 0 or not output.is_file():
            last = next((ln for ln in reversed(proc.stderr.splitlines()) if ln.strip()), "no message")
            raise InputError(f"{deployment}: exporting the graph from {jar} failed: {last.strip()}")
        return load_with_notes(str(output))

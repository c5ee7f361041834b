"""Export the job-graph spec (docs/graph-spec.md) of a user's Flink job, using real Flink.

Users have jars, SQL scripts and compiled plans, not spec JSON. The Java side
(`flink_bridge/java/common/streamgraph/ExportMain.java`, sharing `SpecDumper` with the oracle,
so exported specs have exactly the fields the fixtures have) builds the StreamGraph the way
Flink itself does, without running the job:

* `jar`: `PackagedProgram` + `PackagedProgramUtils.getPipelineFromProgram`, as `flink info`
  does: `main()` runs until `execute()`, which captures the graph and aborts;
* `sql`: a SQL-client style script; its INSERTs become one statement set attached to the env;
* `compiled-plan`: a FLIP-190 plan, translated by the planner (`Planner#translatePlan`);
* `pyflink`: a PyFlink DataStream program, run in its own virtual environment with the full
  `apache-flink` package (created on first use) until it calls `execute()`
  (`flink_bridge/pyflink_capture.py`).

The graph is built with the settings `flink run` would use (config file, `-D`, `-p`), because
uid-less operators' IDs depend on chaining and chaining on those settings; the Java side reports
what it assumed and which uid-less IDs change when a guessed setting takes another value. The JVM
runs in its own process group and never outlives the export (`flink_bridge.jvm.run_process`).

Problems in the user's input become `InputError`s naming the file; bugs in the tool do not.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flink_bridge.dist import WORK_DIR, FlinkDistError, ensure_flink, release_of, work_lock
from flink_bridge.jvm import JvmError, JvmTimeout, compile_tool, run_process, run_tool
from hashing.errors import InputError
from hashing.versions import DEFAULT, PATCH_RELEASES

TOOL = "streamgraph"
EXPORT_MAIN = "upgradegate.bridge.ExportMain"
KINDS = {"jar": "jar", "sql": "sql", "compiled-plan": "plan", "pyflink": "pyflink"}
CAPTURE = Path(__file__).resolve().parent / "pyflink_capture.py"
# Building a graph takes seconds; a main() that blocks (waits for a broker, runs the job) must not
# hold the CLI, or an Airflow task, for long. `--timeout` raises it.
DEFAULT_TIMEOUT = 300.0
STANDARD_CONF, LEGACY_CONF = "config.yaml", "flink-conf.yaml"
PARALLELISM = "parallelism.default"
CHAINING = "pipeline.operator-chaining.enabled"
CHAIN_MAX_P = "pipeline.operator-chaining.chain-operators-with-different-max-parallelism"


def pyflink_python(release: str) -> Path:
    """The interpreter of a virtual environment with `apache-flink==release`, created on first use."""
    venv = WORK_DIR / "pyflink" / release
    python = venv / "bin" / "python"
    if (venv / ".installed").is_file():
        return python
    with work_lock(f"pyflink-{release}"):  # a concurrent export may be creating it: wait for it, never --clear it
        if (venv / ".installed").is_file():
            return python
        print(f"[export] creating the PyFlink {release} environment in {venv} (about a minute) ...", file=sys.stderr)
        ensure_flink(release)  # its apache-flink-libraries archive is reused from the cache
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        proc = subprocess.run([str(python), "-m", "pip", "install", "-q", "--find-links",
                               str(WORK_DIR / "cache" / "flink"), f"apache-flink=={release}"],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise FlinkDistError(f"installing apache-flink=={release} failed:\n{proc.stderr[-2000:]}")
        (venv / ".installed").touch()
    return python


def _export_pyflink(path: Path, args: Sequence[str], release: str, out: Path, conf_dir: Path | None,
                    pairs: dict[str, str], parallelism: int | None, timeout: float) -> None:
    """Run the program in the PyFlink environment until execute(); settings travel as JSON in argv."""
    classes = compile_tool(TOOL, release)
    python = pyflink_python(release)
    settings = json.dumps({"conf_dir": str(conf_dir or ""), "dynamic": pairs,
                           "parallelism": "" if parallelism is None else str(parallelism)})
    # The config is loaded by the capture script itself, not via FLINK_CONF_DIR: the gateway JVM
    # needs the package's own config (its Java 17 `--add-opens` options).
    proc = run_process([str(python), str(CAPTURE), str(out), str(classes), settings, str(path.resolve()), *args],
                       timeout=timeout, cwd=path.resolve().parent)
    if proc.returncode != 0 or not out.is_file():
        last = next((ln for ln in reversed(proc.stderr.splitlines()) if ln.strip()), f"exit {proc.returncode}")
        raise InputError(f"{path}: the PyFlink program could not be run: {last.strip()[-500:]}")


def _check_input(kind: str, path: Path, main_class: str | None) -> None:
    if kind not in KINDS:
        raise InputError(f"{path}: unknown input kind {kind!r}; expected one of {', '.join(KINDS)}")
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    if kind == "jar" and not zipfile.is_zipfile(path):
        raise InputError(f"{path}: not a jar file")
    if main_class is not None and not main_class.strip():
        raise InputError(f"{path}: empty main class name")


# Settings whose value must have a given shape; Flink's own message for a bad one would name
# the job, not the flag that carried the value.
_BOOLEAN_SETTINGS = (CHAINING, "pipeline.operator-chaining", CHAIN_MAX_P)
_MAX_PARALLELISM = 32768  # Flink's upper bound (KeyGroupRangeAssignment.UPPER_BOUND_MAX_PARALLELISM)


def _check_parallelism(value: str, where: str) -> None:
    try:
        p = int(value)
    except ValueError:
        raise InputError(f"{where}: parallelism {value!r} is not a whole number") from None
    if not 1 <= p <= _MAX_PARALLELISM:
        raise InputError(f"{where}: parallelism must be between 1 and {_MAX_PARALLELISM}, got {p}")


def parse_dynamic(pairs: Sequence[str]) -> dict[str, str]:
    """`-D key=value` pairs, as `flink run -D` takes them (later pairs win)."""
    out: dict[str, str] = {}
    for raw in pairs:
        key, sep, value = raw.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key or any(c.isspace() for c in key):
            raise InputError(f"-D {raw!r}: expected key=value, e.g. -D {CHAINING}=false")
        if key == PARALLELISM:
            _check_parallelism(value, f"-D {raw!r}")
        if key in _BOOLEAN_SETTINGS and value.lower() not in ("true", "false"):
            raise InputError(f"-D {raw!r}: {key} is true or false")
        out[key] = value
    return out


def _config_file(config: Path) -> Path:
    """The file `--config` names: itself, or the config file in the directory it names."""
    if config.is_dir():
        names = [n for n in (STANDARD_CONF, LEGACY_CONF) if (config / n).is_file()]
        if not names:
            raise InputError(f"{config}: neither {STANDARD_CONF} nor {LEGACY_CONF} in this directory")
        return config / names[0]
    if not config.is_file():
        raise InputError(f"{config}: no such file")
    return config


def _conf_dir(config: Path, release: str, tmp: Path) -> Path:
    """A FLINK_CONF_DIR holding `config` under the name this release reads, so Flink parses it.

    `--config` names a file or a conf directory. A file called `flink-conf.yaml` is the legacy
    format (flat `key: value` lines, read by 1.x only; 2.0 dropped it); any other file is the
    standard-YAML `config.yaml` of 1.19+.
    """
    major, minor = (int(x) for x in release.split(".")[:2])
    config = _config_file(config)
    legacy = config.name == LEGACY_CONF
    if legacy and major >= 2:
        raise InputError(f"{config}: Flink {release} reads only {STANDARD_CONF} (2.0 dropped {LEGACY_CONF}); "
                         f"convert it with Flink 1.20's bin/migrate-config-file.sh")
    if not legacy and (major, minor) < (1, 19):
        raise InputError(f"{config}: Flink {release} reads only {LEGACY_CONF} ({STANDARD_CONF} came with 1.19)")
    try:
        text = config.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{config}: cannot read: {exc}") from None
    d = tmp / "conf"
    d.mkdir()
    (d / (LEGACY_CONF if legacy else STANDARD_CONF)).write_text(text, encoding="utf-8")
    return d


def export_release(version: str) -> str:
    """The release that builds the graph for `version`: "2.3", "2.3.0", another patch release of
    a supported line ("1.20.1": patch releases share the line's graph and ID rules), or the
    Kubernetes operator's spelling "v1_20"."""
    text = version.strip()
    if text.startswith("v") and "_" in text:
        text = text[1:].replace("_", ".")
    try:
        return release_of(text)
    except FlinkDistError:
        line = ".".join(text.split(".")[:2])
        if line in PATCH_RELEASES and all(p.isdigit() for p in text.split(".")):
            return PATCH_RELEASES[line]
    raise InputError(f"--flink-version {version!r}: not a Flink release export can use; "
                     f"supported: {', '.join(PATCH_RELEASES)}")


@dataclass
class Export:
    """An exported graph and what it rests on."""

    spec: dict[str, Any]
    release: str
    # setting -> {"value": ..., "source": "-p" | "-D" | "config" | "default" (nothing said: a guess)
    #             | "Flink default, not in the config"}
    assumed: dict[str, dict[str, Any]] = field(default_factory=dict)
    # setting -> names of the uid-less operators whose ID changes with that setting
    depends_on: dict[str, list[str]] = field(default_factory=dict)
    # False when the graph could not be rebuilt with other values (PyFlink): `depends_on` then
    # lists every uid-less operator, which *may* depend on the setting
    probed: bool = True

    def assumptions(self) -> str:
        """One line: the release and every chaining-relevant setting with where its value came from."""
        parts = [f"{key}={v['value']} ({v['source']})" for key, v in self.assumed.items()]
        return f"export: Flink {self.release}; " + ", ".join(parts)

    def warnings(self) -> list[str]:
        """One line per defaulted setting that uid-less operators' IDs depend on."""
        out = []
        for key, moved in self.depends_on.items():
            setting = self.assumed.get(key, {})
            if not moved or setting.get("source") != "default":
                continue
            names = ", ".join(moved[:5]) + (f" and {len(moved) - 5} more" if len(moved) > 5 else "")
            how = "-p N" if key == PARALLELISM else f"-D {key}=..."
            verb = "depend" if self.probed else "may depend"
            out.append(f"warning: the IDs of {len(moved)} operator(s) without a uid ({names}) {verb} on {key}, "
                       f"which was not given (assumed {setting.get('value')}); pass the production value "
                       f"({how} or --config), or these IDs may not be the running job's")
        return out


def export_graph(kind: str, path: str | Path, *, main_class: str | None = None, args: Sequence[str] = (),
                 flink_version: str = DEFAULT, parallelism: int | None = None,
                 config: str | Path | None = None, dynamic: Sequence[str] = (),
                 timeout: float = DEFAULT_TIMEOUT) -> Export:
    """Build the graph of a job jar (`kind="jar"`), SQL script (`"sql"`), compiled plan
    (`"compiled-plan"`) or PyFlink program (`"pyflink"`) with the settings `flink run` would use.

    The effective configuration is assembled as `flink run` assembles it: the `config` file (or
    conf directory), then the `dynamic` `key=value` pairs (`-D`), then `parallelism` (`-p`);
    what is not given takes Flink's default. `timeout` bounds the whole JVM run: it is killed
    with its process group when the time is up, and on SIGINT/SIGTERM.
    """
    path = Path(path)
    _check_input(kind, path, main_class)
    if parallelism is not None:
        _check_parallelism(str(parallelism), "-p")
    release = export_release(flink_version)
    pairs = parse_dynamic(dynamic)
    if timeout <= 0:
        raise InputError(f"--timeout {timeout:g}: must be more than 0 seconds")
    ensure_flink(release)
    compile_tool(TOOL, release)
    with tempfile.TemporaryDirectory(prefix="export-") as tmp_name:
        tmp = Path(tmp_name)
        conf_dir = _conf_dir(Path(config), release, tmp) if config is not None else None
        out = tmp / "spec.json"
        try:
            if kind == "pyflink":
                _export_pyflink(path, args, release, out, conf_dir, pairs, parallelism, timeout)
            else:
                argv = [str(out), str(conf_dir or ""), "" if parallelism is None else str(parallelism),
                        str(len(pairs)), *(f"{k}={v}" for k, v in pairs.items()), KINDS[kind], str(path.resolve())]
                if kind == "jar":
                    argv += [main_class or "", *args]
                # ExportMain.ExitGuard keeps the graph when main() calls System.exit: 18-23 need this to allow it
                run_tool(TOOL, release, EXPORT_MAIN, argv, timeout=timeout, options=("-Djava.security.manager=allow",))
        except JvmTimeout as exc:
            raise InputError(f"{path}: building the graph took longer than {exc.timeout:g} s and was stopped (does "
                             f"main() wait for something before execute()? raise --timeout if it is slow)") from None
        except JvmError as exc:
            if out.exists() or kind != "jar":
                raise
            # the JVM ended before the exporter wrote anything: the job's main() ended it (System.exit, on a JVM
            # that no longer allows ExitGuard), not a bug of ours, which would still write its error
            raise InputError(f"{path}: the job's main() ended the JVM (exit code {exc.returncode}) before Flink "
                             f"handed over its graph; let the exception execute() throws while the graph is captured "
                             f"leave main(), or call System.exit only outside that catch") from None
        result = json.loads(out.read_text(encoding="utf-8"))
    if "error" in result:
        error = result["error"]
        where = _config_file(Path(config)) if error.get("where") == "config" and config is not None else path
        raise InputError(f"{where}: {error['message']}")
    assumed = result.get("assumed", {})
    if config is not None:  # a setting the config file leaves out really has Flink's default
        for setting in assumed.values():
            if setting.get("source") == "default":
                setting["source"] = "Flink default, not in the config"
    return Export(result["spec"], release, assumed, result.get("depends_on", {}), result.get("probed", True))


def export_spec(kind: str, path: str | Path, *, main_class: str | None = None, args: Sequence[str] = (),
                flink_version: str = DEFAULT, parallelism: int | None = None,
                **settings: Any) -> dict[str, Any]:
    """The graph spec alone (docs/graph-spec.md); see `export_graph` for the settings."""
    return export_graph(kind, path, main_class=main_class, args=args, flink_version=flink_version,
                        parallelism=parallelism, **settings).spec

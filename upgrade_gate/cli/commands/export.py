"""`upgrade-gate export`: the job-graph spec of a job jar, SQL script or compiled plan.

Users have jars, not spec JSON. This builds the StreamGraph with real Flink (the jars under
`.work/flink/`, downloaded on first use), without running the job, and writes the spec that `ids`
and `check` read. Operators without a uid get IDs that depend on chaining, and chaining on the
settings the job runs with, so export takes what `flink run` takes (`-p`, `-D key=value`, the
cluster's config file), says on stderr what it assumed, and warns when uid-less operators' IDs
depend on a setting it had to default.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from flink_bridge.exporter import DEFAULT_TIMEOUT, export_graph, export_release
from hashing.errors import InputError
from hashing.versions import PATCH_RELEASES
from upgrade_gate.gate import plan_versions
from upgrade_gate.vocabulary import DEFAULT_FLINK_VERSION

NAME = "export"
HELP = "write the job-graph spec of a job jar, SQL script or compiled SQL plan, built by real Flink"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--jar", type=Path, help="job jar; program arguments go after `--`")
    source.add_argument("--sql", type=Path, help="SQL script (DDL, SET, INSERT, statement sets, EXECUTE PLAN; "
                                                 "SQL client syntax); translated, never executed")
    source.add_argument("--compiled-plan", type=Path, help="FLIP-190 compiled plan JSON (COMPILE PLAN)")
    source.add_argument("--pyflink", type=Path, help="PyFlink DataStream program (.py); arguments go after `--`")
    parser.add_argument("--main-class", help="entry point class (default: the jar manifest's Main-Class)")
    parser.add_argument("--flink-version", default=DEFAULT_FLINK_VERSION, metavar="VERSION",
                        help=f"Flink release that builds the graph: {', '.join(PATCH_RELEASES)} "
                             "(default: %(default)s; downloaded on first use)")
    parser.add_argument("-p", "--parallelism", type=str, default=None,
                        help="default parallelism, as `flink run -p` "
                             "(default: the config's parallelism.default, else 1)")
    parser.add_argument("-D", dest="dynamic", action="append", default=[], metavar="KEY=VALUE",
                        help="a Flink setting, as `flink run -D` (repeatable), e.g. "
                             "-D pipeline.operator-chaining.enabled=false")
    parser.add_argument("--config", type=Path, metavar="FILE|DIR",
                        help="the client's Flink config: config.yaml (1.19+), the legacy flink-conf.yaml (1.x), "
                             "or the FLINK_CONF_DIR holding one")
    parser.add_argument("--timeout", type=str, default=str(DEFAULT_TIMEOUT).removesuffix(".0"),
                        help="seconds before the Flink JVM is killed (default: %(default)s)")
    parser.add_argument("-o", "--output", type=Path, help="write the spec here instead of stdout")
    parser.add_argument("program_args", nargs=argparse.REMAINDER, help="-- ARGS...: arguments for the job's main()")


def _number(text: str, flag: str, kind: type) -> int | float:
    try:
        return kind(text)
    except ValueError:
        raise InputError(f"{flag} {text!r}: not a number") from None


def _plans(kind: str, path: Path) -> list[Path]:
    """The compiled plan files the job runs: the input itself, or a script's `EXECUTE PLAN '<file>'` (resolved as
    ExportMain#planFile does: the working directory, else beside the script)."""
    if kind == "compiled-plan":
        return [path] if path.is_file() else []
    if kind != "sql" or not path.is_file():
        return []
    out = []
    for name in re.findall(r"(?i)(?<!AND)\s+EXECUTE\s+PLAN\s+'([^']+)'", " " + path.read_text(encoding="utf-8")):
        f = Path(name.removeprefix("file://"))
        f = f if f.is_absolute() or f.is_file() else path.resolve().parent / f
        if f.is_file():
            out.append(f)
    return out


def _plan_version(path: Path, target: str) -> plan_versions.PlanVersionCheck:
    """`plan_versions.check` of a compiled plan file: would release `target` execute it (FLIP-190)?"""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: cannot read the compiled plan: {exc}") from None
    try:
        return plan_versions.check(plan_versions.plan_flink_version(doc), target)
    except InputError as exc:
        raise InputError(f"{path}: {exc}") from None


def run(args: argparse.Namespace) -> int:
    program_args = list(args.program_args)
    if program_args[:1] == ["--"]:
        program_args = program_args[1:]
    if args.jar is not None:
        kind, path = "jar", args.jar
    elif args.sql is not None:
        kind, path = "sql", args.sql
    elif args.pyflink is not None:
        kind, path = "pyflink", args.pyflink
    else:
        kind, path = "compiled-plan", args.compiled_plan
    parallelism = None if args.parallelism is None else int(_number(args.parallelism, "-p", int))
    timeout = float(_number(args.timeout, "--timeout", float))
    for plan_file in _plans(kind, Path(path)):  # FLIP-190: a release refuses newer plans (gate/plan_versions.py)
        plan = _plan_version(plan_file, export_release(args.flink_version))
        if not plan.accepted:
            raise InputError(f"{plan_file}: {plan.reason}. Flink would fail with: {plan.flink_error}")
    try:
        result = export_graph(kind, path, main_class=args.main_class, args=program_args,
                              flink_version=args.flink_version, parallelism=parallelism, config=args.config,
                              dynamic=args.dynamic, timeout=timeout)
    except KeyboardInterrupt:  # the JVM is already gone (flink_bridge.jvm.run_process)
        print(f"upgrade-gate: export of {path} interrupted", file=sys.stderr)
        return 130
    print(result.assumptions(), file=sys.stderr)
    for warning in result.warnings():
        print(warning, file=sys.stderr)
    text = json.dumps(result.spec, indent=2, ensure_ascii=False) + "\n"
    if args.output is None:
        sys.stdout.write(text)
    else:
        try:
            args.output.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise InputError(f"{args.output}: cannot write: {exc.strerror or exc}") from None
    return 0

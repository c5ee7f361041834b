"""`upgrade-gate export`: the job-graph spec of a job jar, SQL script or compiled plan.

Users have jars, not spec JSON (design §4.1). This builds the StreamGraph with real Flink (the
jars under `.work/flink/`, downloaded on first use), without running the job, and writes the
spec that `ids` and `check` read.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from flink_bridge.exporter import export_spec

NAME = "export"
ORDER = 5
HELP = "write the job-graph spec of a job jar, SQL script or compiled SQL plan, built by real Flink"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--jar", type=Path, help="job jar; program arguments go after `--`")
    source.add_argument("--sql", type=Path, help="SQL script (DDL, SET, INSERT; SQL client syntax)")
    source.add_argument("--compiled-plan", type=Path, help="FLIP-190 compiled plan JSON (COMPILE PLAN)")
    source.add_argument("--pyflink", type=Path, help="PyFlink DataStream program (.py); arguments go after `--`")
    parser.add_argument("--main-class", help="entry point class (default: the jar manifest's Main-Class)")
    parser.add_argument("--flink-version", choices=("1.20", "2.3"), default="2.3",
                        help="Flink release that builds the graph (default: %(default)s)")
    parser.add_argument("--parallelism", type=int, default=1,
                        help="default parallelism, like `flink run -p` (default: %(default)s)")
    parser.add_argument("-o", "--output", type=Path, help="write the spec here instead of stdout")
    parser.add_argument("program_args", nargs=argparse.REMAINDER, help="-- ARGS...: arguments for the job's main()")


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
    spec = export_spec(kind, path, main_class=args.main_class, args=program_args,
                       flink_version=args.flink_version, parallelism=args.parallelism)
    text = json.dumps(spec, indent=2, ensure_ascii=False) + "\n"
    if args.output is None:
        sys.stdout.write(text)
    else:
        args.output.write_text(text, encoding="utf-8")
    return 0

"""Run a PyFlink DataStream program until it calls `execute()`, and dump its StreamGraph as a spec.

Runs inside the PyFlink virtual environment (`.work/pyflink/<release>/`), never in ours: the
`apache-flink` package pins versions that clash with Airflow. Like `flink info` for jars, the
program's `main` runs normally until `execute()`/`execute_async()`; there PyFlink's own
`_generate_stream_graph` (which applies Python operator chaining) builds the graph, our
`SpecDumper` (the same Java class the oracle uses) turns it into the spec, and the program is
stopped before anything runs.

Usage: python pyflink_capture.py OUT.json CLASSES_DIR PROGRAM.py [ARGS...]
"""

from __future__ import annotations

import json
import runpy
import sys
import traceback
from pathlib import Path


class GraphCaptured(BaseException):
    """Stops the user's program at execute(); BaseException so `except Exception` can't swallow it."""


def main(argv: list[str]) -> int:
    out, classes, program, *args = argv
    from pyflink.datastream import StreamExecutionEnvironment
    from pyflink.java_gateway import get_gateway
    from pyflink.util.java_utils import add_jars_to_context_class_loader

    captured: dict[str, object] = {}

    def capture(self: StreamExecutionEnvironment, job_name: str | None = None) -> None:
        add_jars_to_context_class_loader([Path(classes).resolve().as_uri() + "/"])
        graph = self._generate_stream_graph(clear_transformations=False, job_name=job_name)
        bridge = get_gateway().jvm.upgradegate.bridge
        captured["spec"] = json.loads(bridge.Json.write(bridge.SpecDumper.spec(graph)))
        raise GraphCaptured

    StreamExecutionEnvironment.execute = capture  # type: ignore[method-assign]
    StreamExecutionEnvironment.execute_async = capture  # type: ignore[method-assign]
    sys.argv = [program, *args]
    try:
        runpy.run_path(program, run_name="__main__")
        result: dict[str, object] = {"error": {"message": "the program finished without calling env.execute()"}}
    except GraphCaptured:
        result = captured
    except SystemExit as exc:
        result = {"error": {"message": f"the program exited ({exc.code}) before calling env.execute()"}}
    except Exception as exc:  # the user's program failed: report its own error, one line
        last = traceback.extract_tb(exc.__traceback__)[-1]
        result = {"error": {"message": f"{type(exc).__name__}: {exc} (line {last.lineno})"}}
    Path(out).write_text(json.dumps(result), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

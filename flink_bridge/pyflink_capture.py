"""Run a PyFlink DataStream program until it calls `execute()`, and dump its StreamGraph as a spec.

Runs inside the PyFlink virtual environment (`.work/pyflink/<release>/`), never in ours: the
`apache-flink` package pins versions that clash with Airflow. Like `flink info` for jars, the
program's `main` runs normally until `execute()`/`execute_async()`; there PyFlink's own
`_generate_stream_graph` (which applies Python operator chaining) builds the graph, our
`SpecDumper` (the same Java class the oracle uses) turns it into the spec, and the program is
stopped before anything runs.

The settings `flink run` would apply (`{"conf_dir": ..., "dynamic": {k: v}, "parallelism": ...}`)
are loaded by Flink's own `GlobalConfiguration` in the gateway JVM and handed to every
`get_execution_environment()` call, under the program's own configuration (as `flink run -py` does).

Usage: python pyflink_capture.py OUT.json CLASSES_DIR SETTINGS.json PROGRAM.py [ARGS...]
"""

from __future__ import annotations

import json
import runpy
import sys
import traceback
from pathlib import Path


class GraphCaptured(BaseException):
    """Stops the user's program at execute(); BaseException so `except Exception` can't swallow it."""


# The settings that decide chaining, with Flink's defaults (as ExportMain.SETTINGS).
SETTINGS = (("parallelism.default", "1"), ("pipeline.operator-chaining.enabled", "true"),
            ("pipeline.operator-chaining.chain-operators-with-different-max-parallelism", "true"),
            ("pipeline.max-parallelism", "(derived per operator)"), ("execution.runtime-mode", "STREAMING"))


def _source(key: str, settings: dict, in_file: set[str]) -> str:
    if key == "parallelism.default" and settings["parallelism"]:
        return "-p"
    if key in settings["dynamic"]:
        return "-D"
    return "config" if key in in_file else "default"


def main(argv: list[str]) -> int:
    out, classes, settings_json, program, *args = argv
    from pyflink.common import Configuration
    from pyflink.datastream import StreamExecutionEnvironment
    from pyflink.java_gateway import get_gateway
    from pyflink.util.java_utils import add_jars_to_context_class_loader

    settings = json.loads(settings_json)
    jvm = get_gateway().jvm
    if settings["conf_dir"]:
        base = Configuration(j_configuration=jvm.org.apache.flink.configuration.GlobalConfiguration
                             .loadConfiguration(settings["conf_dir"]))
    else:
        base = Configuration()
    in_file = set(base.to_dict())
    for key, value in settings["dynamic"].items():
        base.set_string(key, value)
    if settings["parallelism"]:
        base.set_string("parallelism.default", settings["parallelism"])
    if not base.contains_key("parallelism.default"):
        base.set_string("parallelism.default", "1")  # a cluster's default, not the number of local cores
    original_get_env = StreamExecutionEnvironment.get_execution_environment

    def get_env(configuration: Configuration | None = None) -> StreamExecutionEnvironment:
        merged = Configuration(other=base)
        if configuration is not None:
            merged.add_all(configuration)
        return original_get_env(merged)

    StreamExecutionEnvironment.get_execution_environment = staticmethod(get_env)  # type: ignore[method-assign]

    captured: dict[str, object] = {}

    def capture(self: StreamExecutionEnvironment, job_name: str | None = None) -> None:
        add_jars_to_context_class_loader([Path(classes).resolve().as_uri() + "/"])
        graph = self._generate_stream_graph(clear_transformations=False, job_name=job_name)
        bridge = get_gateway().jvm.upgradegate.bridge
        spec = json.loads(bridge.Json.write(bridge.SpecDumper.spec(graph)))
        captured["spec"] = spec
        effective = base.to_dict()
        captured["assumed"] = {key: {"value": effective.get(key, default),
                                     "source": _source(key, settings, in_file)} for key, default in SETTINGS}
        # Rebuilding means running the program again, so there is no probe: every uid-less
        # operator may depend on each chaining setting.
        uidless = [n["name"] for n in spec["nodes"] if not n.get("uid") and not n.get("uid_hash")]
        captured["depends_on"] = {key: uidless for key, _ in SETTINGS[:3]}
        captured["probed"] = False
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
        first = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), "")
        result = {"error": {"message": f"{type(exc).__name__}: {first} (line {last.lineno})"}}
    Path(out).write_text(json.dumps(result), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""A connector-only upgrade, restored for real: what Flink does when a source's serializer versions change.

`ConnectorVersions.java` (flink_bridge/java/savepoints/common/ugate/savepoints/) runs one job whose FLIP-27 source
reports the split and enumerator serializer versions it is given and, like Flink's connectors, reads every version
up to its own and refuses newer ones. For each release we write one savepoint per written version pair and restore
it with other versions: a connector upgrade (the new reader is newer), a downgrade (the savepoint holds a version
the new reader does not know), and the same versions as the control. Kept under
`tests/fixtures/savepoints/connector-versions/<release>/<case>/_metadata` (HashMap, inline state: the version
headers are in `_metadata`), the outcomes (Flink's root cause for each failed restore) in `outcomes.json`. The gate's
connector serializer rule (`upgrade_gate/gate/rules/connector_versions.py`) is tested against these. A FileSink's
savepoint (`file-sink`: writer and committer state) is kept beside them with the versions FileSink's own serializers
report (`sinks.json`), for the header reader.

Usage: python -m flink_bridge.generate_connector_versions [--versions 2.3 1.20]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

from flink_bridge.dist import WORK_DIR, ensure_flink, release_of
from flink_bridge.generate_savepoints import FIXTURES, _keep, _local, run_java

OUT = FIXTURES / "connector-versions"
# case -> (split serializer version, enumerator serializer version) the savepoint is written with
WRITTEN = {"split-v1": (1, 1), "split-v2": (2, 1), "enum-v2": (1, 2)}
# a FileSink's writer and committer state, with the versions FileSink's serializers report: `sinks.json`
SINK_CASE = "file-sink"
# (case written, versions of the restoring job, what it is)
RESTORES = (
    ("split-v1", (1, 1), "same versions"),
    ("split-v1", (2, 1), "split serializer upgrade"),
    ("split-v2", (1, 1), "split serializer downgrade"),
    ("split-v1", (1, 2), "enumerator serializer upgrade"),
    ("enum-v2", (1, 1), "enumerator serializer downgrade"),
)


def record(version: str, out: Path = OUT) -> list[dict]:
    """Write the savepoints of `WRITTEN` with Flink `version`, restore each as `RESTORES` says; the outcomes."""
    release = release_of(version)
    ensure_flink(release)
    stage = WORK_DIR / "connector-versions-stage" / release
    shutil.rmtree(stage, ignore_errors=True)
    tasks = [*(f"write:{stage / case}:{s}:{e}" for case, (s, e) in WRITTEN.items()), f"sink:{stage / SINK_CASE}"]
    sink: dict = {}
    for line in run_java(version, "ugate.savepoints.ConnectorVersions", tasks, timeout=900).splitlines():
        task, _, result = line.partition("\t")
        if task.startswith(("write:", "sink:")):
            if result.startswith("ERROR"):
                raise RuntimeError(f"{task}: {result}")
            path, _, versions = result.partition("\t")
            _keep(_local(path), out / release / Path(task.split(":")[1]).name, False)
            if versions:
                sink = json.loads(versions)
    tasks = [f"restore:{out / release / case}:{s}:{e}" for case, (s, e), _ in RESTORES]
    outcomes = []
    lines = [ln for ln in run_java(version, "ugate.savepoints.ConnectorVersions", tasks, timeout=900).splitlines()
             if ln.startswith("restore:")]
    for (case, (s, e), what), line in zip(RESTORES, lines, strict=True):
        result = line.partition("\t")[2]
        if result.startswith("ERROR"):
            raise RuntimeError(f"{line}")
        doc = json.loads(result)
        outcomes.append({"release": release, "savepoint": case, "written": dict(zip(("split", "enumerator"),
                                                                                     WRITTEN[case], strict=True)),
                         "restored_with": {"split": s, "enumerator": e}, "change": what, **doc})
        print(f"[connector-versions] {release} {case} -> split v{s} enum v{e}: {doc['status']} {doc['error'] or ''}",
              file=sys.stderr)
    shutil.rmtree(stage, ignore_errors=True)
    sinks = out / "sinks.json"
    recorded = json.loads(sinks.read_text()) if sinks.is_file() else {}
    recorded[release] = sink
    sinks.write_text(json.dumps(dict(sorted(recorded.items())), indent=1) + "\n")
    return outcomes


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--versions", nargs="+", default=["2.3", "1.20"])
    args = ap.parse_args(argv)
    started = time.monotonic()
    dest = OUT / "outcomes.json"
    kept = [o for o in (json.loads(dest.read_text()) if dest.is_file() else [])
            if o["release"] not in {release_of(v) for v in args.versions}]
    outcomes = kept + [o for v in args.versions for o in record(v)]
    outcomes.sort(key=lambda o: (o["release"], o["savepoint"], o["change"]))
    dest.write_text(json.dumps(outcomes, indent=1) + "\n")
    print(f"[connector-versions] {len(outcomes)} restores in {time.monotonic() - started:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

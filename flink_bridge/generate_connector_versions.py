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
report (`sinks.json`), for the header reader. A Sink V2 committer's committables get the same treatment as the
source's serializers: a FileSink whose committable serializer reports the version it is given
(`ConnectorVersions$VersionedCommitSink`), one savepoint per written version (`commit-v1`, `commit-v2`: the
committables are nested inside Flink's CommittableCollectorSerializer layout) restored by an upgraded, a downgraded
and the same committable serializer; their outcomes in `committables.json`.

Usage: python -m flink_bridge.generate_connector_versions [--versions 2.3 1.20] [--only sources|committables]
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
# case -> the committable serializer version a FileSink's committables are written with; then the restores
COMMIT_WRITTEN = {"commit-v1": 1, "commit-v2": 2}
COMMIT_RESTORES = (
    ("commit-v1", 1, "same versions"),
    ("commit-v1", 2, "committable serializer upgrade"),
    ("commit-v2", 1, "committable serializer downgrade"),
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


def record_committables(version: str, out: Path = OUT) -> list[dict]:
    """Write the committer savepoints of `COMMIT_WRITTEN` with Flink `version`, restore each as `COMMIT_RESTORES`
    says; the outcomes."""
    release = release_of(version)
    ensure_flink(release)
    stage = WORK_DIR / "connector-versions-stage" / f"{release}-commit"
    shutil.rmtree(stage, ignore_errors=True)
    tasks = [f"commit-write:{stage / case}:{v}" for case, v in COMMIT_WRITTEN.items()]
    for line in run_java(version, "ugate.savepoints.ConnectorVersions", tasks, timeout=900).splitlines():
        task, _, result = line.partition("\t")
        if task.startswith("commit-write:"):
            if result.startswith("ERROR"):
                raise RuntimeError(f"{task}: {result}")
            _keep(_local(result), out / release / Path(task.split(":")[1]).name, False)
    # restored while the staged pending part files still exist: the upgrade and the control commit them
    tasks = [f"commit-restore:{out / release / case}:{v}" for case, v, _ in COMMIT_RESTORES]
    lines = [ln for ln in run_java(version, "ugate.savepoints.ConnectorVersions", tasks, timeout=900).splitlines()
             if ln.startswith("commit-restore:")]
    outcomes = []
    for (case, v, what), line in zip(COMMIT_RESTORES, lines, strict=True):
        result = line.partition("\t")[2]
        if result.startswith("ERROR"):
            raise RuntimeError(line)
        doc = json.loads(result)
        outcomes.append({"release": release, "savepoint": case, "written": {"committable": COMMIT_WRITTEN[case]},
                         "restored_with": {"committable": v}, "change": what, **doc})
        print(f"[connector-versions] {release} {case} -> committable v{v}: {doc['status']} {doc['error'] or ''}",
              file=sys.stderr)
    shutil.rmtree(stage, ignore_errors=True)
    return outcomes


def _merge(dest: Path, versions: list[str], new: list[dict]) -> list[dict]:
    """`dest`'s outcomes of the other releases, then `new`; written back sorted."""
    releases = {release_of(v) for v in versions}
    kept = [o for o in (json.loads(dest.read_text()) if dest.is_file() else []) if o["release"] not in releases]
    outcomes = sorted(kept + new, key=lambda o: (o["release"], o["savepoint"], o["change"]))
    dest.write_text(json.dumps(outcomes, indent=1) + "\n")
    return outcomes


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--versions", nargs="+", default=["2.3", "1.20"])
    ap.add_argument("--only", choices=["sources", "committables"], help="regenerate only these fixtures")
    args = ap.parse_args(argv)
    started = time.monotonic()
    restores = 0
    if args.only != "committables":
        restores += len(_merge(OUT / "outcomes.json", args.versions, [o for v in args.versions for o in record(v)]))
    if args.only != "sources":
        restores += len(_merge(OUT / "committables.json", args.versions,
                               [o for v in args.versions for o in record_committables(v)]))
    print(f"[connector-versions] {restores} restores in {time.monotonic() - started:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

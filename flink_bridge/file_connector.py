"""The file connector (FileSource / FileSink) through an upgrade that re-keys its source or its sink, on real Flink.

What the gate says losing a connector's state does to the data (`upgrade_gate/gate/state_roles.py`) is a claim about
records: read again, never committed. This module makes real Flink show it. The Java side
(`flink_bridge/java/filesink/common/ugate/filesink/FileSinkRestores.java`) runs job v1 (FileSource -> map ->
FileSink) on a MiniCluster until part of its numbered input is read, takes a savepoint, starts v2 (the source's or the
sink's uid changed) from it with allowNonRestoredState and runs it to the end of its bounded input; here we count what
is on disk afterwards: the input records, the records in committed part files (visible files), duplicates, missing
records, and the records in part files never committed (FileSink's hidden `.part-*.inprogress.*` files, in-progress
or pending: `org.apache.flink.connector.file.sink.writer.FileWriterBucket`).

Usage: python -m flink_bridge.file_connector [--versions 1.20 2.3] [--scenarios ...] [--out DIR] [--record]
       (prints one JSON line per scenario: Java's report and the counts; with --record also keeps each savepoint's
       `_metadata`, v2's graph and the counts under tests/fixtures/file-connector/<release>/<scenario>/, which
       tests/gate/test_file_connector_consequences.py checks the gate against without a JVM)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

from flink_bridge.dist import REPO_ROOT, WORK_DIR, ensure_flink, release_of
from flink_bridge.jvm import JvmError, flink_conf_dir, java_command, run_process

MAIN = "ugate.filesink.FileSinkRestores"
# <rolling>-<savepoint>-<changed>: how the sink rolls its part files (on every checkpoint, or on size/time only),
# how v1's savepoint is taken (stop-with-savepoint, or a savepoint then cancel), whose uid v2 changes
SCENARIOS = ("checkpoint-stop-source", "checkpoint-stop-sink", "size-stop-sink", "checkpoint-trigger-sink")
FIXTURES = REPO_ROOT / "tests" / "fixtures" / "file-connector"
VERSIONS = ("1.20", "2.3")  # the releases the fixtures are recorded with


@dataclass(frozen=True, slots=True)
class Counts:
    """What a reader of the sink's output directory finds at the end, against the input."""

    input_records: int
    committed_records: int  # lines in visible part files
    distinct_committed: int
    duplicates: int  # committed lines beyond the first copy of each record
    missing: int  # input records in no visible part file
    uncommitted_files: int  # hidden part files (in-progress or pending), never made visible
    uncommitted_records: int  # lines in them


def _lines(files: list[Path]) -> list[str]:
    return [line for f in files for line in f.read_text().splitlines() if line]


def count(scenario_dir: Path) -> Counts:
    """Count the input and the sink's output of one scenario (`input/`, `output/`: FileSink's base path, one bucket)."""
    records = _lines(sorted((scenario_dir / "input").iterdir()))
    out = [f for f in (scenario_dir / "output").rglob("*") if f.is_file()]
    visible = [f for f in out if not f.name.startswith(".")]
    hidden = [f for f in out if f.name.startswith(".") and ".inprogress." in f.name]
    committed = Counter(_lines(visible))
    return Counts(input_records=len(records), committed_records=sum(committed.values()),
                  distinct_committed=len(committed), duplicates=sum(n - 1 for n in committed.values()),
                  missing=len(set(records) - set(committed)), uncommitted_files=len(hidden),
                  uncommitted_records=len(_lines(hidden)))


def run(version: str, scenarios: tuple[str, ...] | list[str], out: Path,
        timeout: float = 600) -> list[dict[str, object]]:
    """Run the scenarios on one release in one JVM (one MiniCluster); return Java's report plus the counts of each."""
    release = release_of(version)
    ensure_flink(release)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    conf = flink_conf_dir("filesink-conf", "WARN")
    cmd = java_command("filesink", release, MAIN, [str(out), *scenarios], heap="768m")
    cmd.insert(1, f"-Dlog4j.configurationFile={conf / 'log4j.properties'}")
    proc = run_process(cmd, timeout=timeout, env=dict(os.environ, FLINK_CONF_DIR=str(conf)))
    if proc.returncode != 0:
        raise JvmError(f"{MAIN} (Flink {release}) exited {proc.returncode}:\n{proc.stderr[-4000:]}", proc.returncode)
    results = []
    for line in proc.stdout.splitlines():
        if not line.startswith("{"):
            continue
        doc = json.loads(line)
        if "error" in doc:
            raise JvmError(f"{MAIN} (Flink {release}) {doc['scenario']}: {doc['error']}\n{proc.stderr[-4000:]}")
        doc["release"] = release
        doc["counts"] = asdict(count(out / doc["scenario"]))
        results.append(doc)
    return results


def record(doc: dict[str, object], scenario_dir: Path, dest: Path = FIXTURES) -> Path:
    """Keep one scenario for the offline tests: the savepoint's `_metadata` (its state is inline: the Java side sets
    a 1 MB small-file threshold), v2's graph and what was counted (`outcome.json`)."""
    kept = dest / str(doc["release"]) / str(doc["scenario"])
    shutil.rmtree(kept, ignore_errors=True)
    (kept / "savepoint").mkdir(parents=True)
    savepoint = Path(str(doc["savepoint"]).removeprefix("file:"))
    shutil.copy2(savepoint / "_metadata", kept / "savepoint" / "_metadata")
    shutil.copy2(scenario_dir / "graph-v2.json", kept / "graph-v2.json")
    outcome = {k: v for k, v in doc.items() if k != "savepoint"}
    (kept / "outcome.json").write_text(json.dumps(outcome, indent=1) + "\n")
    return kept


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--versions", nargs="+", default=list(VERSIONS))
    ap.add_argument("--scenarios", nargs="+", default=list(SCENARIOS), choices=SCENARIOS)
    ap.add_argument("--out", type=Path, default=WORK_DIR / "filesink-stage")
    ap.add_argument("--record", action="store_true", help=f"keep the runs under {FIXTURES.relative_to(REPO_ROOT)}")
    args = ap.parse_args(argv)
    for v in args.versions:
        out = args.out / release_of(v)
        for doc in run(v, args.scenarios, out):
            if args.record:
                record(doc, out / str(doc["scenario"]))
            print(json.dumps(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Restore outcomes from real Flink for snapshots that are not plain savepoints.

Three families, one MiniCluster each (flink_bridge/java/restores/common/ugate/checkpoints/):

* `finished`: FLIP-147. A bounded source finished before the snapshot (a canonical savepoint and a
  retained checkpoint); restored into the same job, with its chain split, with an operator added
  after it (chained and not), and rescaled.
* `unaligned`: an unaligned checkpoint with in-flight data (a slow operator behind an exchange);
  restored at the same and another parallelism, with another partitioner, with the exchange now
  chained, and with an operator added at either end of the exchange.
* `rocksdb`: retained incremental RocksDB checkpoints (native format, SSTs under `shared/`);
  restored in NO_CLAIM and CLAIM mode, rescaled, and with the keyed operator's uid changed.

Each scenario records what Flink did (RUNNING or its error chain, what every probe operator got back
per subtask, the job vertices' states, which snapshot files job B deleted). Kept under
`tests/fixtures/checkpoints/<release>/`: `<scenario>/{outcome,graph-a,graph-b}.json` and, per family,
`<family>/job/` (the job's checkpoint folder as Flink left it before any restore: `chk-N/`, `shared/`,
`taskowned/`) and, for `finished`, `<family>/savepoint/`. Flink writes absolute paths into a
checkpoint's `_metadata`; the outcome keeps the pointer Flink was given, the fixture its copy.

Usage: python -m flink_bridge.generate_checkpoint_restores [--versions 1.20 2.3] [--families ...] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

from flink_bridge.dist import REPO_ROOT, WORK_DIR, ensure_flink, release_of
from flink_bridge.jvm import flink_conf_dir, java_command, run_process

FIXTURES = REPO_ROOT / "tests" / "fixtures" / "checkpoints"
VERSIONS = ("1.20", "2.3")
FAMILIES = ("finished", "unaligned", "rocksdb")


def stage_dir(release: str) -> Path:
    return WORK_DIR / "checkpoint-restores-stage" / release


def run_java(version: str, stage: Path, families: list[str], timeout: float = 1500) -> None:
    """One JVM (1 GB heap: the machine is shared); one MiniCluster per family, one after the other."""
    conf = flink_conf_dir("restores-conf", "ERROR")
    cmd = java_command("restores", version, "ugate.checkpoints.CheckpointRestores", [str(stage), *families], heap="1g")
    cmd.insert(1, f"-Dlog4j.configurationFile={conf / 'log4j.properties'}")
    env = dict(os.environ, FLINK_CONF_DIR=str(conf))
    proc = run_process(cmd, timeout=timeout, env=env)
    for line in proc.stdout.splitlines():
        if "\t" in line:
            print(f"[checkpoint-restores] {release_of(version)} {line}", file=sys.stderr)
    if proc.returncode != 0:
        raise RuntimeError(f"checkpoint restores (Flink {release_of(version)}) exited {proc.returncode}:\n"
                           f"{proc.stderr[-4000:]}")


def _local(pointer: str) -> Path:
    return Path(pointer.removeprefix("file://").removeprefix("file:"))


def _json(path: Path) -> object:
    return json.loads(path.read_text())


def _dump(path: Path, obj: object) -> None:
    path.write_text(json.dumps(obj, indent=1, sort_keys=False) + "\n")


def keep(release: str, stage: Path, families: list[str], out: Path) -> list[Path]:
    """Copy each family's snapshot (as it was before any restore) and each scenario's outcome."""
    written: list[Path] = []
    for family in families:
        fam_stage = stage / f"_{family}"
        snap_file = fam_stage / "snapshot.json"
        if not snap_file.is_file():
            continue
        snap = _json(snap_file)
        dest = out / release / family
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir(parents=True)
        shutil.copytree(fam_stage / "pristine", dest / "job")
        if "savepoint" in snap:
            shutil.copytree(_local(snap["savepoint"]), dest / "savepoint")
        snap["fixture_job_dir"] = "job"
        _dump(dest / "snapshot.json", snap)
        job_dir = _local(snap["job_dir"]).as_posix().rstrip("/")
        for outcome_file in sorted(stage.glob("*/outcome.json")):
            outcome = _json(outcome_file)
            if outcome.get("family") != family:
                continue
            pointer = _local(outcome["pointer"]).as_posix()
            if pointer.startswith(job_dir + "/"):
                outcome["fixture"] = f"../{family}/job/{pointer[len(job_dir) + 1:]}"
            else:
                outcome["fixture"] = f"../{family}/savepoint"
            outcome["flink_release"] = release
            sc_dest = out / release / outcome["scenario"]
            shutil.rmtree(sc_dest, ignore_errors=True)
            sc_dest.mkdir(parents=True)
            _dump(sc_dest / "outcome.json", outcome)
            for g in ("graph-a.json", "graph-b.json"):
                _dump(sc_dest / g, _json(outcome_file.parent / g))
            written.append(sc_dest)
    return written


def generate(versions: list[str], families: list[str], out: Path) -> list[Path]:
    written: list[Path] = []
    for release in (release_of(v) for v in versions):
        ensure_flink(release)
        stage = stage_dir(release)
        shutil.rmtree(stage, ignore_errors=True)
        stage.mkdir(parents=True)
        run_java(release, stage, families)
        written += keep(release, stage, families, out)
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--versions", nargs="+", default=list(VERSIONS))
    ap.add_argument("--families", nargs="+", default=list(FAMILIES), choices=FAMILIES)
    ap.add_argument("--out", type=Path, default=FIXTURES)
    args = ap.parse_args(argv)
    t0 = time.monotonic()
    written = generate(args.versions, args.families, args.out)
    print(f"[checkpoint-restores] {len(written)} scenario outcomes in {time.monotonic() - t0:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

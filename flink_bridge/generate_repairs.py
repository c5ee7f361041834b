"""Repaired savepoints restored by real Flink: the oracle `upgrade-gate repair` is tested against.

For each scenario (flink_bridge/java/restores/common/ugate/restores/RepairMain.java) the Java tool runs job A
in a MiniCluster, takes a canonical savepoint (keyed state in files, operator state inline, the FLIP-27
source's enumerator holding splits not yet read), starts job B from it as it is (Flink's own verdict, and with
allowNonRestoredState what the data looks like at the end of the input), then runs `upgrade-gate repair` as a
process and starts job B from the repaired savepoint WITHOUT allowNonRestoredState, to the end of its input.
The restored job checks every restored value against its redundant copy and counts numbers seen twice (a
source that re-reads after the restore).

Kept under `tests/fixtures/repairs/<release>/<scenario>/`: `outcome.json` (the repair's JSON parsed),
`graph-a.json`, `graph-b.json`, `savepoint/` (job A's savepoint: `_metadata` and its state files, relative
names) and `repaired/` (the `_metadata` Flink restored, and the state files the repair wrote anew: a
max-parallelism rewrite's; the others are copies of the source's).
`tests/repair/test_repair_restores.py` repairs the committed savepoint again and asserts the same bytes.

SQL scenarios (`sql-*`) repair the committed savepoint of a real SQL restore scenario
(`tests/fixtures/restores/<release>/<scenario>/`, job A's savepoint written by Flink) with `--old-graph`, and
start job B from the repaired savepoint with the restore generator's SQL tool (`ugate.sql.SqlMain`), whose state
backend records which operators got state back. `cross-version-uid-renamed` repairs the 1.20.5 savepoint of
`uid-renamed` and restores it with Flink 2.3.0.

Usage: python -m flink_bridge.generate_repairs [--versions 1.20 2.3] [--scenarios ...] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from flink_bridge.dist import REPO_ROOT, WORK_DIR, ensure_flink, release_of
from flink_bridge.generate_restores import _local, run_sql_java
from flink_bridge.jvm import flink_conf_dir, java_command
from flink_bridge.sql_scenarios import SQL_SCENARIOS

FIXTURES = REPO_ROOT / "tests" / "fixtures" / "repairs"
VERSIONS = ("1.20", "2.3")
JOB_SCENARIOS = ("identical", "uid-renamed", "uid-removed", "uids-added", "map-inserted-before-uidless-keyed",
                 "chaining-disabled-no-uids", "source-uid-renamed", "operator-removed-dropped",
                 "max-parallelism-128-to-256-long-keys-hashmap", "max-parallelism-256-to-128-string-keys-hashmap",
                 "max-parallelism-256-to-128-long-keys-rocksdb", "max-parallelism-128-to-256-string-keys-rocksdb",
                 "max-parallelism-128-to-256-tuple-keys-hashmap", "states-dropped-by-name")
CROSS = "cross-version-uid-renamed"  # the 1.20.5 savepoint of uid-renamed, repaired, restored by 2.3.0
SQL = ("sql-statement-set-gains-insert", "sql-query-to-plan")
SCENARIOS = (*JOB_SCENARIOS, CROSS, *SQL)
RESTORES = REPO_ROOT / "tests" / "fixtures" / "restores"


def stage_dir(release: str) -> Path:
    return WORK_DIR / "repairs-stage" / release


def _minor(release: str) -> str:
    return ".".join(release.split(".")[:2])


def run_java(version: str, stage: Path, scenarios: list[str], cross: tuple[str, int] | None = None,
             timeout: float = 1800) -> list[str]:
    """One JVM and MiniCluster per release; the repair runs as `python -m upgrade_gate repair` from it."""
    conf = flink_conf_dir("repairs-conf", "ERROR")
    extra = ["--cross", cross[0], str(cross[1])] if cross else []
    cmd = java_command("restores", version, "ugate.restores.RepairMain",
                       [str(stage), _minor(release_of(version)), sys.executable, *extra, *scenarios], heap="1g")
    cmd.insert(1, f"-Dlog4j.configurationFile={conf / 'log4j.properties'}")
    env = dict(os.environ, FLINK_CONF_DIR=str(conf), PYTHONPATH=str(REPO_ROOT))
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    lines = [line for line in proc.stdout.splitlines() if "\t" in line]
    for line in lines:
        print(f"[repairs] {release_of(version)} {line}", file=sys.stderr)
    if proc.returncode != 0:
        raise RuntimeError(f"repairs (Flink {release_of(version)}) exited {proc.returncode}:\n{proc.stderr[-4000:]}")
    return lines


def keep(release: str, stage: Path, scenarios: list[str], out: Path) -> list[Path]:
    written = []
    for name in scenarios:
        src = stage / name
        if not (src / "outcome.json").is_file():
            continue
        outcome = json.loads((src / "outcome.json").read_text())
        repair = outcome.get("repair") or {}
        text = repair.get("output") or ""
        repair["output"] = json.loads(text) if text.strip() else None
        outcome["flink_release"] = release
        dest = out / release / name
        shutil.rmtree(dest, ignore_errors=True)
        (dest / "savepoint").mkdir(parents=True)
        for f in _local(outcome["savepoint"]["pointer"]).iterdir():
            if f.is_file() and f.name != "pointer.txt":
                shutil.copy2(f, dest / "savepoint" / f.name)
        repaired = stage / "repaired" / name
        if (repaired / "_metadata").is_file():  # its _metadata, and the state files the repair wrote anew
            (dest / "repaired").mkdir()
            for f in repaired.iterdir():
                if f.name == "_metadata" or not (dest / "savepoint" / f.name).is_file():
                    shutil.copy2(f, dest / "repaired" / f.name)
        (dest / "outcome.json").write_text(json.dumps(outcome, indent=1) + "\n")
        for g in ("graph-a.json", "graph-b.json"):
            (dest / g).write_text(json.dumps(json.loads((src / g).read_text()), indent=1) + "\n")
        written.append(dest)
    return written


def _cross_savepoint(stage: Path) -> tuple[str, int] | None:
    """The committed 1.20.5 savepoint of uid-renamed, copied into the stage (its handles are relative)."""
    d = FIXTURES / "1.20.5" / "uid-renamed"
    if not (d / "outcome.json").is_file():
        return None
    to = stage / "cross-savepoint"
    shutil.rmtree(to, ignore_errors=True)
    shutil.copytree(d / "savepoint", to)
    return to.resolve().as_uri(), int(json.loads((d / "outcome.json").read_text())["savepoint"]["numbers"])


def run_sql(release: str, stage: Path, names: list[str]) -> list[str]:
    """Repair each SQL scenario's committed savepoint, then start its job B from the repaired one (SqlMain)."""
    by_name = {sc.name: sc for sc in SQL_SCENARIOS}
    given: dict[str, str] = {}
    done = []
    for name in names:
        fixture = RESTORES / release / name
        recorded = json.loads((fixture / "outcome.json").read_text())
        savepoint = (fixture / recorded["savepoint"]["fixture"]).resolve()
        d = stage / name
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
        for f in fixture.iterdir():
            if f.suffix in (".sql", ".conf", ".json") and f.name != "outcome.json":
                shutil.copy2(f, d / f.name)
        repaired = stage / "repaired" / name
        shutil.rmtree(repaired, ignore_errors=True)
        arguments = ["--old-graph"]
        cmd = [sys.executable, "-m", "upgrade_gate", "repair", "--savepoint", str(savepoint), "--graph",
               str(d / "graph-b.json"), "--old-graph", str(d / "graph-a.json"), "--flink-version", _minor(release),
               "--format", "json", "--output", str(repaired)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=dict(os.environ,
                                                                                          PYTHONPATH=str(REPO_ROOT)))
        # the scripts and plans stay in the restore fixture the savepoint comes from (restores/<release>/<name>/)
        outcome = {"scenario": name, "savepoint": {"pointer": savepoint.as_uri(), "restore_fixture": name},
                   "restore": recorded["restore"],
                   **({"restore_allow_non_restored_state": recorded["restore_allow_non_restored_state"]}
                      if "restore_allow_non_restored_state" in recorded else {}),
                   "repair": {"arguments": arguments, "exit_code": proc.returncode, "output": proc.stdout}}
        (d / "outcome.json").write_text(json.dumps(outcome, indent=1) + "\n")
        if proc.returncode == 0:
            given[name] = repaired.resolve().as_uri()
            done.append(name)
        else:
            print(f"[repairs] {release} {name}\tERROR\trepair exited {proc.returncode}: {proc.stderr[-2000:]}",
                  file=sys.stderr)
    if done:
        sql_stage = stage / "sql"
        shutil.rmtree(sql_stage, ignore_errors=True)
        for name in done:
            shutil.copytree(stage / name, sql_stage / name)
        run_sql_java(release, sql_stage, [by_name[n] for n in done], given)
        for name in done:
            run = json.loads((sql_stage / name / "outcome.json").read_text())["restore"]
            outcome = json.loads((stage / name / "outcome.json").read_text())
            outcome["restore_repaired"] = run
            (stage / name / "outcome.json").write_text(json.dumps(outcome, indent=1) + "\n")
    return [f"{n}\t{'OK' if n in done else 'ERROR'}" for n in names]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--versions", nargs="+", default=list(VERSIONS))
    ap.add_argument("--scenarios", nargs="+", default=list(SCENARIOS))
    ap.add_argument("--out", type=Path, default=FIXTURES)
    args = ap.parse_args(argv)
    bad = [s for s in args.scenarios if s not in SCENARIOS]
    if bad:
        ap.error(f"unknown scenarios: {', '.join(bad)}")
    for version in args.versions:
        ensure_flink(version)
        release = release_of(version)
        stage = stage_dir(release)
        shutil.rmtree(stage, ignore_errors=True)
        stage.mkdir(parents=True)
        jobs = [s for s in args.scenarios if s in JOB_SCENARIOS or (s == CROSS and release == "2.3.0")]
        cross = _cross_savepoint(stage) if CROSS in jobs else None
        if cross is None and CROSS in jobs:
            jobs.remove(CROSS)
        lines = run_java(version, stage, jobs, cross) if jobs else []
        lines += run_sql(release, stage, [s for s in args.scenarios if s in SQL])
        failed = [line for line in lines if "\tERROR" in line]
        for path in keep(release, stage, args.scenarios, args.out):
            print(path)
        if failed:
            print(f"{len(failed)} scenario(s) failed on Flink {release}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

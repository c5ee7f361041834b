"""Restore outcomes from real Flink: the oracle the restore simulator is tested against.

For each scenario (a kind of job change, flink_bridge/java/restores/.../Scenarios.java) the Java
tool `restores` runs job A in a MiniCluster, takes a canonical savepoint with non-empty keyed,
list, union, broadcast and source state, then submits job B from it, without and (if that fails)
with allowNonRestoredState, and records what really happened: RUNNING or FAILED and the error
chain, and what every user function got back per subtask (list elements, broadcast entries,
keyed entries, key-group range, max parallelism). Kept under
`tests/fixtures/restores/<release>/<scenario>/`: `outcome.json`, `graph-a.json`, `graph-b.json`
(both dumped by the exporter's SpecDumper from the real StreamGraphs); savepoints (one small
`_metadata`, all state inline) are shared per job-A shape under `<release>/savepoints/<shape>/`.
The `cross-version` scenario restores the other release's `identical` savepoint.

SQL jobs (`--sql`, flink_bridge/sql_scenarios.py) go through the same steps with the Java tool
`ugate.sql.SqlMain`: job graphs built by the exporter's own path (ExportMain#fromSql, SpecDumper),
and which operators got state back read from the state backend at restore (RecordingBackend).
They are kept under `<release>/sql-*/` with their scripts and plans beside the outcome. A new SQL scenario
whose job A's savepoint is already committed restores that savepoint (and takes its graph-a.json) instead of
running job A again, so adding a scenario leaves the committed ones' savepoint as they were measured on
(`--fresh-savepoints` runs job A anyway).

Usage: python -m flink_bridge.generate_restores [--versions 1.20 2.3] [--scenarios ...] [--sql]
       [--fresh-savepoints] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from flink_bridge.dist import REPO_ROOT, WORK_DIR, ensure_flink, release_of
from flink_bridge.jvm import flink_conf_dir, java_command, run_process
from flink_bridge.sql_scenarios import PLANS, SQL_SCENARIOS, SqlScenario

FIXTURES = REPO_ROOT / "tests" / "fixtures" / "restores"
VERSIONS = ("1.20", "2.3")
SCENARIOS = (
    "identical", "identical-no-uids", "uid-removed", "source-uid-removed", "uids-added",
    "chaining-disabled-uids", "chaining-disabled-no-uids", "parallelism-breaks-chain-no-uids",
    "parallelism-breaks-chain-uids", "rescale-up", "rescale-down", "rescale-down-to-1", "rescale-keyed-only",
    "max-parallelism-changed", "max-parallelism-derived-crossing", "parallelism-above-max-parallelism",
    "parallelism-above-explicit-max-parallelism",
    "stateful-operator-removed", "stateful-operator-added", "map-inserted-before-uidless-keyed",
    "uid-hash-pins-old-id", "uid-hash-unknown-id-with-uid", "uid-hash-unknown-id-no-uid",
    "sources-swapped-no-uids", "stateless-operator-removed", "empty-state-operator-removed",
    "chain-mixed-max-parallelism", "cross-version",
    # misrouting (state restored into an operator that is not its writer's counterpart)
    "misroute-identical-no-uids", "misroute-sources-swapped-no-uids", "misroute-sources-swapped-uids",
    "misroute-keyed-branches-reordered", "misroute-map-inserted-shifts-ids", "misroute-union-inputs-reordered",
)
MISROUTE = tuple(s for s in SCENARIOS if s.startswith("misroute-"))
CROSS = "cross-version"


def stage_dir(release: str) -> Path:
    return WORK_DIR / "restores-stage" / release


def run_java(version: str, stage: Path, scenarios: list[str], cross: str | None, timeout: float = 1800) -> None:
    """One JVM, one MiniCluster (1 GB heap: the machine is shared) for all scenarios of a release."""
    conf = flink_conf_dir("restores-conf", "ERROR")
    args = [str(stage), *(["--cross-savepoint", cross] if cross else []), *scenarios]
    cmd = java_command("restores", version, "ugate.restores.Main", args, heap="1g")
    cmd.insert(1, f"-Dlog4j.configurationFile={conf / 'log4j.properties'}")
    env = dict(os.environ, FLINK_CONF_DIR=str(conf))
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    for line in proc.stdout.splitlines():
        if "\t" in line:
            print(f"[restores] {release_of(version)} {line}", file=sys.stderr)
    if proc.returncode != 0:
        raise RuntimeError(f"restores (Flink {release_of(version)}) exited {proc.returncode}:\n{proc.stderr[-4000:]}")


def _local(pointer: str) -> Path:
    return Path(pointer.removeprefix("file://").removeprefix("file:"))


def keep(release: str, stage: Path, scenarios: list[str], out: Path) -> list[Path]:
    """Copy what each scenario needs into the fixtures: outcome, graphs, its (shared) savepoint."""
    written = []
    for name in scenarios:
        src = stage / name
        if not (src / "outcome.json").is_file():
            continue
        outcome = json.loads((src / "outcome.json").read_text())
        pointer = outcome["savepoint"]["pointer"]
        sp_dir = _local(pointer)
        if name == CROSS:
            other = next(r for r in (release_of(v) for v in VERSIONS) if r != release)
            rel = f"../../{other}/savepoints/{sp_dir.parent.name}"
        else:
            rel = f"../savepoints/{sp_dir.parent.name}"
            dest_sp = out / release / "savepoints" / sp_dir.parent.name
            if not (dest_sp / "_metadata").is_file() or (dest_sp / "pointer.txt").read_text() != pointer:
                shutil.rmtree(dest_sp, ignore_errors=True)
                dest_sp.mkdir(parents=True)
                for f in sp_dir.iterdir():
                    if f.is_file():
                        shutil.copy2(f, dest_sp / f.name)
                (dest_sp / "pointer.txt").write_text(pointer)
        outcome["savepoint"]["fixture"] = rel
        outcome["flink_release"] = release
        dest = out / release / name
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir(parents=True)
        (dest / "outcome.json").write_text(json.dumps(outcome, indent=1) + "\n")
        for g in ("graph-a.json", "graph-b.json"):
            if (src / g).is_file():
                (dest / g).write_text(json.dumps(json.loads((src / g).read_text()), indent=1) + "\n")
        written.append(dest)
    return written


def _identical_pointer(release: str) -> str | None:
    f = stage_dir(release) / "identical" / "outcome.json"
    return json.loads(f.read_text())["savepoint"]["pointer"] if f.is_file() else None


def generate(versions: list[str], scenarios: list[str], out: Path) -> list[Path]:
    releases = [release_of(v) for v in versions]
    plain = [s for s in scenarios if s != CROSS]
    if CROSS in scenarios and "identical" not in plain:
        plain.insert(0, "identical")
    written: list[Path] = []
    for release in releases:
        ensure_flink(release)
        stage = stage_dir(release)
        shutil.rmtree(stage, ignore_errors=True)
        stage.mkdir(parents=True)
        run_java(release, stage, plain, None)
        written += keep(release, stage, plain, out)
    if CROSS in scenarios and len(releases) == 2:
        for release in releases:
            other = next(r for r in releases if r != release)
            pointer = _identical_pointer(other)
            if pointer:
                run_java(release, stage_dir(release), [CROSS], pointer)
                written += keep(release, stage_dir(release), [CROSS], out)
    return written


def _sql_stage(release: str) -> Path:
    return WORK_DIR / "restores-stage-sql" / release


def _compile_plans(release: str, stage: Path) -> None:
    """Each plan in its own JVM, as a user compiles it in a fresh SQL client session."""
    plans = stage / "plans"
    plans.mkdir(parents=True, exist_ok=True)
    for name, script in PLANS.items():
        (plans / f"{name}.sql").write_text(script)
        cmd = java_command("restores", release, "upgradegate.bridge.PlanCompiler",
                           [str(plans / f"{name}.sql"), str(plans / f"{name}.json")], heap="512m")
        env = dict(os.environ, FLINK_CONF_DIR=str(flink_conf_dir("restores-conf", "ERROR")))
        proc = run_process(cmd, timeout=600, env=env)
        if proc.returncode != 0:
            raise RuntimeError(f"PlanCompiler {name} (Flink {release}) failed:\n{proc.stderr[-3000:]}")


def _stage_sql(sc: SqlScenario, stage: Path, plans: Path) -> None:
    d = stage / sc.name
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    (d / "a.sql").write_text(sc.a)
    (d / "b.sql").write_text(sc.b)
    for side, conf in (("a", sc.a_conf), ("b", sc.b_conf)):
        if conf:
            (d / f"{side}.conf").write_text("".join(f"{k}={v}\n" for k, v in conf.items()))
    for name in PLANS:
        if f"'{name}.json'" in sc.a + sc.b:
            shutil.copy2(plans / f"{name}.json", d / f"{name}.json")


def run_sql_java(release: str, stage: Path, scenarios: list[SqlScenario], given: dict[str, str],
                 timeout: float = 1800, graphs_only: bool = False) -> None:
    """One JVM, one MiniCluster for the SQL scenarios of a release (state backend: RecordingBackend)."""
    conf = flink_conf_dir("restores-conf", "ERROR")
    args = [str(stage), *(["--graphs-only"] if graphs_only else [])]
    for name, pointer in given.items():
        args += ["--savepoint", f"{name}={pointer}"]
    args += [f"{sc.name}:{sc.shape}" for sc in scenarios]
    cmd = java_command("restores", release, "ugate.sql.SqlMain", args, heap="1g")
    cmd.insert(1, f"-Dlog4j.configurationFile={conf / 'log4j.properties'}")
    proc = run_process(cmd, timeout=timeout, env=dict(os.environ, FLINK_CONF_DIR=str(conf)))
    for line in proc.stdout.splitlines():
        if "\t" in line:
            print(f"[restores] {release} {line}", file=sys.stderr)
    if proc.returncode != 0:
        raise RuntimeError(f"SqlMain (Flink {release}) exited {proc.returncode}:\n{proc.stderr[-4000:]}")


def _keep_sql(release: str, stage: Path, scenarios: list[SqlScenario], out: Path) -> list[Path]:
    written = keep(release, stage, [sc.name for sc in scenarios if not sc.savepoint_from], out)
    for sc in scenarios:
        dest = out / release / sc.name
        if sc.savepoint_from:
            src = stage / sc.name / "outcome.json"
            if not src.is_file():
                continue
            outcome = json.loads(src.read_text())
            shape = _local(outcome["savepoint"]["pointer"]).parent.name  # the other release's shape folder
            outcome["savepoint"]["fixture"] = f"../../{sc.savepoint_from[0]}/savepoints/{shape}"
            outcome["flink_release"] = release
            shutil.rmtree(dest, ignore_errors=True)
            dest.mkdir(parents=True)
            (dest / "outcome.json").write_text(json.dumps(outcome, indent=1) + "\n")
            for g in ("graph-b.json",):
                (dest / g).write_text(json.dumps(json.loads((stage / sc.name / g).read_text()), indent=1) + "\n")
            written.append(dest)
        if dest.is_dir():
            for f in sorted((stage / sc.name).iterdir()):
                if f.suffix in (".sql", ".conf") or (f.suffix == ".json" and f.stem in PLANS):
                    shutil.copy2(f, dest / f.name)
    return written


def redump_sql_graphs(versions: list[str], out: Path) -> list[Path]:
    """Only rebuild graph-a/b.json of the staged SQL scenarios (after an exporter change); outcomes stay."""
    written: list[Path] = []
    for release in (release_of(v) for v in versions):
        stage = _sql_stage(release)
        todo = [sc for sc in SQL_SCENARIOS if (stage / sc.name / "outcome.json").is_file()]
        given = {sc.name: "-" for sc in todo if sc.savepoint_from}
        run_sql_java(release, stage, todo, given, graphs_only=True)
        written += _keep_sql(release, stage, todo, out)
    return written


def _committed_savepoint(out: Path, release: str, sc: SqlScenario) -> tuple[str, Path] | None:
    """The savepoint already committed for this scenario's job A (its shape) and the graph-a.json written with it.

    Restoring it (put back at the path Flink wrote it to, so errors print the same pointer) lets a new scenario
    join its shape without replacing the savepoint the committed outcomes of the other scenarios were measured
    on. None when nothing of that shape is committed: job A runs and is savepointed as usual.
    """
    d = out / release / "savepoints" / sc.shape
    if not (d / "_metadata").is_file() or not (d / "pointer.txt").is_file():
        return None
    rel = f"../savepoints/{sc.shape}"
    graph_a = next((f.parent / "graph-a.json" for f in sorted((out / release).glob("sql-*/outcome.json"))
                    if json.loads(f.read_text())["savepoint"].get("fixture") == rel
                    and (f.parent / "graph-a.json").is_file()), None)
    if graph_a is None:
        return None
    pointer = (d / "pointer.txt").read_text().strip()
    local = _local(pointer)
    if not (local / "_metadata").is_file():
        local.mkdir(parents=True, exist_ok=True)
        for f in d.iterdir():
            if f.is_file() and f.name != "pointer.txt":
                shutil.copy2(f, local / f.name)
    return pointer, graph_a


def generate_sql(versions: list[str], out: Path, names: list[str] | None = None,
                 fresh_savepoints: bool = False) -> list[Path]:
    """SQL scenarios on every release, then those restoring another release's savepoint."""
    releases = [release_of(v) for v in versions]
    chosen = [sc for sc in SQL_SCENARIOS if names is None or sc.name in names]
    written: list[Path] = []
    for crossing in (False, True):
        for release in releases:
            todo = [sc for sc in chosen if release in sc.releases and bool(sc.savepoint_from) == crossing]
            if not todo:
                continue
            ensure_flink(release)
            stage = _sql_stage(release)
            if not crossing:  # each scenario's folder is replaced; other scenarios' stay for the crossing runs
                _compile_plans(release, stage)
            given: dict[str, str] = {}
            for sc in todo:
                plans = stage / "plans"
                if sc.savepoint_from:
                    other, base = sc.savepoint_from
                    f = _sql_stage(other) / base / "outcome.json"
                    if not f.is_file():
                        continue
                    given[sc.name] = json.loads(f.read_text())["savepoint"]["pointer"]
                    plans = _sql_stage(other) / "plans"  # the plan compiled by the older release
                committed = None if sc.savepoint_from or fresh_savepoints else _committed_savepoint(out, release, sc)
                _stage_sql(sc, stage, plans)
                if committed is not None:  # job A is not run again: its committed savepoint and graph
                    given[sc.name] = committed[0]
                    shutil.copy2(committed[1], stage / sc.name / "graph-a.json")
            todo = [sc for sc in todo if not sc.savepoint_from or sc.name in given]
            run_sql_java(release, stage, todo, given)
            written += _keep_sql(release, stage, todo, out)
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--versions", nargs="+", default=list(VERSIONS))
    ap.add_argument("--scenarios", nargs="+", default=list(SCENARIOS))
    ap.add_argument("--out", type=Path, default=FIXTURES)
    ap.add_argument("--sql", action="store_true", help="the SQL scenarios (flink_bridge/sql_scenarios.py) only")
    ap.add_argument("--sql-graphs-only", action="store_true", help="re-dump the staged SQL scenarios' graphs")
    ap.add_argument("--fresh-savepoints", action="store_true",
                    help="SQL: run job A and savepoint it even when its shape's savepoint is committed")
    args = ap.parse_args(argv)
    t0 = time.monotonic()
    if args.sql_graphs_only:
        written = redump_sql_graphs(args.versions, args.out)
    elif args.sql:
        chosen = None if args.scenarios == list(SCENARIOS) else args.scenarios
        written = generate_sql(args.versions, args.out, chosen, args.fresh_savepoints)
    else:
        written = generate(args.versions, args.scenarios, args.out)
    print(f"[restores] {len(written)} scenario outcomes in {time.monotonic() - t0:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

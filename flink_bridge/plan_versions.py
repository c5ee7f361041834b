"""Which compiled plans (FLIP-190) each Flink release executes: measured, for the gate's plan-version rule.

Every installed release compiles the same SQL job (`sql_scenarios.AGG_SQL`: datagen -> GROUP BY ->
blackhole) with `COMPILE PLAN` in its own JVM, then every release runs every plan with `EXECUTE PLAN`
(`TableEnvironment#executePlan`, the Java tool `ugate.plans.PlanAcceptance`) and cancels it once it is
RUNNING. What each release did is kept in `tests/fixtures/plan_versions/acceptance.json`, with the plans
(`plan-<release>.json`) beside it: the oracle of `upgrade_gate/gate/plan_versions.py`.

Usage: python -m flink_bridge.plan_versions [--versions LINE...] [--out DIR]   (default: every installed release)
(hold /tmp/flink-jvm.lock: one JVM at a time).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

from flink_bridge.dist import REPO_ROOT, WORK_DIR, ensure_flink, release_of
from flink_bridge.jvm import flink_conf_dir, java_command, run_process
from flink_bridge.sql_scenarios import AGG_SQL
from hashing.versions import PATCH_RELEASES

FIXTURES = REPO_ROOT / "tests" / "fixtures" / "plan_versions"
TOOL, MAIN = "planversions", "ugate.plans.PlanAcceptance"
_DDL = AGG_SQL[:AGG_SQL.index("INSERT")]  # the tables; the plan holds the query


def _run(release: str, args: list[str]) -> str:
    env = dict(os.environ, FLINK_CONF_DIR=str(flink_conf_dir("restores-conf", "ERROR")))
    proc = run_process(java_command(TOOL, release, MAIN, args, heap="768m"), timeout=900, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"{MAIN} {args[0]} (Flink {release}) exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    return proc.stdout


def measure(versions: list[str], out: Path) -> dict[str, object]:
    releases = [release_of(v) for v in versions]
    stage = WORK_DIR / "plan-versions"
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir(parents=True)
    (stage / "job.sql").write_text(AGG_SQL)
    (stage / "ddl.sql").write_text(_DDL)
    plans: dict[str, dict[str, object]] = {}
    for r in releases:
        ensure_flink(r)
        f = stage / f"plan-{r}.json"
        _run(r, ["compile", str(stage / "job.sql"), str(f)])
        doc = json.loads(f.read_text())
        plans[r] = {"file": f.name, "flinkVersion": doc.get("flinkVersion"),
                    "exec_nodes": sorted({n["type"] for n in doc["nodes"]})}
    executed: dict[str, dict[str, dict[str, str]]] = {}
    for r in releases:
        tsv = stage / f"executed-by-{r}.tsv"
        _run(r, ["execute", str(tsv), str(stage / "ddl.sql"), *(str(stage / f"plan-{p}.json") for p in releases)])
        rows = {}
        for line in tsv.read_text().splitlines():
            name, status, *error = line.split("\t")
            rows[name.removeprefix("plan-").removesuffix(".json")] = {"status": status, **(
                {"error": error[0]} if error else {})}
        executed[r] = rows
        print(f"[plan-versions] {r} executes: " + ", ".join(f"{p}={v['status']}" for p, v in rows.items()),
              file=sys.stderr)
    result = {"job": "flink_bridge/sql_scenarios.py AGG_SQL", "plans": plans, "executed_by": executed}
    out.mkdir(parents=True, exist_ok=True)
    for r in releases:
        shutil.copy2(stage / f"plan-{r}.json", out / f"plan-{r}.json")
    (out / "acceptance.json").write_text(json.dumps(result, indent=1) + "\n")
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--versions", nargs="+", default=list(PATCH_RELEASES))
    ap.add_argument("--out", type=Path, default=FIXTURES)
    args = ap.parse_args(argv)
    measure(args.versions, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

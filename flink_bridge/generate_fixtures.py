"""Re-create the oracle fixtures from real Flink: `python -m flink_bridge.generate_fixtures`.

Real Flink is the authority on operator ids (docs/design.md, Testing). This driver runs the Java oracle
(`flink_bridge/java/common/streamgraph/`, main class `OracleMain`) once per Flink release; it
builds every case's StreamGraph without executing a job and reports the graph spec (docs/graph-spec.md)
together with Flink's own `StreamGraphHasherV2` hashes, user hashes and job vertices, plus
key-group vectors from `KeyGroupRangeAssignment`. Here the output is split into one small
file per case and written with sorted keys, so a re-run is byte-identical and a diff shows
exactly what a Flink release changed.

Then the SQL restore scenarios (flink_bridge/generate_restores.py --sql: real SQL jobs restored by real
Flink, `tests/fixtures/restores/<release>/sql-*/`), unless `--no-sql-restores`.

Layout: `<out>/<release>/graphs/<case>.json` (a spec plus Flink's results, or Flink's error when
only the job graph failed), `<out>/<release>/graph_errors/<case>.json` (Flink refused to build
the StreamGraph at all, so there is no spec, only the error) and `<out>/<release>/keygroups.json`.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from flink_bridge.dist import REPO_ROOT, ensure_flink, release_of
from flink_bridge.jvm import compile_tool, run_tool

TOOL = "streamgraph"
ORACLE_MAIN = "upgradegate.bridge.OracleMain"
DEFAULT_OUT = REPO_ROOT / "tests" / "fixtures" / "flink"
# The releases whose fixtures are committed (other installed releases can be given with --versions).
DEFAULT_VERSIONS = ("1.20", "2.3")


def _pretty(obj: Any) -> str:
    """Indented, key-sorted JSON; non-ASCII kept readable (uids like `ü-uid`)."""
    return json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _one_per_line(obj: dict[str, Any]) -> str:
    """Top-level keys sorted, every list item on its own line: thousands of vectors stay diffable.

    ASCII-escaped because some keys are lone surrogates, which UTF-8 cannot encode.
    """
    parts = []
    for key in sorted(obj):
        value = obj[key]
        if isinstance(value, list):
            items = ",\n".join("    " + json.dumps(v, sort_keys=True) for v in value)
            parts.append(f"  {json.dumps(key)}: [\n{items}\n  ]")
        else:
            parts.append(f"  {json.dumps(key)}: {json.dumps(value, sort_keys=True)}")
    return "{\n" + ",\n".join(parts) + "\n}\n"


def _run_oracle(version: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """One JVM for all cases, in a fixed order, so StreamNode ids are reproducible."""
    with tempfile.TemporaryDirectory(prefix="oracle-") as tmp:
        graphs, keygroups = Path(tmp) / "graphs.jsonl", Path(tmp) / "keygroups.json"
        run_tool(TOOL, version, ORACLE_MAIN, [str(graphs), str(keygroups)])
        records = [json.loads(line) for line in graphs.read_text(encoding="utf-8").splitlines() if line]
        return records, json.loads(keygroups.read_text(encoding="utf-8"))


def generate(version: str, out: Path) -> tuple[int, int]:
    """Write the fixtures of one Flink release; return (graph cases, key vectors)."""
    release = release_of(version)
    ensure_flink(release)
    compile_tool(TOOL, release)
    records, keygroups = _run_oracle(release)
    names = [r["case"] for r in records]
    if len(set(names)) != len(names):
        raise RuntimeError(f"duplicate case names from the oracle: {names}")
    for r in [*records, keygroups]:
        if r["flink_version"] != release:
            raise RuntimeError(f"oracle ran Flink {r['flink_version']}, expected {release}")
    folders = {"graphs": [r for r in records if r["spec"] is not None],
               "graph_errors": [r for r in records if r["spec"] is None]}
    for folder, recs in folders.items():
        target = out / release / folder
        target.mkdir(parents=True, exist_ok=True)
        keep = {r["case"] for r in recs}
        for stale in target.glob("*.json"):
            if stale.stem not in keep:
                stale.unlink()
        for r in recs:
            (target / f"{r['case']}.json").write_text(_pretty(r), encoding="utf-8")
    (out / release / "keygroups.json").write_text(_one_per_line(keygroups), encoding="utf-8")
    return len(records), len(keygroups["keys"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Generate oracle fixtures with real Flink jars.")
    parser.add_argument("--versions", nargs="+", default=list(DEFAULT_VERSIONS),
                        help="Flink versions (default: %(default)s)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder (default: %(default)s)")
    parser.add_argument("--no-sql-restores", action="store_true",
                        help="skip the SQL restore scenarios (a few minutes per release)")
    args = parser.parse_args(argv)
    for version in args.versions:
        start = time.monotonic()
        cases, keys = generate(version, args.out)
        print(f"[oracle] Flink {release_of(version)}: {cases} graph cases, {keys} key vectors "
              f"-> {args.out / release_of(version)} ({time.monotonic() - start:.1f} s)", flush=True)
    if not args.no_sql_restores:
        from flink_bridge.generate_restores import FIXTURES, generate_sql  # runs jobs: only when asked

        start = time.monotonic()
        written = generate_sql(list(args.versions), FIXTURES)
        print(f"[restores] {len(written)} SQL restore scenarios -> {FIXTURES} ({time.monotonic() - start:.0f} s)",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

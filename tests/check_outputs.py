"""Every `check` output the committed real-Flink fixtures can produce, written to a directory: the proof that a
restructuring changed no behaviour (docs/design.md, "Changing the structure").

    python -m tests.check_outputs OUT_DIR [--only SUBSTRING] [--jobs N]

Run it on the tree before the change and after it, then `diff -r BEFORE AFTER`: every file must be identical.
One file per check and format (`json`, `table`, `html`), produced the way a user gets them, through
`upgrade-gate check` (the repair offer included), with the exit code as the first line. The cases:

* every restore scenario (tests/fixtures/restores/<release>/<scenario>) x allowNonRestoredState x
  (v2 | v3 fixed | v3 naive) x (no old graph | graph-a.json): the simulation, the finding rules, the
  misrouting evidence, SQL state, SQL meaning, SQL explanations and remedies;
* every checkpoint scenario (tests/fixtures/checkpoints/<release>/<scenario>): finished operators, unaligned
  in-flight data, claim modes;
* every recorded state-schema pair (savepoints/state-schemas/changes) with --new-job-savepoint and the backend,
  and the same pair the other way round with --old-savepoint;
* every recorded State TTL change (savepoints/state-schemas/ttl) the same two ways, on its own release;
* every recorded configuration (savepoints/state-schemas/config) with --flink-config, on 1.20 and 2.3.

The repository's path is replaced by `<repo>` and nothing wraps (1,000 columns), so two checkouts at different paths
compare. Not a test: the expected outputs are the
tree's own, so they prove sameness, never correctness (the agreement tests compare with real Flink).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"
SCHEMAS = FIXTURES / "savepoints" / "state-schemas"
FORMATS = ("json", "table", "html")
HASHERS = (("v2", "fixed"), ("v3", "fixed"), ("v3", "naive"))
# SchemaChanges.job's graph, as tests/cli/test_report_schema_changes.py writes it
SCHEMA_GRAPH = {"name": "evolving", "max_parallelism": 128, "nodes": [
    {"id": 1, "name": "numbers", "uid": "numbers", "parallelism": 1, "factory": "source"},
    {"id": 2, "name": "throttle", "uid": "throttle", "parallelism": 1},
    {"id": 3, "name": "evolving", "uid": "evolving", "parallelism": 1},
    {"id": 4, "name": "sink", "parallelism": 1}],
    "edges": [{"source": 1, "target": 2}, {"source": 2, "target": 3, "partitioner": "hash"},
              {"source": 3, "target": 4}]}


def _flink(release: str) -> str:
    return ".".join(release.split(".")[:2])


def _restores() -> Iterator[tuple[str, list[str]]]:
    for f in sorted((FIXTURES / "restores").glob("*/*/outcome.json")):
        d, release = f.parent, f.parent.parent.name
        savepoint = (d / json.loads(f.read_text())["savepoint"]["fixture"]).resolve()
        for allow in (False, True):
            for hasher, matching in HASHERS:
                for old in (False, True):
                    name = (f"restores/{release}/{d.name}/{'allow' if allow else 'strict'}-{hasher}-{matching}"
                            f"{'-old' if old else ''}")
                    argv = ["--savepoint", str(savepoint), "--graph", str(d / "graph-b.json"),
                            "--flink-version", _flink(release), "--hasher", hasher, "--matching", matching]
                    argv += ["--allow-non-restored-state"] if allow else []
                    argv += ["--old-graph", str(d / "graph-a.json")] if old else []
                    yield name, argv


def _checkpoints() -> Iterator[tuple[str, list[str]]]:
    for f in sorted((FIXTURES / "checkpoints").glob("*/*/outcome.json")):
        d, release = f.parent, f.parent.parent.name
        snapshot = (d / json.loads(f.read_text())["fixture"]).resolve()
        for allow in (False, True):
            argv = ["--savepoint", str(snapshot), "--graph", str(d / "graph-b.json"), "--flink-version",
                    _flink(release), "--old-graph", str(d / "graph-a.json")]
            yield f"checkpoints/{release}/{d.name}/{'allow' if allow else 'strict'}", (
                argv + (["--allow-non-restored-state"] if allow else []))


def _schemas(graph: Path, kind: str = "changes") -> Iterator[tuple[str, list[str]]]:
    changes = SCHEMAS / kind
    for o in json.loads((changes / "outcomes.json").read_text()):
        base = ["--graph", str(graph), "--flink-version", _flink(o["release"]), "-D",
                f"state.backend.type={o['backend']}"]
        name = f"schemas/{o['release']}/{o['backend']}/{o['change']}" if kind == "changes" else \
            f"{kind}/{o['release']}/{o['backend']}/{o['scenario']}"
        yield f"{name}/new-job", ["--savepoint", str(changes / o["old_savepoint"]),
                                  "--new-job-savepoint", str(changes / o["new_savepoint"]), *base]
        yield f"{name}/old", ["--savepoint", str(changes / o["new_savepoint"]),
                              "--old-savepoint", str(changes / o["old_savepoint"]), *base]


def _configs() -> Iterator[tuple[str, list[str]]]:
    identical = FIXTURES / "restores" / "2.3.0" / "identical"
    savepoint = (identical / json.loads((identical / "outcome.json").read_text())["savepoint"]["fixture"]).resolve()
    for o in json.loads((SCHEMAS / "config" / "outcomes.json").read_text()):
        for flink in ("1.20", "2.3"):
            yield (f"config/{o['release']}/{o['case']}/{flink}",
                   ["--savepoint", str(savepoint), "--graph", str(identical / "graph-b.json"), "--flink-version",
                    flink, "--flink-config", str(SCHEMAS / "config" / o["case"] / o["file"])])


def cases(graph: Path) -> list[tuple[str, list[str]]]:
    return [*_restores(), *_checkpoints(), *_schemas(graph), *_schemas(SCHEMAS / "ttl" / "graph.json", "ttl"),
            *_configs()]


def _one(case: tuple[str, list[str]], out: Path, tmp: str) -> str:
    from upgrade_gate.cli.main import main

    name, argv = case
    for fmt in FORMATS:
        stdout, stderr = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            code = main(["check", *argv, "--format", fmt])
        text = f"exit {code}\n{stdout.getvalue()}\n-- stderr\n{stderr.getvalue()}"
        path = out / f"{name}.{fmt}"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text.replace(str(REPO), "<repo>").replace(tmp, "<tmp>"), encoding="utf-8")
    return name


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("out", type=Path)
    p.add_argument("--only", default="", help="only the cases whose name contains this")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = p.parse_args(argv)
    # tables and paragraphs wrap at the terminal's width, before `<repo>` replaces the checkout's path: wide enough
    # that nothing wraps, two checkouts at paths of different lengths give the same bytes
    os.environ.update({"COLUMNS": "1000", "NO_COLOR": "1"})
    with tempfile.TemporaryDirectory() as tmp:
        graph = Path(tmp) / "evolving.json"
        graph.write_text(json.dumps(SCHEMA_GRAPH))
        todo = [c for c in cases(graph) if args.only in c[0]]
        with ProcessPoolExecutor(args.jobs) as pool:
            done = pool.map(_one, todo, [args.out.resolve()] * len(todo), [tmp] * len(todo), chunksize=8)
            for i, _ in enumerate(done, 1):
                if i % 200 == 0 or i == len(todo):
                    print(f"{i}/{len(todo)} checks written", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

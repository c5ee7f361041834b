"""`upgrade-gate check --manifest`: many jobs, each judged as `check` judges it alone (docs/guide.md, "In CI").

Expected results are the product's own single-check outputs on the committed real-Flink restore fixtures: a job in
a manifest must get exactly the JSON `check --format json` prints for it alone.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.restore_support import RESTORES

R23 = RESTORES / "2.3.0"
SP = R23 / "savepoints" / "uids-p2"
SAFE_GRAPH = R23 / "rescale-up" / "graph-b.json"
BLOCKED_GRAPH = R23 / "uid-removed" / "graph-b.json"
LOSS_GRAPH = R23 / "stateful-operator-removed" / "graph-b.json"


def _rel(path: Path, base: Path) -> str:
    return os.path.relpath(path, base)


def _write(tmp_path: Path, text: str, name: str = "jobs.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _manifest(tmp_path: Path) -> Path:
    """Three jobs named by paths relative to the manifest's directory (the CLI runs from another directory)."""
    return _write(tmp_path, f"""\
jobs:
  - name: orders
    graph: {_rel(SAFE_GRAPH, tmp_path)}
    savepoint: {_rel(SP, tmp_path)}
    flink_version: "2.3"
  - name: payments
    graph: {_rel(BLOCKED_GRAPH, tmp_path)}
    savepoint: {_rel(SP, tmp_path)}
  - name: fraud
    graph: {_rel(LOSS_GRAPH, tmp_path)}
    savepoint: {_rel(SP, tmp_path)}
    allow_non_restored_state: true
    hasher: v2
    D:
      state.backend: rocksdb
""")


def test_each_job_gets_exactly_its_single_check_json_and_the_worst_verdict(cli, tmp_path: Path) -> None:
    p = cli("check", "--manifest", str(_manifest(tmp_path)), "--format", "json")
    assert p.returncode == 1, p.stderr
    doc = json.loads(p.stdout)
    assert [j["name"] for j in doc["jobs"]] == ["orders", "payments", "fraud"]
    assert all(j["error"] is None for j in doc["jobs"])
    assert doc["verdict"] == "RESTORE_FAILS"
    alone = [("--graph", str(SAFE_GRAPH), "--savepoint", str(SP), "--flink-version", "2.3"),
             ("--graph", str(BLOCKED_GRAPH), "--savepoint", str(SP)),
             ("--graph", str(LOSS_GRAPH), "--savepoint", str(SP), "--allow-non-restored-state", "--hasher", "v2",
              "-D", "state.backend=rocksdb")]
    for job, args in zip(doc["jobs"], alone, strict=True):
        single = cli("check", *args, "--format", "json")
        assert job["result"] == json.loads(single.stdout), job["name"]
    assert [j["result"]["verdict"] for j in doc["jobs"]] == ["SAFE", "RESTORE_FAILS", "STATE_LOSS"]


def test_junit_has_one_suite_per_job_and_markdown_one_comment(cli, tmp_path: Path) -> None:
    """What GitLab's test report and a pull-request comment show for a manifest: every job, the blocked ones failing
    with their single check's report."""
    from junitparser import JUnitXml

    out = tmp_path / "j.xml"
    p = cli("check", "--manifest", str(_manifest(tmp_path)), "--format", "junit", "--output", str(out))
    assert p.returncode == 1, p.stderr
    suites = {s.name: s for s in JUnitXml.fromfile(str(out))}
    assert list(suites) == ["orders", "payments", "fraud"]
    assert suites["orders"].failures == 0 and suites["payments"].failures > 0 and suites["fraud"].failures > 0
    restore = {c.name: c for c in suites["payments"]}["restore"]
    single = json.loads(cli("check", "--graph", str(BLOCKED_GRAPH), "--savepoint", str(SP), "--format", "json").stdout)
    assert single["flink_error"] in restore.result[0].text
    p = cli("check", "--manifest", str(_manifest(tmp_path)), "--format", "markdown")
    assert p.returncode == 1, p.stderr
    assert "**3 job(s) · 2 not SAFE · worst: RESTORE_FAILS**" in p.stdout
    assert "<summary>payments: RESTORE_FAILS</summary>" in p.stdout and "<summary>orders" not in p.stdout
    assert p.stdout.count("<!-- upgrade-gate check -->") == 1  # one comment, edited in place by a CI step


def test_the_table_summarises_each_job(cli, tmp_path: Path) -> None:
    p = cli("check", "--manifest", str(_manifest(tmp_path)))
    assert p.returncode == 1, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == "VERDICT: RESTORE_FAILS"
    assert "job" in p.stdout and "state at risk" in p.stdout and "operators at risk" in p.stdout
    row = {line.split()[0]: line.split() for line in lines if line.split()[:1] in (["orders"], ["payments"],
                                                                                  ["fraud"])}
    assert row["orders"][1] == "SAFE" and row["orders"][-1] == "-"
    assert row["payments"][1] == "RESTORE_FAILS" and row["payments"][-1] == "keyed"
    assert row["fraud"][1] == "STATE_LOSS"
    assert lines[-1] == "1 SAFE, 2 not SAFE, 0 with bad input"


def test_all_safe_exits_0_and_a_directory_names_its_manifest(cli, tmp_path: Path) -> None:
    _write(tmp_path, f"jobs:\n  - name: orders\n    graph: {SAFE_GRAPH}\n    savepoint: {SP}\n",
           name="upgrade-gate.jobs.yaml")
    p = cli("check", "--manifest", str(tmp_path), "--format", "json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["verdict"] == "SAFE"


def test_a_job_with_bad_input_is_named_and_the_others_are_still_checked(cli, tmp_path: Path) -> None:
    path = _write(tmp_path, f"""\
jobs:
  - {{name: gone, graph: {SAFE_GRAPH}, savepoint: missing-savepoint}}
  - {{name: orders, graph: {SAFE_GRAPH}, savepoint: {SP}}}
""")
    p = cli("check", "--manifest", str(path), "--format", "json")
    assert p.returncode == 2 and "Traceback" not in p.stderr
    doc = json.loads(p.stdout)
    gone, orders = doc["jobs"]
    alone = cli("check", "--graph", str(SAFE_GRAPH), "--savepoint", str(tmp_path / "missing-savepoint"))
    assert gone["result"] is None and f"upgrade-gate: error: {gone['error']}\n" == alone.stderr  # as alone
    assert gone["error"].startswith(f"{tmp_path / 'missing-savepoint'}: no such file")
    assert orders["result"]["verdict"] == "SAFE" and doc["verdict"] == "SAFE"
    assert p.stderr == f"upgrade-gate: error: job gone: {gone['error']}\n"
    table = cli("check", "--manifest", str(path))
    assert table.returncode == 2 and "BAD INPUT" in table.stdout
    said = " ".join(table.stdout.split())  # wrapped to the terminal: between words, the path never cut
    assert f"error: job gone: {gone['error']}" in said


@pytest.mark.parametrize(("body", "says"), [
    ("jobs: []\n", "expected a non-empty list of jobs under 'jobs:'"),
    ("jobs:\n  - graph: g.json\n    savepoint: sp\n", "jobs[0]: every job needs a name"),
    ("jobs:\n  - {name: a, graph: g.json}\n", "jobs[0] (a): savepoint is required"),
    ("jobs:\n  - {name: a, grpah: g.json, savepoint: sp}\n", "jobs[0] (a): unknown key 'grpah'"),
    ("jobs:\n  - {name: a, graph: g.json, savepoint: sp}\n  - {name: a, graph: g.json, savepoint: sp}\n",
     "jobs[1] (a): the name is used by an earlier job too"),
    ("jobs:\n  - {name: a, graph: g.json, savepoint: sp, flink_version: 1.20}\n",
     "jobs[0] (a): flink_version: write it as a string"),
    ("jobs:\n  - {name: a, graph: g.json, savepoint: sp, hasher: v9}\n", "jobs[0] (a): argument --hasher: invalid"),
    ("jobs:\n  - {name: a, graph: g.json, savepoint: sp, allow_non_restored_state: yes please}\n",
     "jobs[0] (a): allow_non_restored_state: expected true or false"),
    ("jobs: [\n", "invalid YAML"),
    ("job:\n  - {name: a, graph: g.json, savepoint: sp}\n", "unknown key 'job' (a manifest holds 'jobs:')"),
])
def test_a_bad_manifest_exits_2_with_one_line_naming_the_file_and_the_entry(cli, tmp_path: Path, body: str,
                                                                            says: str) -> None:
    path = _write(tmp_path, body)
    p = cli("check", "--manifest", str(path))
    assert p.returncode == 2 and p.stdout == "" and "Traceback" not in p.stderr
    (line,) = p.stderr.splitlines()
    assert line.startswith(f"upgrade-gate: error: {path}") and says in line, line


def test_the_manifest_owns_the_inputs(cli, tmp_path: Path) -> None:
    p = cli("check", "--manifest", str(_manifest(tmp_path)), "--graph", str(SAFE_GRAPH))
    assert p.returncode == 2 and "--graph belongs in the manifest's entries" in p.stderr
    p = cli("check", "--manifest", str(_manifest(tmp_path)), "--format", "html")
    assert p.returncode == 2
    assert "--manifest writes table, json, junit, markdown; --format html reports one job" in p.stderr
    p = cli("check", "--manifest", str(tmp_path / "nowhere"))
    assert p.returncode == 2 and f"{tmp_path / 'nowhere'}: no such file" in p.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    p = cli("check", "--manifest", str(empty))
    assert p.returncode == 2 and "a directory without upgrade-gate.jobs.yaml" in p.stderr


def test_every_note_a_job_prints_names_the_job(cli, tmp_path: Path) -> None:
    """The single check names on stderr the snapshot a `latest:` savepoint resolved to; in a manifest each such
    line says whose it is (fifty jobs' "savepoint: ..." lines are otherwise anonymous)."""
    shutil.copytree(SP, tmp_path / "savepoints" / "savepoint-0a1b2c-0123456789ab")
    path = _write(tmp_path, f"""\
jobs:
  - {{name: orders, graph: {SAFE_GRAPH}, savepoint: "latest:{tmp_path / 'savepoints'}"}}
  - {{name: payments, graph: {BLOCKED_GRAPH}, savepoint: "latest:{tmp_path / 'savepoints'}"}}
""")
    p = cli("check", "--manifest", str(path), "--format", "json")
    assert p.returncode == 1, p.stderr
    lines = p.stderr.splitlines()
    assert [line.split(": ", 1)[0] for line in lines if "savepoint: " in line] == ["job orders", "job payments"]
    assert all(line.startswith(("job orders: ", "job payments: ")) for line in lines), lines

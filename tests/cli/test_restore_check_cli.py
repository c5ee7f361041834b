"""`upgrade-gate check`: exit codes, the JSON contract of docs/design.md and the HTML report."""

from __future__ import annotations

import json
from pathlib import Path

from tests.restore_support import RESTORES

R23 = RESTORES / "2.3.0"
SP = str(R23 / "savepoints" / "uids-p2")


def test_safe_exits_0_with_the_json_contract(cli) -> None:
    p = cli("check", "--savepoint", SP, "--graph", str(R23 / "rescale-up" / "graph-b.json"), "--format", "json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["verdict"] == "SAFE" and doc["restore_succeeds"] is True and doc["flink_error"] is None
    assert doc["losses"] == [] and doc["remedies"] == []
    keyed = next(o for o in doc["operators"] if o["name"] == "keyed")
    assert set(keyed) >= {"operator_id", "name", "matched_by", "new_node_id", "state_bytes", "lost_bytes", "rescale"}
    assert keyed["matched_by"] == "generated" and len(keyed["operator_id"]) == 32
    assert [s["key_groups"] for s in keyed["rescale"]["subtasks"]] == [[0, 42], [43, 85], [86, 127]]
    assert {m["matched_by"] for m in doc["migration"]} <= {"generated", "alternative", "none"}


def test_restore_failure_exits_1_with_flinks_message_and_a_remedy(cli) -> None:
    p = cli("check", "--savepoint", SP, "--graph", str(R23 / "uid-removed" / "graph-b.json"), "--format", "json")
    assert p.returncode == 1
    doc = json.loads(p.stdout)
    assert doc["verdict"] == "RESTORE_FAILS" and not doc["restore_succeeds"]
    assert doc["flink_error"].startswith(f"Failed to rollback to checkpoint/savepoint file:{Path(SP).resolve()}. "
                                         "Cannot map checkpoint/savepoint state for operator ")
    (loss,) = doc["losses"]
    assert loss["name"] == "keyed" and loss["bytes"] > 0 and loss["state_names"] == ["keyed"]
    assert doc["remedies"][0]["action"] == f'setUidHash("{loss["operator_id"]}")'
    assert doc["verdict_with_remedies"] == "SAFE"


def test_allow_non_restored_state_turns_failure_into_state_loss(cli) -> None:
    p = cli("check", "--savepoint", SP, "--graph", str(R23 / "stateful-operator-removed" / "graph-b.json"),
            "--allow-non-restored-state", "--format", "json")
    assert p.returncode == 1
    doc = json.loads(p.stdout)
    assert doc["verdict"] == "STATE_LOSS" and doc["restore_succeeds"]
    assert {n for x in doc["losses"] for n in x["state_names"]} == {"split-a", "split-b", "union-list"}


def test_bad_input_exits_2(cli, tmp_path) -> None:
    p = cli("check", "--savepoint", str(tmp_path / "missing"), "--graph", str(R23 / "identical" / "graph-b.json"))
    assert p.returncode == 2 and "no such file" in p.stderr and "Traceback" not in p.stderr
    p = cli("check", "--savepoint", SP, "--graph", str(R23 / "identical" / "graph-b.json"), "--hasher", "v9")
    assert p.returncode == 2


def test_a_jar_given_as_the_graph_says_how_to_export_it(cli, tmp_path) -> None:
    """The commonest mix-up (issue 32): the job jar where its graph belongs. Not "not UTF-8 text": the way on."""
    import zipfile

    jar = tmp_path / "job.jar"
    with zipfile.ZipFile(jar, "w") as z:
        z.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\nMain-Class: Job\n")
    p = cli("check", "--savepoint", SP, "--graph", str(jar))
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert f"{jar}: a jar (zip archive), not a graph file" in p.stderr and "upgrade-gate export --jar" in p.stderr


def test_flink_120_cannot_read_a_23_savepoint(cli) -> None:
    p = cli("check", "--savepoint", SP, "--graph", str(R23 / "identical" / "graph-b.json"), "--flink-version", "1.20",
            "--format", "json")
    assert p.returncode == 1
    assert json.loads(p.stdout)["flink_error"] == "Unrecognized checkpoint version number: 6"


def test_html_report_puts_the_verdict_first(cli, tmp_path) -> None:
    out = tmp_path / "report.html"
    p = cli("check", "--savepoint", SP, "--graph", str(R23 / "rescale-up" / "graph-b.json"), "--format", "html",
            "-o", str(out))
    assert p.returncode == 0
    html = out.read_text()
    body = html.split("<body", 1)[1].split(">", 1)[1]
    assert body.lstrip().startswith('<div class="verdict v-SAFE" id="verdict">SAFE</div>')
    # the graphs side by side (the CLI passes the graph), bytes per operator, key groups of the keyed operator
    assert 'class="graphs' in html and 'class="bars' in html and html.count('class="keygroups"') == 1
    assert 'data-side="new" data-name="keyed"' in html and 'class="edge"' in html
    assert "<script" not in html and "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")


def test_table_output_names_verdict_and_losses(cli) -> None:
    p = cli("check", "--savepoint", str(R23 / "savepoints" / "uids-but-keyed-p2"),
            "--graph", str(R23 / "map-inserted-before-uidless-keyed" / "graph-b.json"))
    assert p.returncode == 1
    # keyed state taken by a map without keyed input: misrouted (it was STATE_LOSS before)
    assert p.stdout.startswith("VERDICT: STATE_MISROUTED   (with the remedies below: SAFE)")
    assert "no keyed input" in p.stdout and 'uid("inserted")' in p.stdout

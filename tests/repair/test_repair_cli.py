"""`upgrade-gate repair` as a user runs it: plans on the real-Flink restore scenarios, refusals, bad input, S3.

The restore oracle (`tests/fixtures/restores/`, real Flink 1.20.5 and 2.3.0) has job A's savepoint and job B's
graph for every kind of change; here the repair plans them. Which plans Flink accepts is proven with real
restores in test_repair_restores.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import s3_server
from tests.conftest import TESTS, run_cli

RESTORES = TESTS / "fixtures" / "restores"


def _scenario(release: str, name: str) -> tuple[Path, Path, Path]:
    d = RESTORES / release / name
    o = json.loads((d / "outcome.json").read_text())
    return (d / o["savepoint"]["fixture"]).resolve(), d / "graph-a.json", d / "graph-b.json"


def _plan(release: str, name: str, *extra: str) -> tuple[int, dict, str]:
    sp, a, b = _scenario(release, name)
    args = [a if x == "@old" else x for x in extra]
    res = run_cli("repair", "--savepoint", str(sp), "--graph", str(b), "--flink-version",
                  ".".join(release.split(".")[:2]), "--format", "json", *map(str, args))
    return res.returncode, json.loads(res.stdout) if res.stdout.strip() else {}, res.stderr


def _one_line_error(res: subprocess.CompletedProcess[str]) -> str:
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert "Traceback" not in res.stderr
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, res.stderr
    return lines[0]


@pytest.mark.parametrize("name", ["uid-removed", "source-uid-removed", "map-inserted-before-uidless-keyed",
                                  "chaining-disabled-no-uids", "sources-swapped-no-uids", "uids-added",
                                  "misroute-sources-swapped-no-uids", "misroute-keyed-branches-reordered"])
def test_a_flink_2_savepoint_is_repaired_from_what_it_records(name: str) -> None:
    code, doc, err = _plan("2.3.0", name)
    assert code == 0, err
    assert doc["repairable"] and doc["verdict_after"] == "SAFE" and doc["verdict_before"] != "SAFE"
    assert doc["unresolved"] == [] and doc["written"] is None  # no --output: a plan only
    for m in doc["moves"]:  # each state goes to the operator of the same name, said how
        assert m["name"] == m["node_name"] and m["evidence"]
    assert doc["command"].startswith("upgrade-gate repair --savepoint ")


def test_a_flink_1_savepoint_records_no_names_so_only_the_old_graph_settles_an_ambiguous_state() -> None:
    code, doc, _ = _plan("1.20.5", "sources-swapped-no-uids")
    assert code == 1 and not doc["repairable"]
    assert doc["unresolved"] and all(u["candidates"] for u in doc["unresolved"])
    assert doc["written"] is None
    code, doc, err = _plan("1.20.5", "sources-swapped-no-uids", "--old-graph", "@old")
    assert code == 0, err
    assert doc["repairable"] and {m["matched_by"] for m in doc["moves"]} == {"old graph: name"}


def test_a_removed_operator_is_dropped_by_name_not_silently() -> None:
    code, doc, _ = _plan("2.3.0", "stateful-operator-removed")
    assert code == 1 and doc["unresolved"][0]["name"] == "lists"
    assert "--drop" in doc["unresolved"][0]["reason"]
    code, doc, err = _plan("2.3.0", "stateful-operator-removed", "--drop", "lists")
    assert code == 0, err
    assert doc["repairable"] and doc["drops"][0]["name"] == "lists" and doc["drops"][0]["bytes"] > 0


def test_nothing_to_repair_is_said_and_is_not_an_error() -> None:
    sp, _, b = _scenario("2.3.0", "identical")
    res = run_cli("repair", "--savepoint", str(sp), "--graph", str(b))
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("NOTHING TO REPAIR: the check says SAFE")


def test_the_table_shows_each_move_with_its_evidence_and_the_command_to_write_it() -> None:
    sp, _, b = _scenario("2.3.0", "uid-removed")
    res = run_cli("repair", "--savepoint", str(sp), "--graph", str(b))
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("REPAIRABLE: RESTORE_FAILS -> SAFE")
    assert "e7beec23fd9f6ed5e1b8395129d43728" in res.stdout and "3a434c34ffe2fe820735436a4ca97107" in res.stdout
    assert "to write it: upgrade-gate repair" in res.stdout


@pytest.mark.parametrize("extra, words", [
    (["--drop", "lists/count"], "holds no state named 'count' (it holds: "),
    (["--map", "nonsense"], "expected OLD=NEW"),
    (["--map", "e7beec23fd9f6ed5e1b8395129d43728=Source: numbers"], "has no keyed input"),
    (["--map", "ffffffffffffffffffffffffffffffff=keyed"], "holds no operator with this ID"),
    (["--drop", "no-such-operator"], "no savepoint operator with this ID, uid or name"),
])
def test_bad_arguments_are_one_line_and_exit_2(extra: list[str], words: str) -> None:
    sp, _, b = _scenario("2.3.0", "uid-removed")
    res = run_cli("repair", "--savepoint", str(sp), "--graph", str(b), *extra)
    assert words in _one_line_error(res)


def _digests(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def test_a_destination_that_exists_or_lies_in_the_source_is_refused(tmp_path: Path) -> None:
    sp, _, b = _scenario("2.3.0", "uid-removed")
    before = _digests(sp)
    (tmp_path / "taken").mkdir()
    line = _one_line_error(run_cli("repair", "--savepoint", str(sp), "--graph", str(b), "-o", str(tmp_path / "taken")))
    assert "already exists; a repair writes only to a new location" in line
    line = _one_line_error(run_cli("repair", "--savepoint", str(sp), "--graph", str(b), "-o", str(sp / "new")))
    assert "must not be written inside the source savepoint" in line
    assert not (sp / "new").exists() and _digests(sp) == before


def test_an_unrepairable_plan_writes_nothing(tmp_path: Path) -> None:
    sp, _, b = _scenario("1.20.5", "sources-swapped-no-uids")
    res = run_cli("repair", "--savepoint", str(sp), "--graph", str(b), "--flink-version", "1.20",
                  "-o", str(tmp_path / "out"))
    assert res.returncode == 1
    assert res.stdout.startswith("NOT REPAIRABLE") and "Needs your decision" in res.stdout
    assert not (tmp_path / "out").exists()


BUCKET = "savepoints"


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[s3_server.S3Server]:
    server = s3_server.start(tmp_path_factory.mktemp("weed"))
    try:
        server.client().create_bucket(Bucket=BUCKET)
        yield server
    finally:
        server.stop()


def _s3_cli(s3: s3_server.S3Server, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update({"AWS_ENDPOINT_URL": s3.endpoint, "AWS_ACCESS_KEY_ID": s3_server.ACCESS_KEY,
                "AWS_SECRET_ACCESS_KEY": s3_server.SECRET_KEY, "AWS_REGION": "us-east-1"})
    return subprocess.run([sys.executable, "-m", "upgrade_gate", *args], capture_output=True, text=True, timeout=120,
                          env=env)


def test_repair_on_s3_copies_state_files_server_side_and_refuses_a_used_prefix(s3: s3_server.S3Server) -> None:
    d = TESTS / "fixtures" / "repairs" / "2.3.0" / "uid-renamed"
    c = s3.client()
    for f in (d / "savepoint").iterdir():
        c.put_object(Bucket=BUCKET, Key=f"jobs/orders/sp-1/{f.name}", Body=f.read_bytes())
    res = _s3_cli(s3, "repair", "--savepoint", f"s3://{BUCKET}/jobs/orders/sp-1", "--graph", str(d / "graph-b.json"),
                  "--output", f"s3://{BUCKET}/jobs/orders/sp-1-repaired", "--format", "json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["verified_verdict"] == "SAFE" and doc["written"]["state_files"] == len(list(d.glob("savepoint/*"))) - 1
    got = c.get_object(Bucket=BUCKET, Key="jobs/orders/sp-1-repaired/_metadata")["Body"].read()
    assert got == (d / "repaired" / "_metadata").read_bytes()
    for f in (d / "savepoint").iterdir():  # the source is as it was
        assert c.get_object(Bucket=BUCKET, Key=f"jobs/orders/sp-1/{f.name}")["Body"].read() == f.read_bytes()
    again = _s3_cli(s3, "repair", "--savepoint", f"s3://{BUCKET}/jobs/orders/sp-1", "--graph",
                    str(d / "graph-b.json"), "--output", f"s3://{BUCKET}/jobs/orders/sp-1-repaired")
    assert "already holds objects" in _one_line_error(again)

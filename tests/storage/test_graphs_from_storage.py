"""`--graph` and `--old-graph` come from the same places as savepoints: a path, `file://`, `s3://`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import s3_server

pytestmark = pytest.mark.s3

RESTORES = Path(__file__).resolve().parent.parent / "fixtures" / "restores"
SCENARIO = RESTORES / "2.3.0" / "misroute-map-inserted-shifts-ids"
SAVEPOINT = (SCENARIO / json.loads((SCENARIO / "outcome.json").read_text())["savepoint"]["fixture"]).resolve()
BUCKET = "graphs"


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[s3_server.S3Server]:
    server = s3_server.start(tmp_path_factory.mktemp("weed"))
    try:
        c = server.client()
        c.create_bucket(Bucket=BUCKET)
        for name in ("graph-a.json", "graph-b.json"):
            c.put_object(Bucket=BUCKET, Key=f"jobs/{name}", Body=(SCENARIO / name).read_bytes())
        c.put_object(Bucket=BUCKET, Key="jobs/broken.yaml", Body=b"nodes: [&a x, *a]\n")
        yield server
    finally:
        server.stop()


def _cli(s3: s3_server.S3Server, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update({"AWS_ENDPOINT_URL": s3.endpoint, "AWS_ACCESS_KEY_ID": s3_server.ACCESS_KEY,
                "AWS_SECRET_ACCESS_KEY": s3_server.SECRET_KEY, "AWS_REGION": "us-east-1", "COLUMNS": "100"})
    return subprocess.run([sys.executable, "-m", "upgrade_gate", *args], capture_output=True, text=True, timeout=120,
                          env=env)


def test_check_reads_both_graphs_from_s3_like_local_files(s3: s3_server.S3Server) -> None:
    local = _cli(s3, "check", "--savepoint", str(SAVEPOINT), "--graph", str(SCENARIO / "graph-b.json"),
                 "--old-graph", f"file://{SCENARIO / 'graph-a.json'}", "--format", "json")
    remote = _cli(s3, "check", "--savepoint", str(SAVEPOINT), "--graph", f"s3://{BUCKET}/jobs/graph-b.json",
                  "--old-graph", f"s3://{BUCKET}/jobs/graph-a.json", "--format", "json")
    assert local.returncode == remote.returncode == 1, (local.stderr, remote.stderr)
    a, b = json.loads(local.stdout), json.loads(remote.stdout)
    assert a["verdict"] == b["verdict"] == "STATE_MISROUTED"  # the old graph's descriptive fields arrived too
    assert a["misrouted"] == b["misrouted"] and a["operators"] == b["operators"]


def test_ids_of_an_s3_graph(s3: s3_server.S3Server) -> None:
    remote = _cli(s3, "ids", f"s3://{BUCKET}/jobs/graph-b.json", "--format", "json")
    local = _cli(s3, "ids", str(SCENARIO / "graph-b.json"), "--format", "json")
    assert remote.returncode == 0, remote.stderr
    assert json.loads(remote.stdout)["nodes"] == json.loads(local.stdout)["nodes"]


@pytest.mark.parametrize(("graph", "says"), [(f"s3://{BUCKET}/jobs/missing.json", "no such object"),
                                              (f"s3://{BUCKET}/jobs/broken.yaml", "anchors"),
                                              ("s3://no-such-bucket-here/g.json", "no such bucket")])
def test_bad_s3_graphs_are_one_line_naming_the_object(s3: s3_server.S3Server, graph: str, says: str) -> None:
    p = _cli(s3, "check", "--savepoint", str(SAVEPOINT), "--graph", graph)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and graph in lines[0] and says in lines[0].lower(), p.stderr

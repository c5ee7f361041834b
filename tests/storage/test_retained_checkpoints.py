"""Retained checkpoints (what `last-state` upgrades and crash recoveries restore), local and on a real S3.

The fixtures are retained incremental RocksDB checkpoints (native format) that real Flink 1.20.5 and
2.3.0 wrote (flink_bridge/generate_checkpoint_restores.py): `<job>/chk-<n>/` with `_metadata` and the
checkpoint's own small files, and the SSTs in `<job>/shared/`. What a user notices: naming the job's
checkpoint folder checks its latest complete checkpoint; `inspect` lists every file the checkpoint needs
outside `chk-<n>/`, so nobody deletes them before the upgrade; the verdict is the one real Flink gave.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

from tests import s3_server
from tests.conftest import REPO, run_cli
from tests.fault_proxy import FaultProxy
from upgrade_gate.storage import discovery
from upgrade_gate.storage.savepoints import load_savepoint
from upgrade_gate.storage.state_files import external_files

CHECKPOINTS = REPO / "tests" / "fixtures" / "checkpoints"
RELEASES = ("1.20.5", "2.3.0")
BUCKET = "flink-checkpoints"


def job_dir(release: str) -> Path:
    return CHECKPOINTS / release / "rocksdb" / "job"


def restored_chk(release: str) -> str:
    """The checkpoint Flink restored in the ckpt-* scenarios: the newest it had retained."""
    outcome = json.loads((CHECKPOINTS / release / "ckpt-no-claim" / "outcome.json").read_text())
    return outcome["pointer"].rstrip("/").rsplit("/", 1)[-1]


def shared_files(release: str) -> set[str]:
    return {f"shared/{p.name}" for p in (job_dir(release) / "shared").iterdir()}


@pytest.mark.parametrize("release", RELEASES)
def test_a_jobs_checkpoint_folder_reads_its_latest_complete_checkpoint(release: str, tmp_path: Path) -> None:
    chk = restored_chk(release)
    assert load_savepoint(str(job_dir(release))).source.endswith(f"/{chk}/_metadata")
    assert discovery.resolve(f"latest:{job_dir(release)}").location.endswith(f"/{chk}")
    # a copy keeps no file times: the checkpoint number decides, and a chk-<n> still being written
    # (no _metadata yet) is not complete
    copy = tmp_path / "0123456789abcdef0123456789abcdef"
    shutil.copytree(job_dir(release), copy)
    older = sorted((p for p in copy.glob("chk-*") if p.name != chk), key=lambda p: int(p.name[4:]))[0]
    os.utime(older / "_metadata", (time.time() + 60, time.time() + 60))
    (copy / "chk-999").mkdir()
    assert Path(discovery.resolve(f"latest:{copy}?kind=checkpoint").location).name == chk
    assert Path(load_savepoint(str(copy)).source).parent.name == chk


@pytest.mark.parametrize("release", RELEASES)
def test_inspect_lists_the_shared_files_the_checkpoint_needs(release: str) -> None:
    proc = run_cli("inspect", str(job_dir(release)), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    ext = json.loads(proc.stdout)["external_files"]
    chk = restored_chk(release)
    assert ext["snapshot_dir"].endswith(f"/{chk}") and ext["count"] == len(ext["files"]) > 0
    listed = {f["relative"] for f in ext["files"]}
    # every one is a shared SST (or RocksDB file) of this job, and each is really there beside the copy
    assert all(f["area"] == "shared" and f["found"].startswith(("yes", "moved")) for f in ext["files"])
    assert listed <= shared_files(release)
    assert ext["bytes"] == sum((job_dir(release) / r).stat().st_size for r in listed)
    # the checkpoint's own files (chk-<n>/) are never listed
    assert not any(f"/{chk}/" in f["path"] for f in ext["files"])
    table = run_cli("inspect", str(job_dir(release)), "--format", "table")
    words = " ".join(table.stdout.split())  # the title wraps at the terminal's width, wherever the path ends
    assert f"Files outside {ext['snapshot_dir']}: {ext['count']}" in words
    assert "must not be deleted" in words


def test_a_savepoint_needs_no_file_outside_its_directory() -> None:
    sp = CHECKPOINTS / "2.3.0" / "finished" / "savepoint"
    assert external_files(load_savepoint(str(sp)), str(sp)) == []


@pytest.mark.parametrize("release", RELEASES)
def test_check_a_retained_checkpoint_gives_flinks_verdict(release: str) -> None:
    for scenario, code, verdict in (("ckpt-no-claim", 0, "SAFE"), ("ckpt-uid-changed", 1, "RESTORE_FAILS")):
        graph = CHECKPOINTS / release / scenario / "graph-b.json"
        proc = run_cli("check", "--savepoint", str(job_dir(release)), "--graph", str(graph),
                       "--flink-version", release[:4].rstrip("."), "--format", "json")
        assert proc.returncode == code, proc.stderr
        assert json.loads(proc.stdout)["verdict"] == verdict


# ---- the same on a real S3 server -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[s3_server.S3Server]:
    server = s3_server.start(tmp_path_factory.mktemp("weed-checkpoints"))
    try:
        c = server.client()
        c.create_bucket(Bucket=BUCKET)
        for release in RELEASES:
            for f in sorted(p for p in job_dir(release).rglob("*") if p.is_file()):
                key = f"{release}/{'ab' * 16}/{f.relative_to(job_dir(release)).as_posix()}"
                c.put_object(Bucket=BUCKET, Key=key, Body=f.read_bytes())
        yield server
    finally:
        server.stop()


@pytest.fixture
def s3_env(s3: s3_server.S3Server, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    env = {"AWS_ENDPOINT_URL_S3": s3.endpoint, "AWS_ACCESS_KEY_ID": s3_server.ACCESS_KEY,
           "AWS_SECRET_ACCESS_KEY": s3_server.SECRET_KEY, "AWS_REGION": "us-east-1"}
    for key in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(key)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return env


def _etags(s3: s3_server.S3Server) -> dict[str, str]:
    pages = s3.client().get_paginator("list_objects_v2").paginate(Bucket=BUCKET)
    return {o["Key"]: o["ETag"] for p in pages for o in p.get("Contents", ())}


@pytest.mark.s3
@pytest.mark.parametrize("release", RELEASES)
def test_retained_checkpoint_on_s3(release: str, s3: s3_server.S3Server, s3_env: dict[str, str],
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    before = _etags(s3)
    folder = f"s3://{BUCKET}/{release}/{'ab' * 16}"
    chk = restored_chk(release)
    port = urlparse(s3.endpoint).port
    assert port
    with FaultProxy("127.0.0.1", port) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL_S3", proxy.url)
        assert load_savepoint(folder).source == f"{folder}/{chk}/_metadata"
        listings = [parse_qs(urlparse(p).query) for m, p, _ in proxy.log
                    if m == "GET" and urlparse(p).path.rstrip("/") == f"/{BUCKET}"]
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3.endpoint)
    assert listings and all(q.get("delimiter") == ["/"] for q in listings), proxy.log  # never the shared/ SSTs
    assert discovery.resolve(f"latest:{folder}").location == f"{folder}/{chk}"
    proc = run_cli("inspect", f"latest:s3a://{BUCKET}/{release}/{'ab' * 16}", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert f"{chk}" in proc.stderr  # the chosen checkpoint is named
    ext = json.loads(proc.stdout)["external_files"]
    local = external_files(load_savepoint(str(job_dir(release))), str(job_dir(release) / chk))
    assert {f["relative"] for f in ext["files"]} == {f.relative for f in local}
    assert all(f["found"] == "not checked" for f in ext["files"])  # one request per SST would not scale
    graph = CHECKPOINTS / release / "ckpt-rescale" / "graph-b.json"
    proc = run_cli("check", "--savepoint", folder, "--graph", str(graph), "--flink-version",
                   release[:4].rstrip("."), "--format", "json")
    assert proc.returncode == 0 and json.loads(proc.stdout)["verdict"] == "SAFE", proc.stderr
    assert _etags(s3) == before  # read-only

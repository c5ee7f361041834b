"""Savepoints on S3, against a real S3 server (SeaweedFS `weed mini`, credentials enforced)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests import s3_server
from tests.metadata_support import first_difference, fixture_dirs, flink_view, template
from upgrade_gate.flink.metadata import to_json
from upgrade_gate.storage.savepoints import StorageError, load_savepoint, newest_metadata_key, read_metadata_blob

pytestmark = pytest.mark.s3
BUCKET = "savepoints"
DIRS = {f"{d.parent.name}/{d.name}": d for d in fixture_dirs()}
FILES_CASE = next(d for k, d in sorted(DIRS.items()) if k.endswith("hashmap-native-p4-maxpar256-files"))
SMALL_CASE = next(d for k, d in sorted(DIRS.items()) if k.endswith("rocksdb-canonical-p1"))


@pytest.fixture(scope="session")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[s3_server.S3Server]:
    server = s3_server.start(tmp_path_factory.mktemp("weed"))
    try:
        yield server
    finally:
        server.stop()


def _upload_dir(client, local: Path, prefix: str) -> None:  # type: ignore[no-untyped-def]
    for p in sorted(local.iterdir()):
        if p.is_file() and p.name != "flink-view.json":
            client.put_object(Bucket=BUCKET, Key=f"{prefix}/{p.name}", Body=p.read_bytes())


@pytest.fixture(scope="session")
def bucket(s3: s3_server.S3Server) -> dict[str, str]:
    """Layout: a relocatable savepoint, a job prefix with old/new/incomplete savepoints, a huge prefix."""
    c = s3.client()
    c.create_bucket(Bucket=BUCKET)
    _upload_dir(c, FILES_CASE, "single/savepoint-files")
    _upload_dir(c, SMALL_CASE, "job-a/savepoint-old")
    time.sleep(1.1)  # LastModified has one-second resolution
    _upload_dir(c, FILES_CASE, "job-a/savepoint-new")
    time.sleep(1.1)
    c.put_object(Bucket=BUCKET, Key="job-a/savepoint-incomplete/some-state-file", Body=b"x")
    # > 1000 objects; the newest complete savepoint sorts after the first page of keys.
    keys = [f"job-big/aaa-chk-{i:05d}/state" for i in range(1100)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda k: c.put_object(Bucket=BUCKET, Key=k, Body=b"s"), keys))
    _upload_dir(c, SMALL_CASE, "job-big/aaa-chk-00000")
    time.sleep(1.1)
    _upload_dir(c, FILES_CASE, "job-big/zzz-newest")
    c.put_object(Bucket=BUCKET, Key="empty-job/readme.txt", Body=b"no savepoints here")
    return {"endpoint": s3.endpoint}


def _snapshot(client) -> dict[str, str]:  # type: ignore[no-untyped-def]
    out = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET):
        for o in page.get("Contents", ()):
            out[o["Key"]] = o["ETag"]
    return out


def test_savepoint_directory_on_s3_equals_flinks_view(s3: s3_server.S3Server, bucket: dict[str, str]) -> None:
    m = load_savepoint(f"s3://{BUCKET}/single/savepoint-files", client=s3.client())
    ours = template(to_json(m, detail=True), f"s3://{BUCKET}/single/savepoint-files")
    assert first_difference(ours, flink_view(FILES_CASE)) is None
    paths = [h.delegate.path for o in m.operator_states for s in o.subtask_states.values()
             for h in (*s.managed_keyed_state, *s.managed_operator_state)]
    assert paths and all(p.startswith(f"s3://{BUCKET}/single/savepoint-files/") for p in paths)


def test_metadata_object_and_trailing_slash(s3: s3_server.S3Server, bucket: dict[str, str]) -> None:
    a = read_metadata_blob(f"s3://{BUCKET}/single/savepoint-files/_metadata", client=s3.client())
    b = read_metadata_blob(f"s3://{BUCKET}/single/savepoint-files/", client=s3.client())
    assert a.data == b.data == (FILES_CASE / "_metadata").read_bytes()
    assert a.source == f"s3://{BUCKET}/single/savepoint-files/_metadata"


def test_job_prefix_picks_newest_complete_savepoint(s3: s3_server.S3Server, bucket: dict[str, str]) -> None:
    blob = read_metadata_blob(f"s3://{BUCKET}/job-a", client=s3.client())
    assert blob.source == f"s3://{BUCKET}/job-a/savepoint-new/_metadata"


def test_more_than_1000_objects_are_paged(s3: s3_server.S3Server, bucket: dict[str, str]) -> None:
    c = s3.client()
    assert c.list_objects_v2(Bucket=BUCKET, Prefix="job-big/")["IsTruncated"]
    assert newest_metadata_key(c, BUCKET, "job-big/") == "job-big/zzz-newest/_metadata"
    assert read_metadata_blob(f"s3://{BUCKET}/job-big/", client=c).data == (FILES_CASE / "_metadata").read_bytes()


def test_missing_object_empty_prefix_and_bucket(s3: s3_server.S3Server, bucket: dict[str, str]) -> None:
    c = s3.client()
    with pytest.raises(StorageError, match="no such object"):
        read_metadata_blob(f"s3://{BUCKET}/nope/_metadata", client=c)
    with pytest.raises(StorageError, match="no complete savepoint"):
        read_metadata_blob(f"s3://{BUCKET}/empty-job", client=c)
    with pytest.raises(StorageError, match="no complete savepoint"):
        read_metadata_blob(f"s3://{BUCKET}/does-not-exist/", client=c)
    with pytest.raises(StorageError, match="s3://no-such-bucket-x/"):
        read_metadata_blob("s3://no-such-bucket-x/sp", client=c)


def test_wrong_key_is_a_clean_error(s3: s3_server.S3Server, bucket: dict[str, str]) -> None:
    with pytest.raises(StorageError) as info:
        read_metadata_blob(f"s3://{BUCKET}/single/savepoint-files", client=s3.client(secret="wrong-secret"))
    assert "access denied" in str(info.value) and "savepoint-files" in str(info.value)
    with pytest.raises(StorageError, match="access denied"):
        read_metadata_blob(f"s3://{BUCKET}/job-a", client=s3.client(access="nobody", secret="nothing"))


def test_size_cap_is_enforced(s3: s3_server.S3Server, bucket: dict[str, str]) -> None:
    with pytest.raises(StorageError, match="limit"):
        read_metadata_blob(f"s3://{BUCKET}/single/savepoint-files", client=s3.client(), max_bytes=100)


def _cli(env_extra: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(env_extra)
    return subprocess.run([sys.executable, "-m", "upgrade_gate", *args], capture_output=True, text=True,
                          timeout=120, env=env)


def test_cli_reads_s3_from_the_standard_aws_environment(s3: s3_server.S3Server, bucket: dict[str, str]) -> None:
    env = {"AWS_ENDPOINT_URL": s3.endpoint, "AWS_ACCESS_KEY_ID": s3_server.ACCESS_KEY,
           "AWS_SECRET_ACCESS_KEY": s3_server.SECRET_KEY, "AWS_REGION": "us-east-1"}
    proc = _cli(env, "inspect", f"s3://{BUCKET}/job-a", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    without_states = [{k: v for k, v in op.items() if k not in ("states", "states_incomplete")}
                      for op in doc["operators"]]
    assert without_states == to_json(load_savepoint(str(FILES_CASE)))["operators"]
    bad = _cli({**env, "AWS_SECRET_ACCESS_KEY": "wrong"}, "inspect", f"s3://{BUCKET}/job-a")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and f"s3://{BUCKET}/job-a" in bad.stderr


def test_nothing_under_the_bucket_was_changed(s3: s3_server.S3Server, bucket: dict[str, str]) -> None:
    c = s3.client()
    before = _snapshot(c)
    for name in ("single/savepoint-files", "job-a", "job-big/", "single/savepoint-files/_metadata"):
        load_savepoint(f"s3://{BUCKET}/{name}", client=c)
    assert _snapshot(c) == before

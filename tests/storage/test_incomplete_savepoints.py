"""Discovery picks the newest *complete* snapshot and names the newer incomplete ones it skipped.

A snapshot is still being written (by Flink, or by a copy or upload) when its directory has no `_metadata`
yet, or when its `_metadata` ends early. Before, the half-written newest one won and was reported as a
corrupt file: the check failed closed, but blocked an upgrade the older complete savepoint would allow.
A `_metadata` that is complete but corrupt still fails (nothing older is silently taken instead).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import s3_server
from tests.hostile_inputs import REPO, run_measured
from upgrade_gate.flink.metadata.errors import MetadataFormatError
from upgrade_gate.storage import discovery
from upgrade_gate.storage.savepoints import load_newest_complete, load_savepoint

RESTORES = REPO / "tests" / "fixtures" / "restores" / "1.20.5"
SP = RESTORES / "savepoints" / "uids-p2"  # a complete Flink 1.20.5 savepoint of job c9dfb5...
GRAPH = RESTORES / "identical" / "graph-b.json"
JOB = "c9dfb5e1a3f04b6e9d2c7a8b5e4f3d21"
OLD, HALF, EMPTY = "savepoint-c9dfb5-00000000aaaa", "savepoint-c9dfb5-00000000bbbb", "savepoint-c9dfb5-00000000cccc"
METADATA = (SP / "_metadata").read_bytes()


def _put(root: Path, rel: str, data: bytes | None, mtime: float) -> Path:
    folder = root / rel
    folder.mkdir(parents=True)
    if data is None:
        (folder / "op-state").write_bytes(b"x")  # state files written, _metadata not yet
        os.utime(folder, (mtime, mtime))
    else:
        (folder / "_metadata").write_bytes(data)
        os.utime(folder / "_metadata", (mtime, mtime))
    return folder


@pytest.fixture
def half_written(tmp_path: Path) -> Path:
    """A complete older savepoint, a newer one whose _metadata was cut halfway, and the newest with none."""
    t = time.time() - 1000
    _put(tmp_path, OLD, METADATA, t)
    _put(tmp_path, HALF, METADATA[: len(METADATA) // 2], t + 10)
    _put(tmp_path, EMPTY, None, t + 20)
    return tmp_path


def test_latest_picks_the_newest_complete_savepoint_and_names_the_skipped(half_written: Path) -> None:
    metadata, found = discovery.load(f"latest:{half_written}?job-id={JOB}")
    assert found.location == str(half_written / OLD)
    assert metadata.source == str(half_written / OLD / "_metadata")
    assert [s.location for s in found.skipped] == [str(half_written / EMPTY), str(half_written / HALF)]
    warnings = found.warnings()
    assert "no _metadata" in warnings[0] and f"its _metadata is incomplete ({len(METADATA) // 2} bytes" in warnings[1]


def test_a_job_prefix_picks_the_newest_complete_savepoint(half_written: Path) -> None:
    loaded = load_newest_complete(str(half_written))
    assert loaded.source == str(half_written / OLD / "_metadata")
    assert [s.location for s in loaded.skipped] == [str(half_written / EMPTY), str(half_written / HALF)]
    assert load_savepoint(f"file://{half_written}").checkpoint_id == loaded.metadata.checkpoint_id


def test_retained_checkpoints_skip_the_one_in_progress(tmp_path: Path) -> None:
    folder = tmp_path / JOB
    t = time.time() - 1000
    _put(folder, "chk-3", METADATA, t + 30)  # file times say nothing: the counter orders checkpoints
    _put(folder, "chk-4", METADATA[:100], t)
    _put(folder, "chk-5", None, t)
    (folder / "shared").mkdir()
    for name in (str(folder), f"latest:{folder}"):
        metadata, found = (discovery.load(name) if name.startswith("latest:")
                           else (load_newest_complete(name).metadata, load_newest_complete(name)))
        skipped = [s.location for s in found.skipped]
        assert skipped == [str(folder / "chk-5"), str(folder / "chk-4")], name
        assert metadata.source == str(folder / "chk-3" / "_metadata")


def test_the_cli_reads_the_complete_one_and_warns(half_written: Path) -> None:
    for args in (("inspect", f"latest:{half_written}?job-id={JOB}", "--format", "json"),
                 ("inspect", str(half_written), "--format", "json"),
                 ("check", "--savepoint", str(half_written), "--graph", str(GRAPH), "--flink-version", "1.20")):
        res = run_measured(*args)
        assert res.returncode == 0, res.stderr
        warnings = [line for line in res.stderr.splitlines() if line.startswith("warning: ")]
        assert len(warnings) == 2, res.stderr
        assert f"skipped the newer {half_written / EMPTY}: no _metadata" in warnings[0]
        assert f"skipped the newer {half_written / HALF}: its _metadata is incomplete" in warnings[1]
        assert "Traceback" not in res.stderr


def test_a_complete_but_corrupt_newest_savepoint_still_fails(tmp_path: Path) -> None:
    t = time.time() - 1000
    _put(tmp_path, OLD, METADATA, t)
    _put(tmp_path, HALF, b"XXXX" + METADATA[4:], t + 10)  # whole, but not Flink's format
    with pytest.raises(MetadataFormatError, match="Unexpected magic number"):
        load_newest_complete(str(tmp_path))
    with pytest.raises(MetadataFormatError, match="Unexpected magic number"):
        discovery.load(f"latest:{tmp_path}?job-id={JOB}")


def test_a_named_snapshot_is_never_swapped_for_another(half_written: Path) -> None:
    """Only a prefix is searched: the directory or `_metadata` a user names is read, incomplete or not."""
    with pytest.raises(MetadataFormatError, match=r"truncated|only"):
        load_newest_complete(str(half_written / HALF))
    res = run_measured("inspect", str(half_written / HALF / "_metadata"))
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr


# ---- on S3 (SeaweedFS) ----------------------------------------------------------------------------------
BUCKET = "half-written"


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    server = s3_server.start(tmp_path_factory.mktemp("weed-half"))
    try:
        c = server.client()
        c.create_bucket(Bucket=BUCKET)
        c.put_object(Bucket=BUCKET, Key=f"savepoints/{OLD}/_metadata", Body=METADATA)
        time.sleep(1.1)  # LastModified has one-second resolution
        c.put_object(Bucket=BUCKET, Key=f"savepoints/{HALF}/_metadata", Body=METADATA[:200])
        time.sleep(1.1)
        c.put_object(Bucket=BUCKET, Key=f"savepoints/{EMPTY}/op-state", Body=b"x")
        c.put_object(Bucket=BUCKET, Key=f"checkpoints/{JOB}/chk-3/_metadata", Body=METADATA)
        c.put_object(Bucket=BUCKET, Key=f"checkpoints/{JOB}/chk-4/_metadata", Body=METADATA[:100])
        c.put_object(Bucket=BUCKET, Key=f"checkpoints/{JOB}/chk-5/op-state", Body=b"x")
        yield {"AWS_ENDPOINT_URL_S3": server.endpoint, "AWS_ACCESS_KEY_ID": s3_server.ACCESS_KEY,
               "AWS_SECRET_ACCESS_KEY": s3_server.SECRET_KEY, "AWS_REGION": "us-east-1"}
    finally:
        server.stop()


@pytest.fixture
def s3_env(s3: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    for key in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(key)
    for k, v in s3.items():
        monkeypatch.setenv(k, v)
    return s3


@pytest.mark.s3
def test_on_s3_the_newest_complete_snapshot_is_read(s3_env: dict[str, str]) -> None:
    sp = f"s3://{BUCKET}/savepoints"
    loaded = load_newest_complete(f"{sp}/")
    assert loaded.source == f"{sp}/{OLD}/_metadata"
    assert [s.location for s in loaded.skipped] == [f"{sp}/{EMPTY}", f"{sp}/{HALF}"]
    metadata, found = discovery.load(f"latest:{sp}?job-id={JOB}")
    assert metadata.source == f"{sp}/{OLD}/_metadata"
    assert [s.location for s in found.skipped] == [f"{sp}/{EMPTY}", f"{sp}/{HALF}"]
    chk = f"s3://{BUCKET}/checkpoints/{JOB}"
    for name in (chk, f"latest:{chk}"):
        metadata, found = (discovery.load(name) if name.startswith("latest:")
                           else (load_newest_complete(name).metadata, load_newest_complete(name)))
        assert metadata.source == f"{chk}/chk-3/_metadata", name
        assert [s.location for s in found.skipped] == [f"{chk}/chk-5", f"{chk}/chk-4"], name



def test_the_fleet_jobs_read_a_job_folders_newest_complete_savepoint(half_written: Path) -> None:
    """The Spark jobs' per-job readers (fleet scan, fleet gate, serializer scan) pass over a savepoint still
    being written, as the CLI and the DAGs do: the job is gated on its complete one, not reported corrupt."""
    from spark_jobs import fleet_gate, savepoint_scan, state_serializers

    complete = str(half_written / OLD / "_metadata")
    assert set(savepoint_scan.operator_columns("j", str(half_written), None)["metadata"]) == {complete}
    rows = state_serializers.serializer_rows("j", str(half_written), None)
    assert rows and {r["metadata"] for r in rows} == {complete} and not any(r["error"] for r in rows)
    _, _, verdict = fleet_gate.gate_job({"job": "j", "spec": str(GRAPH), "savepoint": str(half_written),
                                         "hasher": "v2", "matching": "fixed", "allow_non_restored_state": False,
                                         "flink_version": "1.20", "old_spec": None}, None, None)
    assert verdict["metadata"] == complete and not verdict.get("error") and verdict["verdict"] == "SAFE", verdict

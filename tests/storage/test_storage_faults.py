"""Storage under faults, against a real S3 server (SeaweedFS) with FaultProxy in front of its S3 port.

What a user would notice: a download cut mid-way is retried and read correctly, or reported as a cut
download (never as a corrupt savepoint); a server that never answers fails within the configured
time; a prefix holding several jobs is refused instead of silently checking another job's state.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import pytest

from tests import s3_server
from tests.fault_proxy import FaultProxy
from tests.metadata_support import flink_view
from upgrade_gate.flink.metadata.errors import MetadataFormatError
from upgrade_gate.storage.s3 import DOWNLOAD_ATTEMPTS, TIMEOUT_ENV, StorageError, Timeouts
from upgrade_gate.storage.savepoints import load_savepoint, read_metadata_blob

pytestmark = pytest.mark.s3
BUCKET = "faults"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "savepoints"
BIG = FIXTURES / "1.20.5" / "rocksdb-native-p2"  # the largest _metadata (57 KB): a cut lands mid-body
SMALL = FIXTURES / "1.20.5" / "rocksdb-canonical-p1"
JOB_A, JOB_B = "a1b2c3" + "d4" * 13, "0f9e8d" + "7c" * 13  # 32 hex digits, like a Flink JobID
SP_A1, SP_A2 = f"savepoint-{JOB_A[:6]}-00000000a001", f"savepoint-{JOB_A[:6]}-00000000a002"
SP_B1 = f"savepoint-{JOB_B[:6]}-00000000b001"


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[s3_server.S3Server]:
    server = s3_server.start(tmp_path_factory.mktemp("weed-faults"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def bucket(s3: s3_server.S3Server) -> None:
    """one-job/: two savepoints of job A (A2 newest); shared/: job A's and job B's savepoints side by side
    (Flink's cluster-wide savepoint directory); checkpoints/<JobID>/chk-<n> of two jobs; upgraded/: a job
    folder after an upgrade (old JobID A, new JobID B)."""
    c = s3.client()
    c.create_bucket(Bucket=BUCKET)
    small, big = (SMALL / "_metadata").read_bytes(), (BIG / "_metadata").read_bytes()
    c.put_object(Bucket=BUCKET, Key=f"one-job/{SP_A1}/_metadata", Body=small)
    c.put_object(Bucket=BUCKET, Key=f"shared/{SP_A1}/_metadata", Body=small)
    c.put_object(Bucket=BUCKET, Key=f"checkpoints/{JOB_A}/chk-3/_metadata", Body=small)
    c.put_object(Bucket=BUCKET, Key=f"upgraded/{SP_A1}/_metadata", Body=small)
    time.sleep(1.1)  # LastModified has one-second resolution
    c.put_object(Bucket=BUCKET, Key=f"one-job/{SP_A2}/_metadata", Body=big)
    c.put_object(Bucket=BUCKET, Key=f"one-job/{SP_A2}/some-state", Body=b"x")
    c.put_object(Bucket=BUCKET, Key=f"shared/{SP_B1}/_metadata", Body=big)
    c.put_object(Bucket=BUCKET, Key=f"checkpoints/{JOB_B}/chk-5/_metadata", Body=big)
    c.put_object(Bucket=BUCKET, Key=f"upgraded/{SP_B1}/_metadata", Body=big)


@pytest.fixture
def proxy(s3: s3_server.S3Server, bucket: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[FaultProxy]:
    """FaultProxy in front of the S3 port; the code under test builds its client from the standard AWS
    environment, as the CLI and the Spark jobs do."""
    port = urlparse(s3.endpoint).port
    assert port
    with FaultProxy("127.0.0.1", port) as p:
        for key in [k for k in os.environ if k.startswith("AWS_")]:
            monkeypatch.delenv(key)
        monkeypatch.setenv("AWS_ENDPOINT_URL_S3", p.url)
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3_server.ACCESS_KEY)
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3_server.SECRET_KEY)
        monkeypatch.setenv("AWS_REGION", "us-east-1")
        monkeypatch.delenv(TIMEOUT_ENV, raising=False)
        yield p


def _gets(proxy: FaultProxy) -> list[str]:
    return [action for method, path, action in proxy.log if method == "GET" and path.endswith("/_metadata")]


# ---- cut downloads ----------------------------------------------------------------------------------------
def test_download_cut_midway_is_retried_and_read_correctly(proxy: FaultProxy) -> None:
    size = (BIG / "_metadata").stat().st_size
    proxy.add_rule(r"/_metadata$", "cut_response", method="GET", after_bytes=size // 2, times=2)
    meta = load_savepoint(f"s3://{BUCKET}/one-job/{SP_A2}")
    assert meta.checkpoint_id == flink_view(BIG)["checkpoint_id"]
    assert [o.operator_id_hex for o in meta.operator_states] == [o["operator_id"] for o in flink_view(BIG)["operators"]]
    assert _gets(proxy) == ["cut_response", "cut_response", "pass"]


def test_download_cut_on_every_attempt_is_a_cut_download_not_a_corrupt_savepoint(proxy: FaultProxy) -> None:
    proxy.add_rule(r"/_metadata$", "cut_response", method="GET", after_bytes=1000, times=-1)
    start = time.monotonic()
    with pytest.raises(StorageError) as info:
        load_savepoint(f"s3://{BUCKET}/one-job/{SP_A2}")
    assert not isinstance(info.value, MetadataFormatError)
    msg = str(info.value)
    assert f"s3://{BUCKET}/one-job/{SP_A2}/_metadata" in msg and "download cut" in msg and "incomplete" in msg
    assert "corrupt" not in msg.replace("not a corrupt", "")
    assert len(_gets(proxy)) >= DOWNLOAD_ATTEMPTS and time.monotonic() - start < 30


@pytest.mark.parametrize("fault", ["drop_response", "reset"])
def test_connection_lost_before_the_answer_is_retried(proxy: FaultProxy, fault: str) -> None:
    proxy.add_rule(r"/_metadata$", fault, method="GET", times=1)
    blob = read_metadata_blob(f"s3://{BUCKET}/one-job/{SP_A2}/_metadata")
    assert blob.data == (BIG / "_metadata").read_bytes()
    assert _gets(proxy) == [fault, "pass"]


def test_server_errors_then_success_is_read(proxy: FaultProxy) -> None:
    proxy.add_rule(r"/_metadata$", "status", method="GET", status=503, times=2)
    blob = read_metadata_blob(f"s3://{BUCKET}/one-job/{SP_A2}")
    assert blob.data == (BIG / "_metadata").read_bytes()
    assert _gets(proxy) == ["status", "status", "pass"]


# ---- a server that never answers ----------------------------------------------------------------------------
@pytest.mark.parametrize("where", ["everything", "download"])
def test_a_server_that_never_answers_fails_within_the_configured_time(proxy: FaultProxy,
                                                                      monkeypatch: pytest.MonkeyPatch,
                                                                      where: str) -> None:
    monkeypatch.setenv(TIMEOUT_ENV, "5")
    proxy.add_rule(r"/_metadata$" if where == "download" else r"", "blackhole", times=-1,
                   method="GET" if where == "download" else None)
    start = time.monotonic()
    with pytest.raises(StorageError) as info:
        read_metadata_blob(f"s3://{BUCKET}/one-job/{SP_A2}")
    elapsed = time.monotonic() - start
    assert elapsed < 5.5, elapsed
    msg = str(info.value)
    assert f"s3://{BUCKET}/one-job/{SP_A2}/_metadata" in msg and "timed out after" in msg and TIMEOUT_ENV in msg


@pytest.mark.parametrize("where", ["everything", "download"])
def test_a_server_that_trickles_its_answer_fails_within_the_configured_time(proxy: FaultProxy,
                                                                           monkeypatch: pytest.MonkeyPatch,
                                                                           where: str) -> None:
    """One byte every 0.5 s, status line and headers included: no read timeout ever fires (each byte comes
    in time), yet the read ends at the budget (it took 89 s against 10 s before the watchdog)."""
    monkeypatch.setenv(TIMEOUT_ENV, "5")
    proxy.add_rule(r"/_metadata$" if where == "download" else r"", "trickle", delay=0.5, times=-1,
                   method="GET" if where == "download" else None)
    start = time.monotonic()
    with pytest.raises(StorageError) as info:
        read_metadata_blob(f"s3://{BUCKET}/one-job/{SP_A2}")
    elapsed = time.monotonic() - start
    assert 4.9 <= elapsed < 5.5, elapsed
    msg = str(info.value)
    assert f"s3://{BUCKET}/one-job/{SP_A2}/_metadata" in msg and "timed out after" in msg and TIMEOUT_ENV in msg


def test_the_cli_against_a_trickling_server_ends_at_the_deadline(proxy: FaultProxy) -> None:
    proxy.add_rule(r"", "trickle", delay=0.5, times=-1)
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "upgrade_gate", "inspect", f"s3://{BUCKET}/one-job/{SP_A2}"],
                          capture_output=True, text=True, timeout=60, env={**os.environ, TIMEOUT_ENV: "5"})
    elapsed = time.monotonic() - start
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "timed out after 5.0 s" in proc.stderr and "Traceback" not in proc.stderr
    assert elapsed < 5.5 + 1.5, elapsed  # + the interpreter's start


def test_default_budget_keeps_the_worst_case_under_a_minute() -> None:
    t = Timeouts.for_budget(60)
    assert t.worst_call <= 0.8 * 60 and t.attempts >= 2 and t.read >= 5
    assert Timeouts.for_budget(5).worst_call <= 4


def test_bad_budget_value_is_a_clean_error(proxy: FaultProxy, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TIMEOUT_ENV, "soon")
    with pytest.raises(StorageError, match=f"{TIMEOUT_ENV}=soon"):
        read_metadata_blob(f"s3://{BUCKET}/one-job/{SP_A2}")


# ---- which savepoint a prefix names --------------------------------------------------------------------------
def test_one_jobs_prefix_picks_its_newest_savepoint(proxy: FaultProxy) -> None:
    blob = read_metadata_blob(f"s3://{BUCKET}/one-job/")
    assert blob.source == f"s3://{BUCKET}/one-job/{SP_A2}/_metadata"
    blob = read_metadata_blob(f"s3://{BUCKET}/checkpoints/{JOB_B}")
    assert blob.source == f"s3://{BUCKET}/checkpoints/{JOB_B}/chk-5/_metadata"


@pytest.mark.parametrize("name", ["shared", "shared/", "checkpoints", ""])
def test_prefix_or_bucket_holding_several_jobs_is_refused(proxy: FaultProxy, name: str) -> None:
    with pytest.raises(StorageError) as info:
        read_metadata_blob(f"s3://{BUCKET}/{name}")
    msg = str(info.value)
    assert "ambiguous" in msg and "name the savepoint directory" in msg
    shown = msg.split("(", 1)[1].split(")", 1)[0].split(", ")
    assert 2 <= len(shown) <= 6 and all(s.startswith(f"s3://{BUCKET}/") for s in shown[:5])
    if name.startswith("shared"):
        assert shown == [f"s3://{BUCKET}/shared/{SP_B1}", f"s3://{BUCKET}/shared/{SP_A1}"]  # newest first
    assert not [m for m, path, _ in proxy.log if m == "GET" and path.endswith("/_metadata")]  # nothing read


def test_a_jobs_own_folder_after_an_upgrade_is_one_job(proxy: FaultProxy) -> None:
    """The gate's `latest` reads `<root>/<job>/`: every upgrade adds savepoints under a new JobID there."""
    with pytest.raises(StorageError, match="ambiguous"):
        read_metadata_blob(f"s3://{BUCKET}/upgraded/")
    blob = read_metadata_blob(f"s3://{BUCKET}/upgraded/", job_folder=True)
    assert blob.source == f"s3://{BUCKET}/upgraded/{SP_B1}/_metadata"


def test_local_directories_follow_the_same_rule(tmp_path: Path) -> None:
    def put(rel: str, src: Path, mtime: float) -> None:
        (tmp_path / rel).mkdir(parents=True)
        shutil.copy(src / "_metadata", tmp_path / rel / "_metadata")
        os.utime(tmp_path / rel / "_metadata", (mtime, mtime))

    put(f"shared/{SP_A1}", SMALL, 1_000_000)
    put(f"shared/{SP_B1}", BIG, 2_000_000)
    put(f"checkpoints/{JOB_A}/chk-3", SMALL, 1_000_000)
    put(f"checkpoints/{JOB_B}/chk-5", BIG, 2_000_000)
    put(f"one-job/{SP_A1}", SMALL, 1_000_000)
    put(f"one-job/{SP_A2}", BIG, 2_000_000)
    for name in ("shared", "checkpoints", ""):
        with pytest.raises(StorageError, match=r"ambiguous.*name the savepoint directory"):
            read_metadata_blob(str(tmp_path / name))
    assert read_metadata_blob(str(tmp_path / "one-job")).source == str(tmp_path / "one-job" / SP_A2 / "_metadata")
    assert read_metadata_blob(f"file://{tmp_path}/checkpoints/{JOB_A}").source.endswith("chk-3/_metadata")
    assert read_metadata_blob(str(tmp_path / "shared"), job_folder=True).source.endswith(f"{SP_B1}/_metadata")


# ---- through the CLI ---------------------------------------------------------------------------------------
def test_cli_reports_a_cut_download_in_one_line(proxy: FaultProxy) -> None:
    proxy.add_rule(r"/_metadata$", "cut_response", method="GET", after_bytes=500, times=-1)
    proc = subprocess.run([sys.executable, "-m", "upgrade_gate", "inspect", f"s3://{BUCKET}/one-job/{SP_A2}"],
                          capture_output=True, text=True, timeout=120, env=dict(os.environ))
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert f"s3://{BUCKET}/one-job/{SP_A2}/_metadata" in lines[0] and "download cut" in lines[0]

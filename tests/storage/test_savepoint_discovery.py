"""Savepoint discovery where Flink puts savepoints: a flat state.savepoints.dir / state.checkpoints.dir
(local and on a real S3 server), and Flink's REST API on a real standalone cluster (marker `flink`).

What a user notices: the newest snapshot of *their* job is checked (never a newer one of another job),
the chosen snapshot is named on stderr, and anything ambiguous or missing is exit 2 with one line that
lists what is there.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

from tests import s3_server
from tests.conftest import REPO, run_cli
from tests.fault_proxy import FaultProxy
from upgrade_gate.storage import discovery
from upgrade_gate.storage.s3 import StorageError

RESTORES = REPO / "tests" / "fixtures" / "restores" / "1.20.5"
SP_120 = RESTORES / "savepoints" / "uids-p2"  # written by Flink 1.20.5 as savepoint-c9dfb5-cd654d33cd20
SP_23 = REPO / "tests" / "fixtures" / "restores" / "2.3.0" / "savepoints" / "uids-p2"
OTHER = REPO / "tests" / "fixtures" / "savepoints" / "1.20.5" / "rocksdb-canonical-p1"
SAFE_GRAPH = RESTORES / "identical" / "graph-b.json"
FAILS_GRAPH = RESTORES / "uid-removed" / "graph-b.json"
JOB = "c9dfb5e1a3f04b6e9d2c7a8b5e4f3d21"  # the job whose savepoints we want (first 6 hex: c9dfb5)
OTHER_JOB = "a421b60d9c8b7a6f5e4d3c2b1a098765"
TWIN = "c9dfb5ffffffffffffffffffffffffff"  # shares JOB's first 6 hex digits
SP_JOB = "savepoint-c9dfb5-cd654d33cd20"
SP_JOB_OLD = "savepoint-c9dfb5-00000000aaaa"
SP_OTHER = "savepoint-a421b6-aae97baff0c0"


def _put(root: Path, rel: str, src: Path, mtime: float) -> None:
    d = root / rel
    d.mkdir(parents=True)
    shutil.copy(src / "_metadata", d / "_metadata")
    os.utime(d / "_metadata", (mtime, mtime))


@pytest.fixture
def flat(tmp_path: Path) -> Path:
    """One directory as Flink's defaults fill it: every job's savepoints side by side, and retained
    checkpoints in <JobID>/chk-<n> (some setups point both options at one root)."""
    t = time.time() - 1000
    _put(tmp_path, SP_JOB_OLD, OTHER, t)
    _put(tmp_path, SP_JOB, SP_120, t + 10)
    _put(tmp_path, SP_OTHER, SP_23, t + 20)  # the newest savepoint in the directory is another job's
    (tmp_path / "savepoint-c9dfb5-0000000bad00").mkdir()  # in progress: no _metadata yet
    (tmp_path / "savepoint-c9dfb5-0000000bad00" / "state").write_bytes(b"x")
    _put(tmp_path, f"{OTHER_JOB}/chk-9", SP_23, t + 30)
    (tmp_path / JOB / "shared").mkdir(parents=True)
    return tmp_path


# ---- flat directories, local -------------------------------------------------------------------------------
def test_job_id_picks_the_newest_savepoint_of_that_job_not_the_newest_in_the_directory(flat: Path) -> None:
    found = discovery.resolve(f"latest:{flat}?job-id={JOB}")
    assert found.location == str(flat / SP_JOB)
    assert "savepoint" in found.how and JOB in found.how
    short = discovery.resolve(f"latest:file://{flat}?job-id={JOB[:6]}&kind=savepoint")
    assert short.location == str(flat / SP_JOB)


def test_inspect_takes_the_same_discovery_forms_and_says_what_it_picked(flat: Path) -> None:
    p = run_cli("inspect", f"latest:{flat}?job-id={JOB}", "--format", "json")
    assert p.returncode == 0, p.stderr
    assert p.stderr.startswith(f"savepoint: {flat / SP_JOB / '_metadata'} (")
    assert json.loads(p.stdout)["checkpoint_id"] == json.loads(
        run_cli("inspect", str(flat / SP_JOB), "--format", "json").stdout)["checkpoint_id"]
    bad = run_cli("inspect", f"latest:{flat}")  # several jobs, no job id: refused, listing them
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and SP_JOB in bad.stderr


def test_retained_checkpoints_are_found_by_job_id_newest_first(flat: Path) -> None:
    t = time.time() - 500
    _put(flat, f"{JOB}/chk-3", OTHER, t)
    _put(flat, f"{JOB}/chk-12", SP_120, t + 5)
    found = discovery.resolve(f"latest:{flat}?job-id={JOB}")
    assert found.location == str(flat / JOB / "chk-12")  # newer than the job's savepoints
    assert "checkpoint" in found.how
    assert discovery.resolve(f"latest:{flat}?job-id={JOB}&kind=savepoint").location == str(flat / SP_JOB)


def test_a_directory_of_several_jobs_without_job_id_is_refused_listing_them(flat: Path) -> None:
    with pytest.raises(StorageError) as err:
        discovery.resolve(f"latest:{flat}")
    msg = str(err.value)
    assert "ambiguous" in msg and "job-id" in msg
    assert "c9dfb5" in msg and "a421b6" in msg and OTHER_JOB in msg and SP_JOB in msg


def test_a_shared_id_prefix_is_refused_unless_the_full_id_is_given(flat: Path) -> None:
    t = time.time() - 400
    _put(flat, f"{JOB}/chk-4", OTHER, t)
    _put(flat, f"{TWIN}/chk-8", SP_120, t + 1)
    with pytest.raises(StorageError, match=r"ambiguous.*give the full id") as err:
        discovery.resolve(f"latest:{flat}?job-id=c9dfb5&kind=checkpoint")
    assert JOB in str(err.value) and TWIN in str(err.value)
    assert discovery.resolve(f"latest:{flat}?job-id={JOB}&kind=checkpoint").location == str(flat / JOB / "chk-4")


def test_a_job_with_nothing_here_lists_what_is_there(flat: Path) -> None:
    with pytest.raises(StorageError, match=r"no complete snapshots of job 0123456789ab here; it holds") as err:
        discovery.resolve(f"latest:{flat}?job-id=0123456789ab")
    assert f"{OTHER_JOB} (1 savepoint, 1 checkpoint" in str(err.value) and "c9dfb5 (2 savepoints" in str(err.value)
    with pytest.raises(StorageError, match=r"no complete checkpoints of job c9dfb5"):
        discovery.resolve(f"latest:{flat}?job-id={JOB}&kind=checkpoint")


@pytest.mark.parametrize("spec, problem", [
    ("latest:", "expected latest:DIR"),
    ("latest:{flat}?job-id=xyz", "expected a Flink JobID"),
    ("latest:{flat}?job=c9dfb5", "unknown option 'job'"),
    ("latest:{flat}?job-id=c9dfb5&kind=both", "kind=both"),
    ("latest:{flat}/nope?job-id=c9dfb5", "no such directory"),
    ("latest:hdfs://nn/savepoints?job-id=c9dfb5", "unsupported scheme"),
])
def test_bad_discovery_input_is_one_line_and_exit_2(flat: Path, spec: str, problem: str) -> None:
    res = run_cli("check", "--savepoint", spec.format(flat=flat), "--graph", str(SAFE_GRAPH))
    assert res.returncode == 2, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and problem in res.stderr
    assert "Traceback" not in res.stderr


def test_cli_checks_the_discovered_savepoint_and_says_which_it_is(flat: Path) -> None:
    res = run_cli("check", "--savepoint", f"latest:{flat}?job-id={JOB}", "--graph", str(SAFE_GRAPH),
                  "--flink-version", "1.20", "--format", "json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["verdict"] == "SAFE"
    assert f"savepoint: {flat / SP_JOB / '_metadata'}" in res.stderr
    res = run_cli("check", "--savepoint", f"latest:{flat}?job-id={JOB}", "--graph", str(FAILS_GRAPH),
                  "--flink-version", "1.20")
    assert res.returncode == 1 and "RESTORE_FAILS" in res.stdout


def test_airflow_param_latest_with_job_id_reads_a_flat_root(flat: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(REPO / "plugins"))
    from flink_gate import gate

    assert gate.savepoint_location("latest", "orders", str(flat)) == f"{flat}/orders/"
    assert gate.savepoint_location(f"latest?job-id={JOB}", "orders", str(flat)) == str(flat / SP_JOB)
    assert gate.savepoint_location(f"latest:{flat}?job-id={JOB}", "orders", "") == str(flat / SP_JOB)
    assert gate.savepoint_location("s3://b/p/savepoint-x", "orders", "") == "s3://b/p/savepoint-x"
    with pytest.raises(StorageError, match="ambiguous"):
        gate.savepoint_location("latest?kind=savepoint", "orders", str(flat))


# ---- flat directories on S3 ---------------------------------------------------------------------------------
BUCKET = "flink-state"


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[s3_server.S3Server]:
    server = s3_server.start(tmp_path_factory.mktemp("weed-discovery"))
    try:
        c = server.client()
        c.create_bucket(Bucket=BUCKET)
        c.put_object(Bucket=BUCKET, Key=f"savepoints/{SP_JOB_OLD}/_metadata", Body=(OTHER / "_metadata").read_bytes())
        time.sleep(1.1)  # LastModified has one-second resolution
        c.put_object(Bucket=BUCKET, Key=f"savepoints/{SP_JOB}/_metadata", Body=(SP_120 / "_metadata").read_bytes())
        time.sleep(1.1)
        c.put_object(Bucket=BUCKET, Key=f"savepoints/{SP_OTHER}/_metadata", Body=(SP_23 / "_metadata").read_bytes())
        c.put_object(Bucket=BUCKET, Key="savepoints/savepoint-c9dfb5-0000000bad00/state", Body=b"x")
        c.put_object(Bucket=BUCKET, Key=f"checkpoints/{OTHER_JOB}/chk-9/_metadata",
                     Body=(SP_23 / "_metadata").read_bytes())
        c.put_object(Bucket=BUCKET, Key=f"checkpoints/{OTHER_JOB}/shared/abc", Body=b"x")
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
def test_flat_savepoint_dir_on_s3_selected_by_job_id(s3: s3_server.S3Server, s3_env: dict[str, str]) -> None:
    before = _etags(s3)
    found = discovery.resolve(f"latest:s3://{BUCKET}/savepoints/?job-id={JOB}")
    assert found.location == f"s3://{BUCKET}/savepoints/{SP_JOB}"
    metadata, _ = discovery.load(f"latest:s3a://{BUCKET}/savepoints?job-id={JOB}")
    assert metadata.source == f"s3://{BUCKET}/savepoints/{SP_JOB}/_metadata"
    assert discovery.resolve(f"latest:s3://{BUCKET}/checkpoints?job-id={OTHER_JOB}").location == \
        f"s3://{BUCKET}/checkpoints/{OTHER_JOB}/chk-9"
    with pytest.raises(StorageError, match=r"ambiguous.*c9dfb5.*a421b6|ambiguous.*a421b6.*c9dfb5"):
        discovery.resolve(f"latest:s3://{BUCKET}/savepoints")
    assert _etags(s3) == before  # read-only


@pytest.mark.s3
def test_incremental_checkpoint_files_are_not_listed(s3: s3_server.S3Server, s3_env: dict[str, str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """`<JobID>/shared/` of incremental RocksDB checkpoints can hold millions of objects: discovery lists
    folders one level at a time, so 1,100 shared files (more than one listing page) cost no extra request."""
    c = s3.client()
    job = "5e5e5e" + "0" * 26
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: c.put_object(Bucket=BUCKET, Key=f"incremental/{job}/shared/{i:05d}", Body=b"s"),
                      range(1100)))
    c.put_object(Bucket=BUCKET, Key=f"incremental/{job}/chk-77/_metadata", Body=(SP_120 / "_metadata").read_bytes())
    port = urlparse(s3.endpoint).port
    assert port
    with FaultProxy("127.0.0.1", port) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL_S3", proxy.url)
        found = discovery.resolve(f"latest:s3://{BUCKET}/incremental?job-id={job}")
        listings = [parse_qs(urlparse(p).query) for m, p, _ in proxy.log
                    if m == "GET" and urlparse(p).path.rstrip("/") == f"/{BUCKET}"]
    assert found.location == f"s3://{BUCKET}/incremental/{job}/chk-77"
    assert 1 <= len(listings) <= 3, proxy.log
    # each listing is one level (delimiter /) or only savepoint directories: never the shared/ files
    assert all(q.get("delimiter") == ["/"] or q["prefix"][0].startswith("incremental/savepoint-") for q in listings)


@pytest.mark.s3
def test_cli_on_s3_flat_dir(s3: s3_server.S3Server, s3_env: dict[str, str]) -> None:
    env = {**os.environ, **s3_env}
    exe = Path(sys.executable).with_name("upgrade-gate")
    res = subprocess.run([str(exe), "check", "--savepoint", f"latest:s3://{BUCKET}/savepoints?job-id={JOB}",
                          "--graph", str(SAFE_GRAPH), "--flink-version", "1.20"], capture_output=True, text=True,
                         env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    assert f"s3://{BUCKET}/savepoints/{SP_JOB}/_metadata" in res.stderr and "VERDICT: SAFE" in res.stdout


# ---- Flink's REST API on a real cluster ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def flink(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    """A standalone Flink 2.3 cluster running the v1 counter job, with one savepoint taken through the CLI."""
    from flink_bridge.cluster import FlinkCluster
    from tests.upgrade_jobs import JOB_NAME, build_jobs, main_class

    jars = build_jobs("2.3")
    cluster = FlinkCluster(tmp_path_factory.mktemp("flink-discovery"))
    cluster.start()
    try:
        flink_cli = cluster._script("flink")
        run = subprocess.run([*flink_cli, "run", "-d", "-c", main_class("v1"), str(jars["v1"]), "--rate", "50"],
                             env=cluster._env, capture_output=True, text=True, timeout=180)
        assert run.returncode == 0, run.stdout + run.stderr
        jid = next(j["jid"] for j in cluster.get("/jobs/overview")["jobs"] if j["name"] == JOB_NAME)
        deadline = time.monotonic() + 120
        while cluster.get(f"/jobs/{jid}")["state"] != "RUNNING" or any(
                v["status"] != "RUNNING" for v in cluster.get(f"/jobs/{jid}")["vertices"]):
            assert time.monotonic() < deadline, "job did not start"
            time.sleep(0.5)
        time.sleep(2)  # some records, so the savepoint holds keyed state
        sp = subprocess.run([*flink_cli, "savepoint", jid], env=cluster._env, capture_output=True, text=True,
                            timeout=180)
        assert sp.returncode == 0, sp.stdout + sp.stderr
        path = next(ln.split("Path:", 1)[1].strip() for ln in sp.stdout.splitlines() if "Path:" in ln)
        yield {"cluster": cluster, "jid": jid, "savepoint": path, "jars": jars, "name": JOB_NAME}
    finally:
        cluster.stop()


@pytest.mark.flink
def test_flink_rest_finds_the_jobs_latest_savepoint_by_name_and_by_id(flink: dict) -> None:
    cluster = flink["cluster"]
    host = cluster.rest_url.removeprefix("http://")
    by_name = discovery.resolve(f"flink-rest://{host}/{flink['name']}")
    assert by_name.location == flink["savepoint"]
    assert "savepoint" in by_name.how and flink["jid"] in by_name.how
    assert discovery.resolve(f"flink-rest://{host}/{flink['jid']}?kind=savepoint").location == flink["savepoint"]
    # the cluster's state.savepoints.dir is flat, as Flink's default: the same savepoint by JobID
    flat = discovery.resolve(f"latest:{cluster.savepoint_uri}?job-id={flink['jid']}")
    assert Path(flat.location).resolve() == Path(flink["savepoint"].removeprefix("file:")).resolve()
    with pytest.raises(StorageError, match=r"no job named or with id 'no-such-job' \(jobs: ugate-counter"):
        discovery.resolve(f"flink-rest://{host}/no-such-job")
    with pytest.raises(StorageError, match=r"no completed checkpoint with an external path"):
        discovery.resolve(f"flink-rest://{host}/{flink['name']}?kind=checkpoint")


@pytest.mark.flink
def test_check_against_a_running_job_via_rest_with_a_deployment_spec(flink: dict, tmp_path: Path) -> None:
    """The CI gate end to end: savepoint from Flink's REST API, new graph exported from the spec's jar with
    the spec's settings; the compatible v2 is SAFE, the lossy v2 is not."""
    host = flink["cluster"].rest_url.removeprefix("http://")
    from tests.upgrade_jobs import main_class

    for variant, code in (("v2-compatible", 0), ("v2-lossy", 1)):
        spec = tmp_path / f"{variant}.yaml"
        spec.write_text(
            "apiVersion: flink.apache.org/v1beta1\nkind: FlinkDeployment\nmetadata: {name: counter}\n"
            f"spec:\n  flinkVersion: v2_3\n  flinkConfiguration: {{pipeline.max-parallelism: '128'}}\n"
            f"  job:\n    jarURI: {flink['jars'][variant].resolve().as_uri()}\n"
            f"    entryClass: {main_class(variant)}\n    args: ['--rate', '50']\n    parallelism: 1\n"
            "    upgradeMode: savepoint\n")
        res = run_cli("check", "--savepoint", f"flink-rest://{host}/{flink['name']}", "--deployment", str(spec),
                      "--format", "json")
        assert res.returncode == code, res.stderr
        assert "exporting the new graph" in res.stderr and f"savepoint: {flink['savepoint'].removeprefix('file:')}" \
            in res.stderr
        doc = json.loads(res.stdout)
        assert doc["flink_version"] == "2.3" and doc["savepoint"].startswith(flink["savepoint"].removeprefix("file:"))


@pytest.mark.flink
def test_a_jobmanager_that_never_answers_or_fails_is_one_line_within_the_time_limit(flink: dict) -> None:
    port = urlparse(flink["cluster"].rest_url).port
    assert port
    with FaultProxy("127.0.0.1", port) as proxy:
        host = proxy.url.removeprefix("http://")
        proxy.add_rule(r"^/jobs/overview", "blackhole", times=10)
        env = {**os.environ, "UPGRADE_GATE_S3_TIMEOUT": "3"}
        exe = Path(sys.executable).with_name("upgrade-gate")
        start = time.monotonic()
        res = subprocess.run([str(exe), "check", "--savepoint", f"flink-rest://{host}/{flink['name']}",
                              "--graph", str(SAFE_GRAPH)], capture_output=True, text=True, env=env, timeout=60)
        assert time.monotonic() - start < 15
        assert res.returncode == 2 and "timed out after" in res.stderr and "UPGRADE_GATE_S3_TIMEOUT" in res.stderr
        assert len(res.stderr.strip().splitlines()) == 1
        proxy.clear()
        proxy.add_rule(r"/checkpoints$", "status", status=503, times=10)
        with pytest.raises(StorageError, match=r"/jobs/[0-9a-f]{32}/checkpoints: HTTP 503"):
            discovery.resolve(f"flink-rest://{host}/{flink['name']}")


def test_unreachable_flink_is_one_line_exit_2() -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    res = run_cli("check", "--savepoint", f"flink-rest://127.0.0.1:{port}/orders", "--graph", str(SAFE_GRAPH))
    assert res.returncode == 2 and "cannot reach Flink's REST API" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_a_checkpoint_chosen_over_a_savepoint_says_it_will_not_stay() -> None:
    """Issue 32: `flink-rest://` picks the newer snapshot; when that is a checkpoint newer than a savepoint, the
    user is told the checkpoint goes away (subsumed, or deleted on cancel) and how to check the savepoint.
    The answer has the shape of Flink's `CheckpointingStatistics` (`/jobs/<id>/checkpoints`)."""
    job = {"jid": "a" * 32, "name": "orders", "state": "RUNNING"}
    stats = {"latest": {"savepoint": {"id": 7, "external_path": "file:/sp/savepoint-aaaaaa-1"},
                        "completed": {"id": 9, "external_path": "file:/cp/" + "a" * 32 + "/chk-9"}}}
    found = discovery.latest_snapshot(stats, job, None, "http://flink:8081")
    assert found.location.endswith("chk-9")
    assert any("newer than savepoint 7" in w and "?kind=savepoint" in w for w in found.warnings()), found.warnings()
    only_savepoint = discovery.latest_snapshot({"latest": {"savepoint": stats["latest"]["savepoint"]}}, job, None,
                                               "http://flink:8081")
    assert only_savepoint.warnings() == []
    older_checkpoint = {"latest": {**stats["latest"], "completed": {**stats["latest"]["completed"], "id": 5}}}
    assert discovery.latest_snapshot(older_checkpoint, job, None, "x").warnings() == []

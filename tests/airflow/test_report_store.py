"""The report store under concurrent publishers: a reader always gets a check and an HTML of the same
version, no publisher fails, concurrent meta updates all survive, old versions go away only after
their grace period, and reports in the layout before manifests are still read.

Real threads and real processes on a real directory; nothing is mocked.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

from demo.stack import REPO

PUBLISHER = """
import sys
sys.path[:0] = [{plugins!r}]
from flink_gate.reports import ReportStore
store = ReportStore({root!r}, gc_grace_s={grace!r})
for i in range({count}):
    tag = f"proc{{sys.argv[1]}}-{{i}}"
    store.publish("orders/enrichment", "manual__2026-11-23T08:00:00+00:00", {{"verdict": "SAFE", "tag": tag}},
                  f"<html><body data-tag='{{tag}}'>{{tag}}</body></html>", {{"dag_id": "d", "tag": tag}})
print("published", {count})
"""


def _read_pair(store, entry):
    """What a reader sees: the check, the HTML and the meta of one entry."""
    check = json.loads((entry.path / "check.json").read_text())
    html = (entry.path / "report.html").read_text()
    return check["tag"], html.split("data-tag='", 1)[1].split("'", 1)[0], entry.meta["tag"]


def test_concurrent_publishers_never_fail_and_readers_never_see_a_mixed_pair(tmp_path: Path):
    from flink_gate.reports import ReportStore

    grace = 1.5
    store = ReportStore(tmp_path, gc_grace_s=grace)
    job, run = "orders/enrichment", "manual__2026-11-23T08:00:00+00:00"
    store.publish(job, run, {"verdict": "SAFE", "tag": "first"}, "<html data-tag='first'></html>",
                  {"tag": "first"})
    stop = threading.Event()
    errors: list[str] = []
    reads = {"n": 0, "tags": set()}

    def reader() -> None:
        while not stop.is_set():
            try:
                entries = store.entries()
                assert len(entries) == 1, entries
                for entry in (entries[0], store.get(entries[0].job, entries[0].run)):
                    tags = _read_pair(store, entry)
                    assert len(set(tags)) == 1, f"mixed pair: {tags}"
                    assert entry.version and entry.path.name == entry.version == entry.meta["version"]
                    reads["n"] += 1
                    reads["tags"].add(tags[0])
            except Exception as exc:
                errors.append(f"reader: {type(exc).__name__}: {exc}")
                return

    def thread_publisher(n: int) -> None:
        deadline = time.monotonic() + 2 * grace + 1
        i = 0
        while time.monotonic() < deadline:
            tag = f"thread{n}-{i}"
            try:
                store.publish(job, run, {"verdict": "STATE_LOSS", "tag": tag}, f"<p data-tag='{tag}'>{tag}</p>",
                              {"dag_id": "d", "tag": tag})
            except Exception as exc:
                errors.append(f"publisher {n}: {type(exc).__name__}: {exc}")
                return
            i += 1

    script = PUBLISHER.format(plugins=str(REPO / "plugins"), root=str(tmp_path), grace=grace, count=150)
    procs = [subprocess.Popen([sys.executable, "-c", script, str(k)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for k in range(2)]
    readers = [threading.Thread(target=reader) for _ in range(2)]
    publishers = [threading.Thread(target=thread_publisher, args=(n,)) for n in range(3)]
    for t in readers + publishers:
        t.start()
    for t in publishers:
        t.join(timeout=60)
    outs = [p.communicate(timeout=120) for p in procs]
    stop.set()
    for t in readers:
        t.join(timeout=30)

    assert errors == []
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0 and "published 150" in out, err[-2000:]
    assert reads["n"] > 50 and len(reads["tags"]) > 5, reads["n"]
    # the last switch wins: the manifest names a complete version, and that is what readers get
    entry = store.entries()[0]
    assert len(set(_read_pair(store, entry))) == 1
    rdir = store.run_dir(job, run)
    assert sorted(p.name for p in rdir.iterdir() if p.name.startswith(".") and p.name != ".lock") == []

    # versions superseded more than the grace period ago are collected by the next publish
    time.sleep(grace + 0.2)
    path = store.publish(job, run, {"verdict": "SAFE", "tag": "last"}, "<p data-tag='last'></p>", {"tag": "last"})
    versions = sorted(p.name for p in rdir.iterdir() if p.name.startswith("v-"))
    assert len(versions) <= 2 and path.name in versions, versions  # current + the one just superseded
    assert _read_pair(store, store.get(store.entries()[0].job, store.entries()[0].run)) == ("last",) * 3


def test_a_page_and_its_frame_show_the_same_version_while_a_retry_publishes(tmp_path: Path):
    from flink_gate.reports import ReportStore

    store = ReportStore(tmp_path)
    store.publish("job", "run", {"verdict": "SAFE", "tag": "a"}, "<p data-tag='a'></p>", {"tag": "a"})
    page = store.get("job", "run")
    store.publish("job", "run", {"verdict": "STATE_LOSS", "tag": "b"}, "<p data-tag='b'></p>", {"tag": "b"})
    frame = store.get("job", "run", page.version)  # the page links its frame to its own version
    assert frame is not None and (frame.path / "report.html").read_text() == "<p data-tag='a'></p>"
    assert frame.verdict == "SAFE" and frame.meta["superseded_by"] == store.get("job", "run").version
    assert store.get("job", "run").verdict == "STATE_LOSS"
    assert store.get("job", "run", "../../etc") is None and store.get("job", "run", "v-" + "0" * 32) is None


def test_concurrent_meta_updates_of_different_fields_all_survive(tmp_path: Path):
    from flink_gate.reports import ReportStore

    store = ReportStore(tmp_path)
    store.publish("job", "run", {"verdict": "STATE_LOSS"}, "<p/>", {"dag_id": "d"})
    barrier = threading.Barrier(8)
    errors: list[str] = []

    def update(n: int) -> None:
        barrier.wait()
        try:
            for i in range(20):
                store.update_meta("job", "run", **{f"field{n}": i})
        except Exception as exc:
            errors.append(f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=update, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    meta = store.get("job", "run").meta
    assert {f"field{n}": 19 for n in range(8)}.items() <= meta.items()
    assert meta["verdict"] == "STATE_LOSS" and meta["dag_id"] == "d"


def test_reports_of_the_layout_before_manifests_are_still_read_and_replaced(tmp_path: Path):
    from flink_gate.reports import ReportStore

    old = tmp_path / "ledger-rollup" / "manual__1"
    old.mkdir(parents=True)
    (old / "check.json").write_text(json.dumps({"verdict": "STATE_LOSS"}))
    (old / "report.html").write_text("<p>old</p>")
    (old / "meta.json").write_text(json.dumps({"verdict": "STATE_LOSS", "published_at": "2026-01-01T00:00:00"}))
    store = ReportStore(tmp_path)
    [entry] = store.entries()
    assert (entry.job, entry.run, entry.verdict) == ("ledger-rollup", "manual__1", "STATE_LOSS")
    assert (entry.path / "report.html").read_text() == "<p>old</p>"
    store.update_meta("ledger-rollup", "manual__1", alert_sent=True)
    assert store.get("ledger-rollup", "manual__1").meta["alert_sent"] is True

    store.publish("ledger-rollup", "manual__1", {"verdict": "SAFE"}, "<p>new</p>", {})
    [entry] = store.entries()
    assert entry.verdict == "SAFE" and (entry.path / "report.html").read_text() == "<p>new</p>"
    assert not (old / "meta.json").exists() and not (old / "check.json").exists()

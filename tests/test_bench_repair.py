"""`python -m bench.bench_repair` measures what it says (issue 29), in its tiny configuration.

Part 1 (the repair against a plain copy of the same files, no JVM) runs on the committed `uid-renamed` savepoint with
2 rounds per side; part 2 (the max-parallelism rewrite against Flink's own reading, a JVM per Flink side) on the
committed `max-parallelism-128-to-256-long-keys-hashmap` savepoint. From what the benchmark prints and records: the
statistic is named and is the same on both sides, both sides were timed the same way, the rounds alternated, the
load and date were recorded, and each ratio is the quotient of the two reported rates.
"""

from __future__ import annotations

import dataclasses
import json
import re
import statistics
from pathlib import Path
from typing import Any

import pytest

from bench import bench_repair, fair
from tests.test_bench_fairness import _check_record, _printed

_NUMBER = r"([\d,]+(?:\.\d+)?(?:e[+-]\d+)?)"


def _abba(rounds: int) -> list[str]:
    return [s for i in range(rounds) for s in (("copy", "repair") if i % 2 == 0 else ("repair", "copy"))]


def _copy_printed(block: str) -> dict[str, float]:
    """The rates and ratios of one printed repair-vs-copy block, as a reader of `make bench`'s log sees them."""
    out = {}
    for side in ("copy", "repair"):
        m = re.search(rf"   {side}\s*: {_NUMBER} MB/s by wall, {_NUMBER} MB/CPU-s, median of (\d+) rounds", block)
        assert m, block
        out[f"{side}_wall"] = float(m.group(1).replace(",", ""))
        out[f"{side}_cpu"] = float(m.group(2).replace(",", ""))
    for by in ("wall", "CPU"):
        m = re.search(rf"ratio repair/copy by {by} ([\d.]+)", block)
        assert m, block
        out[f"ratio_{by.lower()}"] = float(m.group(1))
    return out


def test_the_repair_and_the_copy_are_timed_alike_and_the_ratio_is_their_quotient(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    records = tmp_path / "copy.jsonl"
    assert bench_repair.main(["--tiny", "--parts", "copy", "--copy-json", str(records)]) == 0
    text = capsys.readouterr().out
    results = [json.loads(line) for line in records.read_text().splitlines()]
    assert [(r["how"], r["sync"]) for r in results] == [("in-process", "metadata"), ("in-process", "all"),
                                                        ("cli", "metadata"), ("cli", "all")]
    blocks = text.split("\n== repair vs plain copy: ")[1:]
    assert len(blocks) == len(results)
    for r, block in zip(results, blocks, strict=True):
        # the statistic is named, and the same on both sides
        assert r["statistic"] == bench_repair.COPY_STATISTIC and "median of per-round rates" in r["statistic"]
        assert f"statistic: {bench_repair.COPY_STATISTIC}" in block
        c, p = r["copy"], r["repair"]
        for side in (c, p):
            assert side["rounds"] == r["rounds"] == 2 and len(side["rates_wall"]) == len(side["rates_cpu"]) == 2
            assert side["rate_wall"] == pytest.approx(statistics.median(side["rates_wall"]), rel=1e-12)
            assert side["rate_cpu"] == pytest.approx(statistics.median(side["rates_cpu"]), rel=1e-12)
            assert side["rates_wall"] == pytest.approx([r["bytes"] / s for s in side["wall_s"]])
        # both sides timed the same way, alternated ABBA, doing the same durability work
        assert c["timed_by"] == p["timed_by"] == bench_repair.TIMED_BY[r["how"]]
        timed = re.search(r"timed by: copy (.+); repair (.+)", block)
        assert timed and timed.group(1) == timed.group(2) == c["timed_by"]
        assert r["order"] == _abba(2) and r["alternated"] == "ABBA"
        assert f"durability: {bench_repair.DURABILITY[r['sync']]}" in block
        # the ratio is the quotient of the two rates, with its spread from the paired rounds
        for by in ("wall", "cpu"):
            assert r[f"ratio_{by}"] == pytest.approx(p[f"rate_{by}"] / c[f"rate_{by}"], rel=1e-12)
            paired = [a / b for a, b in zip(p[f"rates_{by}"], c[f"rates_{by}"], strict=True)]
            assert r[f"paired_{by}"] == pytest.approx(paired)
            assert r[f"ratio_{by}_range"] == pytest.approx([min(paired), max(paired)])
        assert r["goal_met"] == (r["ratio_wall"] >= 0.5)
        printed = _copy_printed(block)
        # printed with 3 decimals: exact to 0.0005 (abs); the printed rates to 1 % (rel)
        for by in ("wall", "cpu"):
            assert printed[f"ratio_{by}"] == pytest.approx(printed[f"repair_{by}"] / printed[f"copy_{by}"], rel=0.01,
                                                           abs=0.0006)
        assert printed["ratio_wall"] == pytest.approx(r["ratio_wall"], abs=0.0006)
        # what was timed is a verified repair moving state, of every state file of the source
        assert r["moves"] and r["state_files"] == 2 and r["files"] == 3
        # the load and the date are recorded
        assert len(r["load_before"]) == len(r["load_after"]) == 3 and r["cpus"] >= 1
        assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", r["date"]) and r["command"]
        assert "load average" in block
    assert "summary, repair vs plain copy" in text


@pytest.mark.flink
def test_the_rewrite_is_compared_with_flinks_reading_fairly(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    records = tmp_path / "fair.jsonl"
    assert bench_repair.main(["--tiny", "--parts", "rescale", "--json", str(records)]) == 0
    text = capsys.readouterr().out
    results: list[dict[str, Any]] = [json.loads(line) for line in records.read_text().splitlines()]
    assert [r["flink_mode"] for r in results] == ["entries", "entries-in-memory", "heap"]
    printed = _printed(text.split("\ninput ", 1)[1])
    assert len(printed) == len(results)
    tiny = dataclasses.replace(fair.Settings.tiny(), rounds=2)
    for r, p in zip(results, printed, strict=True):
        _check_record(r, tiny)  # thread CPU both sides, same round rule, ABBA, one statistic, load, ratio
        # printed with 3 decimals: a ratio of 0.034 is only that exact (abs), the rates to 1 % (rel)
        assert p["ratio"] == pytest.approx(p["ours"] / p["flink"], rel=0.01, abs=0.0006)
        assert p["ratio"] == pytest.approx(r["ratio"], abs=0.0006)
        assert r["unit"] == "bytes" and r["same_as_flink"] is True and r["new_max_parallelism"] == 256
        # both sides read the same bytes per pass: the savepoint's keyed state files
        per_pass = r["flink_counts"]["bytes"]
        assert r["ours"]["items"] == per_pass * r["ours"]["units"]
        assert r["flink"]["items"] == per_pass * r["flink"]["units"]
        # Flink's reading of the rewritten savepoint found every entry where Flink assigns its key
        assert r["flink_counts_rewritten"]["misplaced"] == 0
        assert r["flink_counts_rewritten"]["entries"] == r["flink_counts"]["entries"] == r["ours_counts"]["entries"]
    assert "summary (ratio = median ours / median Flink" in text

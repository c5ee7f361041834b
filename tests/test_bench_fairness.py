"""The benchmarks against Flink still measure what they say (issue 34).

A benchmark that can flatter us is worse than none: the old ones timed the JVM by wall clock in another minute than
ours (so under load it never finished JIT-compiling) and divided our best time by Flink's mean. Every comparison now
goes through `bench/fair.py`; these tests run each benchmark in a tiny configuration (a few short rounds, a short
warm-up, small committed inputs) against the real Flink jars and check, from what it prints and records, that both
sides were timed by thread CPU with the same per-round rule, that the rounds alternated, that the same statistic
(the median of per-round rates) was used on both sides and is named, that the load was recorded, and that the ratio
is the quotient of the two reported rates. A stub test checks `fair.compare`'s arithmetic without a JVM.
"""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path
from typing import Any

import pytest

from bench import fair
from tests.conftest import REPO

SAVEPOINT = REPO / "tests" / "fixtures" / "savepoints" / "2.3.0" / "hashmap-canonical-p2"
STATE_SCHEMAS = REPO / "tests" / "fixtures" / "savepoints" / "state-schemas" / "2.3.0" / "rocksdb-native-p1"
TINY = fair.Settings.tiny()


def _abba(rounds: int) -> list[str]:
    return [side for i in range(rounds) for side in (("ours", "flink") if i % 2 == 0 else ("flink", "ours"))]


def _check_record(r: dict[str, Any], settings: fair.Settings = TINY) -> None:
    """What every fair result must show, whatever it compares."""
    assert r["statistic"] == fair.STATISTIC and "median of per-round rates" in r["statistic"]
    o, f = r["ours"], r["flink"]
    # both sides timed by the CPU of the working thread, with the same per-round rule
    assert o["timed_by"] == f["timed_by"] == "thread_cpu"
    assert "time.thread_time_ns" in o["clock"] and "ThreadMXBean.getCurrentThreadCpuTime" in f["clock"]
    for side in (o, f):
        assert side["rounds"] == settings.rounds == r["rounds"]
        assert len(side["rates"]) == settings.rounds
        assert side["cpu_s"] >= settings.rounds * settings.round_cpu  # every round ran to its CPU budget
        assert side["cpu_s"] <= side["wall_s"] * 1.05 + 0.01  # thread CPU, not process CPU or a coarse clock
        assert side["rate"] == pytest.approx(statistics.median(side["rates"]), rel=1e-12)  # the same statistic
        warm = side["warm_up"]
        assert warm["warm_rounds"] >= 1 and warm["warm_cpu_ns"] >= settings.round_cpu * 1e9
        # warmed up by CPU: at least the minimum (a JVM warmed by an earlier comparison re-checks its rate
        # without one), then until stable or the limit
        assert warm["min_cpu_s"] == (0.0 if warm["recheck"] else settings.warm_min_cpu)
        assert warm["warm_cpu_ns"] >= warm["min_cpu_s"] * 1e9
        assert warm["stable"] or warm["warm_cpu_ns"] >= settings.warm_max_cpu * 1e9
    # the rounds alternated ours/Flink, ABBA
    assert r["order"] == _abba(settings.rounds) and r["alternated"] == "ABBA"
    # the ratio is the quotient of the two reported rates, with its spread from the paired rounds
    assert r["ratio"] == pytest.approx(o["rate"] / f["rate"], rel=1e-12)
    paired = [a / b for a, b in zip(o["rates"], f["rates"], strict=True)]
    assert r["paired_ratios"] == pytest.approx(paired)
    assert r["ratio_range"] == pytest.approx([min(paired), max(paired)])
    assert min(paired) <= r["ratio_iqr"][0] <= r["ratio_iqr"][1] <= max(paired)
    # the load and the date are recorded
    assert len(r["load_before"]) == len(r["load_after"]) == 3 and r["cpus"] >= 1
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", r["date"])
    assert r["command"]


_RATE = r"([\d,]+(?:\.\d+)?)( M)? "


def _printed(text: str) -> list[dict[str, float]]:
    """The rates and ratio of each printed comparison, as a reader of `make bench`'s log sees them."""
    blocks = text.split("\n== ")[1:]
    out = []
    for b in blocks:
        def rate(who: str, block: str = b) -> float:
            m = re.search(rf"   {who}\s*: {_RATE}", block)
            assert m, f"no {who} rate in: {block}"
            return float(m.group(1).replace(",", "")) * (1e6 if m.group(2) else 1)
        ratio = re.search(r"ratio ours/Flink ([\d.]+)", b)
        assert ratio, b
        assert "statistic: median of per-round rates" in b
        assert "timed by: ours thread CPU" in b and "Flink JVM thread CPU" in b
        assert "alternated ABBA" in b and "load average" in b
        assert re.search(r"IQR [\d.]+-[\d.]+, min-max [\d.]+-[\d.]+", b)
        out.append({"ours": rate("ours"), "flink": rate("Flink"), "ratio": float(ratio.group(1))})
    return out


def _run(main: Any, argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    records = tmp_path / "fair.jsonl"
    assert main([*argv, "--tiny", "--json", str(records)]) == 0
    text = capsys.readouterr().out
    results = [json.loads(line) for line in records.read_text().splitlines()]
    printed = _printed(text)
    assert len(printed) == len(results) >= 1
    for r, p in zip(results, printed, strict=True):
        _check_record(r)
        # the printed ratio is the quotient of the printed rates (up to their rounding)
        # printed with 3 decimals: a ratio of 0.034 is only that exact (abs), the rates to 1 % (rel)
        assert p["ratio"] == pytest.approx(p["ours"] / p["flink"], rel=0.01, abs=0.0006)
        assert p["ratio"] == pytest.approx(r["ratio"], abs=0.0006)
    assert "summary (ratio = median ours / median Flink" in text
    return results


@pytest.mark.flink
def test_hashing_benchmark_is_fair(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from bench import bench_hashing
    results = _run(bench_hashing.main, ["--graphs", "4", "--operators", "20"], tmp_path, capsys)
    assert [r["ours_kind"] for r in results] == ["V2 alone", "V2 + V3 in one pass",
                                                  "compute_operator_ids V3 whole (more work than Flink's side)"]
    assert all(r["same_v2_as_flink"] and r["unit"] == "nodes" and r["nodes"] > 0 for r in results)


@pytest.mark.flink
def test_metadata_benchmark_is_fair(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from bench import bench_metadata
    (r,) = _run(bench_metadata.main, ["--input", str(SAVEPOINT)], tmp_path, capsys)
    assert r["same_as_flink"] is True and r["unit"] == "files"
    assert r["flink_code"] == "Checkpoints.loadCheckpointMetadata"


@pytest.mark.flink
def test_state_meta_benchmark_is_fair(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from bench import bench_state_meta
    (r,) = _run(bench_state_meta.main, ["--input", str(STATE_SCHEMAS)], tmp_path, capsys)
    assert r["same_as_flink"] is True and r["states"] == 20


@pytest.mark.flink
def test_keygroups_benchmark_is_fair(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from bench import bench_keygroups
    results = _run(bench_keygroups.main, ["--keys", "20000", "--string-keys", "5000", "--scalar-keys", "2000",
                                          "--batch", "5000"], tmp_path, capsys)
    assert [(r["key_type"], r["mode"]) for r in results] == [
        (t, m) for t in ("int", "long", "string") for m in ("one array", "in 5,000-key batches")]
    assert all(r["same_as_flink"] for r in results)


class _StubFlink:
    """Flink's side without a JVM: fixed rounds, to check compare's arithmetic and order."""

    clock = fair.FLINK_CLOCK
    version = "2.3.0"
    def __init__(self, rates: list[float]) -> None:
        self.info = {"java": "stub"}
        self.rates = list(rates)
        self.calls: list[str] = []

    def warm(self, s: fair.Settings) -> dict[str, Any]:
        self.calls.append("warm")
        return {"warm_rounds": 1, "warm_cpu_ns": int(s.warm_min_cpu * 1e9), "stable": True, "spread": 0.0}

    def round(self, seconds: float) -> fair.Round:
        self.calls.append("round")
        rate = self.rates.pop(0)
        cpu = int(seconds * 1e9)
        return fair.Round(cpu, cpu, cpu, cpu, int(rate * seconds), 1, 0, 0)


def test_compare_uses_one_statistic_and_alternates() -> None:
    s = fair.Settings(rounds=4, round_cpu=0.001, warm_min_cpu=0.001, warm_max_cpu=0.01, window=2, tolerance=10)
    order: list[str] = []
    stub = _StubFlink([1e6, 2e6, 4e6, 3e6])

    def unit() -> int:
        order.append("ours")
        return 10
    ours = fair.Ours(unit)
    original = stub.round

    def flink_round(seconds: float) -> fair.Round:
        order.append("flink")
        return original(seconds)
    stub.round = flink_round  # type: ignore[method-assign]
    r = fair.compare(fair.Comparison("stub", "stub", "items", "ours", "flink"), ours, stub, s)  # type: ignore[arg-type]
    assert r["flink"]["rate"] == pytest.approx(statistics.median([1e6, 2e6, 4e6, 3e6]), rel=1e-3)
    assert r["ratio"] == pytest.approx(r["ours"]["rate"] / r["flink"]["rate"], rel=1e-12)
    assert r["order"] == _abba(4)
    # in time, after the warm-up: ours' units, then Flink's round, then Flink's round, then ours' units...
    timed = order[len(order) - len([x for x in order if x == "flink"]) - r["ours"]["units"]:]
    collapsed = [x for i, x in enumerate(timed) if i == 0 or timed[i - 1] != x]
    # ours | flink flink | ours ours | flink flink | ours
    assert collapsed == ["ours", "flink", "ours", "flink", "ours"]


def test_check_cost_benchmark_times_whole_processes_alternated(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """`bench_check` (a check's own CPU, no Flink side): every case is a whole process timed by its CPU, the cases
    alternate run by run, the same statistic for all, the floor beside them, the load recorded."""
    from bench import bench_check

    record = tmp_path / "check.jsonl"
    assert bench_check.main(["--runs", "2", "--record", str(record)]) == 0
    r = json.loads(record.read_text().splitlines()[-1])
    assert r["statistic"] == "median of per-run process CPU (user+sys)" and r["runs"] == 2
    assert len(r["loadavg_before"]) == 3 and len(r["loadavg_after"]) == 3
    cases = r["cases"]
    assert set(cases) == set(bench_check.cases())
    floor, check = cases["python -c pass (floor)"]["median_s"], cases["check --format json"]["median_s"]
    assert 0 < floor < check  # a check does real work beyond the interpreter's start
    out = capsys.readouterr().out
    assert "median, min-max of 2 runs" in out and f"<= {bench_check.GOAL_CPU_S} CPU-s" in out

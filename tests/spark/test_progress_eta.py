"""The fleet progress line's ETA (spark_jobs/progress.py): measured on recent counting, not on Spark's start-up.

A 10,000-job scan sat at 0 % for 80 s while executors and Python workers started, then predicted 11.8 hours from
its first few jobs; it ended a minute later. The clock here is a test clock: what is asserted is the line a user
reads in the Airflow task log after that start-up."""

from __future__ import annotations

import logging
import re

from spark_jobs.progress import WINDOW_S, Progress

LINE = re.compile(r"fleet_check: ([\d,]+)/10,000 jobs \(([\d.]+) %\), ([\d.]+) jobs/s, ([^,]+), (\d+) s elapsed")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _progress(clock: Clock) -> Progress:
    p = Progress(logging.getLogger("test"), "fleet_check", 10_000, clock=clock)
    p._sock.close()  # its receiver is not started: counts are set by the test
    return p


def test_start_up_says_tasks_are_starting_and_does_not_spoil_the_eta() -> None:
    clock = Clock()
    p = _progress(clock)
    for _ in range(16):  # 80 s of Spark starting executors, a line every 5 s, nothing counted
        clock.now += 5
        assert LINE.fullmatch(p.line()).group(4) == "tasks starting"
    for _ in range(4):  # then 250 jobs a second
        clock.now += 5
        p.done += 1250
    done, pct, rate, eta, elapsed = LINE.fullmatch(p.line()).groups()
    assert (done, pct, float(rate), elapsed) == ("5,000", "50.0", 250.0, "100")
    assert eta == "20 s left"  # 5,000 left at 250 jobs/s, not hours from an average over the start-up


def test_the_rate_follows_the_last_half_minute() -> None:
    clock = Clock()
    p = _progress(clock)
    for step in range(24):  # 100 jobs/s for 60 s, then 20 jobs/s (a slower part of the fleet) for 60 s
        clock.now += 5
        p.done += 500 if step < 12 else 100
        p.line()
    _, _, rate, eta, _ = LINE.fullmatch(p.line()).groups()
    assert float(rate) == 20.0 and WINDOW_S <= 60
    assert p.done == 7_200 and eta == "140 s left"


def test_the_last_line_says_done() -> None:
    clock = Clock()
    p = _progress(clock)
    clock.now += 3
    p.done = 10_000
    assert LINE.fullmatch(p.line()).group(4) == "done"

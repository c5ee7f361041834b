"""Progress of a fleet job in its driver log: jobs done / total, rate and ETA, at a steady interval.

A fleet run is minutes of tasks with nothing in between in Spark's log (accumulators reach the
driver only when a task ends, so with a few long tasks they jump from 0 to 25 % to 50 %). Here
each task sends a tiny UDP datagram ("<jobs done since the last one>") to a socket the driver
opened on its own address (`spark.driver.host`, which executors already reach for the rest of
Spark's traffic), at most every half second and at the task's end. A driver thread sums them and
logs one line every `interval` seconds, which spark-submit streams to its caller (the Airflow task
log of `flink_fleet_scan`). Progress is advisory: a lost datagram only delays a count, a retried
task may count its jobs twice (the shown count is capped at the total), and the job's result
never depends on it.

The rate and the ETA are the rate of the last `WINDOW_S` seconds of counting, not of the whole run: a
fleet run spends its first tens of seconds launching executors and Python workers with nothing to
count, and an average over that time predicted hours for a run that ended a minute later. Until
the first count arrives the line says the tasks are starting.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from types import TracebackType
from typing import Any

SEND_EVERY_S = 0.5
WINDOW_S = 30.0  # the rate behind the ETA: jobs counted in the last half minute


class Progress:
    """Driver side: a UDP counter and a reporter thread; `address` goes into the tasks' closures."""

    def __init__(self, log: logging.Logger, what: str, total: int, host: str = "127.0.0.1",
                 interval: float = 5.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.log, self.what, self.total, self.interval, self._clock = log, what, total, interval, clock
        self.done = 0
        self._samples: deque[tuple[float, int]] = deque()  # (when, done) at each report, the last WINDOW_S
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._sock.bind((host, 0))
        self._sock.settimeout(0.2)
        self.address: tuple[str, int] = self._sock.getsockname()
        self._stop = threading.Event()
        self._start = clock()
        self._threads = [threading.Thread(target=self._receive, daemon=True, name="progress-receive"),
                         threading.Thread(target=self._report, daemon=True, name="progress-report")]

    @classmethod
    def for_session(cls, spark: Any, log: logging.Logger, what: str, total: int, interval: float = 5.0) -> Progress:
        host = spark.sparkContext.getConf().get("spark.driver.host", "127.0.0.1") or "127.0.0.1"
        return cls(log, what, total, host, interval)

    def __enter__(self) -> Progress:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        deadline = time.monotonic() + 1.0  # the tasks' last datagrams may still be in flight
        while exc_type is None and self.done < self.total and time.monotonic() < deadline:
            time.sleep(0.05)
        self._stop.set()
        for t in self._threads:
            t.join(timeout=2)
        self._sock.close()
        if exc_type is None:  # the count the tasks reported, not assumed: the test holds it to the total
            self.log.info("%s", self.line())

    def _receive(self) -> None:
        while not self._stop.is_set():
            try:
                data = self._sock.recv(64)
            except OSError:  # timeout (check the stop flag) or closed
                continue
            try:
                self.done = min(self.total, self.done + int(data))
            except ValueError:  # not one of ours
                continue

    def _report(self) -> None:
        while not self._stop.wait(self.interval):
            self.log.info("%s", self.line())

    def line(self) -> str:
        """"fleet_ids: 1,200/10,000 jobs (12.0 %), 240.0 jobs/s, 37 s left, 5 s elapsed"."""
        now = self._clock()
        elapsed = now - self._start
        samples = self._samples
        samples.append((now, self.done))
        while len(samples) > 2 and now - samples[1][0] >= WINDOW_S:
            samples.popleft()  # keep one sample at or before the window's start as the base
        base = samples[0]
        if base[1] == 0:  # the window began before the first count: measure from the last moment with none
            base = [s for s in samples if s[1] == 0][-1]
        span = now - base[0]
        rate = (self.done - base[1]) / span if span > 0 else 0.0
        pct = 100.0 * self.done / self.total if self.total else 100.0
        if self.done >= self.total:
            eta = "done"
        elif self.done == 0:
            eta = "tasks starting"
        elif rate > 0:
            eta = f"{(self.total - self.done) / rate:.0f} s left"
        else:
            eta = "ETA unknown"
        return (f"{self.what}: {self.done:,}/{self.total:,} jobs ({pct:.1f} %), {rate:.1f} jobs/s, {eta}, "
                f"{elapsed:.0f} s elapsed")


class Ticker:
    """Executor side: counts jobs and sends the count to the driver at most every `SEND_EVERY_S`."""

    def __init__(self, address: tuple[str, int] | None) -> None:
        self.address = address
        self.pending = 0
        self._last = time.monotonic()
        self._sock: socket.socket | None = None

    def tick(self, n: int = 1) -> None:
        if self.address is None:
            return
        self.pending += n
        if time.monotonic() - self._last >= SEND_EVERY_S:
            self.flush()

    def flush(self) -> None:
        if self.address is None or not self.pending:
            return
        try:
            if self._sock is None:
                self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            self._sock.sendto(str(self.pending).encode(), self.address)
        except OSError:  # progress is advisory: never fail a task over it
            return
        self.pending = 0
        self._last = time.monotonic()

    def close(self) -> None:
        """The task's last count, then the socket."""
        self.flush()
        if self._sock is not None:
            self._sock.close()
            self._sock = None

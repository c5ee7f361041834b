"""What a deferred task went through, read from the standalone Airflow's own metadata database and task logs.

A deferral is short and the API server (one worker, SQLite) stalls under load, so the tests that must see a task
`deferred` sample the `task_instance` table itself a few times a second (`StateWatch`), and read the task's log
file where the worker wrote it (`task_log`) when they must react within seconds to what the task said.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

Row = tuple[str, str, str | None]  # (run id, task id, state)


def task_states(home: Path, dag_id: str) -> tuple[list[Row], int]:
    """(run, task, state) of `dag_id`'s task instances, and how many tasks of any DAG hold a worker slot now."""
    with sqlite3.connect(home / "airflow.db", timeout=5) as db:
        rows = db.execute("select run_id, task_id, state from task_instance where dag_id=?", (dag_id,)).fetchall()
        running = db.execute("select count(*) from task_instance where state='running'").fetchone()[0]
    return rows, int(running)


def task_log(home: Path, dag_id: str, run_id: str, task_id: str) -> str:
    """Everything the task's attempts logged so far (the worker's log files under the Airflow home)."""
    folder = home / "logs" / f"dag_id={dag_id}" / f"run_id={run_id}" / f"task_id={task_id}"
    return "\n".join(f.read_text(errors="replace") for f in sorted(folder.rglob("*.log"))) if folder.is_dir() else ""


class StateWatch:
    """Samples `dag_id`'s task states in a thread while in a `with` block: `history[(run, task)]` is the states
    each task went through (consecutive repeats folded), `most_running` the most tasks of any DAG seen running at
    once; `on_sample(rows)` is called after each sample (for what a test samples besides)."""

    def __init__(self, home: Path, dag_id: str, on_sample: Callable[[list[Row]], Any] | None = None,
                 every_s: float = 0.2) -> None:
        self.home, self.dag_id, self.on_sample, self.every_s = home, dag_id, on_sample, every_s
        self.history: dict[tuple[str, str], list[str | None]] = {}
        self.most_running = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self._stop.is_set():
            try:
                rows, running = task_states(self.home, self.dag_id)
            except sqlite3.OperationalError:  # the scheduler holds SQLite's write lock for a moment
                self._stop.wait(0.1)
                continue
            self.most_running = max(self.most_running, running)
            for run, task, state in rows:
                seen = self.history.setdefault((run, task), [])
                if not seen or seen[-1] != state:
                    seen.append(state)
            if self.on_sample is not None:
                self.on_sample(rows)
            self._stop.wait(self.every_s)

    def states(self, run_id: str, task_id: str) -> list[str | None]:
        return list(self.history.get((run_id, task_id), []))

    def deferred(self) -> set[tuple[str, str]]:
        """(run, task) of every task seen `deferred`."""
        return {key for key, states in self.history.items() if "deferred" in states}

    def __enter__(self) -> StateWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

"""The plugin's DAG-run listener: writes the gate's sentence into Airflow's notes when a run ends.

A task cannot set notes through the Task SDK (its execution API has no note call), and giving
tasks credentials for the public REST API only to write a sentence would be worse. The scheduler
finishes every run and calls `on_dag_run_success` / `on_dag_run_failed` (Airflow's listener
hooks, `airflow.listeners.spec.dagrun`) inside its own database session, so this listener reads
the note each gate task pushed to XCom (`flink_gate.outcome.NOTE_XCOM_KEY`) and sets it as that
task instance's note and, unless a person already wrote one, as the run's note. The scheduler's
commit stores it with the run's final state, so the grid shows both together.
"""

from __future__ import annotations

import logging
from typing import Any

from airflow.listeners import hookimpl

from flink_gate.outcome import NOTE_XCOM_KEY, clip, crash_note

log = logging.getLogger(__name__)
GATE_DAGS = ("flink_upgrade_gate", "flink_fleet_scan", "flink_rolling_upgrade", "flink_gate_on_landing")


def write_notes(dag_run: Any, failed: bool = False) -> list[str]:
    """Copy the run's gate notes into its task instance notes and its run note; returns them. A `failed` run
    without a gate note crashed: its run note says so (`outcome.crash_note`)."""
    from airflow import settings
    from airflow.models.dagrun import DagRun
    from airflow.models.xcom import XComModel
    from sqlalchemy import select
    from sqlalchemy.orm import object_session

    if dag_run.dag_id not in GATE_DAGS:
        return []
    session = object_session(dag_run)
    if session is None:
        # `airflow dags test` hands over a detached run; its loop commits the thread's scoped session,
        # so the notes go there (a second session would wait on SQLite's write lock)
        session = settings.Session()
        dag_run = session.scalar(select(DagRun).where(DagRun.dag_id == dag_run.dag_id,
                                                      DagRun.run_id == dag_run.run_id))
        if dag_run is None:
            return []
    rows = session.scalars(XComModel.get_many(run_id=dag_run.run_id, dag_ids=dag_run.dag_id,
                                              key=NOTE_XCOM_KEY)).all()
    notes = []
    for row in sorted(rows, key=lambda r: r.task_id):
        text = XComModel.deserialize_value(row)
        if not isinstance(text, str) or not text:
            continue
        ti = dag_run.get_task_instance(row.task_id, session=session, map_index=row.map_index)
        if ti is not None and not ti.note:
            ti.note = clip(text)
        notes.append(text)
    if failed and not any(n.startswith("BLOCKED") for n in notes):
        # a crash, or an approved upgrade that failed: first, so that a red run never reads as SAFE or BLOCKED
        failed_tasks = sorted(ti.task_id for ti in dag_run.get_task_instances(session=session)
                              if str(ti.state) == "failed")
        notes.insert(0, crash_note(failed_tasks))
    if notes and not dag_run.note:
        dag_run.note = clip(" · ".join(notes))
    session.flush()
    log.info("upgrade gate: notes of %s %s: %s", dag_run.dag_id, dag_run.run_id, notes)
    return notes


def _safely(dag_run: Any, failed: bool = False) -> None:
    try:
        write_notes(dag_run, failed)
    except Exception:  # a note must never fail the scheduler's state update
        log.exception("upgrade gate: could not write the run note of %s", getattr(dag_run, "run_id", "?"))


@hookimpl
def on_dag_run_success(dag_run: Any, msg: str) -> None:
    _safely(dag_run)


@hookimpl
def on_dag_run_failed(dag_run: Any, msg: str) -> None:
    _safely(dag_run, failed=True)

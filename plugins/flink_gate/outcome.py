"""How a gate run says what it decided, in Airflow's own places: the run's state and a note on the run and task.

A blocked upgrade is not a done one. The gate task writes its verdict (report, alert, XCom) and then
fails without a retry, so the run is red wherever people count runs (DAG list, runs list, overview,
grid) and only SAFE is green (issue 32: a green blocked run was counted as done). The note tells a
blocked run from a crash: "BLOCKED: <verdict>, <bytes> at risk — report: <url>" on the gate, against
"FAILED, no verdict: <task> failed" (`crash_note`) for a run that crashed. The sentence is pushed to
XCom under `NOTE_XCOM_KEY`; the plugin's listener (`flink_gate.listeners`) copies it into the task
instance note and the DAG run note when the run ends: a task has no supported way to write notes
itself (the Task SDK's execution API has none), the scheduler that finishes the run does.

The run page shows a note only as it was when the page opened (docs/design.md, "The verdict on the run
page"), so the gate also names its task instance with the sentence (`VERDICT_LABEL_TEMPLATE`, at most
`MAX_LABEL_CHARS`): the run page's task instance table polls until the run ends and shows that name.

No Airflow import here: the operator, the fleet task, the listener and the tests share it.
"""

from __future__ import annotations

from typing import Any

from upgrade_gate.report.sizes import human_bytes

NOTE_XCOM_KEY = "gate_note"
REPORT_URL_XCOM_KEY = "report_url"
MAX_NOTE_CHARS = 1000  # Airflow's note columns are 1000 characters
MAX_LABEL_CHARS = 250  # a task instance's rendered_map_index column is 250 characters
# the gate's `map_index_template`: the note it put into its context (`LABEL_CONTEXT_KEY`); empty (no label) until then
LABEL_CONTEXT_KEY = "gate_verdict_label"
VERDICT_LABEL_TEMPLATE = "{{ " + LABEL_CONTEXT_KEY + " | default('') }}"


def clip(text: str, limit: int = MAX_NOTE_CHARS) -> str:
    """At most `limit` characters (Airflow's 1000 for a note), keeping a trailing `— report: <url>` whole: the link is
    the note's point."""
    if len(text) <= limit:
        return text
    head, sep, link = text.rpartition(" — ")
    if sep and len(link) < limit // 2:
        keep = limit - len(sep) - len(link) - 1
        return head[:keep] + "…" + sep + link
    return text[: limit - 1] + "…"


def verdict_label(note: str) -> str:
    """The gate task instance's name on the run page: the note, cut after its verdict (in its caveats) rather than in
    its report link."""
    return clip(note, MAX_LABEL_CHARS)


def gate_note(verdict: str, bytes_at_risk: int | None, report_url: str, *, blocked: bool,
              caveat: str | None = None) -> str:
    """`BLOCKED: STATE_MISROUTED, 4.8 KiB at risk — report: <url>` or `SAFE: no state at risk — …`; `caveat`
    (`export_caveat`) goes before the report link."""
    extra = f"; {caveat}" if caveat else ""
    if not blocked:
        return clip(f"{verdict}: the upgrade may proceed, no state at risk{extra} — report: {report_url}")
    return clip(f"BLOCKED: {verdict}, {human_bytes(int(bytes_at_risk or 0))} at risk{extra} — report: {report_url}")


def upgrade_plan(p: dict[str, Any]) -> str:
    """What an approval sets in motion, in the words of the run's own params: which job stops, where its savepoint
    goes, what starts from it, and what happens if that does not restore (`upgrade_machine`, `rollback`)."""
    stop = (f"Flink job {p['flink_job_id']}" if p.get("flink_job_id")
            else f"the RUNNING Flink job named {p.get('job_name')}")
    where = p.get("savepoint_target_dir") or "the cluster's state.savepoints.dir"
    jar = p.get("jar") or (f"uploaded jar {p['flink_jar_id']}" if p.get("flink_jar_id") else "the new jar")
    main = p.get("main_class") or "its manifest's Main-Class"
    settings = list(p.get("flink_settings") or ())
    how = f"parallelism {p['parallelism']}" if p.get("parallelism") else "the job's default parallelism"
    how += f", -D {' -D '.join(settings)}" if settings else ""
    back = (f"if it does not restore, {p['rollback_jar']} is restarted from the same savepoint"
            if p.get("rollback_jar") or p.get("rollback_jar_id")
            else "if it does not restore, nothing is restarted (no rollback jar): a person must act")
    return (f"On Approve: {stop} is stopped with a savepoint into {where}; {jar} ({main}) starts from it with {how}; "
            f"{back}.")


def export_caveat(export: dict[str, Any] | None) -> str | None:
    """What a verdict on a graph exported from the jar rests on, when the export had to guess
    (`flink_gate.job_export`): the note must not read as a plain SAFE."""
    warned = list((export or {}).get("warnings") or [])
    if not warned:
        return None
    return (f"CAUTION: the jar export guessed {len(warned)} setting(s) that uid-less operators' IDs depend on "
            f"(give the job's parallelism / -D settings; see the report's warnings)")


def check_caveat(check: dict[str, Any]) -> str | None:
    """What a verdict rests on that it did not verify: the jar export's guesses (`export_caveat`), and, for a SAFE,
    state types compared with nothing from the new job (`CheckResult.state_types_compared`; a blocked upgrade is
    blocked whatever the types)."""
    untyped = check.get("state_types_compared") is False and check.get("verdict") == "SAFE"
    said = [c for c in (export_caveat(check.get("export")),
                        "state types not compared (no savepoint of the new job version)" if untyped else None) if c]
    return "; ".join(said) or None


def crash_note(failed_tasks: list[str]) -> str:
    """A failed run with no verdict (a crash, bad input, an upgrade that failed): not to be read as BLOCKED."""
    tasks = ", ".join(failed_tasks) or "a task"
    return clip(f"FAILED, no verdict: {tasks} failed (see the task log); this is not a gate verdict")


def repair_note(verdict: str, offer: dict[str, Any], report_url: str) -> str:
    """`REPAIRABLE: RESTORE_FAILS as it is; the upgrade goes ahead from a repaired savepoint after approval — …`."""
    how = " ".join(offer.get("options") or [])
    return clip(f"REPAIRABLE: {verdict} as it is; the upgrade goes ahead from a repaired savepoint"
                f"{f' ({how})' if how else ''} after approval — report: {report_url}")


def fleet_note(published: dict[str, Any], report_url: str) -> str:
    """`BLOCKED 3 of 4 jobs (fraud-scoring, …), 2 repairable by `upgrade-gate repair`, 12.3 KiB at risk — summary:
    <url>`, or `PASS: …`."""
    jobs = int(published.get("jobs") or 0)
    blocked = list(published.get("blocked") or [])
    unchecked = int(published.get("unchecked") or 0)
    tail = f", {unchecked} not checked" if unchecked else ""
    if not blocked:
        return clip(f"PASS: all {jobs} jobs SAFE{tail} — summary: {report_url}")
    names = ", ".join(blocked[:5]) + (", …" if len(blocked) > 5 else "")
    repairable = int(published.get("repairable") or 0)
    fixable = f", {repairable} repairable by `upgrade-gate repair`" if repairable else ""
    return clip(f"BLOCKED {len(blocked)} of {jobs} jobs ({names}){fixable}, "
                f"{human_bytes(int(published.get('bytes_at_risk') or 0))} at risk{tail} — summary: {report_url}")


def rollout_note(result: dict[str, Any], report_url: str | None) -> str:
    """`BLOCKED at fraud-scoring (gate: …): upgraded [..], left [..] — report: <url>` or `DONE: …`.

    A rollout a gate stopped is an outcome (the run stays green, like the single-job gate); one a
    crash stopped is not, and gets no note: its red task says it."""
    stopped = result.get("stopped_at") or {}
    done = f"upgraded {len(result.get('upgraded') or [])}, checked SAFE {len(result.get('checked_safe') or [])}"
    if not stopped:
        return clip(f"DONE: {done}, no job blocked")
    left = ", ".join(result.get("left") or []) or "none"
    tail = f" — report: {report_url}" if report_url else ""
    return clip(f"BLOCKED at {stopped.get('job')} ({stopped.get('reason')}): {done}; not upgraded: {left}{tail}")

"""flink_rolling_upgrade: upgrade a list of Flink jobs in waves, each gated on zero state loss.

Manual. One canary wave, then batches of N. Each job: newest savepoint → restore simulation →
(upgrade mode, SAFE only) stop-with-savepoint, start the new jar from it, verify the restore.
The rollout stops at the first blocked gate or failed upgrade and reports which jobs were
upgraded, which one stopped it, and which were left. A rollout a gate stopped is not a done one: `outcome`
fails (never retried) with the note "BLOCKED at <job> (gate: …): upgraded N, …; not upgraded: … — report:
<link>" on the task and the run, so the run is red wherever runs are counted; a failed upgrade or a crash
fails the run too, noted "FAILED, no verdict" (flink_gate.listeners), and a finished rollout is green.
With `deferrable` (upgrade mode) a wave's upgrades run at once and their waits for Flink go to the triggerer:
`roll_out` is deferred, holding no worker slot (flink_gate.rolling_deferred; docs/guide.md, "Deferred waits").
Wiring only; see plugins/flink_gate/rolling.py.
"""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import Param, dag, task
from flink_gate import rolling
from flink_gate.dag_parts import CHECK, check_params, deferrable_param, in_section, storage_param, waivers_param
from flink_gate.operators.rolling import RollOutOperator

ROLLOUT = "Rollout: waves, and what each wave does"
JOB_SCHEMA = {
    "type": "object",
    "required": ["job_name", "graph"],
    "properties": {
        "job_name": {"type": "string", "minLength": 1},
        "graph": {"type": "string", "minLength": 1, "description": "new graph spec / plan URI"},
        "jar": {"type": "string"}, "main_class": {"type": "string"}, "flink_job_id": {"type": "string"},
        "flink_jar_id": {"type": "string"}, "savepoint": {"type": "string"}, "parallelism": {"type": "integer"},
        "allow_non_restored_state": {"type": "boolean"},
        "flink_settings": {"type": "array", "items": {"type": "string"},
                           "description": "key=value pairs as `flink run -D`: checked, and given to the new job"},
        "accept_state_loss": {"type": "array", "items": {"type": "string"},
                              "description": "operator uids/names whose state may be dropped (explicitly accepted)"},
        "savepoint_target_dir": {"type": "string", "description": "default: <savepoint root>/<job_name>"},
        "rollback_jar": {"type": "string", "description": "the running version's jar: restarted from the upgrade "
                         "savepoint if the new job does not restore"},
        "rollback_jar_id": {"type": "string"}, "rollback_main_class": {"type": "string"},
        "repair_savepoint": {"type": "boolean", "description": "a blocked upgrade that `upgrade-gate repair` makes "
                             "SAFE goes ahead from a repaired copy of the stop-with-savepoint (written beside it)"},
    },
}


@dag(
    dag_id="flink_rolling_upgrade",
    schedule=None,
    catchup=False,
    max_active_runs=1,
    tags=["flink", "upgrade-gate"],
    description="Upgrade a list of Flink jobs in waves (canary, then batches), each gated on zero state loss; "
                "stops at the first blocked gate",
    doc_md=__doc__,
    params=in_section(CHECK, {
        "jobs": Param([], type="array", items=JOB_SCHEMA, minItems=1, title="Jobs, in rollout order",
                      description='[{"job_name": "orders", "graph": "s3://…/orders.json", "jar": "…", '
                      '"main_class": "…"}, …]'),
        "savepoint_root": Param(None, type=["null", "string"],
                                description="Empty: the Variable upgrade_gate_savepoint_root."),
        **check_params(),
        # one file for the rollout; an entry with `job:` waives a loss of that job only
        "waivers": waivers_param(),
        "aws_conn_id": storage_param(),
    }) | in_section(ROLLOUT, {
        "canary": Param(1, type="integer", minimum=0, title="Canary jobs (first wave)"),
        "batch_size": Param(5, type="integer", minimum=1, title="Jobs per later wave"),
        "mode": Param("check", type="string", enum=["check", "upgrade"],
                      description="check: gate every job, touch nothing. upgrade: upgrade SAFE jobs wave by wave."),
        "state_root": Param(None, type=["null", "string"],
                            description="Upgrade records and per-job leases (s3://bucket/prefix/). Empty: the Variable "
                            "upgrade_gate_state_root, else the local work directory (single worker only)."),
        "deferrable": deferrable_param("Upgrade every job of a wave at once (a wave is gated whole before any of its "
                                       "jobs is touched)"),
        "flink_conn_id": Param("flink_default", type="string"),
        "timeout_s": Param(600, type="integer", minimum=10),
    }),
)
def flink_rolling_upgrade() -> None:
    @task
    def plan_waves(**context) -> list[list[str]]:
        p = context["params"]
        return rolling.plan_waves([j["job_name"] for j in p["jobs"]], p["canary"], p["batch_size"])

    # Retries are safe and needed: an interrupted upgrade resumes from its record; the last failure gives the
    # job leases back (`release_leases`). `deferrable`: the waits go to the triggerer (flink_gate.rolling_deferred)
    roll_out = RollOutOperator(task_id="roll_out", waves=plan_waves(), retries=2, retry_delay=timedelta(seconds=10),
                               on_failure_callback=rolling.release_leases)

    @task(retries=0)
    def outcome(result: dict, **context) -> dict:
        """Say who was upgraded, skipped and left. A gate that stopped the rollout fails the task with the
        BLOCKED note (the run is not done, and reads red); a job whose check or upgrade crashed fails it too."""
        from airflow.sdk.exceptions import AirflowFailException
        from flink_gate.outcome import NOTE_XCOM_KEY, rollout_note

        print(f"upgraded: {result['upgraded']}; checked SAFE: {result['checked_safe']}; "
              f"skipped: {result['skipped']}; left: {result['left']}")
        stopped = result["stopped_at"]
        if stopped and result["jobs"].get(stopped["job"], {}).get("status") != "blocked":
            raise AirflowFailException(f"rollout stopped at {stopped['job']}: {stopped['reason']}; "
                                       f"upgraded {result['upgraded']}, left {result['left']}")
        url = rolling.report_url_of(stopped["job"], context["ti"].run_id) if stopped else None
        note = rollout_note(result, url)
        context["ti"].xcom_push(key=NOTE_XCOM_KEY, value=note)
        if stopped:
            raise AirflowFailException(note)
        return result

    outcome(roll_out.output)


flink_rolling_upgrade()

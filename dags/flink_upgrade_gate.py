"""flink_upgrade_gate: check one Flink job upgrade against its savepoint, and optionally perform it.

Manual (`schedule=None`), triggered from the Airflow UI's form. Wiring only; the steps live in
`plugins/flink_gate/steps.py` and every Flink rule in the core.

    check ── gate ── decide ─┬─ approve (HITL) ─────┬─ upgrade ── verify
                             └─ no_approval_needed ─┘     ⇅          ⇅      deferrable: while Flink writes the
                                                     FlinkWaitsTrigger (triggerer)   savepoint / restores the job

`check` fetches the savepoint and the new graph (a jar is exported by real Flink), computes the operator IDs,
simulates the restore and publishes the report in one task: as five tasks, Airflow's task start-up was most of
the wait for a verdict (docs/performance.md, "Gate: trigger to verdict").

A blocked upgrade is not a done one: `gate` alerts, then *fails* (never retried), nothing after it runs and
the run ends failed, with the note "BLOCKED: STATE_MISROUTED, 4.8 KiB at risk — report: …" on the gate task
and the run (written by the plugin's listener). A crash fails another task and its run is noted "FAILED, no
verdict: <task> failed". SAFE is green. Bad input (no graph, a savepoint path that names nothing, a
malformed spec) fails `check` once, without retries; storage timeouts and 5xx keep their retries.

With `deferrable` (upgrade mode) `upgrade` and `verify` hold no worker slot while Flink writes the
stop-with-savepoint or the new job restores: they are deferred to `FlinkWaitsTrigger` and resume from the job's
upgrade record (flink_gate.operators.upgrade; docs/guide.md, "Deferred waits").
"""

from __future__ import annotations

from datetime import timedelta

from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.providers.standard.operators.hitl import ApprovalOperator
from airflow.sdk import Param, dag, task
from flink_gate import steps
from flink_gate.dag_parts import (
    CHECK,
    UPGRADE,
    check_params,
    deferrable_param,
    flip411_params,
    in_section,
    job_settings_params,
    notifiers,
    storage_param,
    waivers_param,
)
from flink_gate.failures import fail_once_on_bad_input
from flink_gate.gate import FROM_CATALOGUE
from flink_gate.operators.gate import FlinkUpgradeGateOperator
from flink_gate.operators.upgrade import UpgradeStepOperator

PARAMS = in_section(CHECK, {
    "job_name": Param("orders-enrichment", type="string", minLength=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
                      title="Flink job", description="The job's name: names its savepoint prefix, its report "
                      "and (for an upgrade) the running Flink job."),
    "savepoint": Param("latest", type="string", minLength=1, title="Savepoint",
                       description="One of: s3://bucket/prefix/savepoint-… or a file:// path (a savepoint or "
                       "checkpoint directory, or its _metadata); `latest`: the newest complete savepoint under "
                       "<savepoint root>/<job>/; `latest?job-id=<JobID>`: that Flink job's newest snapshot in a flat "
                       "root; `latest:<dir>?job-id=<JobID>`: the same under another directory; "
                       "`flink-rest://host:port/<job name or id>`: what the running job last completed; "
                       "`k8s:<FlinkDeployment>.yaml`: the snapshot the Kubernetes operator recorded."),
    "savepoint_root": Param(None, type=["null", "string"], title="Savepoint root",
                            description="Prefix that holds one folder per job (used with `latest`). Empty: the "
                            "Airflow Variable upgrade_gate_savepoint_root."),
    # never empty (the form refuses it before a run starts): a URI, `catalogue` or `jar`
    "graph": Param(FROM_CATALOGUE, type="string", minLength=1, title="New job graph", section=CHECK,
                   description="URI of the new job's graph spec (docs/graph-spec.md) or Flink execution plan JSON; "
                   "`catalogue`: <job>.json in the Airflow Variable upgrade_gate_catalogue (what the fleet scan "
                   "checks); `jar`: export it from the job jar below."),
    "jar": Param(None, type=["null", "string"], title="Job jar",
                 description="The new job jar (path or URI). Used to export the graph when no graph is given, and "
                 "uploaded to Flink when the upgrade is performed."),
    "main_class": Param(None, type=["null", "string"], title="Main class", description="Entry class (default: the jar "
                        "manifest's Main-Class)."),
    **check_params(section=CHECK, flip411=False),
    **job_settings_params(section=CHECK),
    "waivers": waivers_param(section=CHECK),
    "aws_conn_id": storage_param(section=CHECK),
}) | in_section(UPGRADE, {
    "mode": Param("check", type="string", enum=["check", "upgrade"], title="Mode",
                  description="check: simulate and report only. upgrade: after a SAFE verdict, stop the job with a "
                  "savepoint and start the new jar from it."),
    "require_approval": Param(True, type="boolean", title="Require human approval",
                              description="Upgrade mode: wait for an Approve in the Airflow UI before touching "
                              "the running job."),
    "flink_job_id": Param(None, type=["null", "string"], title="Running Flink job id",
                          description="Upgrade mode: the job to replace (default: the RUNNING job named as above)."),
    "flink_jar_id": Param(None, type=["null", "string"], title="Uploaded jar id",
                          description="Upgrade mode: a jar already uploaded to Flink (skips the upload)."),
    "savepoint_target_dir": Param(None, type=["null", "string"], title="Savepoint target directory",
                                  description="Upgrade mode: where Flink writes the stop-with-savepoint "
                                  "(default: the cluster's state.savepoints.dir)."),
    "rollback_jar": Param(None, type=["null", "string"], title="Rollback jar",
                          description="Upgrade mode: the running version's jar, restarted from the upgrade savepoint "
                          "if the new job does not restore (without it a failed restore needs an operator)."),
    "rollback_main_class": Param(None, type=["null", "string"], title="Rollback main class"),
    "repair_savepoint": Param(False, type="boolean", title="Repair a blocked upgrade",
                              description="Upgrade mode: when the gate blocks but `upgrade-gate repair` would make "
                              "the upgrade SAFE (the report says so), stop the job with a savepoint, write a "
                              "repaired copy beside it (the savepoint itself is never modified), check it and start "
                              "the new job from the copy. Asks for approval like any upgrade."),
    "state_root": Param(None, type=["null", "string"], title="Upgrade records",
                        description="Where upgrade records and per-job leases live (s3://bucket/prefix/). Empty: the "
                        "Variable upgrade_gate_state_root; if that is empty too, the local work directory "
                        "(single worker only)."),
    "deferrable": deferrable_param("Stop the job and start the new version as usual, but wait for the savepoint "
                                   "and the restore in the triggerer (`upgrade` and `verify` show as deferred)"),
    "flink_conn_id": Param("flink_default", type="string", title="Flink REST connection"),
    "timeout_s": Param(600, type="integer", minimum=10, title="Flink operation timeout (s)"),
}) | flip411_params()



@dag(
    dag_id="flink_upgrade_gate",
    schedule=None,
    catchup=False,
    tags=["flink", "upgrade-gate"],
    params=PARAMS,
    description="Check one Flink job's upgrade against its savepoint (verdict + report), and optionally "
                "perform it after a SAFE verdict",
    doc_md=__doc__,
    # a person is waiting on a manual gate: its tasks go before the nightly fleet scan's when slots are short
    # (absolute weights: Airflow's default sums the downstream tasks, which favours the scan's long chains)
    default_args={"retries": 2, "retry_delay": timedelta(seconds=10), "priority_weight": 100,
                  "weight_rule": "absolute"},
    max_active_runs=4,
)
def flink_upgrade_gate() -> None:
    @task
    def check(**context) -> dict:
        with fail_once_on_bad_input():
            return steps.check(context)

    @task.branch
    def decide(**context) -> list[str] | None:
        return steps.decide(context)

    gate = FlinkUpgradeGateOperator(task_id="gate", check=check(), notifiers=notifiers())
    approve = ApprovalOperator(
        task_id="approve",
        subject="Upgrade Flink job {{ params.job_name }}?",
        body="{{ ti.xcom_pull(task_ids='gate')['approval'] }} Report: "
             "{{ ti.xcom_pull(task_ids='check')['report_url'] }}",
        response_timeout=timedelta(hours=24),
        on_success_callback=steps.approval_note,  # "REJECTED by <who> at <when>" on the run
    )
    no_approval = EmptyOperator(task_id="no_approval_needed")
    # Retries are safe: the upgrade resumes from its record in the object store and the cluster. `deferrable`: the
    # waits for Flink go to the triggerer (flink_gate.operators.upgrade)
    upgraded = UpgradeStepOperator(task_id="upgrade", step="upgrade", trigger_rule="none_failed_min_one_success",
                                   retries=2, on_failure_callback=steps.release_lease)

    gate >> decide() >> [approve, no_approval] >> upgraded
    UpgradeStepOperator(task_id="verify", step="verify", upgraded=upgraded.output, retries=2)


flink_upgrade_gate()

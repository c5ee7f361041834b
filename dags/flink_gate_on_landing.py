"""flink_gate_on_landing: run the upgrade gate by itself when a new graph spec or savepoint lands in object storage.

A gate that runs only when someone triggers it misses the graph pushed at 2 a.m. This DAG is scheduled on two
assets, each with an `AssetWatcher` whose trigger (`flink_gate.triggers.object_landed.ObjectLandedTrigger`)
lists a prefix from Airflow's triggerer and fires once per object newly written there:

* the fleet catalogue (Airflow Variable `upgrade_gate_catalogue`): `<job>.json` / `.yaml` directly under it;
* the savepoint root (Variable `upgrade_gate_savepoint_root`): `<job>/<savepoint-…>/_metadata`.

    landed_jobs ── gate_job[job] (mapped: one per job that landed): check ── gate

`landed_jobs` maps each landed key to its job by the bucket layout (`flink_gate.landing`); each job is then
checked by the very tasks of `flink_upgrade_gate` (`flink_gate.steps.check`, `FlinkUpgradeGateOperator`),
check only: same verdict, report, alert and note ("BLOCKED: STATE_MISROUTED, … — report: …") as the manual gate. It
never upgrades: a person does that from `flink_upgrade_gate`. The prefixes are read when the file is parsed;
with neither Variable set the DAG has no schedule and runs only when triggered with `landed` URIs.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import Asset, AssetAny, AssetWatcher, Param, Variable, dag, task, task_group
from flink_gate import steps
from flink_gate.dag_parts import (
    CHECK,
    check_params,
    flip411_params,
    in_section,
    notifiers,
    storage_param,
    waivers_param,
)
from flink_gate.failures import fail_once_on_bad_input
from flink_gate.landing import SPEC_SUFFIXES, jobs_landed, log
from flink_gate.operators.gate import FlinkUpgradeGateOperator
from flink_gate.triggers.object_landed import ObjectLandedTrigger


def _setting(name: str, default: str = "") -> str:
    """An Airflow Variable at parse time (the watchers' prefixes must be known when the DAG is serialised)."""
    try:
        return str(Variable.get(name, default=default) or default).strip()
    except Exception:  # no metadata database reachable (e.g. a lint-only parse): no watcher
        return default


CATALOGUE = _setting("upgrade_gate_catalogue").rstrip("/")
SAVEPOINT_ROOT = _setting("upgrade_gate_savepoint_root").rstrip("/")
WATCH_CONN = _setting("upgrade_gate_watch_conn_id", "aws_default")
POLL_S = float(_setting("upgrade_gate_watch_interval_s", "60"))


def _watched(name: str, prefix: str, **trigger: Any) -> Asset | None:
    if not prefix.startswith("s3://"):
        return None
    return Asset(name=name, uri=f"{prefix}/", watchers=[AssetWatcher(
        name=f"{name}_landed", trigger=ObjectLandedTrigger(prefix=f"{prefix}/", aws_conn_id=WATCH_CONN,
                                                            poll_interval=POLL_S, **trigger))])


ASSETS = [a for a in (
    _watched("flink_graph_specs", CATALOGUE, suffixes=SPEC_SUFFIXES, top_level=True),
    _watched("flink_savepoints", SAVEPOINT_ROOT, suffixes=("/_metadata",)),
) if a is not None]

PARAMS = in_section(CHECK, {
    "landed": Param([], type="array", items={"type": "string"}, title="Landed objects",
                    description="A manual run only: s3:// URIs to gate as if they had just landed (a graph spec in "
                    "the catalogue or a savepoint's _metadata). An asset-triggered run gates the objects that "
                    "landed."),
    **check_params(section=CHECK, flip411=False),
    "waivers": waivers_param(section=CHECK),
    "aws_conn_id": storage_param(section=CHECK),
}) | flip411_params()


def _for_job(context: Any, landing: dict[str, Any]) -> dict[str, Any]:
    """The task context with the job's params laid over the DAG's: the form a manual gate run gets."""
    params = {**dict(context["params"]), "mode": "check",
              **{k: v for k, v in landing.items() if k != "landed"}}
    return {**context, "params": params}


@dag(
    dag_id="flink_gate_on_landing",
    schedule=AssetAny(*ASSETS) if ASSETS else None,
    catchup=False,
    tags=["flink", "upgrade-gate"],
    params=PARAMS,
    description="Check a job's upgrade by itself when its new graph spec or a savepoint lands in object storage",
    doc_md=__doc__,
    default_args={"retries": 2, "retry_delay": timedelta(seconds=10)},
    max_active_runs=4,
)
def flink_gate_on_landing() -> None:
    @task
    def landed_jobs(**context) -> list[dict[str, Any]]:
        """The jobs the landed objects belong to; objects the layout names no job for are logged and left."""
        uris = list(context["params"].get("landed") or ())
        for events in (context.get("triggering_asset_events") or {}).values():
            uris += [str(e.extra["payload"]["uri"]) for e in events
                     if isinstance((e.extra or {}).get("payload"), dict) and e.extra["payload"].get("uri")]
        jobs, unknown = jobs_landed(uris, CATALOGUE, SAVEPOINT_ROOT)
        for uri in unknown:
            log.warning("%s names no job (catalogue %s/<job>.json, savepoints %s/<job>/<savepoint>/_metadata):"
                              " not gated", uri, CATALOGUE or "unset", SAVEPOINT_ROOT or "unset")
        for job in jobs:
            log.info("%s: landed %s -> graph %s, savepoint %s", job["job_name"], ", ".join(job["landed"]),
                           job["graph"], job["savepoint"])
        return jobs

    @task
    def check(landing: dict[str, Any], **context) -> dict:
        with fail_once_on_bad_input():
            return steps.check(_for_job(context, landing))

    @task_group
    def gate_job(landing: dict[str, Any]) -> None:
        FlinkUpgradeGateOperator(task_id="gate", check=check(landing), notifiers=notifiers())

    gate_job.expand(landing=landed_jobs())


flink_gate_on_landing()

"""Registers the upgrade gate with the Airflow 3 API server, UI and scheduler.

* the FastAPI app (the report view) at `/upgrade-gate`; the external view puts "Upgrade gate" in
  the Browse menu and shows the app inside the Airflow UI (at `/plugin/upgrade-gate`);
* the "Upgrade report" operator extra link of the gate tasks (`flink_gate.links`);
* the DAG-run listener that writes each gate's verdict into the task and run notes
  (`flink_gate.listeners`: "BLOCKED: STATE_MISROUTED, 4.8 KiB at risk — report: …").
"""

from __future__ import annotations

from typing import Any, ClassVar

from airflow.plugins_manager import AirflowPlugin
from flink_gate import listeners as note_listener
from flink_gate.links import UpgradeReportLink
from flink_gate.views.app import URL_PREFIX, app


class FlinkUpgradeGatePlugin(AirflowPlugin):
    name = "flink_upgrade_gate"
    fastapi_apps: ClassVar[list[dict[str, Any]]] = [
        {"app": app, "url_prefix": URL_PREFIX, "name": "Flink upgrade gate reports"}]
    external_views: ClassVar[list[dict[str, Any]]] = [{
        "name": "Upgrade gate",
        "href": f"{URL_PREFIX}/",
        "destination": "nav",
        "category": "browse",
        "url_route": "upgrade-gate",
    }]
    operator_extra_links: ClassVar[list[Any]] = [UpgradeReportLink()]
    listeners: ClassVar[list[Any]] = [note_listener]

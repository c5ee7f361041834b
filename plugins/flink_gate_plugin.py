"""Registers the upgrade-gate view with the Airflow 3 API server and UI.

The FastAPI app is mounted at `/upgrade-gate`; the external view puts "Upgrade gate" in the
Browse menu and shows the app inside the Airflow UI (at `/plugin/upgrade-gate`).
"""

from __future__ import annotations

from typing import Any, ClassVar

from airflow.plugins_manager import AirflowPlugin
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

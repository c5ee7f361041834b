"""Airflow glue for Flink Upgrade Gate, laid out like an Airflow provider package.

* `hooks/`: connections and clients (object storage for savepoints and graphs, Flink REST).
* `operators/`: thin operators with `template_fields` (the gate).
* `notifications/`: small `BaseNotifier` classes (HTTP webhook, Slack webhook, SMTP).
* `views/`: the FastAPI app behind the "Upgrade gate reports" view in the Airflow UI.
* `alerts.py`, `reports.py`, `gate.py`: plain Python (no Airflow import) that turns the core's
  `CheckResult` into alert text and published reports, so it is testable without a scheduler.

Every Flink rule lives in the core (`hashing/`, `restore/`); nothing here re-derives one.
"""

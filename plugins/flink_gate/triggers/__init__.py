"""Triggers of the upgrade gate: each runs in Airflow's triggerer, not in a worker slot; they wait and watch, never act.

* `flink_waits.FlinkWaitsTrigger`: a deferred rolling upgrade waiting on savepoints and restores
  (docs/guide.md, "Deferred waits").
* `object_landed.ObjectLandedTrigger`: the asset watcher of the asset-driven gate
  (docs/guide.md, "The asset-driven gate").
"""

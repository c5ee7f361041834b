"""Triggers of the upgrade gate: each runs in Airflow's triggerer, not in a worker slot."""

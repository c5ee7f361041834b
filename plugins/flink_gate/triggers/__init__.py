"""Triggers: what the triggerer runs while a task is deferred (no worker slot held); they wait, never act."""

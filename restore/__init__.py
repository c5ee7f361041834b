"""Flink's restore rules: `_metadata` reading, state assignment, verdicts and reports."""

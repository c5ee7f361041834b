"""The gate's own judgement on top of Flink's rules: the verdict, misrouted state, remedies."""

__all__ = ["check", "findings", "misrouting", "policy", "remedies", "state_schema_rules"]

"""The gate's own judgement on top of Flink's rules: the verdict, misrouted state, remedies."""

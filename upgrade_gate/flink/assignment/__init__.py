"""Flink's restore-time state assignment, rule for rule, in pure Python.

One module per Flink class, under Flink's names, so a Flink engineer can check each rule:
`load_validation` (`Checkpoints.loadAndValidateCheckpoint`), `job` (`ExecutionJobVertex` and its
max-parallelism rules), `task_state_assignment` (`TaskStateAssignment`: the per-vertex and
per-operator restore record), `finished_state` (`VertexFinishedStateChecker`), `state_assignment`
(`StateAssignmentOperation`), `operator_state_repartitioner` (`RoundRobinOperatorStateRepartitioner`),
`keyed_state` (key-group redistribution), `channel_state` (unaligned-checkpoint state) and
`errors` (Flink's exception texts).

Dependencies run one way (tests/test_architecture.py keeps it so): `errors`, `job`, `keyed_state` and
`operator_state_repartitioner` import no sibling; `load_validation` needs `errors` and `job`;
`task_state_assignment` (the records) builds on the first four; `channel_state` and `finished_state`
read the records; `state_assignment` imports them all. The package itself imports nothing, so
importing one rule does not load the others. Each rule has a direct test in tests/flink/.
"""

__all__ = ["channel_state", "errors", "finished_state", "job", "keyed_state", "load_validation",
           "operator_state_repartitioner", "state_assignment", "task_state_assignment"]

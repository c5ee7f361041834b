"""Flink's restore-time state assignment, rule for rule, in pure Python.

One module per Flink class, under Flink's names, so a Flink engineer can check each rule:
`load_validation` (`Checkpoints.loadAndValidateCheckpoint`), `finished_state`
(`VertexFinishedStateChecker`), `state_assignment` (`StateAssignmentOperation` +
`TaskStateAssignment`), `operator_state_repartitioner` (`RoundRobinOperatorStateRepartitioner`),
`keyed_state` (key-group redistribution), `channel_state` (unaligned-checkpoint state).
"""

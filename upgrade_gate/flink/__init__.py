"""Flink's own restore rules, under Flink's names: `_metadata` reading (`metadata`), state
assignment (`assignment`, mirroring `StateAssignmentOperation` and its checkers) and the
simulation that runs them for a new job graph (`simulation`). Nothing here judges an upgrade;
that is `upgrade_gate.gate`."""

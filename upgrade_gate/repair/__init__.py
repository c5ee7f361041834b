"""Savepoint repair: write a NEW savepoint that the new job restores completely.

The gate says why an upgrade loses state; this layer changes the savepoint instead of the job: the state an
operator wrote moves to the operator ID the new job gives its counterpart (what Flink's State Processor API
`SavepointWriter#changeOperatorIdentifier` does, coordinator state included), and state the user gives up is
dropped by name instead of by `allowNonRestoredState`. The source savepoint is never modified: the storage
layer writes only to a destination that does not exist yet (`upgrade_gate/storage/savepoint_writer.py`).

* `plan.py`: which savepoint operator goes to which new operator, with the evidence; what is dropped; what
  cannot be decided without the user (`--map`).
* `rewrite.py`: the repaired `CheckpointMetadata` (IDs, names, uids; dropped operators and states).
* `run.py`: plan, check the repaired metadata in memory, write it with its state files, read it back and
  check it again: a repair that would not be SAFE is never written.

docs/design.md, "Repair", and docs/guarantees.md list what is promised and which tests prove it.
"""

"""Flink Upgrade Gate: will this Flink upgrade restore every byte of state?

Layers, each importing only the ones before it (docs/design.md):

* `hashing` (top level): Flink's identity rules, operator IDs and key groups;
* `upgrade_gate.flink`: Flink's restore rules (`_metadata` read and written, canonical keyed state, state
  assignment, simulation);
* `upgrade_gate.gate`: our judgement over parsed inputs (`CheckInputs`; the rule chain, findings, the verdict,
  misrouting, remedies, policy), with no I/O;
* `upgrade_gate.storage`: savepoints (read-only; a repaired one written only to a new location), objects (graphs,
  reports), and every input of a check read into a `CheckInputs` (`storage.check_inputs`);
* `upgrade_gate.repair`: a new savepoint the new job restores completely (plans, rewrite, max parallelism);
* `upgrade_gate.report`: rendering (the HTML report and fleet page, a check as text, terminal tables), from
  arguments only: it reads no savepoint, state file or graph;
* `upgrade_gate.cli`: delivery (the `upgrade-gate` command: arguments and wiring).
"""

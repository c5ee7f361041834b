"""What each Flink release does when a job's State TTL changed between the savepoint and the new job: one table,
every entry established by a real restore.

Flink keeps no TTL setting in a savepoint except the serializer it implies: a state with TTL is written by
`TtlStateFactory$TtlSerializer` (the value and its last-access timestamp; for list and map state the element or
map value is wrapped), so turning TTL on or off replaces a serializer snapshot, and a changed duration changes
nothing the savepoint records. Whether the new job's serializer resolves as compatible with the old one is the
release's choice: FLINK-37295 (Flink 2.x) lets the TTL-aware serializer migrate across the switch. The table below
says what real Flink did, per release line, state kind and backend: job A's savepoint restored by job B of the
same release with one state's TTL changed and every restored value read back and compared (TtlChanges.java,
`python -m flink_bridge.generate_savepoints --ttl-changes`, recorded in
tests/fixtures/savepoints/state-schemas/ttl/outcomes.json). A combination not in the table (another release
line, a reducing or aggregating state, a savepoint written by another release line) is judged incompatible and
said to be "not verified on this release" (docs/guide.md, "State TTL by Flink release").
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from hashing.versions import FlinkVersion

__all__ = ["TTL_RULES", "TtlOutcome", "TtlRule", "ttl_rule"]


class TtlOutcome(StrEnum):
    """What the recorded restore did."""

    RESTORES = "restores"  # RUNNING, every restored value read back equal to what job A wrote
    FAILS = "fails"  # the restore failed (the scenario's recorded status holds Flink's exception)


@dataclass(frozen=True, slots=True)
class TtlRule:
    """One entry: the outcome and the recorded restore that established it (`<release>/<backend>/<scenario>`,
    a row of state-schemas/ttl/outcomes.json)."""

    outcome: TtlOutcome
    scenario: str


R, F = TtlOutcome.RESTORES, TtlOutcome.FAILS

# (release line, change, state kind, backend) -> rule. change: off-on (TTL turned on), on-off (turned off),
# duration (1 day -> 2 days). The scenario names are those of outcomes.json.
TTL_RULES: dict[tuple[str, str, str, str], TtlRule] = {
    ("1.20", "off-on", "value", "hashmap"): TtlRule(F, "1.20.5/hashmap/ttl-off-on-value"),
    ("1.20", "off-on", "list", "hashmap"): TtlRule(F, "1.20.5/hashmap/ttl-off-on-list"),
    ("1.20", "off-on", "map", "hashmap"): TtlRule(F, "1.20.5/hashmap/ttl-off-on-map"),
    ("1.20", "on-off", "value", "hashmap"): TtlRule(F, "1.20.5/hashmap/ttl-on-off-value"),
    ("1.20", "on-off", "list", "hashmap"): TtlRule(F, "1.20.5/hashmap/ttl-on-off-list"),
    ("1.20", "on-off", "map", "hashmap"): TtlRule(F, "1.20.5/hashmap/ttl-on-off-map"),
    ("1.20", "duration", "value", "hashmap"): TtlRule(R, "1.20.5/hashmap/ttl-duration-value"),
    ("1.20", "duration", "list", "hashmap"): TtlRule(R, "1.20.5/hashmap/ttl-duration-list"),
    ("1.20", "duration", "map", "hashmap"): TtlRule(R, "1.20.5/hashmap/ttl-duration-map"),
    ("1.20", "off-on", "value", "rocksdb"): TtlRule(F, "1.20.5/rocksdb/ttl-off-on-value"),
    ("1.20", "off-on", "list", "rocksdb"): TtlRule(F, "1.20.5/rocksdb/ttl-off-on-list"),
    ("1.20", "off-on", "map", "rocksdb"): TtlRule(F, "1.20.5/rocksdb/ttl-off-on-map"),
    ("1.20", "on-off", "value", "rocksdb"): TtlRule(F, "1.20.5/rocksdb/ttl-on-off-value"),
    ("1.20", "on-off", "list", "rocksdb"): TtlRule(F, "1.20.5/rocksdb/ttl-on-off-list"),
    ("1.20", "on-off", "map", "rocksdb"): TtlRule(F, "1.20.5/rocksdb/ttl-on-off-map"),
    ("1.20", "duration", "value", "rocksdb"): TtlRule(R, "1.20.5/rocksdb/ttl-duration-value"),
    ("1.20", "duration", "list", "rocksdb"): TtlRule(R, "1.20.5/rocksdb/ttl-duration-list"),
    ("1.20", "duration", "map", "rocksdb"): TtlRule(R, "1.20.5/rocksdb/ttl-duration-map"),
    ("2.3", "off-on", "value", "hashmap"): TtlRule(R, "2.3.0/hashmap/ttl-off-on-value"),
    ("2.3", "off-on", "list", "hashmap"): TtlRule(R, "2.3.0/hashmap/ttl-off-on-list"),
    ("2.3", "off-on", "map", "hashmap"): TtlRule(R, "2.3.0/hashmap/ttl-off-on-map"),
    ("2.3", "on-off", "value", "hashmap"): TtlRule(R, "2.3.0/hashmap/ttl-on-off-value"),
    ("2.3", "on-off", "list", "hashmap"): TtlRule(R, "2.3.0/hashmap/ttl-on-off-list"),
    ("2.3", "on-off", "map", "hashmap"): TtlRule(R, "2.3.0/hashmap/ttl-on-off-map"),
    ("2.3", "duration", "value", "hashmap"): TtlRule(R, "2.3.0/hashmap/ttl-duration-value"),
    ("2.3", "duration", "list", "hashmap"): TtlRule(R, "2.3.0/hashmap/ttl-duration-list"),
    ("2.3", "duration", "map", "hashmap"): TtlRule(R, "2.3.0/hashmap/ttl-duration-map"),
    ("2.3", "off-on", "value", "rocksdb"): TtlRule(R, "2.3.0/rocksdb/ttl-off-on-value"),
    ("2.3", "off-on", "list", "rocksdb"): TtlRule(R, "2.3.0/rocksdb/ttl-off-on-list"),
    ("2.3", "off-on", "map", "rocksdb"): TtlRule(R, "2.3.0/rocksdb/ttl-off-on-map"),
    ("2.3", "on-off", "value", "rocksdb"): TtlRule(R, "2.3.0/rocksdb/ttl-on-off-value"),
    ("2.3", "on-off", "list", "rocksdb"): TtlRule(R, "2.3.0/rocksdb/ttl-on-off-list"),
    ("2.3", "on-off", "map", "rocksdb"): TtlRule(R, "2.3.0/rocksdb/ttl-on-off-map"),
    ("2.3", "duration", "value", "rocksdb"): TtlRule(R, "2.3.0/rocksdb/ttl-duration-value"),
    ("2.3", "duration", "list", "rocksdb"): TtlRule(R, "2.3.0/rocksdb/ttl-duration-list"),
    ("2.3", "duration", "map", "rocksdb"): TtlRule(R, "2.3.0/rocksdb/ttl-duration-map"),
}


def ttl_rule(version: FlinkVersion, change: str, kind: str, backend: str) -> TtlRule | None:
    """The recorded rule for a restore by `version`, or None: not verified on this release."""
    return TTL_RULES.get((str(version), change, kind, backend))

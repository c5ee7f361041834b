"""The words every layer shares, defined once: verdicts, hashers, matching modes, Flink versions.

The CLI's argparse `choices`, the Spark jobs' flags, the DAGs' `Param` enums, the alerts and the
report colours all read these names from here, so a new verdict or Flink line is added in one
place (docs/design.md, "One vocabulary").
"""

from __future__ import annotations

from enum import StrEnum

from hashing.hashers import HASHERS as _HASHER_CLASSES
from hashing.versions import DEFAULT as DEFAULT_FLINK_VERSION
from hashing.versions import SUPPORTED as FLINK_VERSIONS
from upgrade_gate.flink.assignment.state_assignment import MATCHING_MODES

__all__ = ["DEFAULT_FLINK_VERSION", "DEFAULT_HASHER", "DEFAULT_MATCHING", "FLINK_VERSIONS", "HASHERS",
           "MATCHING_MODES", "Verdict"]

HASHERS: tuple[str, ...] = tuple(_HASHER_CLASSES)
DEFAULT_HASHER = "v2"
DEFAULT_MATCHING = MATCHING_MODES[0]


class Verdict(StrEnum):
    """The outcome of a check. A `StrEnum`, so JSON, XCom and Spark columns keep the plain names.

    Severity orders the verdicts (higher is worse). Misrouting ranks above loss because it is
    silent twice over: the job runs, and an operator works on another operator's data. Corruption
    (state whose bytes the new Flink misreads) ranks above both: the state arrives at the right
    operator and is wrong."""

    SAFE = "SAFE"
    STATE_LOSS = "STATE_LOSS"
    STATE_MISROUTED = "STATE_MISROUTED"
    STATE_CORRUPTED = "STATE_CORRUPTED"
    RESTORE_FAILS = "RESTORE_FAILS"

    @property
    def severity(self) -> int:
        return _SEVERITY[self]

    @property
    def blocks(self) -> bool:
        """Does this verdict stop an upgrade unless its losses are accepted by name (`gate.policy`)?"""
        return self is not Verdict.SAFE

    @property
    def meaning(self) -> str:
        """One sentence for people: what happens if the upgrade goes ahead anyway."""
        return _MEANING[self]

    @property
    def outcome(self) -> str:
        """What the upgrade would do, for a headline ("the upgrade would fail to restore"): the alerts' titles."""
        return _OUTCOME[self]

    @classmethod
    def worst_first(cls) -> tuple[Verdict, ...]:
        return tuple(sorted(cls, key=lambda v: -v.severity))

    @classmethod
    def mildest_first(cls) -> tuple[Verdict, ...]:
        return tuple(sorted(cls, key=lambda v: v.severity))


_SEVERITY = {Verdict.SAFE: 0, Verdict.STATE_LOSS: 1, Verdict.STATE_MISROUTED: 2, Verdict.STATE_CORRUPTED: 3,
             Verdict.RESTORE_FAILS: 4}
_OUTCOME = {Verdict.SAFE: "would restore every state", Verdict.STATE_LOSS: "would lose state",
            Verdict.STATE_MISROUTED: "would restore state into the wrong operator",
            Verdict.STATE_CORRUPTED: "would restore state corrupted", Verdict.RESTORE_FAILS: "would fail to restore"}
_MEANING = {
    Verdict.SAFE: "The savepoint restores into the new job and every byte of state lands on an operator.",
    Verdict.STATE_LOSS: "The restore succeeds, but state is dropped or reset.",
    Verdict.STATE_MISROUTED: "The restore succeeds, but some state lands on an operator that did not write it.",
    Verdict.STATE_CORRUPTED: "The new Flink reads some state back wrong: the job runs on corrupted values, or fails "
                             "when it reads them.",
    Verdict.RESTORE_FAILS: "Flink will refuse to start the new job from this savepoint.",
}

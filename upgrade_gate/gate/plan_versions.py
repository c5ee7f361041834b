"""Will this Flink release execute this compiled plan (FLIP-190 `EXECUTE PLAN`)?

A compiled plan records the release that wrote it (`"flinkVersion": "1.20"`) and, per ExecNode, its type and
version (`stream-exec-sink_2`). The planner reads `flinkVersion` with `FlinkVersion.byCode` and refuses a code
its own `FlinkVersion` enum does not have (`FlinkVersionJsonDeserializer`: "Unknown Flink version '2.3'"), so
a release cannot run a plan of a newer one. Older plans it runs: every release keeps the ExecNode versions of
the releases before it (`@ExecNodeMetadata`; 2.3 writes `stream-exec-sink_2` but still reads `_1`).

Measured with real Flink (flink_bridge/plan_versions.py -> tests/fixtures/plan_versions/acceptance.json): each
of 1.19.3, 1.20.5, 2.0.2, 2.1.3, 2.2.1 and 2.3.0 compiled the same job, and each release ran every plan.
Every release executed the plans of its own and of every earlier release (1.19 -> 2.3 included: the 2.0 major
release kept them), and refused every newer one with `ValidationException: Unknown Flink version '<x.y>'`.
FLIP-190 itself promises less (a plan of one release restores in the next); older plans outside the measured
range (before 1.19) are reported as not measured. Whether the plan's *operators* keep their state is the
restore check's business (`upgrade-gate check` with the graph `export --compiled-plan` builds).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hashing.errors import InputError
from hashing.versions import PATCH_RELEASES

__all__ = ["MEASURED", "PlanVersionCheck", "check", "plan_flink_version"]

# the releases whose plans every later measured release executed (tests/fixtures/plan_versions/acceptance.json)
MEASURED = tuple(PATCH_RELEASES)  # every installed release (hashing/versions.py)


@dataclass(frozen=True)
class PlanVersionCheck:
    plan_version: str
    target: str
    accepted: bool
    measured: bool  # both versions are in the measured range
    reason: str
    flink_error: str | None = None  # what Flink says when it refuses the plan

    def to_json(self) -> dict[str, Any]:
        return {"plan_version": self.plan_version, "target": self.target, "accepted": self.accepted,
                "measured": self.measured, "reason": self.reason, "flink_error": self.flink_error}


def _key(version: str) -> tuple[int, int]:
    parts = version.strip().split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        raise InputError(f"{version!r}: not a Flink version (expected major.minor, e.g. 1.20)") from None


def plan_flink_version(plan: dict[str, Any]) -> str:
    """The `flinkVersion` of a compiled plan (its top-level field, as `JsonPlanGraph` writes it)."""
    version = plan.get("flinkVersion") if isinstance(plan, dict) else None
    if not isinstance(version, str) or not version:
        raise InputError("not a compiled plan: no \"flinkVersion\" field (COMPILE PLAN writes one)")
    return version


def check(plan_version: str, target: str) -> PlanVersionCheck:
    """Whether Flink `target` ("2.3", "2.3.0") executes a plan compiled by Flink `plan_version` ("1.20")."""
    plan_line = "{}.{}".format(*_key(plan_version))
    target_line = "{}.{}".format(*_key(target))
    measured = plan_line in MEASURED and target_line in MEASURED
    if _key(plan_line) > _key(target_line):
        return PlanVersionCheck(
            plan_line, target_line, False, measured,
            f"a plan compiled by Flink {plan_line} does not run on the older Flink {target_line}: its planner does "
            f"not know that version. Compile the plan with Flink {target_line} (or older), or run Flink "
            f"{plan_line} or newer",
            flink_error=f"org.apache.flink.table.api.ValidationException: Unknown Flink version '{plan_line}'")
    if plan_line == target_line:
        return PlanVersionCheck(plan_line, target_line, True, measured, f"compiled by Flink {plan_line} itself")
    if not measured:
        return PlanVersionCheck(plan_line, target_line, True, False,
                                f"not measured: Flink {target_line} knows version {plan_line}, but whether it still "
                                f"has every ExecNode version of this plan was measured only for plans of "
                                f"{MEASURED[0]} and newer")
    return PlanVersionCheck(plan_line, target_line, True, True,
                            f"Flink {target_line} executes plans compiled by every earlier release from {MEASURED[0]} "
                            f"(measured); the plan's operators keep their uids, so state restores as the restore "
                            f"check says")

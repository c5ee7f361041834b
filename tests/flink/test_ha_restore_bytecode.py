"""The Kubernetes operator's `last-state` rule (`upgrade_gate.gate.upgrade_modes`), read from every release's own
bytecode: a checkpoint recovered through HA metadata is restored with `allowNonRestoredState` false, and every
operator it holds, empty or not, must exist in the new job.

FLINK-39513 changes `CheckpointCoordinator.restoreInitialCheckpointIfPresent` to take the setting; when a release
in `hashing.versions.RELEASES` has that fix, this test fails for it, and `gate.upgrade_modes` must learn which
releases honour the setting.
"""

from __future__ import annotations

import re
import subprocess
from functools import cache

import pytest

from flink_bridge.dist import ensure_flink
from hashing.versions import PATCH_RELEASES

pytestmark = pytest.mark.flink

COORDINATOR = "org.apache.flink.runtime.checkpoint.CheckpointCoordinator"
ASSIGNMENT = "org.apache.flink.runtime.checkpoint.StateAssignmentOperation"


@cache
def _javap(release: str, cls: str) -> str:
    jar = next((ensure_flink(release) / "lib").glob("flink-dist-*.jar"))
    return subprocess.run(["javap", "-v", "-p", "-cp", str(jar), cls], capture_output=True, text=True,
                          check=True).stdout


def _method(text: str, name: str) -> str:
    """One method of `javap -v -p` output: from its signature to the blank line that ends it."""
    start = re.search(rf"^  \S.* {name}\(.*$", text, re.M)
    assert start, f"{name} not found"
    end = text.find("\n\n", start.end())
    return text[start.start():end if end >= 0 else len(text)]


def _parameter_slots(method: str) -> dict[str, int]:
    return {m.group(2): int(m.group(1)) for m in re.finditer(r"^\s+0\s+\d+\s+(\d+)\s+(\w+)\s+\S+$", method, re.M)}


@pytest.mark.parametrize("release", sorted(PATCH_RELEASES.values()))
def test_a_checkpoint_recovered_through_ha_metadata_ignores_allow_non_restored_state(release: str) -> None:
    text = _javap(release, COORDINATOR)
    initial = _method(text, "restoreInitialCheckpointIfPresent")
    parameters = initial.splitlines()[0].split("(", 1)[1].split(")")[0]
    assert parameters.startswith("java.util.Set<")
    assert "boolean" not in parameters, "the setting is a parameter: FLINK-39513 is in this release"
    internal = _method(text, "restoreLatestCheckpointedStateInternal")
    slot = _parameter_slots(internal)["allowNonRestoredState"]  # slot 0 is `this`, one slot per parameter before it
    lines = [line for line in initial.splitlines() if re.match(r"^\s+\d+: ", line)]
    code = [line.split(":", 1)[1].split()[0] for line in lines]
    call = next(i for i, line in enumerate(lines) if "restoreLatestCheckpointedStateInternal" in line)
    arity = len(internal.splitlines()[0].split("(", 1)[1].split(")")[0].split(","))
    pushed = code[call - arity:call]  # the arguments, in order, right before the call
    assert pushed[slot - 1] == "iconst_0", f"allowNonRestoredState is {pushed[slot - 1]}, not the constant false"


@pytest.mark.parametrize("release", sorted(PATCH_RELEASES.values()))
def test_every_operator_of_a_recovered_checkpoint_must_exist_even_without_state(release: str) -> None:
    text = _javap(release, ASSIGNMENT)
    completeness = _method(text, "checkStateMappingCompleteness")
    assert "There is no operator for the state" in text  # an ldc, or a string-concatenation recipe (2.x)
    assert "java/lang/IllegalStateException" in completeness
    assert not re.search(r"hasState|getStateSize|hasSubtaskStates|getCoordinatorState", completeness), \
        "this release skips empty operator states: the gate's HA path must skip them too"

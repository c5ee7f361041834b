"""`Checkpoints.loadAndValidateCheckpoint`, rule by rule (upgrade_gate/flink/assignment/load_validation.py).

Expected texts are Flink's `String.format`s in `Checkpoints.java` (1.20 and 2.x); the first `%s` of
the max-parallelism message is `CheckpointMetadata.toString()`, the literal "Checkpoint Metadata".
"""

from __future__ import annotations

import pytest

from tests.flink.support import metadata, oid, operator, pair, vertex
from upgrade_gate.flink.assignment.errors import RestoreFailure
from upgrade_gate.flink.assignment.load_validation import has_state, load_and_validate
from upgrade_gate.flink.metadata.model import OperatorSubtaskState

POINTER = "file:/savepoints/savepoint-1"


def test_state_under_a_generated_id_is_kept() -> None:
    st = operator(oid(1))
    res = load_and_validate(metadata(st), [vertex(pair(1, oid(1)))], POINTER, False)
    assert res.kept == {oid(1): st} and res.skipped_empty == () and res.dropped == ()


def test_state_under_a_user_defined_id_maps_to_its_vertex() -> None:
    # operatorToJobVertexMapping holds every pair's generated id and, when present, its user-defined id
    st = operator(oid(9))
    res = load_and_validate(metadata(st), [vertex(pair(1, oid(1), oid(9)))], POINTER, False)
    assert list(res.kept) == [oid(9)]


def test_unmatched_state_fails_with_flinks_message() -> None:
    with pytest.raises(RestoreFailure) as e:
        load_and_validate(metadata(operator(oid(2))), [vertex(pair(1, oid(1)))], POINTER, False)
    assert e.value.java_class == "java.lang.IllegalStateException"
    assert e.value.message == (
        f"Failed to rollback to checkpoint/savepoint {POINTER}. Cannot map checkpoint/savepoint state for operator "
        f"{oid(2).hex()} to the new program, because the operator is not available in the new program. If you want "
        "to allow to skip this, you can set the --allowNonRestoredState option on the CLI.")


def test_unmatched_coordinator_state_alone_counts_as_state() -> None:
    st = operator(oid(2), subtasks={}, coordinator=True)
    assert has_state(st)
    with pytest.raises(RestoreFailure, match="Cannot map checkpoint/savepoint state for operator 0202"):
        load_and_validate(metadata(st), [vertex(pair(1, oid(1)))], POINTER, False)


def test_unmatched_empty_state_is_skipped_even_without_allow_non_restored_state() -> None:
    # "Skipping empty savepoint state for operator {}." : no OperatorSubtaskState.hasState(), no coordinator
    st = operator(oid(2), subtasks={0: OperatorSubtaskState(), 1: OperatorSubtaskState()})
    assert not has_state(st)
    res = load_and_validate(metadata(st), [vertex(pair(1, oid(1)))], POINTER, False)
    assert res.kept == {} and res.skipped_empty == (st,) and res.dropped == ()


def test_allow_non_restored_state_drops_unmatched_state() -> None:
    st, empty = operator(oid(2)), operator(oid(3), subtasks={})
    res = load_and_validate(metadata(st, empty), [vertex(pair(1, oid(1)))], POINTER, True)
    assert res.kept == {} and res.dropped == (st,) and res.skipped_empty == (empty,)


def test_max_parallelism_mismatch_on_a_configured_vertex_fails() -> None:
    with pytest.raises(RestoreFailure) as e:
        load_and_validate(metadata(operator(oid(1), max_parallelism=128)),
                          [vertex(pair(1, oid(1)), max_parallelism=256)], POINTER, False)
    assert e.value.message == (
        "Failed to rollback to checkpoint/savepoint Checkpoint Metadata. Max parallelism mismatch between "
        f"checkpoint/savepoint state and new program. Cannot map operator {oid(1).hex()} with max parallelism 128 "
        "to new program with max parallelism 256. This indicates that the program has been changed in a "
        "non-compatible way after the checkpoint/savepoint.")


def test_max_parallelism_mismatch_on_a_derived_vertex_is_accepted() -> None:
    # ExecutionJobVertex.canRescaleMaxParallelism: a derived (auto-configured) max parallelism may change
    v = vertex(pair(1, oid(1)), parallelism=2)  # derived: 128
    st = operator(oid(1), max_parallelism=512)
    assert list(load_and_validate(metadata(st), [v], POINTER, False).kept) == [oid(1)]

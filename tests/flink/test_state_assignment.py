"""`StateAssignmentOperation.assignStates`, upgrade_gate/flink/assignment/state_assignment.py.

Matching per `OperatorIDPair` (tail first): the user-defined id wins only when the snapshot holds state
under it, else the generated id (FLINK-13973, 1.14+); matched state is `remove`d from the snapshot's map,
so it is matched once; the task sees it under the generated id. FLIP-411's V3 pairs carry
`[uid hash?, V2 id]`: `fixed` takes the first alternative present, `naive` runs Flink's loop once per
legacy hasher and lets a later pair that finds nothing overwrite `perVertex[generated]` with an empty state.
Then `assignAttemptState`: `checkParallelismPreconditions` (texts below; the first also seen in real
Flink runs, tests/fixtures/restores/*/parallelism-above-max-parallelism), key-group partitions with the
vertex's (possibly adopted) max parallelism. Coordinator state is restored by generated id only
(`CheckpointCoordinator.restoreStateToCoordinators`), and only a FLIP-27 source has a coordinator.
"""

from __future__ import annotations

import pytest

from hashing.graph import Partitioner
from tests.flink.support import channel_in, graph, oid, operator, pair, vertex
from upgrade_gate.flink.assignment.errors import RestoreFailure
from upgrade_gate.flink.assignment.load_validation import LoadResult
from upgrade_gate.flink.assignment.state_assignment import assign_states
from upgrade_gate.flink.metadata.model import OperatorSubtaskState

G = graph(names={1: "Source: events", 2: "counts"}, edges=[(1, 2, Partitioner.HASH)], sources={1})


def _assign(vertices, *states, matching: str = "fixed", hasher: str = "v2", g=G):
    return assign_states(LoadResult({s.operator_id: s for s in states}, (), ()), vertices, g, matching, hasher)


# ---- matching (V2: Flink as released) ---------------------------------------------------------------------

def test_the_user_defined_id_wins_when_the_snapshot_has_state_under_it() -> None:
    by_alt, by_gen = operator(oid(9)), operator(oid(2))
    a = _assign([vertex(pair(2, oid(2), oid(9)))], by_alt, by_gen)
    r = a.operators[2]
    assert (r.matched_by, r.matched_id, r.old) == ("alternative", oid(9), by_alt)
    assert a.unconsumed == {oid(2): by_gen}  # the generated id's state is left: nothing takes it


def test_the_generated_id_is_used_when_the_user_defined_id_has_no_state() -> None:
    st = operator(oid(2))
    r = _assign([vertex(pair(2, oid(2), oid(9)))], st).operators[2]
    assert (r.matched_by, r.matched_id, r.old) == ("generated", oid(2), st)


def test_an_operator_without_state_in_the_snapshot_gets_none() -> None:
    a = _assign([vertex(pair(1, oid(1))), vertex(pair(2, oid(2)))], operator(oid(2)))
    assert (a.operators[1].matched_by, a.operators[1].old) == ("none", None)


def test_state_is_matched_once() -> None:
    # vertex 1 takes oid(1) by its generated id; vertex 2's uid hash pins the same id but finds it removed
    st = operator(oid(1))
    a = _assign([vertex(pair(1, oid(1))), vertex(pair(2, oid(2), oid(1)))], st)
    assert a.operators[1].old is st and a.operators[2].old is None


# ---- matching (V3, FLIP-411: pairs [uid hash?, V2 id]) -------------------------------------------------------

def test_v3_fixed_takes_the_first_alternative_the_snapshot_holds() -> None:
    v2_state, uid_state = operator(oid(1)), operator(oid(9))
    v = vertex(pair(2, oid(3), oid(9), oid(1)))  # generated V3 id 03.., uid hash 09.., V2 id 01..
    r = _assign([v], v2_state, uid_state, hasher="v3").operators[2]
    assert (r.matched_by, r.matched_id) == ("alternative", oid(9))
    r = _assign([v], v2_state, hasher="v3").operators[2]
    assert (r.matched_by, r.matched_id) == ("alternative", oid(1))


def test_v3_naive_loses_state_found_by_the_uid_hash_pair() -> None:
    # pair 1 (generated, uid hash) finds the state; pair 2 (generated, V2 id) finds nothing and
    # perVertex.put(generated, empty OperatorState) replaces it: the FLIP-411 state loss
    st = operator(oid(9))
    r = _assign([vertex(pair(2, oid(3), oid(9), oid(1)))], st, matching="naive", hasher="v3").operators[2]
    assert (r.old, r.overwritten, r.matched_by) == (None, st, "none")


def test_v3_naive_keeps_state_found_by_the_last_pair() -> None:
    st = operator(oid(1))
    r = _assign([vertex(pair(2, oid(3), oid(9), oid(1)))], st, matching="naive", hasher="v3").operators[2]
    assert (r.old, r.overwritten, r.matched_by, r.matched_id) == (st, None, "alternative", oid(1))


def test_v3_naive_without_a_uid_hash_matches_by_the_v2_id() -> None:
    st = operator(oid(1))
    r = _assign([vertex(pair(2, oid(3), oid(1)))], st, matching="naive", hasher="v3").operators[2]
    assert (r.old, r.matched_id) == (st, oid(1))


# ---- assignAttemptState --------------------------------------------------------------------------------------

def test_parallelism_above_the_restored_max_parallelism_fails() -> None:
    v = vertex(pair(2, oid(2)), parallelism=6)
    with pytest.raises(RestoreFailure) as e:
        _assign([v], operator(oid(2), parallelism=2, max_parallelism=4))
    assert e.value.message == (
        f"The state for task {oid(2).hex()} can not be restored. The maximum parallelism (4) of the restored state "
        "is lower than the configured parallelism (6). Please reduce the parallelism of the task to be lower or "
        "equal to the maximum parallelism.")


def test_parallelism_preconditions_are_checked_before_channel_state() -> None:
    # assignAttemptState: checkParallelismPreconditions, then the operator states, then the channel states
    v = vertex(pair(1, oid(1)), pair(2, oid(2)), parallelism=6)  # head 1 -> tail 2
    misplaced = OperatorSubtaskState(input_channel_state=channel_in())  # input state on the tail
    with pytest.raises(RestoreFailure, match=r"^The state for task .* maximum parallelism \(4\)"):
        _assign([v], operator(oid(2), parallelism=1, max_parallelism=4, subtasks={0: misplaced}),
                g=graph(edges=[(1, 2, Partitioner.FORWARD)]))
    # at a valid parallelism nothing fails: Flink's TaskStateAssignment looks for input-channel state on the
    # vertex's input operator (the head) only, so the tail's in-flight buffers are never redistributed (real
    # Flink restores such a job RUNNING and drops them: tests/gate/test_checkpoint_restores_agreement.py)
    a = _assign([vertex(pair(1, oid(1)), pair(2, oid(2)))], operator(oid(2), parallelism=1, subtasks={0: misplaced}),
                g=graph(edges=[(1, 2, Partitioner.FORWARD)]))
    assert a.operators[2].old is not None


def test_a_configured_max_parallelism_that_differs_fails() -> None:
    v = vertex(pair(2, oid(2)), max_parallelism=256)
    with pytest.raises(RestoreFailure, match=r"^The maximum parallelism \(128\) with which the latest checkpoint of "
                                             r"the execution job vertex .* has been taken and the current maximum "
                                             r"parallelism \(256\) changed\. This is currently not supported\.$"):
        _assign([v], operator(oid(2), max_parallelism=128))


def test_a_derived_max_parallelism_adopts_the_snapshots() -> None:
    v = vertex(pair(2, oid(2)), parallelism=3)  # derived: 128
    r = _assign([v], operator(oid(2), parallelism=2, max_parallelism=512)).operators[2]
    assert r.max_parallelism == 512
    assert r.key_groups == [(0, 170), (171, 341), (342, 511)]  # computeKeyGroupRangeForOperatorIndex(512, 3, i)
    assert [[p.old_subtask for p in sub] for sub in r.keyed] == [[0], [0, 1], [1]]


def test_a_fully_finished_vertex_is_finished_on_restore() -> None:
    a = _assign([vertex(pair(2, oid(2)))], operator(oid(2), fully_finished=True), g=graph(names={2: "counts"}))
    assert a.operators[2].finished_on_restore and a.operators[2].keyed == []


# ---- coordinators --------------------------------------------------------------------------------------------

def test_coordinator_state_is_restored_by_generated_id_into_a_source() -> None:
    st = operator(oid(1), subtasks={}, coordinator=True)
    assert _assign([vertex(pair(1, oid(1)))], st).operators[1].coordinator_restored is True


def test_coordinator_state_under_a_user_defined_id_is_not_restored() -> None:
    st = operator(oid(9), subtasks={}, coordinator=True)
    r = _assign([vertex(pair(1, oid(1), oid(9)))], st).operators[1]
    assert r.old is st and r.coordinator_restored is False


def test_coordinator_state_into_an_operator_without_a_coordinator_is_not_restored() -> None:
    st = operator(oid(2), subtasks={}, coordinator=True)
    assert _assign([vertex(pair(2, oid(2)))], st).operators[2].coordinator_restored is False

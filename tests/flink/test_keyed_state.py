"""Keyed-state redistribution (`StateAssignmentOperation.reAssignSubKeyedStates` with
`KeyGroupRangeAssignment.computeKeyGroupRangeForOperatorIndex`), upgrade_gate/flink/assignment/keyed_state.py.

Range vectors follow Flink's formula `start = (i * maxP + p - 1) / p`, `end = ((i + 1) * maxP - 1) / p`;
[0,42] [43,85] [86,127] and [0,127] [128,255] were also seen in real Flink runs' subtask key groups.
"""

from __future__ import annotations

import pytest

from hashing.errors import FlinkError
from hashing.graph import Partitioner
from tests.flink.support import PROXY_BYTES, graph, incremental, keyed, lists, oid, operator
from upgrade_gate.flink.assignment.keyed_state import (
    KeyedPiece,
    has_keyed_input,
    has_keyed_state,
    key_group_partitions,
    reassign_keyed,
)
from upgrade_gate.flink.metadata.model import Mode, OperatorSubtaskState


@pytest.mark.parametrize(("max_p", "p", "ranges"), [
    (128, 3, [(0, 42), (43, 85), (86, 127)]),
    (256, 2, [(0, 127), (128, 255)]),
    (10, 4, [(0, 2), (3, 4), (5, 7), (8, 9)]),
    (4, 4, [(0, 0), (1, 1), (2, 2), (3, 3)]),
])
def test_key_group_partitions_are_flinks_ranges(max_p: int, p: int, ranges: list[tuple[int, int]]) -> None:
    assert key_group_partitions(max_p, p) == ranges


def test_parallelism_above_max_parallelism_is_refused() -> None:
    # KeyGroupRangeAssignment.computeKeyGroupRangeForOperatorIndex: checkArgument(maxParallelism >= parallelism)
    with pytest.raises(FlinkError, match=r"Maximum parallelism must not be smaller than parallelism\."):
        key_group_partitions(2, 3)


def test_same_parallelism_hands_each_subtask_its_own_handles_as_they_are() -> None:
    # newParallelism == oldParallelism: subtask i gets old subtask i's handles, not cut to its range
    op = operator(oid(1), subtasks={0: OperatorSubtaskState(managed_keyed_state=(keyed(0, 70),)),
                                    1: OperatorSubtaskState(managed_keyed_state=(keyed(71, 127),),
                                                            raw_keyed_state=(keyed(71, 127, 1),))})
    got = reassign_keyed(op, key_group_partitions(128, 2))
    # the whole handle, its serialization proxy included
    assert got == [[KeyedPiece(0, (0, 70), PROXY_BYTES + 710)],
                   [KeyedPiece(1, (71, 127), PROXY_BYTES + 570), KeyedPiece(1, (71, 127), PROXY_BYTES + 57, raw=True)]]


def test_rescale_gives_each_subtask_the_intersection_of_every_old_handle() -> None:
    op = operator(oid(1), subtasks={0: OperatorSubtaskState(managed_keyed_state=(keyed(0, 63),)),
                                    1: OperatorSubtaskState(managed_keyed_state=(keyed(64, 127),))})
    got = reassign_keyed(op, key_group_partitions(128, 3))
    assert [[(p.old_subtask, p.key_groups) for p in sub] for sub in got] == [
        [(0, (0, 42))],
        [(0, (43, 63)), (1, (64, 85))],
        [(1, (86, 127))],
    ]
    # KeyGroupsStateHandle.getIntersection keeps the offsets of those key groups: the bytes are theirs, and the
    # slice holding a handle's first key group also carries the stream's head (the serialization proxy), so the
    # slices of one handle add up to its size (the report's per-subtask bytes add up: issue 32)
    assert [p.bytes for p in got[1]] == [21 * 10, PROXY_BYTES + 22 * 10]
    for j, h in ((0, op.subtask_states[0].managed_keyed_state[0]), (1, op.subtask_states[1].managed_keyed_state[0])):
        assert sum(p.bytes for sub in got for p in sub if p.old_subtask == j) == h.state_size


def test_incremental_handles_come_whole_when_they_overlap() -> None:
    # IncrementalRemoteKeyedStateHandle.getIntersection returns the handle itself; the backend clips on restore
    op = operator(oid(1), subtasks={0: OperatorSubtaskState(managed_keyed_state=(incremental(0, 63, 1000),)),
                                    1: OperatorSubtaskState(managed_keyed_state=(incremental(64, 127, 500),))})
    got = reassign_keyed(op, key_group_partitions(128, 3))
    assert [[(p.old_subtask, p.bytes) for p in sub] for sub in got] == [[(0, 1000)], [(0, 1000), (1, 500)], [(1, 500)]]


def test_an_operator_without_keyed_state_hands_out_nothing() -> None:
    op = operator(oid(1), subtasks={0: OperatorSubtaskState(managed_operator_state=(lists(s=(1, Mode.UNION)),))},
                  parallelism=1)
    assert not has_keyed_state(op)
    assert reassign_keyed(op, key_group_partitions(128, 2)) == []


@pytest.mark.parametrize(("partitioner", "keyed_input"), [
    (Partitioner.HASH, True),  # keyBy: KeyGroupStreamPartitioner
    (Partitioner.FORWARD_FOR_CONSECUTIVE_HASH, True),  # batch-mode forward between consecutive keyBys
    (Partitioner.FORWARD, False),
    (Partitioner.REBALANCE, False),
    (Partitioner.BROADCAST, False),
])
def test_keyed_input_is_a_keyby_edge_into_the_operator(partitioner: Partitioner, keyed_input: bool) -> None:
    g = graph(edges=[(1, 2, partitioner)])
    assert has_keyed_input(g, 2) is keyed_input
    assert has_keyed_input(g, 1) is False  # a source has no input at all


@pytest.mark.parametrize("release", ["1.20.5", "2.3.0"])
@pytest.mark.parametrize("new_p", [1, 3, 4, 7])
def test_rescaled_bytes_follow_the_key_groups_of_a_real_savepoint_with_empty_ones(release: str, new_p: int) -> None:
    """Flink writes offset 0 for a key group without data (KeyGroupRangeOffsets is set only for groups that
    wrote any). Each new subtask gets exactly the bytes of the non-empty key groups it takes, and together
    they get all of them: no subtask gets 0 while another gets everything."""
    from pathlib import Path

    from upgrade_gate.flink.metadata.model import KeyGroupsStateHandle
    from upgrade_gate.storage.savepoints import load_savepoint

    sp = Path(__file__).resolve().parent.parent / "fixtures" / "savepoints" / release / "hashmap-canonical-p2"
    op = next(o for o in load_savepoint(str(sp)).operator_states
              if any(s.managed_keyed_state for s in o.subtask_states.values()))
    group_bytes: dict[int, int] = {}  # key group -> its bytes, from the positions of the groups that wrote data
    heads: dict[int, int] = {}  # a handle's first key group -> the stream's head before any key group's data
    for st in op.subtask_states.values():
        for h in st.managed_keyed_state:
            assert isinstance(h, KeyGroupsStateHandle)
            starts = sorted((off, h.key_group_range.start + i) for i, off in enumerate(h.offsets) if off > 0)
            assert len(starts) < len(h.offsets)  # this savepoint does have empty key groups
            for (off, group), nxt in zip(starts, [*(o for o, _ in starts[1:]), h.state_size], strict=True):
                group_bytes[group] = nxt - off
            heads[h.key_group_range.start] = starts[0][0]
    partitions = key_group_partitions(op.max_parallelism, new_p)
    pieces = reassign_keyed(op, partitions)
    got = [sum(p.bytes for p in subtask) for subtask in pieces]
    # the head goes with the slice that holds the handle's first key group: the slices add up to the handles
    want = [sum(b for g, b in group_bytes.items() if lo <= g <= hi) + sum(b for g, b in heads.items() if lo <= g <= hi)
            for lo, hi in partitions]
    assert got == want and sum(got) == sum(group_bytes.values()) + sum(heads.values())
    assert all(g > 0 for g in got)  # 97 keys over 128 groups: every new subtask owns some data

"""`RoundRobinOperatorStateRepartitioner.repartitionState`, mode by mode
(upgrade_gate/flink/assignment/operator_state_repartitioner.py).

Expected values are worked from Flink's code: `repartitionSplitState` hands `total / newP` partitions
(+1 while `total % newP` remains) to subtasks `(i + startParallelOp) % newP`, taking consecutive
offsets, and the next name starts at the first subtask that got no extra; `repartitionUnionState`
gives every subtask every entry; `repartitionBroadcastState` gives subtask i old entry `i % oldP`;
with unchanged parallelism and no UNION state the old lists are returned as they are.
"""

from __future__ import annotations

from tests.flink.support import lists
from upgrade_gate.flink.assignment.operator_state_repartitioner import repartition_state
from upgrade_gate.flink.metadata.model import Mode

SPLIT, UNION, BROADCAST = Mode.SPLIT_DISTRIBUTE, Mode.UNION, Mode.BROADCAST


def _layout(result, name: str) -> list[list[tuple[int, int]]]:
    """Per new subtask: (old subtask, elements) of `name`, in hand-out order."""
    return [[(p.old_subtask, p.elements) for p in sub.pieces if p.name == name] for sub in result]


def test_split_distribute_hands_out_consecutive_partitions_extras_first() -> None:
    # 5 elements over 3 subtasks: base 1, remainder 2 -> 2, 2, 1, cut across the old handles in order
    old = [[lists(a=(3, SPLIT))], [lists(a=(2, SPLIT))]]
    got = repartition_state(old, 2, 3)
    assert _layout(got, "a") == [[(0, 2)], [(0, 1), (1, 1)], [(1, 1)]]
    assert [sub.elements() for sub in got] == [{"a": 2}, {"a": 2}, {"a": 1}]


def test_split_distribute_starts_the_next_name_where_extras_stopped() -> None:
    # "a" (hashCode 97) precedes "b" (98) in HashMap order; "a" gives its extras to subtasks 0 and 1,
    # so "b"'s single element starts at subtask 2 (startParallelOp = newStartParallelOp), not 0
    got = repartition_state([[lists(a=(5, SPLIT), b=(1, SPLIT))]], 1, 3)
    assert [sub.elements() for sub in got] == [{"a": 2}, {"a": 2}, {"a": 1, "b": 1}]


def test_split_distribute_scale_in_merges_everything() -> None:
    old = [[lists(a=(2, SPLIT))], [lists(a=(3, SPLIT))], [lists(a=(1, SPLIT))]]
    got = repartition_state(old, 3, 1)
    assert _layout(got, "a") == [[(0, 2), (1, 3), (2, 1)]]


def test_union_goes_to_every_new_subtask_in_full() -> None:
    old = [[lists(u=(2, UNION))], [lists(u=(3, UNION))]]
    got = repartition_state(old, 2, 3)
    assert _layout(got, "u") == [[(0, 2), (1, 3)]] * 3


def test_union_is_redistributed_even_at_unchanged_parallelism() -> None:
    # newParallelism == oldParallelism with UNION state: own handles kept, every union entry added
    old = [[lists(s=(1, SPLIT), u=(2, UNION))], [lists(s=(4, SPLIT), u=(3, UNION))]]
    got = repartition_state(old, 2, 2)
    assert _layout(got, "s") == [[(0, 1)], [(1, 4)]]
    assert _layout(got, "u") == [[(0, 2), (1, 3)], [(0, 2), (1, 3)]]


def test_unchanged_parallelism_without_union_keeps_every_subtasks_own_state() -> None:
    old = [[lists(s=(3, SPLIT), b=(2, BROADCAST))], [lists(s=(1, SPLIT), b=(2, BROADCAST))]]
    got = repartition_state(old, 2, 2)
    assert [sorted((p.name, p.old_subtask, p.elements) for p in sub.pieces) for sub in got] == [
        [("b", 0, 2), ("s", 0, 3)], [("b", 1, 2), ("s", 1, 1)]]
    assert all(p.handle is old[sub.index][0] for sub in got for p in sub.pieces)


def test_broadcast_subtask_i_takes_old_subtask_i_mod_old_parallelism() -> None:
    old = [[lists(b=(2, BROADCAST))], [lists(b=(2, BROADCAST))]]
    assert _layout(repartition_state(old, 2, 5), "b") == [[(0, 2)], [(1, 2)], [(0, 2)], [(1, 2)], [(0, 2)]]
    assert _layout(repartition_state(old, 2, 1), "b") == [[(0, 2)]]


def test_subtask_bytes_count_each_state_file_once() -> None:
    # slices of one delegate file are merged into one OperatorStateHandle per subtask (the merge map)
    old = [[lists(a=(4, SPLIT), b=(4, SPLIT))]]
    got = repartition_state(old, 1, 2)
    assert [sub.bytes() for sub in got] == [100, 100]

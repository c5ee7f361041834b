"""`RoundRobinOperatorStateRepartitioner` in isolation, against what real Flink handed each subtask.

The rule's direct, mode-by-mode tests are in tests/flink/test_operator_state_repartitioner.py."""

from __future__ import annotations

import pytest

from tests.restore_support import scenarios
from upgrade_gate.flink.assignment.operator_state_repartitioner import java_hashmap_order, repartition_state
from upgrade_gate.storage.savepoints import load_savepoint

RESCALES = [s for s in scenarios() if s.name in ("rescale-up", "rescale-down", "rescale-down-to-1",
                                                 "parallelism-breaks-chain-uids")]


def test_java_hashmap_order_follows_string_hashcode_buckets() -> None:
    # "split-a".hashCode() and "split-b".hashCode() differ by 1: adjacent buckets, a before b
    assert java_hashmap_order(["split-b", "split-a"]) == ["split-a", "split-b"]
    assert java_hashmap_order(["Aa", "BB"]) == ["Aa", "BB"]  # same hashCode: insertion order
    assert java_hashmap_order(["BB", "Aa"]) == ["BB", "Aa"]


@pytest.mark.parametrize("sc", RESCALES, ids=str)
def test_split_and_union_counts_match_flink(sc) -> None:
    meta = load_savepoint(str(sc.savepoint))
    lists = next(op for op in meta.operator_states
                 if any("split-a" in h.state_name_to_partition_offsets
                        for s in op.subtask_states.values() for h in s.managed_operator_state))
    old = [list(lists.subtask_states[i].managed_operator_state) for i in range(lists.parallelism)]
    real = sc.outcome["restore"]["restored"]["lists"]
    new = repartition_state(old, lists.parallelism, len(real))
    for got, want in zip(new, real, strict=True):
        counts = got.elements()
        assert {k: counts.get(k, 0) for k in ("split-a", "split-b", "union-list")} == \
               {k: want[k] for k in ("split-a", "split-b", "union-list")}

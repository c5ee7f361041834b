"""FLIP-411's "naive" multi-pair bug, on a real savepoint re-keyed to V3 ids.

No real-Flink oracle exists here: StreamGraphHasherV3 was never merged into Flink (through 2.3.0),
so we build the V3 savepoint ourselves: a real 2.3.0 savepoint whose operator ids are replaced by
our V3 ids of the same job (what Flink with V3 would have written), then restore it into the same job.
"""

from __future__ import annotations

import dataclasses

from hashing.operator_ids import compute_operator_ids
from hashing.readers import load_graph
from tests.restore_support import RESTORES
from upgrade_gate.storage.check_inputs import check_upgrade
from upgrade_gate.storage.savepoints import load_savepoint
from upgrade_gate.vocabulary import Verdict

R23 = RESTORES / "2.3.0"


def _v3_savepoint(savepoint: str, graph):
    meta = load_savepoint(savepoint)
    v2 = compute_operator_ids(graph, "v2")
    v3 = compute_operator_ids(graph, "v3")
    to_v3 = {v2.pairs[n].generated: v3.pairs[n].generated for n in v2.pairs}
    ops = tuple(dataclasses.replace(op, operator_id=to_v3.get(op.operator_id, op.operator_id))
                for op in meta.operator_states)
    return dataclasses.replace(meta, operator_states=ops)


def test_naive_matching_loses_v3_state_and_fixed_keeps_it() -> None:
    graph = load_graph(R23 / "identical-no-uids" / "graph-b.json").graph
    meta = _v3_savepoint(str(R23 / "savepoints" / "no-uids-p2"), graph)
    naive = check_upgrade(meta, graph, hasher="v3", matching="naive")
    assert naive.verdict == Verdict.STATE_LOSS and naive.restore_succeeds
    reasons = {x["reason"] for x in naive.losses}
    assert any("overwritten with an empty state" in r for r in reasons)
    lost = {x["name"] for x in naive.losses}
    assert {"keyed", "lists", "broadcast"} <= lost
    fixed = check_upgrade(meta, graph, hasher="v3", matching="fixed")
    assert fixed.verdict == Verdict.SAFE, fixed.losses


def test_v2_savepoint_into_v3_job_restores_task_state_by_the_v2_alternative() -> None:
    """V2 -> V3 migration: task state matches the V2 alternative; a FLIP-27 source's coordinator state does
    not (coordinators are looked up by generated id only), which the gate reports as a loss."""
    graph = load_graph(R23 / "identical-no-uids" / "graph-b.json").graph
    res = check_upgrade(str(R23 / "savepoints" / "no-uids-p2"), graph, hasher="v3", matching="fixed")
    assert res.restore_succeeds
    by_name = {o["new_node_name"]: o for o in res.operators if o["new_node_id"] is not None and o["state_bytes"]}
    assert by_name["keyed"]["matched_by"] == "alternative"
    assert [x["state_names"] for x in res.losses] == [["coordinator"]]
    rows = {m["name"]: m for m in res.migration}
    assert rows["keyed"]["savepoint_id"] == rows["keyed"]["v2_id"] != rows["keyed"]["new_id"]

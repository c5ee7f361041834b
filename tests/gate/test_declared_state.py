"""What `upgrade-gate lint` calls stateful holds state in real Flink's savepoints (docs/design.md, Testing).

Every restore scenario's old graph (`graph-a.json`, exported from the job with real Flink) wrote a committed
savepoint; each operator `upgrade_gate.gate.declared_state` says keeps state must hold state there, under the ID
Flink gave it. The converse is not promised: a user function's state shows only in a savepoint.
"""

from __future__ import annotations

import pytest

from hashing.operator_ids import compute_operator_ids
from hashing.readers import load_graph
from tests.restore_support import Scenario, scenarios
from upgrade_gate.flink.assignment.load_validation import has_state
from upgrade_gate.gate.declared_state import stateful_reason, unpinned_stateful
from upgrade_gate.gate.inputs import side_of
from upgrade_gate.storage.savepoints import load_newest_complete

WRITERS = [s for s in scenarios() if (s.dir / "graph-a.json").is_file()]


@pytest.mark.parametrize("scenario", WRITERS, ids=str)
def test_every_operator_called_stateful_holds_state_in_the_savepoint_its_job_wrote(scenario: Scenario) -> None:
    side = side_of(load_graph(scenario.dir / "graph-a.json"))
    ids = compute_operator_ids(side.graph, "v2", scenario.flink_version)
    held = {op.operator_id for op in load_newest_complete(str(scenario.savepoint)).metadata.operator_states
            if has_state(op)}
    for node in side.graph.nodes:
        if stateful_reason(side, node.id) is None:
            continue
        pair = ids.pairs[node.id]
        assert {pair.generated, *pair.alternatives} & held, f"{node.name}: {stateful_reason(side, node.id)}"


def test_the_signs_cover_sources_and_sql_operators_of_the_fixtures() -> None:
    """Not vacuous: the FLIP-27, SQL and keyed signs each name operators the real savepoints hold state for."""
    reasons = {stateful_reason(side, n.id) or "" for s in WRITERS
               for side in [side_of(load_graph(s.dir / "graph-a.json"))] for n in side.graph.nodes}
    assert any(r.startswith("a FLIP-27 source") for r in reasons)
    assert any(r.startswith("a SQL operator") for r in reasons)
    assert any(r.startswith("a keyed input") for r in reasons)


def test_a_uid_or_a_uid_hash_pins_the_state() -> None:
    """`identical` gives every operator a uid: nothing is unpinned; `identical-no-uids` leaves its source and its
    keyed operator bare."""
    for release in ("1.20.5", "2.3.0"):
        pinned = next(s for s in WRITERS if s.release == release and s.name == "identical")
        side = side_of(load_graph(pinned.dir / "graph-a.json"))
        assert unpinned_stateful(side, compute_operator_ids(side.graph, "v2", pinned.flink_version)) == []
        bare = next(s for s in WRITERS if s.release == release and s.name == "identical-no-uids")
        side = side_of(load_graph(bare.dir / "graph-a.json"))
        assert [u.name for u in unpinned_stateful(side, compute_operator_ids(side.graph, "v2", bare.flink_version))
                ] == ["Source: numbers", "keyed"]

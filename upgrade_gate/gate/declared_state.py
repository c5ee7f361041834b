"""Which operators of a graph hold state, said by the graph alone (no savepoint): what `upgrade-gate lint` flags.

Flink restores state by operator ID; an operator without `uid()` gets a positional ID (`StreamGraphHasherV2`) that
an innocent change elsewhere in the job re-keys (docs/design.md, "The problem in one paragraph"). Before a
savepoint exists, only the graph can say which operators that puts at risk, from what it shows:

* the spec's `state` field (docs/graph-spec.md, descriptive node fields): the author declared the state;
* a FLIP-27 source (`factory: source`, Flink's `SourceOperator`): it always keeps its reader's splits in the
  operator list state `SourceReaderState` (`SourceOperator#initializeState`), whatever the connector;
* a SQL operator whose key or state row types the exporter recorded (`sql_state`, docs/graph-spec.md): the
  planner gave its runtime function state (an aggregate's accumulators, a join's buffers);
* a keyed input (a `keyBy`, `has_keyed_input`, the test the gate uses for "can it read keyed state"): Flink gives
  the operator a keyed state backend, and a keyed operator's state and timers live there. This one is a strong
  hint rather than a promise (a stateless `map` after a `keyBy` would be flagged too), measured on the fixtures:
  all 132 keyed operators of the 142 recorded restore scenarios hold state in their real savepoints.

Other operators may hold state too (a `CheckpointedFunction`'s operator state, a broadcast state), which only
the running job's savepoint shows: `upgrade-gate check` judges those. `tests/gate/test_declared_state.py` checks
against real Flink savepoints that every operator named here does hold state.
"""

from __future__ import annotations

from dataclasses import dataclass

from hashing.graph import Factory
from hashing.operator_ids import OperatorIds
from upgrade_gate.flink.assignment.keyed_state import has_keyed_input
from upgrade_gate.gate.inputs import GraphSide
from upgrade_gate.gate.misrouting import declared_state_names

__all__ = ["UnpinnedState", "stateful_reason", "unpinned_stateful"]

SOURCE_READER_STATE = "SourceReaderState"  # SourceOperator's SPLITS_STATE_DESC


@dataclass(frozen=True)
class UnpinnedState:
    """A stateful operator without `uid()` or `setUidHash()`: its state is found by position only."""

    node_id: int
    name: str
    operator_id: str  # the ID Flink generates for it today (32 hex characters)
    why: str  # what says it is stateful

    def to_json(self) -> dict[str, object]:
        return {"node_id": self.node_id, "name": self.name, "operator_id": self.operator_id, "why": self.why}


def stateful_reason(side: GraphSide, nid: int) -> str | None:
    """Why the graph says node `nid` keeps state, or None when it does not say so."""
    declared = declared_state_names(side.extras.get(nid, {}).get("state"))
    if declared:
        return f"declares state: {', '.join(declared)}"
    if side.graph.by_id[nid].factory is Factory.SOURCE:
        return f"a FLIP-27 source: its splits are operator state ({SOURCE_READER_STATE})"
    entry = (side.sql_state or {}).get(str(nid))
    if isinstance(entry, dict) and (entry.get("types") or entry.get("key") is not None):
        return "a SQL operator with state (its state types are in the export's sql_state)"
    if has_keyed_input(side.graph, nid):
        return "a keyed input (keyBy): its state and timers are keyed state"
    return None


def unpinned_stateful(side: GraphSide, ids: OperatorIds) -> list[UnpinnedState]:
    """Every stateful operator of the graph that neither `uid()` nor `setUidHash()` pins, in node order."""
    out = []
    for node in side.graph.nodes:
        if node.uid is not None or node.uid_hash is not None:
            continue
        why = stateful_reason(side, node.id)
        if why is not None:
            out.append(UnpinnedState(node.id, node.name, ids.pairs[node.id].generated.hex(), why))
    return out

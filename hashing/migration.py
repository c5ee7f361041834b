"""The V2 -> V3 migration table: for every operator, its id today, its id under FLIP-411's V3
hasher, and what lets V2 state restore into it (so a person can read a hasher switch).
"""

from __future__ import annotations

from dataclasses import dataclass

from hashing.frozen import fast_init
from hashing.graph import StreamGraph
from hashing.operator_ids import compute_operator_ids
from hashing.versions import FlinkVersion


@fast_init
@dataclass(frozen=True, slots=True)
class MigrationRow:
    node_id: int
    name: str
    uid: str | None
    v2_id: str
    v3_id: str
    restores_by: str  # "same id" | "uid hash" | "v2 alternative"

    @property
    def changed(self) -> bool:
        return self.v2_id != self.v3_id


def v2_to_v3(graph: StreamGraph, flink_version: str | FlinkVersion | None = None) -> list[MigrationRow]:
    v2 = compute_operator_ids(graph, "v2", flink_version)
    v3 = compute_operator_ids(graph, "v3", flink_version)
    rows = []
    for nid, pair in v3.pairs.items():
        old = v2.pairs[nid].generated
        if pair.generated == old:
            how = "same id"
        elif v2.pairs[nid].user_defined is not None:
            how = "uid hash"  # V2 state of a setUidHash node lives under the hash, which V3 keeps first
        else:
            how = "v2 alternative"
        rows.append(MigrationRow(nid, pair.name, pair.uid, old.hex(), pair.generated.hex(), how))
    return rows

"""The autoscaler's per-vertex parallelism overrides after a graph change.

The Flink Kubernetes Operator's autoscaler writes its decisions to `pipeline.jobvertex-parallelism-overrides`
(`PipelineOptions.PARALLELISM_OVERRIDES`: `<JobVertexID>:<parallelism>,...`). Flink's `Dispatcher` applies it by
looking every job vertex of the submitted job up by `JobVertexID.toHexString()`; a key that names no vertex is
ignored without a word. A JobVertexID is the generated ID of the chain's head operator, so a change that re-keys
an operator or re-chains it (a head now chained behind another operator) leaves the override behind, and the
vertex silently runs at the spec's parallelism instead of the one the autoscaler chose. The savepoint still
holds the old head operator under that ID, so the new job's vertex holding that operator is the override's new
key (docs/guide.md, "Kubernetes upgrade modes").
"""

from __future__ import annotations

from collections.abc import Iterator

from upgrade_gate.gate.findings import Finding, Note
from upgrade_gate.gate.rules import RuleContext

__all__ = ["OVERRIDES", "orphaned_parallelism_overrides", "parse_overrides"]

OVERRIDES = "pipeline.jobvertex-parallelism-overrides"


def parse_overrides(value: str) -> dict[str, str]:
    """`id:parallelism,id:parallelism` (Flink's map syntax) as {lower-case id: parallelism}; unparsable entries
    are kept by their text, so they are named rather than dropped."""
    out: dict[str, str] = {}
    for entry in value.split(","):
        key, _, parallelism = entry.strip().partition(":")
        if key.strip():
            out[key.strip().lower()] = parallelism.strip()
    return out


def orphaned_parallelism_overrides(ctx: RuleContext) -> Iterator[Finding]:
    config = ctx.inputs.flink_config
    value = config.get(OVERRIDES) if config is not None else None
    if not value:
        return
    vertices = {v.id_hex: v for v in ctx.sim.vertices}
    for key, parallelism in parse_overrides(value).items():
        if key in vertices:
            continue
        ignored = (f"autoscaler override {key}:{parallelism} ({OVERRIDES}) names no job vertex of the new job: Flink "
                   f"ignores it without a word")
        nid = next((n for n, pair in ctx.ids.pairs.items()
                    if key in (pair.generated.hex(), *(a.hex() for a in pair.alternatives))), None)
        holder = next((v for v in ctx.sim.vertices if nid in v.vertex.node_ids_head_first), None)
        if holder is None or nid is None:
            yield Note(f"{ignored}; no operator of the new job has that ID (the vertex's head operator was removed or "
                       f"re-keyed): drop the override, or let the autoscaler decide again")
            continue
        node = ctx.graph.by_id[nid]
        moved = (f"{ignored}; operator '{node.name}' holds that ID now, in job vertex '{holder.name}' "
                 f"({holder.id_hex}, parallelism {holder.parallelism} without the override)")
        if node.uid is not None or getattr(node, "uid_hash", None) is not None:
            yield Note(f"{moved}: the override's new key is {holder.id_hex}:{parallelism}")
        else:  # a uid-less ID comes from the operator's position: another operator may have taken it
            yield Note(f"{moved}; it has no uid, so its ID comes from its position: if it is the operator the "
                       f"autoscaler scaled, the override's new key is {holder.id_hex}:{parallelism}")

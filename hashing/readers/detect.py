"""Auto-detect the kind of graph document a user handed us and parse it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hashing.errors import InputError
from hashing.graph import StreamGraph
from hashing.readers.plan import is_execution_plan, parse_execution_plan
from hashing.readers.source import read_document
from hashing.readers.spec import parse_spec

# Spec node fields the hasher ignores but people and the misrouting check read: they tell two
# same-shaped operators apart (docs/graph-spec.md).
DESCRIPTIVE_FIELDS = ("kind", "state", "key_type", "factory_class", "connector")


@dataclass(frozen=True)
class LoadedGraph:
    """A graph as read from one document, with everything any caller needs, so it is read once."""

    graph: StreamGraph
    kind: str  # "spec" | "execution-plan"
    assumptions: list[str] = field(default_factory=list)
    origin: str = ""
    extras: dict[int, dict[str, Any]] = field(default_factory=dict)  # node id -> DESCRIPTIVE_FIELDS present
    # the exporter's top-level `sql_state`: per SQL operator its key and state row types (docs/graph-spec.md)
    sql_state: dict[str, Any] | None = None


def _extras(doc: Any) -> dict[int, dict[str, Any]]:
    """Node id -> its descriptive fields; a node without any (most) is passed over with one C-level check."""
    extras: dict[int, dict[str, Any]] = {}
    for raw in doc.get("nodes") or ():
        if isinstance(raw, dict) and type(raw.get("id")) is int and not raw.keys().isdisjoint(DESCRIPTIVE_FIELDS):
            found = {k: raw[k] for k in DESCRIPTIVE_FIELDS if k in raw}
            if found:
                extras[raw["id"]] = found
    return extras


def parse_graph(doc: Any, origin: str) -> LoadedGraph:
    if isinstance(doc, dict) and "flinkVersion" in doc and "nodes" in doc:
        raise InputError(f"{origin}: this is a FLIP-190 compiled SQL plan; turn it into a graph spec with real "
                         "Flink first: upgrade-gate export --compiled-plan " + origin)
    if is_execution_plan(doc):
        graph, assumptions = parse_execution_plan(doc, origin)
        return LoadedGraph(graph, "execution-plan", assumptions, origin)
    graph = parse_spec(doc, origin)
    sql_state = doc.get("sql_state") if isinstance(doc, dict) else None
    return LoadedGraph(graph, "spec", [], origin, _extras(doc),
                       sql_state if isinstance(sql_state, dict) and sql_state else None)


def load_graph(path: str | Path) -> LoadedGraph:
    return parse_graph(read_document(path), str(path))

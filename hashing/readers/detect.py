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


@dataclass(frozen=True)
class LoadedGraph:
    graph: StreamGraph
    kind: str  # "spec" | "execution-plan"
    assumptions: list[str] = field(default_factory=list)


def parse_graph(doc: Any, origin: str) -> LoadedGraph:
    if isinstance(doc, dict) and "flinkVersion" in doc and "nodes" in doc:
        raise InputError(f"{origin}: this is a FLIP-190 compiled SQL plan; turn it into a graph spec with real "
                         "Flink first: upgrade-gate export --compiled-plan " + origin)
    if is_execution_plan(doc):
        graph, assumptions = parse_execution_plan(doc, origin)
        return LoadedGraph(graph, "execution-plan", assumptions)
    return LoadedGraph(parse_spec(doc, origin), "spec")


def load_graph(path: str | Path) -> LoadedGraph:
    return parse_graph(read_document(path), str(path))

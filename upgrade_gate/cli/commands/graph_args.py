"""Arguments shared by the commands that read a job graph."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from hashing.errors import FlinkError
from hashing.readers import LoadedGraph
from upgrade_gate.storage.objects import read_graph
from upgrade_gate.vocabulary import DEFAULT_FLINK_VERSION, FLINK_VERSIONS


def add_graph_arguments(parser: argparse.ArgumentParser, graph_help: str) -> None:
    parser.add_argument("graph", metavar="GRAPH", help=graph_help)
    parser.add_argument("--flink-version", default=None,
                        help=f"Flink version that will run the job (default {DEFAULT_FLINK_VERSION}; "
                             f"{FLINK_VERSIONS[0]}-{FLINK_VERSIONS[-1]} supported)")
    parser.add_argument("--format", choices=("table", "json"), default="table", help="output format (default table)")


def load_with_notes(path: str) -> LoadedGraph:
    """Load a graph and tell the user, on stderr, every default we had to assume."""
    loaded = read_graph(path)
    if loaded.assumptions:
        print(f"note: {path} is a Flink execution plan; assumed:", file=sys.stderr)
        for a in loaded.assumptions:
            print(f"  - {a}", file=sys.stderr)
    return loaded


@contextmanager
def graph_named(origin: str) -> Iterator[None]:
    """A rule Flink itself would refuse the graph by (a uid hash collision, an empty uid) names the file."""
    try:
        yield
    except FlinkError as exc:
        if str(exc).startswith(origin):
            raise
        raise FlinkError(f"{origin}: Flink would refuse this job graph: {exc}") from None

"""Reading a graph document with bounded time and memory, and one clear error per failure.

Graph files come from users (through S3, into Airflow workers and Spark executors). The reading itself
is the shared hardened reader, `hashing.documents` (regular files only, bounded size, values and depth,
YAML without aliases, anchors, merge keys or tags); this module holds the graph's limits and words, so
every caller (CLI, Airflow, Spark) reads a graph the same way. Every error is an `InputError` whose
message starts with the file's name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hashing import documents
from hashing.documents import read_local_file
from hashing.errors import InputError

__all__ = ["GRAPH_LIMITS", "MAX_DEPTH", "MAX_GRAPH_BYTES", "MAX_NUMBER_CHARS", "MAX_VALUES", "load_yaml",
           "parse_bytes", "parse_text", "read_document", "read_local_file"]

MAX_GRAPH_BYTES = 16 * 1024 * 1024  # a 200-operator spec is ~50 KB, a 2,000-operator SQL export ~5 MB
# Containers and separators a graph document may hold before it is parsed: every one becomes a Python
# object, so this (not the byte size) bounds the memory a parse takes (~60 MB at the cap; a spec node
# has about 12). A 2,000-operator graph has about 40,000.
MAX_VALUES = 1_000_000
# A spec is 5 levels deep (document, nodes, node, state, state entry) and Flink's execution plan 4;
# 100 leaves room for descriptive fields and stays far below Python's recursion limit, so nothing
# that later prints or walks a value can overflow the stack.
MAX_DEPTH = 100
# Java's long has 19 digits; a longer number is no id, parallelism or index, and YAML's base-60
# integers ("1:2:3:...") cost quadratic time in their length.
MAX_NUMBER_CHARS = 100
GRAPH_LIMITS = documents.Limits(MAX_GRAPH_BYTES, MAX_VALUES, MAX_DEPTH, MAX_NUMBER_CHARS)
WHAT = "a graph file"


ARCHIVE_MAGIC = b"PK\x03\x04"  # a jar is a zip archive (java.util.jar.JarFile)


def _refuse_archive(head: bytes, origin: str) -> None:
    """A job jar given where its graph belongs is the commonest mix-up: say how to get the graph from it."""
    if head.startswith(ARCHIVE_MAGIC):
        raise InputError(f"{origin}: a jar (zip archive), not a graph file; export the job's graph from it first: "
                         f"upgrade-gate export --jar {origin} -p <the job's parallelism> -o graph.json")


def read_document(path: str | Path) -> Any:
    """Parse JSON or YAML (by extension, falling back to content) and return the document."""
    p = Path(path)
    try:
        with p.open("rb") as f:  # before the size limit: a jar is larger than any graph
            _refuse_archive(f.read(len(ARCHIVE_MAGIC)), str(p))
    except OSError:
        pass  # read_local_file says what is wrong with the path
    data = read_local_file(p, MAX_GRAPH_BYTES, what="a graph file (JSON or YAML)")
    return parse_bytes(data, str(p), yaml_first=p.suffix.lower() in (".yaml", ".yml"))


def parse_bytes(data: bytes, origin: str, yaml_first: bool = False) -> Any:
    """`parse_text` of UTF-8 bytes (what `read_object` returns)."""
    _refuse_archive(data[: len(ARCHIVE_MAGIC)], origin)
    return documents.parse_bytes(data, origin, what=WHAT, limits=GRAPH_LIMITS, yaml_first=yaml_first)


def parse_text(text: str, origin: str, yaml_first: bool = False) -> Any:
    """The document in `text` (JSON, else YAML), plain data only, nested at most `MAX_DEPTH` deep."""
    return documents.parse_text(text, origin, what=WHAT, limits=GRAPH_LIMITS, yaml_first=yaml_first)


def load_yaml(text: str, origin: str, *, what: str = WHAT, error: type[InputError] = InputError) -> Any:
    """One YAML document as plain data (see `hashing.documents.load_yaml`)."""
    return documents.load_yaml(text, origin, what=what, limits=GRAPH_LIMITS, error=error)

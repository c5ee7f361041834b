"""The size limits of one kind of document, on their own so that the YAML loader (`hashing.yaml_loader`, imported by
`hashing.documents` only when a YAML document is read) can name them without importing its importer."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Limits:
    """What one kind of document may hold. The defaults are the graph reader's (docs/graph-spec.md)."""

    max_bytes: int = 16 * 1024 * 1024
    # containers, separators and lines counted in the text before it is parsed (~60 bytes of objects each)
    max_values: int = 1_000_000
    max_depth: int = 100
    # Java's long has 19 digits; a longer number is no id, count, timestamp or size
    max_number_chars: int = 100

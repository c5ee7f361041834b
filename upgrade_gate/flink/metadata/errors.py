"""Errors of the `_metadata` reader.

Every malformed input ends in a `MetadataFormatError`: one line naming the file, the byte
offset where reading stopped and what was expected there. It is an `InputError`, so the CLI
exits with code 2 and prints no traceback.
"""

from __future__ import annotations

from hashing.errors import InputError

__all__ = ["MetadataFormatError"]


class MetadataFormatError(InputError):
    """A `_metadata` file (or object) that is truncated, foreign or corrupt."""

    def __init__(self, source: str, offset: int, message: str) -> None:
        super().__init__(f"{source}: offset {offset}: {message}")
        self.source = source
        self.offset = offset
        self.detail = message

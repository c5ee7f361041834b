"""Errors a user can act on.

Everything the CLI reports as "bad input" (exit code 2, one line, no traceback) derives from
`InputError`; its message must name the file or object and what is wrong with it. Errors that
Flink itself would raise for a valid-looking input carry Flink's exact text in `FlinkError`,
so users can search for it.
"""

from __future__ import annotations


class InputError(ValueError):
    """Bad input: a malformed graph, savepoint or argument. The CLI exits with code 2."""


class FlinkError(InputError):
    """An input Flink itself rejects; `str()` is Flink's own message text."""

    def __init__(self, message: str, java_class: str = "java.lang.IllegalArgumentException") -> None:
        super().__init__(message)
        self.java_class = java_class


def describe(value: object, limit: int = 60) -> str:
    """`value` for an error message: one short line that never raises and never recurses.

    Error messages quote what the user wrote, but a hostile file can hold a 10 MB string, an
    integer with a million digits (whose `repr` raises ValueError) or a list nested a thousand
    levels deep (whose `repr` overflows the stack): those are summarised instead of printed."""
    if value is None or isinstance(value, (bool, float)):
        return repr(value)
    if isinstance(value, int):
        if value.bit_length() > 128:
            return f"an integer of about {value.bit_length() * 30103 // 100000 + 1} digits"
        return repr(value)
    if isinstance(value, str):
        if len(value) > limit:
            return f"{value[:limit]!r}... ({len(value)} characters)"
        return repr(value)
    if isinstance(value, list):
        return f"a list of {len(value)} item(s)"
    if isinstance(value, dict):
        return f"an object with {len(value)} field(s)"
    return f"a value of type {type(value).__name__}"

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

"""Which task errors are worth a retry.

A missing graph, a savepoint path that names nothing, a malformed spec or `_metadata`: the same
input gives the same error on every try, so the task fails once (`AirflowFailException`, no retry,
no retry delay before the user sees the one-line message). A timeout, an S3 5xx or a cut
connection may pass on the next try, so it is re-raised as it is and the task's retries apply.
The wording comes from the core (`hashing.errors.InputError`, `upgrade_gate.storage.s3.StorageError`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from hashing.errors import InputError
from upgrade_gate.storage.s3 import StorageError

# StorageError wordings that describe the input, not the weather (upgrade_gate/storage/*.py)
DETERMINISTIC_STORAGE = ("no such object", "no such bucket", "no such directory", "no such file",
                         "no complete", "not a directory", "expected ", "unsupported scheme", "larger than",
                         "not valid", "unknown option", "access denied", "ambiguous", "not a yaml",
                         "is not a flink version", "no job named", "has no completed")


class BadInput(ValueError):
    """A task parameter that cannot work (raised by the DAG's own steps)."""


def is_deterministic(exc: BaseException) -> bool:
    """True when retrying with the same input cannot help."""
    if isinstance(exc, BadInput):
        return True
    if isinstance(exc, StorageError):
        text = str(exc).lower()
        if "timed out" in text:
            return False
        return any(marker in text for marker in DETERMINISTIC_STORAGE)
    return isinstance(exc, InputError)


@contextmanager
def fail_once_on_bad_input() -> Iterator[None]:
    """Turn a deterministic input error into `AirflowFailException` (the task is not retried)."""
    try:
        yield
    except Exception as exc:
        if not is_deterministic(exc):
            raise
        from airflow.sdk.exceptions import AirflowFailException

        raise AirflowFailException(f"bad input, not retried: {exc}") from exc

"""Which Flink release will run the job, and the rules that differ between releases.

Users pass `--flink-version 1.20` or `2.3.0`; rules that changed (empty uids, `_metadata`
versions, uid-hash matching) look the answer up here instead of comparing strings.
"""

from __future__ import annotations

from dataclasses import dataclass

from hashing.errors import InputError

# Chaining rules used by the hasher are identical across these (flink-internals.md §2.2).
SUPPORTED = ("1.18", "1.19", "1.20", "2.0", "2.1", "2.2", "2.3")
DEFAULT = "2.3"


@dataclass(frozen=True, order=True)
class FlinkVersion:
    major: int
    minor: int

    @classmethod
    def parse(cls, text: str | None) -> FlinkVersion:
        text = (text or DEFAULT).strip()
        parts = text.split(".")
        try:
            major, minor = int(parts[0]), int(parts[1])
        except (IndexError, ValueError):
            raise InputError(f"--flink-version {text!r}: expected MAJOR.MINOR such as 1.20 or 2.3") from None
        if f"{major}.{minor}" not in SUPPORTED:
            raise InputError(f"--flink-version {text}: supported Flink versions are {', '.join(SUPPORTED)}")
        return cls(major, minor)

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"

    @property
    def rejects_empty_uid(self) -> bool:
        """2.0+ (FLINK-36001): `OperatorIDPair` refuses empty operator names and uids."""
        return self.major >= 2

"""Which Flink release will run the job, and the rules that differ between releases.

Users pass `--flink-version 1.20` or `2.3.0`; rules that changed (empty uids, `_metadata`
versions, uid-hash matching) look the answer up here instead of comparing strings.
"""

from __future__ import annotations

from dataclasses import dataclass

from hashing.errors import InputError

# Chaining rules used by the hasher are identical across these (`StreamingJobGraphGenerator#isChainable`).
SUPPORTED = ("1.18", "1.19", "1.20", "2.0", "2.1", "2.2", "2.3")
DEFAULT = "2.3"

# The `_metadata` format version each release writes (`Checkpoints` / `MetadataSerializers`, checked in the
# release jars: `MetadataV4Serializer` in 1.16–1.20, V5 in 2.0, V6 in 2.1–2.3). A release reads
# every version from OLDEST_READ_METADATA_VERSION up to the one it writes, and nothing newer:
# 1.20 fails on a 2.x savepoint with "Unrecognized checkpoint version number: 6".
_METADATA_VERSION_WRITTEN = {"1.18": 4, "1.19": 4, "1.20": 4, "2.0": 5, "2.1": 6, "2.2": 6, "2.3": 6}
OLDEST_READ_METADATA_VERSION = 2  # v1 (Flink 1.2) is refused by every supported release


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

    @property
    def metadata_version(self) -> int:
        """The `_metadata` format version this release writes (and the newest it reads)."""
        return _METADATA_VERSION_WRITTEN[str(self)]

    def reads_metadata(self, version: int) -> bool:
        """Whether this release reads format `version` (else "Unrecognized checkpoint version number")."""
        return OLDEST_READ_METADATA_VERSION <= version <= self.metadata_version

    def or_older_writer_of(self, metadata_version: int) -> FlinkVersion:
        """The release line whose rules wrote a savepoint of this `_metadata` version, when that is older
        than this one: a v4 savepoint was written by 1.x, whose rules (empty uids allowed) then applied.
        Within a line the rules the hasher follows are the same, so the newest release of it stands in."""
        if metadata_version <= 4 < self.metadata_version:
            return FlinkVersion.parse("1.20")
        return self

"""Which Flink release will run the job, and the rules that differ between releases.

Users pass `--flink-version 1.20` or `2.3.0`; rules that changed (empty uids, `_metadata`
versions, uid-hash matching) look the answer up here instead of comparing strings.

`RELEASES` is the one table of the Flink releases the project supports: the CLI's choices, the
DAGs' `Param` enums, the Spark jobs' flags, the jars `flink_bridge` installs (`make flink`, the
Airflow image) and the plans measured (`upgrade_gate/gate/plan_versions.py`) all derive from it,
so a new release is one row here (README.md, "Supporting a new Flink release";
tests/test_release_table.py fails where a release is spelled outside it).
"""

from __future__ import annotations

from dataclasses import dataclass

from hashing.errors import InputError


@dataclass(frozen=True)
class Release:
    """One supported release line and the facts about it that the rules look up."""

    line: str  # "major.minor", as users pass it
    # The `_metadata` format version the line writes (`Checkpoints` / `MetadataSerializers`, checked in the
    # release jars: `MetadataV4Serializer` in 1.16–1.20, V5 in 2.0, V6 in 2.1–2.3).
    metadata_version: int
    # The exact `apache-flink-libraries` release whose jars `flink_bridge/dist.py` installs as the oracle and
    # exporter; None when pip has none we can use.
    patch: str | None


# Chaining rules used by the hasher are identical across these (`StreamingJobGraphGenerator#isChainable`).
# 1.18 has no patch release: it has neither config.yaml nor the Sink V2 committer API our Java helpers use.
RELEASES = (
    Release("1.18", 4, None),
    Release("1.19", 4, "1.19.3"),
    Release("1.20", 4, "1.20.5"),
    Release("2.0", 5, "2.0.2"),
    Release("2.1", 6, "2.1.3"),
    Release("2.2", 6, "2.2.1"),
    Release("2.3", 6, "2.3.0"),
)
DEFAULT = "2.3"

SUPPORTED = tuple(r.line for r in RELEASES)
# "major.minor" -> the exact release we install, for every line pip can fetch (downloaded on first use)
PATCH_RELEASES: dict[str, str] = {r.line: r.patch for r in RELEASES if r.patch}
_BY_LINE = {r.line: r for r in RELEASES}

# A release reads every `_metadata` version from OLDEST_READ_METADATA_VERSION up to the one it writes, and
# nothing newer: 1.20 fails on a 2.x savepoint with "Unrecognized checkpoint version number: 6".
OLDEST_READ_METADATA_VERSION = 2  # v1 (Flink 1.2) is refused by every supported release
# the newest 1.x line: its rules (empty uids allowed) stand for every 1.x writer of a savepoint
_NEWEST_1X = max((r for r in RELEASES if r.line.startswith("1.")), key=lambda r: int(r.line.split(".")[1]))


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
        return _BY_LINE[str(self)].metadata_version

    def reads_metadata(self, version: int) -> bool:
        """Whether this release reads format `version` (else "Unrecognized checkpoint version number")."""
        return OLDEST_READ_METADATA_VERSION <= version <= self.metadata_version

    def or_older_writer_of(self, metadata_version: int) -> FlinkVersion:
        """The release line whose rules wrote a savepoint of this `_metadata` version, when that is older
        than this one: a v4 savepoint was written by 1.x, whose rules (empty uids allowed) then applied.
        Within a line the rules the hasher follows are the same, so the newest release of it stands in."""
        if metadata_version <= _NEWEST_1X.metadata_version < self.metadata_version:
            return FlinkVersion.parse(_NEWEST_1X.line)
        return self

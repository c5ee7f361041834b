"""Helpers shared by the `_metadata` tests: fixture discovery, path templating, a tiny writer.

The writer (`MetadataBuilder`) emits the DataOutputStream encoding Flink's serializers write,
for synthetic files that exercise error paths and versions no installable Flink writes (v2, v3).
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "savepoints"
EXPECTED_VERSION = {"1.20.5": 4, "2.0.2": 5, "2.3.0": 6}


def fixture_dirs() -> list[Path]:
    return sorted(p.parent for p in FIXTURES.glob("*/*/flink-view.json"))


def fixture_id(p: Path) -> str:
    return f"{p.parent.name}/{p.name}"


def template(obj: Any, base: str) -> Any:
    """Replace the snapshot directory in resolved paths by ${SAVEPOINT}, as the Java dumper does."""
    if isinstance(obj, dict):
        return {k: template(v, base) for k, v in obj.items()}
    if isinstance(obj, list):
        return [template(v, base) for v in obj]
    if isinstance(obj, str) and obj.startswith(base):
        return "${SAVEPOINT}" + obj[len(base):]
    return obj


def flink_view(d: Path) -> dict[str, Any]:
    return json.loads((d / "flink-view.json").read_text())


def first_difference(a: Any, b: Any, path: str = "") -> str | None:
    """A readable pointer to the first field where our reading and Flink's differ."""
    if type(a) is not type(b):
        return f"{path}: {a!r} != {b!r}"
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                return f"{path}/{k}: present only in {'ours' if k in a else 'Flink'}"
            d = first_difference(a[k], b[k], f"{path}/{k}")
            if d:
                return d
        return None
    if isinstance(a, list):
        if len(a) != len(b):
            return f"{path}: {len(a)} items != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            d = first_difference(x, y, f"{path}[{i}]")
            if d:
                return d
        return None
    return None if a == b else f"{path}: {a!r} != {b!r}"


def abspath(d: Path) -> str:
    return os.path.abspath(d)


class MetadataBuilder:
    """Big-endian writer mirroring `DataOutputStream`."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def int(self, v: int) -> MetadataBuilder:
        self.buf += struct.pack(">i", v)
        return self

    def long(self, v: int) -> MetadataBuilder:
        self.buf += struct.pack(">q", v)
        return self

    def byte(self, v: int) -> MetadataBuilder:
        self.buf += struct.pack(">B", v & 0xFF)
        return self

    def utf(self, s: str) -> MetadataBuilder:
        raw = s.encode("utf-8")
        self.buf += struct.pack(">H", len(raw)) + raw
        return self

    def raw(self, b: bytes) -> MetadataBuilder:
        self.buf += b
        return self

    def bytes(self) -> bytes:
        return bytes(self.buf)


def header(version: int) -> MetadataBuilder:
    return MetadataBuilder().int(0x4960672D).int(version)


def v3_file(subtask_body: bytes, *, version: int = 3, parallelism: int = 2, trailer: bytes = b"") -> bytes:
    """One operator with one subtask (index 0) whose state bytes are `subtask_body`."""
    b = header(version).long(7).int(0).int(1)
    if version >= 5:
        b.utf("op").utf("op-uid")
    b.raw(bytes(range(16))).int(parallelism).int(128).byte(0).int(1).int(0).raw(subtask_body)
    return b.raw(trailer).bytes()


def empty_subtask() -> bytes:
    """No operator state, no keyed state, no channel state (v3+)."""
    return MetadataBuilder().int(0).int(0).byte(0).byte(0).int(0).int(0).bytes()

"""The pins of requirements.txt, the one pin list: the Makefile and the Dockerfiles install with
`-c requirements.txt`, and the tests that compare a deployment with the tested versions read them here."""

from __future__ import annotations

import re
from pathlib import Path

REQUIREMENTS = Path(__file__).resolve().parent.parent / "requirements.txt"


def requirement_pins() -> dict[str, str]:
    """Package name (lower case) -> pinned version."""
    pins = {}
    for line in REQUIREMENTS.read_text(encoding="utf-8").splitlines():
        m = re.match(r"^([A-Za-z0-9_.-]+)==([^\s#]+)", line.strip())
        if m:
            pins[m.group(1).lower()] = m.group(2)
    return pins

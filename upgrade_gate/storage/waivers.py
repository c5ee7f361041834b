"""Reading `.upgrade-gate.yaml`: the team's threshold and intended losses, recorded in the repository.

One reader for every front end (the CLI's `--waivers`, the DAGs' `waivers` parameter, the fleet scan's `--waivers`),
so one file means the same everywhere; the decision itself is `upgrade_gate.gate.policy.decide`. The format is in
docs/guide.md, "Recording an intended loss":

    fail_on: STATE_MISROUTED          # optional: the threshold when --fail-on is not given
    waivers:
      - operator: old-dedup           # uid, name or operator id
        state: seen-ids               # optional: only this state
        job: orders-enrichment        # optional: only this fleet job
        reason: dedup moved to the sink, its state is obsolete
        who: data-platform (J. Doe)
        expires: 2026-12-31           # ISO date, the last day it applies

A bad file is one `StorageError` naming the file, the entry and what is wrong; unknown keys are errors (a misspelt
`expire:` must not silently make a waiver last forever).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any

from hashing.documents import Limits, parse_bytes
from upgrade_gate.gate.waivers import Waiver
from upgrade_gate.storage.objects import read_object
from upgrade_gate.storage.s3 import StorageError
from upgrade_gate.vocabulary import Verdict

__all__ = ["DEFAULT_FILE", "GatePolicyFile", "find_default", "read_policy_file"]

DEFAULT_FILE = ".upgrade-gate.yaml"
WHAT = "an upgrade-gate policy file (YAML: fail_on, waivers)"
LIMITS = Limits(max_bytes=1 << 20, max_values=100_000, max_depth=16, max_number_chars=40)
TOP_KEYS = {"fail_on", "waivers"}
REQUIRED = ("operator", "reason", "who", "expires")
OPTIONAL = ("state", "job")
LEVELS = tuple(v for v in Verdict if v.blocks)


@dataclass(frozen=True)
class GatePolicyFile:
    """What the file says: its threshold (None: not set) and its waivers."""

    origin: str
    fail_on: Verdict | None
    waivers: tuple[Waiver, ...]


def find_default(directory: str | Path = ".") -> str | None:
    """`.upgrade-gate.yaml` in `directory` (the CLI's current directory), if there is one."""
    path = Path(directory) / DEFAULT_FILE
    return str(path) if path.is_file() else None


def read_policy_file(location: str, *, client: Any | None = None) -> GatePolicyFile:
    """The file at a path, `file://` or `s3://` URI (read through `storage.objects`, bounded like every object)."""
    data = read_object(location, max_bytes=LIMITS.max_bytes, client=client, what=WHAT)
    doc = parse_bytes(data, location, what=WHAT, limits=LIMITS, error=StorageError, yaml_first=True)
    if not isinstance(doc, dict):
        raise StorageError(f"{location}: expected a mapping with `waivers:` (a list) and optionally `fail_on:`, "
                           f"found {type(doc).__name__}")
    unknown = sorted(set(doc) - TOP_KEYS)
    if unknown:
        raise StorageError(f"{location}: unknown key {unknown[0]!r} (known: {', '.join(sorted(TOP_KEYS))})")
    fail_on = doc.get("fail_on")
    if fail_on is not None and fail_on not in LEVELS:
        raise StorageError(f"{location}: fail_on is {fail_on!r}; expected one of {', '.join(LEVELS)}")
    entries = doc.get("waivers") or []
    if not isinstance(entries, list):
        raise StorageError(f"{location}: waivers must be a list, found {type(entries).__name__}")
    waivers = tuple(_waiver(entry, f"{location}: waiver {i}", f"{location} #{i}")
                    for i, entry in enumerate(entries, 1))
    return GatePolicyFile(location, Verdict(fail_on) if fail_on else None, waivers)


def _waiver(entry: Any, where: str, origin: str) -> Waiver:
    if not isinstance(entry, dict):
        raise StorageError(f"{where}: expected a mapping (operator, reason, who, expires), found "
                           f"{type(entry).__name__}")
    if isinstance(entry.get("operator"), str) and entry["operator"].strip():
        where = f"{where} ({entry['operator'].strip()})"
    unknown = sorted(set(entry) - set(REQUIRED) - set(OPTIONAL))
    if unknown:
        raise StorageError(f"{where}: unknown key {unknown[0]!r} (known: {', '.join((*REQUIRED, *OPTIONAL))})")
    missing = [k for k in REQUIRED if entry.get(k) in (None, "")]
    if missing:
        raise StorageError(f"{where}: {missing[0]} is required")
    text = {k: _text(entry[k], k, where) for k in (*REQUIRED[:3], *OPTIONAL) if entry.get(k) is not None}
    return Waiver(text["operator"], text["reason"], text["who"], _day(entry["expires"], where),
                  text.get("state"), text.get("job"), origin)


def _text(value: Any, key: str, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise StorageError(f"{where}: {key} must be a non-empty string, found {value!r}")
    return value.strip()


def _day(value: Any, where: str) -> date:
    """An ISO date (YAML reads an unquoted `2026-12-31` as a date already); a time of day is refused, since the
    waiver ends with a UTC day."""
    if isinstance(value, datetime):
        raise StorageError(f"{where}: expires must be a date (YYYY-MM-DD), not a time: {value.isoformat()}")
    if isinstance(value, date):
        return value
    try:
        return date.fromisoformat(str(value).strip())
    except ValueError:
        raise StorageError(f"{where}: expires must be an ISO date (YYYY-MM-DD), found {value!r}") from None

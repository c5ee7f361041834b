"""The state-meta reader parses each distinct proxy of a savepoint once (`reader._Seen`), keyed by the proxy's
own bytes: a stream's state follows its proxy, so two subtasks' streams differ where their proxies do not.

What the reader keeps must be what parsing every stream on its own gives. Fixtures: the real Flink 1.20 and
2.3 savepoints of test_state_meta.py (every backend, two subtasks in the `-p2` cases). The opener below makes
every stream's bytes differ after the proxy, as real state does.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from upgrade_gate.flink.state_meta import read_state_schemas, reader
from upgrade_gate.flink.state_meta.streams import Opener, StreamRef, local_opener
from upgrade_gate.storage.savepoints import load_savepoint

ROOT = Path(__file__).resolve().parent.parent / "fixtures" / "savepoints" / "state-schemas"
CASES = sorted(p.parent for p in ROOT.glob("*/*/flink-state-meta.json"))


def _distinct_tails() -> Opener:
    """Each stream read with its own bytes after whatever it holds."""
    counter = itertools.count()

    def open_stream(ref: StreamRef, limit: int) -> tuple[bytes, bool]:
        data, whole = local_opener(ref, limit)
        return data + next(counter).to_bytes(8, "big"), whole

    return open_stream


@pytest.mark.parametrize("case", CASES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_proxy_read_once_is_what_every_stream_holds(case: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    metadata = load_savepoint(str(case))
    shared = read_state_schemas(metadata, _distinct_tails(), strict=True)
    assert shared == read_state_schemas(metadata, strict=True)  # the plain reading
    monkeypatch.setattr(reader._Seen, "proxy", lambda self, data, parse: None)  # every stream parsed on its own
    assert shared == read_state_schemas(metadata, _distinct_tails(), strict=True)

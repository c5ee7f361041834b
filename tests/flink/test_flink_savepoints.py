"""Tier `flink`: re-create savepoints with real Flink now and check the reader agrees with Flink's fresh view.

Slow (a MiniCluster per case); run with `pytest -m flink`. Savepoints are compared by Flink's
reading of them, not byte for byte: they contain random ids and timestamps.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from flink_bridge.generate_savepoints import generate
from tests.metadata_support import first_difference, flink_view, template
from upgrade_gate.flink.metadata import to_json
from upgrade_gate.storage.savepoints import load_savepoint

pytestmark = pytest.mark.flink
CASES = ["hashmap-canonical-p2", "rocksdb-native-p2", "checkpoint-finished-tasks"]


@pytest.mark.parametrize("version", ["1.20", "2.3"])
def test_fresh_savepoints_read_like_flink(version: str, tmp_path: Path) -> None:
    written = generate(version, CASES, tmp_path)
    assert set(CASES) <= {d.name for d in written}  # 1.20 also yields the derived v3 files
    for d in written:
        ours = template(to_json(load_savepoint(str(d)), detail=True), os.path.abspath(d))
        assert first_difference(ours, flink_view(d)) is None, d

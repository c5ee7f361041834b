"""One restore in Flink's order (`CheckpointCoordinator.restoreSavepoint`): read `_metadata`, validate,
assign; upgrade_gate/flink/simulation.py.

`MetadataSerializers.getSerializer(version)` throws `IllegalArgumentException("Unrecognized checkpoint
version number: " + version)` for a format the release does not know: 1.x reads up to v4, 2.0 up to
v5, 2.1+ up to v6 (checked against the release jars).
"""

from __future__ import annotations

import pytest

from hashing.graph import StreamGraph, StreamNode
from hashing.operator_ids import compute_operator_ids
from hashing.versions import FlinkVersion
from tests.flink.support import metadata, operator
from upgrade_gate.flink.simulation import max_metadata_version, simulate


@pytest.mark.parametrize(("release", "newest"), [("1.18", 4), ("1.20", 4), ("2.0", 5), ("2.1", 6), ("2.3", 6)])
def test_newest_metadata_version_per_release(release: str, newest: int) -> None:
    assert max_metadata_version(FlinkVersion.parse(release)) == newest


def _simulate(version: int, flink: str, allow: bool = False):
    g = StreamGraph.of("job", [StreamNode(1, "Source: events", 2)], [])
    ids = compute_operator_ids(g, "v2", flink)
    st = operator(ids.pairs[1].generated)
    return simulate(metadata(st, version=version), g, ids, "file:/sp", allow_non_restored_state=allow,
                    matching="fixed")


def test_a_newer_metadata_format_fails_before_anything_is_validated() -> None:
    sim = _simulate(6, "1.20")
    assert sim.load is None and sim.assignment is None
    assert (sim.failure.message, sim.failure.java_class) == ("Unrecognized checkpoint version number: 6",
                                                             "java.lang.IllegalArgumentException")


def test_a_known_format_is_validated_then_assigned() -> None:
    sim = _simulate(5, "2.0")
    assert sim.failure is None and sim.assignment is not None
    assert [r.matched_by for r in sim.assignment.operators.values()] == ["generated"]

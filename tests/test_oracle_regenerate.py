"""The committed Flink fixtures are exactly what real Flink produces today.

Runs the oracle generator (real Flink 1.20.5 and 2.3.0 jars, one JVM per release) into a
temporary folder and compares every file byte for byte with `tests/fixtures/flink/`. If this
fails, either the fixtures were edited by hand or the generator changed: re-run
`python -m flink_bridge.generate_fixtures` and review the diff.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flink_bridge.generate_fixtures import DEFAULT_VERSIONS, generate
from tests.conftest import FLINK_FIXTURES, FLINK_RELEASES

pytestmark = pytest.mark.flink


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.json"))}


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("oracle")
    for version in DEFAULT_VERSIONS:
        generate(version, out)
    return out


@pytest.mark.parametrize("release", FLINK_RELEASES)
def test_committed_fixtures_are_byte_identical_to_real_flink(regenerated: Path, release: str) -> None:
    committed, fresh = _files(FLINK_FIXTURES / release), _files(regenerated / release)
    assert sorted(committed) == sorted(fresh), "fixture files added or missing: re-run the generator"
    changed = [name for name in fresh if fresh[name] != committed[name]]
    assert not changed, f"Flink {release} now gives different results for: {changed[:10]}"


@pytest.mark.parametrize("release", FLINK_RELEASES)
def test_flink_rejections_are_recorded_with_flinks_own_text(regenerated: Path, release: str) -> None:
    """A user who hits these errors searches for Flink's wording, so the fixtures must carry it."""
    def error_of(folder: str, case: str) -> dict:
        path = regenerated / release / folder / f"{case}.json"
        return json.loads(path.read_text(encoding="utf-8"))["flink"]["error"]

    collision = error_of("graphs", "uid_collision")
    assert collision["class"] == "java.lang.IllegalArgumentException"
    assert collision["message"].startswith('Hash collision on user-specified ID "dup".')
    empty = error_of("graphs", "empty_uid")
    if release.startswith("1."):
        assert empty is None, "Flink 1.x accepts uid(\"\") (all-zero operator id)"
    else:
        assert empty == {"class": "java.lang.IllegalArgumentException",
                         "message": "Empty string operator uid is not allowed"}
    missing = error_of("graph_errors", "auto_uids_disabled_missing_uid")
    assert "Auto generated UIDs have been disabled" in missing["message"]

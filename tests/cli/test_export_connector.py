"""`upgrade-gate export` records what a job's connectors read: the node's `connector` field (the FLIP-27 source's
split and enumerator serializer versions, read from its operator factory by real Flink), which the connector
serializer rule compares with a savepoint's headers (docs/guide.md, "Connector serializer versions").

The versions expected are the ones Flink's NumberSequenceSource really wrote into committed real-Flink savepoints
(TtlChanges.java's jobs read `fromSequence`), read back by the product's header reader: nothing is hand-written.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from flink_bridge.dist import classpath
from flink_bridge.exporter import export_spec
from tests.conftest import TESTS

pytestmark = pytest.mark.flink

SOURCE = "org.apache.flink.api.connector.source.lib.NumberSequenceSource"


@pytest.fixture(scope="module")
def exiting_jar(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ExitingJob (fromSequence -> keyBy/reduce -> DiscardingSink), built with javac + jar as a user's build would."""
    work = tmp_path_factory.mktemp("job")
    sources = [str(p) for p in (TESTS / "jobs" / "com" / "example" / "exiting").rglob("*.java")]
    subprocess.run(["javac", "-nowarn", "--release", "17", "-cp", classpath("2.3"), "-d", str(work / "classes"),
                    *sources], check=True, capture_output=True, text=True)
    jar = work / "exiting.jar"
    subprocess.run(["jar", "--create", "--file", str(jar), "-C", str(work / "classes"), "."], check=True)
    return jar


@pytest.mark.parametrize("flink", ["2.3", "1.20"])
def test_export_names_the_source_and_the_versions_it_reads(exiting_jar: Path, flink: str) -> None:
    spec = export_spec("jar", exiting_jar, main_class="com.example.exiting.ExitingJob", flink_version=flink)
    by_name = {n["name"]: n for n in spec["nodes"]}
    [source] = [n for n in spec["nodes"] if n.get("factory") == "source"]
    assert source["connector"]["class"] == SOURCE
    # what the export says the source reads is what the same source class wrote into a real savepoint
    assert (source["connector"]["split_serializer"], source["connector"]["enumerator_serializer"]) == _written(flink)
    # a stateless sink and a keyed reduce have no connector field: nothing of theirs is versioned connector state
    assert "connector" not in by_name["sum"]


def _written(flink: str) -> tuple[int, int]:
    """The split and enumerator versions NumberSequenceSource wrote into a committed real-Flink savepoint."""
    from upgrade_gate.flink.connector_state import ConnectorState, read_connector_versions
    from upgrade_gate.storage.savepoints import load_savepoint

    release = {"2.3": "2.3.0", "1.20": "1.20.5"}[flink]
    root = TESTS / "fixtures" / "savepoints" / "state-schemas" / "ttl" / release / "hashmap"
    metadata = load_savepoint(str(next(p.parent for p in sorted(root.rglob("_metadata")))))
    found = {w.state: w.versions for w in read_connector_versions(metadata)}
    [split], [enumerator] = found[ConnectorState.SPLITS], found[ConnectorState.ENUMERATOR]
    return split, enumerator

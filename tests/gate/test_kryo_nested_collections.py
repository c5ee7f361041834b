"""A Kryo-serialized class that is not a POJO and holds a java.util collection in its object graph, crossing Kryo
2 -> 5: the gate follows what Kryo wrote, not only the serializer snapshot (which names the class alone).

`python -m flink_bridge.generate_savepoints --kryo-nested` (KryoNested.java) wrote a savepoint with Flink 1.20.5
(HashMap and RocksDB), then restored it with 2.3.0 and, as the control, with 1.20.5, reading every key's value
back: tests/fixtures/savepoints/state-schemas/kryo-nested/outcomes.json. Expected verdicts come from there.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from upgrade_gate.cli.main import main
from upgrade_gate.flink.state_meta import read_state_schemas
from upgrade_gate.gate.state_schema_rules import kryo_misreads
from upgrade_gate.storage.savepoints import load_savepoint

ROOT = Path(__file__).resolve().parent.parent / "fixtures" / "savepoints" / "state-schemas" / "kryo-nested"
OUTCOMES = json.loads((ROOT / "outcomes.json").read_text())


def _check(savepoint: Path, flink: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["check", "--savepoint", str(savepoint), "--graph", str(ROOT / "graph.json"), "--flink-version",
                     flink, "--format", "json"])
    assert code in (0, 1), err.getvalue()
    return code, json.loads(out.getvalue())


@pytest.mark.parametrize("outcome", OUTCOMES, ids=lambda o: f"{o['savepoint']}-on-{o['restored_on']}")
def test_verdict_agrees_with_the_real_restore(outcome: dict) -> None:  # type: ignore[type-arg]
    """2.3 restored every key RUNNING but with list elements missing: STATE_CORRUPTED naming the state and the
    collection Kryo wrote; 1.20 restored every value intact: SAFE."""
    flink = ".".join(outcome["restored_on"].split(".")[:2])
    code, doc = _check(ROOT / outcome["savepoint"], flink)
    if set(outcome["states"].values()) == {"OK"}:
        assert (code, doc["verdict"]) == (0, "SAFE"), doc["losses"]
    else:
        assert outcome["status"] == "RUNNING" and outcome["states"]["holder"].startswith("BAD")
        assert (code, doc["verdict"]) == (1, "STATE_CORRUPTED")
        [loss] = doc["losses"]
        assert loss["state_names"] == ["holder"] and "java.util.ArrayList" in loss["reason"]


def test_the_snapshot_alone_does_not_show_the_collection() -> None:
    """Why the bytes are read: the state's Kryo snapshot names KryoNested$Holder only, which alone is a note."""
    schemas = read_state_schemas(load_savepoint(str(ROOT / "1.20.5" / "hashmap")))
    [m] = [m for m in kryo_misreads(schemas) if m.state.name == "holder"]
    assert m.snapshot.type_name == "ugate.savepoints.KryoNested$Holder" and not m.blocking

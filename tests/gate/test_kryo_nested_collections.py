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
# the same job with ArrayList registered with Kryo (`--kryo-nested-registered`): written by registration id
REGISTERED = json.loads((ROOT / "registered-outcomes.json").read_text())


def _check(savepoint: Path, flink: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["check", "--savepoint", str(savepoint), "--graph", str(ROOT / "graph.json"), "--flink-version",
                     flink, "--format", "json"])
    assert code in (0, 1), err.getvalue()
    return code, json.loads(out.getvalue())


@pytest.mark.parametrize("outcome", OUTCOMES + REGISTERED, ids=lambda o: f"{o['savepoint']}-on-{o['restored_on']}")
def test_verdict_agrees_with_the_real_restore(outcome: dict) -> None:  # type: ignore[type-arg]
    """2.3 restored every key RUNNING but with list elements missing: STATE_CORRUPTED naming the state and the
    collection Kryo wrote (by name, or, registered, by registration id: mapped back to the snapshot's
    registrations); 1.20 restored every value intact: SAFE."""
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


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_the_registered_list_is_written_by_id_not_by_name(backend: str) -> None:
    """Why names alone are not enough: no value of the registered savepoint holds the class's name, while its
    snapshot lists ArrayList right after the state's own type; the scan still finds it, through the id."""
    from upgrade_gate.flink.canonical import kryo_classes
    from upgrade_gate.flink.canonical.format import read_key_group
    from upgrade_gate.flink.metadata.model import KeyGroupsSavepointStateHandle
    from upgrade_gate.flink.metadata.reader import BoundedReader
    from upgrade_gate.flink.state_meta.proxy import read_keyed_proxy
    from upgrade_gate.flink.state_meta.streams import local_opener, stream_of

    metadata = load_savepoint(str(ROOT / "1.20.5" / f"registered-{backend}"))
    [op] = [o for o in metadata.operator_states if o.subtask_states and any(
        s.managed_keyed_state for s in o.subtask_states.values())]
    [holder] = [s for o in read_state_schemas(metadata) for s in o.states if s.name == "holder"]
    assert [n for n, _, _ in holder.serializer("VALUE_SERIALIZER").registrations][:2] == [
        "ugate.savepoints.KryoNested$Holder", "java.util.ArrayList"]
    values = []
    for s in op.subtask_states.values():
        for h in s.managed_keyed_state:
            assert isinstance(h, KeyGroupsSavepointStateHandle)
            ref = stream_of(h.delegate, metadata.source)
            data, _ = local_opener(ref, kryo_classes.MAX_SCANNED_BYTES)
            r = BoundedReader(data, ref.source)
            read_keyed_proxy(r, h.kind)
            for offset in (o for o in h.offsets if o):
                values += [e.value for e in read_key_group(r, offset, "key group")]
    assert len(values) == 8 and not any(list(kryo_classes._names(v)) for v in values)
    found = kryo_classes.kryo_written_classes(op, {"holder"}, local_opener, metadata.source)
    assert found == {"holder": {"java.util.ArrayList"}}

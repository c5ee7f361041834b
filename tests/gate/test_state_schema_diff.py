"""The schema diff of two savepoints of one job agrees with what real Flink did with them.

`generate_savepoints --schema-changes` (SchemaChanges.java) let job A write a savepoint, then restored it with
a job B whose state types changed (POJO field added, removed, retyped; Row and SQL's RowData field added,
retyped; key type),
on the HashMap and RocksDB backends, Flink 1.20.5 and 2.3.0, and recorded RUNNING (every value checked) or
Flink's error; B also wrote a savepoint of its own from scratch. The diff of A's and B's savepoints must say
"fails" exactly where Flink failed, with Flink's error text (serializer `@hash`es aside), and name the state.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from upgrade_gate.flink.state_meta import OperatorSchemas, SerializerSnapshot, StateMetaInfo, read_state_schemas
from upgrade_gate.flink.state_meta.model import KRYO_SNAPSHOT, POJO_SNAPSHOT
from upgrade_gate.gate.state_schema_diff import ENUM_SNAPSHOT, Compat, diff_schemas, resolve, serializer_class
from upgrade_gate.storage.savepoints import load_savepoint

ROOT = Path(__file__).resolve().parent.parent / "fixtures" / "savepoints" / "state-schemas" / "changes"
OUTCOMES = json.loads((ROOT / "outcomes.json").read_text())
CHANGED_STATE = {"pojo": "account", "row": "row", "rowdata": "rowdata", "key": "(key)"}


def _diff(outcome: dict) -> tuple[list, list]:  # type: ignore[type-arg]
    old = read_state_schemas(load_savepoint(str(ROOT / outcome["old_savepoint"])))
    new = read_state_schemas(load_savepoint(str(ROOT / outcome["new_savepoint"])))
    return diff_schemas(old, new)


@pytest.mark.parametrize("outcome", OUTCOMES, ids=lambda o: f"{o['release']}-{o['backend']}-{o['change']}")
def test_diff_agrees_with_what_flink_did(outcome: dict) -> None:  # type: ignore[type-arg]
    diffs, _notes = _diff(outcome)
    blocking = [d for d in diffs if d.blocking]
    if outcome["status"] == "RUNNING":
        assert not blocking, [d.summary() for d in blocking]
        assert set(outcome["states"].values()) == {"OK"}, outcome  # migrated: every value read back right
        if outcome["change"] != "none":
            assert [d.compat for d in diffs] == [Compat.MIGRATION] and diffs[0].state == "account"
    else:
        recorded = re.sub(r"@[0-9a-f]+", "", outcome["status"].removeprefix("FAILED: "))
        assert blocking, outcome
        first = blocking[0]
        assert first.state == CHANGED_STATE[outcome["change"].split("-")[0]]
        assert first.error(outcome["backend"]) == recorded


def test_recorded_outcomes_are_the_issues_facts() -> None:
    """Retyped POJO field: IllegalArgumentException on the heap backend, StateMigrationException on RocksDB;
    added and removed fields migrate; every change is recorded on both releases and both backends."""
    by = {(o["release"], o["backend"], o["change"]): o["status"] for o in OUTCOMES}
    assert len(by) == 2 * 2 * 9
    for release in ("1.20.5", "2.3.0"):
        assert by[(release, "hashmap", "pojo-field-retyped")].startswith("FAILED: java.lang.IllegalArgumentException")
        assert "StateMigrationException" in by[(release, "rocksdb", "pojo-field-retyped")]
        for backend in ("hashmap", "rocksdb"):
            assert by[(release, backend, "pojo-field-added")] == by[(release, backend, "pojo-field-removed")] \
                == "RUNNING"
            for change in ("row-field-added", "rowdata-field-added", "rowdata-field-retyped", "key-retyped"):
                assert "StateMigrationException" in by[(release, backend, change)]


def _evolving_graph(tmp_path: Path) -> Path:
    """SchemaChanges.job's graph (uids as in the Java job, parallelism 1)."""
    graph = tmp_path / "graph.json"
    graph.write_text(json.dumps({"name": "evolving", "max_parallelism": 128, "nodes": [
        {"id": 1, "name": "numbers", "uid": "numbers", "parallelism": 1, "factory": "source"},
        {"id": 2, "name": "throttle", "uid": "throttle", "parallelism": 1},
        {"id": 3, "name": "evolving", "uid": "evolving", "parallelism": 1},
        {"id": 4, "name": "sink", "parallelism": 1}],
        "edges": [{"source": 1, "target": 2}, {"source": 2, "target": 3, "partitioner": "hash"},
                  {"source": 3, "target": 4}]}))
    return graph


def test_check_with_a_new_job_savepoint_names_the_state_and_flinks_error(tmp_path: Path) -> None:
    """What a user runs: the current savepoint, the new job's graph, and a savepoint of the new job from a staging
    run. A retyped POJO field blocks with RESTORE_FAILS naming the state; an added field passes with a note."""
    graph = _evolving_graph(tmp_path)
    base = ROOT / "2.3.0" / "rocksdb"

    def check(change: str) -> tuple[int, dict]:  # type: ignore[type-arg]
        proc = subprocess.run([sys.executable, "-m", "upgrade_gate", "check", "--savepoint", str(base / "none"),
                               "--graph", str(graph), "--new-job-savepoint", str(base / change),
                               "-D", "state.backend.type=rocksdb",
                               "--flink-version", "2.3", "--format", "json"], capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode in (0, 1), proc.stderr
        return proc.returncode, json.loads(proc.stdout)

    code, doc = check("pojo-field-retyped")
    assert code == 1 and doc["verdict"] == "RESTORE_FAILS" and not doc["restore_succeeds"]
    assert doc["flink_error"].startswith("org.apache.flink.util.StateMigrationException: The new state serializer")
    [change] = [c for c in doc["schema_changes"] if c["compatibility"] == "INCOMPATIBLE"]
    assert change["state"] == "account" and change["changes"][0]["path"] == "amount"
    code, doc = check("pojo-field-added")
    assert code == 0 and doc["verdict"] == "SAFE", doc
    assert any("'account'" in w and "field added" in w for w in doc["warnings"])


# Rules Flink's snapshots state that the recorded jobs do not exercise, on hand-built snapshot trees.
_BASE = "org.apache.flink.api.common.typeutils.base."
LONG = SerializerSnapshot(f"{_BASE}LongSerializer$LongSerializerSnapshot", 3)
STRING = SerializerSnapshot(f"{_BASE}StringSerializer$StringSerializerSnapshot", 3)
LIST = "org.apache.flink.api.common.typeutils.base.ListSerializerSnapshot"
TTL = "org.apache.flink.runtime.state.ttl.TtlStateFactory$TtlSerializerSnapshot"


def _enum(*constants: str) -> SerializerSnapshot:
    return SerializerSnapshot(ENUM_SNAPSHOT, 3, type_name="a.Color", enum_constants=constants)


def test_enum_kryo_list_and_ttl_rules() -> None:
    assert [c.compat for c in resolve(_enum("RED", "GREEN"), _enum("RED", "GREEN", "BLUE"))] == [Compat.RECONFIGURED]
    [removed] = resolve(_enum("RED", "GREEN"), _enum("RED"))
    assert removed.compat is Compat.INCOMPATIBLE and "GREEN" in removed.what
    kryo_a = SerializerSnapshot(KRYO_SNAPSHOT, 2, type_name="a.A")
    assert resolve(kryo_a, SerializerSnapshot(KRYO_SNAPSHOT, 2, type_name="a.B"))[0].compat is Compat.INCOMPATIBLE
    nested_pojo = SerializerSnapshot(POJO_SNAPSHOT, 2, type_name="a.P", fields=(("xs", SerializerSnapshot(
        LIST, 1, nested=(LONG,), composite=True)),))
    retyped = SerializerSnapshot(POJO_SNAPSHOT, 2, type_name="a.P", fields=(("xs", SerializerSnapshot(
        LIST, 1, nested=(STRING,), composite=True)),))
    [change] = resolve(nested_pojo, retyped)
    assert change.path == "xs" and change.field_retyped and change.compat is Compat.INCOMPATIBLE
    ttl = SerializerSnapshot(TTL, 2, nested=(LONG, LONG), composite=True)
    assert resolve(LONG, ttl)[0].what == "TTL turned on"
    assert [c.what for c in resolve(ttl, STRING)] == ["TTL turned off", "serializer replaced"]  # the value retyped too
    assert serializer_class(TTL) == "org.apache.flink.runtime.state.ttl.TtlStateFactory$TtlSerializer"


def test_kind_change_and_states_on_one_side_only() -> None:
    def op(*states: StateMetaInfo) -> OperatorSchemas:
        return OperatorSchemas("ab" * 16, "counter", "counter", (), LONG, states)

    def state(name: str, kind: str) -> StateMetaInfo:
        return StateMetaInfo(name, "KEY_VALUE", (("KEYED_STATE_TYPE", kind),), (("VALUE_SERIALIZER", LONG),))

    diffs, notes = diff_schemas([op(state("count", "VALUE"), state("gone", "VALUE"))],
                                [op(state("count", "LIST"), state("fresh", "MAP"))])
    [d] = diffs
    assert d.blocking and d.error("rocksdb") == ("java.lang.IllegalStateException: Incompatible key/value state "
                                                 "types. Was [VALUE], registered with [LIST].")
    assert any("'gone'" in n and "does not declare" in n for n in notes)
    assert any("'fresh'" in n and "starts empty" in n for n in notes)


def test_old_savepoint_is_the_baseline_and_bad_flags_are_one_line(tmp_path: Path) -> None:
    """`--old-savepoint OLD`: OLD (written before the change) is the baseline, `--savepoint` the candidate written
    by the changed job; both at once, or a -D without '=', is bad input (exit 2, one line)."""
    base = ROOT / "1.20.5" / "hashmap"
    graph = str(_evolving_graph(tmp_path))

    def run(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "upgrade_gate", "check", "--savepoint",
                               str(base / "row-field-retyped"), "--graph", graph, "--flink-version", "1.20",
                               "--format", "json", *extra], capture_output=True, text=True, timeout=120)

    assert run().returncode == 0  # the changed job's own savepoint restores into it
    proc = run("--old-savepoint", str(base / "none"))
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["verdict"] == "RESTORE_FAILS" and "RowSerializer" in doc["flink_error"]
    assert [x["state_names"] for x in doc["losses"] if "restore fails" in x["reason"]] == [["row"]]
    for bad in (["--old-savepoint", str(base / "none"), "--new-job-savepoint", str(base / "none")],
                ["-D", "state.backend.type"]):
        proc = run(*bad)
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr

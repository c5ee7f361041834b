"""The state-meta reader against Flink's own reading, on real 1.20 and 2.3 savepoints.

Fixtures: tests/fixtures/savepoints/state-schemas/<release>/<case>/, written by
`python -m flink_bridge.generate_savepoints --state-schemas` (StateSchemas.java: one state per serializer
family) with `flink-state-meta.json`, what Flink's `KeyedBackendSerializationProxy` and
`OperatorBackendSerializationProxy` read from every handle (StateMetaDump.java).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from hashing.errors import InputError
from upgrade_gate.flink.metadata import parse_metadata
from upgrade_gate.flink.metadata.model import (
    CheckpointMetadata,
    IncrementalRemoteKeyedStateHandle,
    KeyGroupsStateHandle,
    RelativeFileStateHandle,
    new_operator_state,
    new_subtask_state,
)
from upgrade_gate.flink.state_meta import oracle_view, read_state_schemas
from upgrade_gate.storage.savepoints import load_savepoint

ROOT = Path(__file__).resolve().parent.parent / "fixtures" / "savepoints" / "state-schemas"
CASES = sorted(p.parent for p in ROOT.glob("*/*/flink-state-meta.json"))
RELEASES = sorted({p.parent.name for p in CASES})
FILES_CASE = "hashmap-canonical-files-p1"
# corruptions per release; `make fuzz` sets UPGRADE_GATE_FUZZ_EXAMPLES for a long run
MUTATIONS = max(400, int(os.environ.get("UPGRADE_GATE_FUZZ_EXAMPLES", "0")))


def _id(p: Path) -> str:
    return f"{p.parent.name}/{p.name}"


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "upgrade_gate", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "200", **(env or {})})


def test_fixtures_cover_both_releases_and_backends() -> None:
    assert RELEASES == ["1.20.5", "2.3.0"]
    assert {p.name for p in CASES} == {"hashmap-canonical-p2", FILES_CASE, "rocksdb-canonical-p1", "rocksdb-native-p1",
                                       "hashmap-snappy-p1"}


@pytest.mark.parametrize("release", RELEASES)
def test_snappy_compressed_handles_are_read(release: str) -> None:
    """With snapshot compression the key groups are Snappy-compressed; the proxy before them is not, and says so."""
    ops = read_state_schemas(load_savepoint(str(ROOT / release / "hashmap-snappy-p1")))
    keyed = [k for op in ops for s in op.subtasks for k in s.keyed]
    assert keyed and all(k.compression for k in keyed) and sum(len(k.states) for k in keyed) >= 14


@pytest.mark.parametrize("d", CASES, ids=_id)
def test_reader_lists_what_flinks_proxies_read(d: Path) -> None:
    """Every handle: proxy version, compression flag, key serializer, and per state its name, backend type,
    options and serializer snapshots (class, version, nested / POJO fields / Kryo type and registrations)."""
    ours = {op["operator_id"]: op for op in oracle_view(read_state_schemas(load_savepoint(str(d))))["operators"]}
    flink = {op["operator_id"]: op for op in json.loads((d / "flink-state-meta.json").read_text())["operators"]}
    assert ours.keys() == flink.keys()
    for op_id, op in flink.items():
        assert ours[op_id] == op, op_id


@pytest.mark.parametrize("release", RELEASES)
def test_each_serializer_family_is_named(release: str) -> None:
    ops = read_state_schemas(load_savepoint(str(ROOT / release / "hashmap-canonical-p2")))
    states = {s.name: s for op in ops for s in op.states}
    kinds = {n: s.kind for n, s in states.items()}
    assert kinds["long-value"] == "value" and kinds["long-list"] == "list" and kinds["pojo-map"] == "map"
    assert kinds["reducing-sum"] == "reducing" and kinds["_timer_state/processing_user-timers"] == "timers"
    assert kinds["pojo-list"] == "list" and kinds["union-longs"] == "union" and kinds["rules-pojo"] == "broadcast"
    assert states["ttl-value"].ttl and not states["long-value"].ttl

    def value(name: str) -> str:
        v = states[name].serializer("VALUE_SERIALIZER")
        assert v is not None
        return v.describe()

    assert value("long-value") == "Long"
    assert value("generic-hashmap") == "Kryo(java.util.HashMap)"
    assert value("kryo-opaque") == "Kryo(ugate.savepoints.StateSchemas$Opaque)"
    tagged = states["kryo-custom-serializer"].serializer("VALUE_SERIALIZER")
    assert tagged is not None and ("ugate.savepoints.StateSchemas$Tagged", "CLASS",
                                   "ugate.savepoints.TaggedKryoSerializer") in tagged.registrations
    assert value("tuple") == "Tuple<Long, String>" and value("row") == "Row<Long, String>"
    assert value("enum") == "Enum(StateSchemas$Color)"
    assert value("pojo-primitives") == "Pojo(StateSchemas$PlainPojo){count: Int, id: Long, name: String}"
    for name in ("pojo-collections", "pojo-list", "rules-pojo"):
        assert "counts: Kryo(java.util.HashMap), history: Kryo(java.util.ArrayList)" in value(name)
    keyed = next(op for op in ops if op.key_serializer is not None)
    assert keyed.key_serializer is not None and keyed.key_serializer.describe() == "Long"


def _keyed_state_file(d: Path) -> tuple[Path, int]:
    """The file of the keyed operator's handle in the files fixture (a RelativeFileStateHandle), and where
    its proxy ends: the first key group's offset (FullSnapshotAsyncWriter writes the proxy, then key groups)."""
    meta = parse_metadata((d / "_metadata").read_bytes(), str(d / "_metadata"), str(d))
    for op in meta.operator_states:
        for st in op.subtask_states.values():
            for h in st.managed_keyed_state:
                assert isinstance(h, KeyGroupsStateHandle) and isinstance(h.delegate, RelativeFileStateHandle)
                return Path(h.delegate.path), min(o for o in h.offsets if o > 0)
    raise AssertionError("no keyed handle")


@pytest.mark.parametrize("release", RELEASES)
def test_truncated_or_corrupt_state_file_is_one_input_error(release: str, tmp_path: Path) -> None:
    """Every 13th cut of the proxy and 400 random corruptions: an InputError naming the file and an offset, or a
    reading (a flipped byte inside a name is still a valid file), never another exception; bounded time."""
    d = shutil.copytree(ROOT / release / FILES_CASE, tmp_path / "sp")
    state_file, proxy_end = _keyed_state_file(d)  # the key-group data after the proxy is never read
    original = state_file.read_bytes()
    meta = parse_metadata((d / "_metadata").read_bytes(), str(d / "_metadata"), str(d))
    clean = read_state_schemas(meta, strict=True)
    errors = 0
    started = time.monotonic()
    for cut in range(0, proxy_end, 13):
        state_file.write_bytes(original[:cut])
        with pytest.raises(InputError) as err:
            read_state_schemas(meta, strict=True)
        assert str(err.value).startswith(str(state_file)) and "offset" in str(err.value)
        errors += 1
    rng = random.Random(15)
    for _ in range(MUTATIONS):
        data = bytearray(original)
        for _ in range(rng.randint(1, 4)):
            at = rng.randrange(proxy_end)
            data[at] = rng.choice((0, 0xFF, 0x7F, rng.randrange(256)))
        state_file.write_bytes(bytes(data))
        try:
            read_state_schemas(meta, strict=True)
        except InputError as exc:
            assert "\n" not in str(exc) and str(exc).startswith(str(state_file))
            errors += 1
    assert errors > 300 and time.monotonic() - started < 60 * max(1, MUTATIONS // 400)
    state_file.write_bytes(original)
    assert read_state_schemas(meta, strict=True) == clean


def test_huge_counts_fail_before_allocating(tmp_path: Path) -> None:
    """A count of 2^31-1 states or nested snapshots is refused against the bytes left, not allocated."""
    d = shutil.copytree(ROOT / "2.3.0" / FILES_CASE, tmp_path / "sp")
    state_file, _ = _keyed_state_file(d)
    data = bytearray(state_file.read_bytes())
    nested = data.find(bytes.fromhex("001457fd00000001"))  # NestedSerializersSnapshotDelegate magic + version
    assert nested > 0
    data[nested + 8:nested + 12] = b"\x7f\xff\xff\xff"
    state_file.write_bytes(bytes(data))
    meta = parse_metadata((d / "_metadata").read_bytes(), str(d / "_metadata"), str(d))
    with pytest.raises(InputError, match="nested serializer snapshots 2147483647 needs"):
        read_state_schemas(meta, strict=True)


def test_missing_state_file_is_noted_not_fatal(tmp_path: Path) -> None:
    d = shutil.copytree(ROOT / "1.20.5" / FILES_CASE, tmp_path / "sp")
    state_file, _ = _keyed_state_file(d)
    state_file.unlink()
    ops = read_state_schemas(load_savepoint(str(d)))
    notes = [n for op in ops for n in op.incomplete]
    assert len(notes) == 1 and str(state_file) in notes[0] and "No such file" in notes[0]
    assert {s.name for op in ops for s in op.states} >= {"pojo-list", "rules-pojo"}  # the other handles still read


def test_inspect_lists_every_state_in_json_and_table() -> None:
    d = ROOT / "1.20.5" / "hashmap-canonical-p2"
    proc = _cli("inspect", str(d), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    ops = {op["uid"] or op["operator_id"]: op for op in json.loads(proc.stdout)["operators"]}
    keyed = next(op for op in ops.values() if any(s["name"] == "long-value" for s in op["states"]))
    by_name = {s["name"]: s for s in keyed["states"]}
    assert by_name["pojo-collections"]["kind"] == "value" and by_name["pojo-collections"]["key_serializer"] == "Long"
    assert by_name["ttl-value"]["ttl"] is True and by_name["pojo-map"]["serializer"].startswith("Map<String, Pojo(")
    broadcast = next(s for op in ops.values() for s in op["states"] if s["name"] == "rules-pojo")
    assert broadcast["kind"] == "broadcast" and broadcast["map_key_serializer"] == "String"
    value = by_name["generic-hashmap"]["serializers"]["VALUE_SERIALIZER"]
    assert value["class"].endswith("KryoSerializerSnapshot") and value["type"] == "java.util.HashMap"
    table = _cli("inspect", str(d), "--format", "table")
    assert table.returncode == 0 and "States" in table.stdout
    assert "Kryo(java.util.HashMap)" in table.stdout and "timers" in table.stdout and "TTL" in table.stdout


def test_inspect_exits_2_with_one_line_on_a_corrupt_state_file(tmp_path: Path) -> None:
    d = shutil.copytree(ROOT / "2.3.0" / FILES_CASE, tmp_path / "sp")
    state_file, _ = _keyed_state_file(d)
    state_file.write_bytes(state_file.read_bytes()[:40])
    proc = _cli("inspect", str(d), "--format", "json")
    assert proc.returncode == 2 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and str(state_file) in lines[0] and "offset" in lines[0], proc.stderr


def test_state_files_on_s3_read_like_local_ones(tmp_path: Path) -> None:
    """The files fixture in a real S3 server (SeaweedFS): relative handles resolve to s3:// objects, read by
    ranged GETs; `inspect` lists the same states as from the local copy, and a deleted object is noted."""
    from tests import s3_server

    (tmp_path / "weed").mkdir()
    server = s3_server.start(tmp_path / "weed")
    try:
        client = server.client()
        client.create_bucket(Bucket="state-meta")
        local = ROOT / "2.3.0" / FILES_CASE
        for p in sorted(local.iterdir()):
            if p.is_file():
                client.put_object(Bucket="state-meta", Key=f"job/sp-1/{p.name}", Body=p.read_bytes())
        env = {"AWS_ENDPOINT_URL": server.endpoint, "AWS_ACCESS_KEY_ID": s3_server.ACCESS_KEY,
               "AWS_SECRET_ACCESS_KEY": s3_server.SECRET_KEY, "AWS_REGION": "us-east-1"}
        remote = _cli("inspect", "s3://state-meta/job/sp-1", "--format", "json", env=env)
        assert remote.returncode == 0, remote.stderr
        here = _cli("inspect", str(local), "--format", "json")
        states = [(op["operator_id"], op["states"]) for op in json.loads(remote.stdout)["operators"]]
        assert states == [(op["operator_id"], op["states"]) for op in json.loads(here.stdout)["operators"]]
        assert sum(len(s) for _, s in states) >= 18
        state_file, _ = _keyed_state_file(local)
        client.delete_object(Bucket="state-meta", Key=f"job/sp-1/{state_file.name}")
        gone = _cli("inspect", "s3://state-meta/job/sp-1", "--format", "json", env=env)
        assert gone.returncode == 0, gone.stderr
        notes = [n for op in json.loads(gone.stdout)["operators"] for n in op.get("states_incomplete", ())]
        assert len(notes) == 1 and f"s3://state-meta/job/sp-1/{state_file.name}" in notes[0]
    finally:
        server.stop()


def test_pre_1_17_layouts_are_noted_not_called_corrupt(tmp_path: Path) -> None:
    """A proxy version 1-5 or a legacy TypeSerializerConfigSnapshot (proxy format 1) is what Flink 1.16 and
    older wrote: valid bytes Flink 1.17+ refuses. The reader notes it; it does not report a corrupt file."""
    d = shutil.copytree(ROOT / "1.20.5" / FILES_CASE, tmp_path / "sp")
    state_file, _ = _keyed_state_file(d)
    original = state_file.read_bytes()
    meta = parse_metadata((d / "_metadata").read_bytes(), str(d / "_metadata"), str(d))
    state_file.write_bytes((5).to_bytes(4, "big") + original[4:])
    notes = [n for op in read_state_schemas(meta, strict=True) for n in op.incomplete]
    assert len(notes) == 1 and "version 5 (Flink 1.16 or older)" in notes[0]
    # version 6, compression flag, then the key serializer's proxy format: 1 = TypeSerializerConfigSnapshot
    state_file.write_bytes(original[:5] + (1).to_bytes(4, "big") + original[9:])
    notes = [n for op in read_state_schemas(meta, strict=True) for n in op.incomplete]
    assert len(notes) == 1 and "TypeSerializerConfigSnapshot" in notes[0]


def _wide_rocksdb(tmp_path: Path, subtasks: int, distinct: bool) -> CheckpointMetadata:
    """The real 2.3 RocksDB native savepoint's keyed operator widened to `subtasks` subtasks, each with its own
    meta file next to `_metadata` holding the real proxy bytes (`distinct`: one trailing byte differs per file,
    so no two files are alike and nothing is parsed once for many)."""
    meta = load_savepoint(str(ROOT / "2.3.0" / "rocksdb-native-p1"))
    op = next(o for o in meta.operator_states if any(s.managed_keyed_state for s in o.subtask_states.values()))
    handle = op.subtask_states[0].managed_keyed_state[0]
    assert isinstance(handle, IncrementalRemoteKeyedStateHandle) and handle.meta_state_handle is not None
    proxy = handle.meta_state_handle.data  # type: ignore[union-attr]
    states = {}
    for i in range(subtasks):
        name = f"meta-{i:04d}"
        data = proxy + (i.to_bytes(2, "big") if distinct else b"")
        (tmp_path / name).write_bytes(data)
        h = replace(handle, meta_state_handle=RelativeFileStateHandle(str(tmp_path / name), name, len(data)))
        states[i] = new_subtask_state((), (), (h,), ())
    wide = new_operator_state(op.operator_id, op.name, op.uid, subtasks, 32768, None, states)
    return replace(meta, operator_states=(wide,), source=str(tmp_path / "_metadata"))


@pytest.mark.parametrize("distinct", [False, True], ids=["identical-proxies", "all-distinct"])
def test_1000_subtask_rocksdb_savepoint_reads_in_under_2s(tmp_path: Path, distinct: bool) -> None:
    meta = _wide_rocksdb(tmp_path, 1000, distinct)
    started = time.perf_counter()
    ops = read_state_schemas(meta, strict=True)
    took = time.perf_counter() - started
    print(f"\n1,000-subtask RocksDB meta ({'distinct' if distinct else 'identical'} proxies): {took:.3f} s")
    assert len(ops) == 1 and len(ops[0].subtasks) == 1000 and len(ops[0].states) >= 14
    assert all(k.source.endswith(f"meta-{s.index:04d}") for s in ops[0].subtasks for k in s.keyed)
    assert took < (2.0 if not distinct else 10.0)  # all-distinct: the uncached worst case, on a shared machine


# -- RowData state: the rows' logical types (issue 15) ------------------------------------------------------
SQL_RESTORES = Path(__file__).resolve().parent.parent / "fixtures" / "restores"
ROW_SNAPSHOT = b"org.apache.flink.table.runtime.typeutils.RowDataSerializer$RowDataSerializerSnapshot"


def _sql_savepoint(release: str, scenario: str) -> Path:
    d = SQL_RESTORES / release / scenario
    return (d / json.loads((d / "outcome.json").read_text())["savepoint"]["fixture"]).resolve()


def _state_types(release: str, scenario: str) -> dict[str, tuple[str, ...] | None]:
    ops = read_state_schemas(load_savepoint(str(_sql_savepoint(release, scenario))), strict=True)
    out: dict[str, tuple[str, ...] | None] = {}
    for op in ops:
        if op.key_serializer is not None and op.key_serializer.logical_types is not None:
            out.setdefault("key", op.key_serializer.logical_types)
        for st in op.states:
            value = st.serializer("VALUE_SERIALIZER")  # the row itself, or inside a map (join records)
            rows = [s.logical_types for _, s in value.walk() if s.logical_types is not None] if value else []
            if rows:
                out[st.name] = rows[0]
    return out


@pytest.mark.parametrize("release", RELEASES)
def test_sql_state_rows_carry_their_logical_types(release: str) -> None:
    """The field types of Flink's RowDataSerializer snapshots, as `LogicalType#asSerializableString()`:
    length, precision and nullability included (real SQL savepoints, flink_bridge/sql_scenarios.py)."""
    ltz = "TIMESTAMP(3) WITH LOCAL TIME ZONE NOT NULL"  # the proctime column, its kind (PROCTIME) not part of it
    dedup = _state_types(release, "sql-type-varchar-to-string")
    assert (dedup["key"], dedup["deduplicate-state"]) == (("INT",), ("INT", "VARCHAR(3)", "BIGINT", ltz))
    assert _state_types(release, "sql-type-not-null-to-nullable")["deduplicate-state"] == (
        "INT", "VARCHAR(2147483647)", ltz, "BIGINT NOT NULL")
    assert _state_types(release, "sql-type-decimal-precision")["accState"] == ("DECIMAL(10, 2)",)
    assert _state_types(release, "sql-type-decimal-sum-precision")["accState"] == ("DECIMAL(38, 2)",)
    assert _state_types(release, "sql-type-timestamp-precision")["accState"] == ("TIMESTAMP(3)",)
    assert _state_types(release, "sql-join-identical")["left-records"] == ("INT", "VARCHAR(2147483647)")


@pytest.mark.parametrize("release", RELEASES)
def test_savepoint_types_are_spelled_as_the_exporter_writes_them(release: str) -> None:
    """Every row type read from job A's savepoint (all SQL scenarios) is one the exporter dumped for job A's graph
    (Java's own asSerializableString), so the two sides compare as Flink's `Arrays.equals` does."""
    checked = 0
    for graph_a in sorted((SQL_RESTORES / release).glob("sql-*/graph-a.json")):
        if "mini-batch.enabled" in (graph_a.parent / "a.sql").read_text():
            continue  # a mini-batch aggregate's function sits in a bundle operator the exporter does not open
        dumped = set()
        for entry in json.loads(graph_a.read_text())["sql_state"].values():
            for tree in (entry.get("key"), *entry.get("types", {}).values()):
                if tree and "logical_types" in tree:
                    dumped.add(tuple(tree["logical_types"]))
        if not dumped:
            continue  # exported before `logical_types`: compared by serializers (test_sql_state_rules.py)
        checked += 1
        # the key and the states the SQL rule compares (the exporter does not open window operators' internals)
        read = {t for name, t in _state_types(release, graph_a.parent.name).items()
                if name in ("key", "accState", "deduplicate-state")}
        assert read and read <= dumped, graph_a.parent.name
    assert checked >= 20


def _row_snapshot_bytes() -> tuple[bytes, int]:
    """A real `_metadata` with inline SQL state, and where the kept row's RowDataSerializerSnapshot begins."""
    data = (_sql_savepoint("2.3.0", "sql-type-varchar-to-string") / "_metadata").read_bytes()
    at = data.find(b"deduplicate-state")
    at = data.find(ROW_SNAPSHOT, at) - 2  # its writeUTF length
    assert at > 0
    return data, at


def test_row_types_of_a_corrupt_snapshot_fail_as_input_errors() -> None:
    """Every cut and 400 random corruptions of a RowData snapshot's Java-serialized types: a reading or one
    InputError (never another exception), in bounded time; a type class not modelled leaves the types unknown."""
    from upgrade_gate.flink.metadata.reader import BoundedReader
    from upgrade_gate.flink.state_meta.snapshots import UnknownSnapshotFormat, read_versioned_snapshot

    data, at = _row_snapshot_bytes()
    clean = read_versioned_snapshot(BoundedReader(data, "m", at), 0)
    assert clean.logical_types == ("INT", "VARCHAR(3)", "BIGINT", "TIMESTAMP(3) WITH LOCAL TIME ZONE NOT NULL")
    assert len(clean.nested) == 4
    end = data.find(bytes.fromhex("001457fd00000001"), at) + 12
    started = time.monotonic()
    outcomes = {"read": 0, "error": 0}
    rng = random.Random(15)
    cases = [data[:cut] for cut in range(at, end)]
    for _ in range(MUTATIONS):
        mutated = bytearray(data)
        for _ in range(rng.randint(1, 3)):
            mutated[rng.randrange(at + 100, end)] = rng.choice((0, 0xFF, 0x7F, 0x71, 0x73, rng.randrange(256)))
        cases.append(bytes(mutated))
    for case in cases:
        try:
            read_versioned_snapshot(BoundedReader(case, "m", at), 0)
            outcomes["read"] += 1
        except (InputError, UnknownSnapshotFormat) as exc:
            assert "\n" not in str(exc)
            outcomes["error"] += 1
    assert outcomes["error"] > 300 and time.monotonic() - started < 30
    huge = bytearray(data)
    huge[at + 2 + len(ROW_SNAPSHOT) + 4:at + 2 + len(ROW_SNAPSHOT) + 8] = b"\x7f\xff\xff\xff"  # the type count
    with pytest.raises(InputError, match="row field logical types 2147483647 needs"):
        read_versioned_snapshot(BoundedReader(bytes(huge), "m", at), 0)
    foreign = data.replace(b"logical.VarCharType", b"logical.VarCharTypf", 1)
    unknown = read_versioned_snapshot(BoundedReader(foreign, "m", at), 0)
    assert unknown.logical_types is None and unknown.nested == clean.nested

"""`upgrade-gate inspect` lists every state of real Flink 1.20 and 2.3 savepoints as a user reads it.

Fixtures: tests/fixtures/savepoints/state-schemas/<release>/<case>/ (one state per serializer family, written
by real Flink) with `flink-state-meta.json`, what Flink's own `KeyedBackendSerializationProxy` and
`OperatorBackendSerializationProxy` read from every handle: the expected states, kinds, distribution modes
and serializer snapshot classes and versions come from there, never typed in.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "savepoints" / "state-schemas"
CASES = sorted(p.parent for p in ROOT.glob("*/*/flink-state-meta.json"))


def _id(p: Path) -> str:
    return f"{p.parent.name}/{p.name}"


def _cli(*args: str, columns: int = 200) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "upgrade_gate", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": str(columns)})


def _flink_states(d: Path) -> dict[str, dict[str, dict[str, Any]]]:
    """operator id -> state name -> Flink's reading of that state (first subtask that has it)."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for op in json.loads((d / "flink-state-meta.json").read_text())["operators"]:
        states = out.setdefault(op["operator_id"], {})
        for s in op["subtasks"]:
            for k in s["keyed"]:
                for st in k["states"]:
                    states.setdefault(st["name"], {**st, "key_serializer": k["key_serializer"]})
            for o in s["operator"]:
                for st in (*o["operator_states"], *o["broadcast_states"]):
                    states.setdefault(st["name"], st)
    return {k: v for k, v in out.items() if v}


@pytest.mark.parametrize("d", CASES, ids=_id)
def test_json_lists_every_state_flink_reads(d: Path) -> None:
    """Per operator: the same states as Flink's proxies, the state's serializer snapshot class and version,
    the distribution mode of operator state, and the key serializer of keyed operators."""
    proc = _cli("inspect", str(d), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    ours = {op["operator_id"]: op for op in json.loads(proc.stdout)["operators"] if op["states"]}
    flink = _flink_states(d)
    assert ours.keys() == flink.keys()
    for op_id, states in flink.items():
        got = {s["name"]: s for s in ours[op_id]["states"]}
        assert got.keys() == states.keys(), op_id
        for name, f in states.items():
            s = got[name]
            value = f["serializers"]["VALUE_SERIALIZER"]
            assert (s["serializer_class"], s["serializer_version"]) == (value["class"], value["version"]), name
            assert s["backend_type"] == f["backend_type"]
            assert s.get("distribution_mode") == f["options"].get("OPERATOR_STATE_DISTRIBUTION_MODE")
            if f.get("key_serializer"):
                assert s["key_serializer"] == "Long"


@pytest.mark.parametrize("release", ["1.20.5", "2.3.0"])
def test_pojo_with_a_hashmap_field_shows_as_kryo_serialized_map_field(release: str) -> None:
    d = ROOT / release / "hashmap-canonical-p2"
    doc = json.loads(_cli("inspect", str(d), "--format", "json").stdout)
    states = {s["name"]: s for op in doc["operators"] for s in op["states"]}
    pojo = states["pojo-collections"]
    assert pojo["kind"] == "value" and pojo["serializer"].startswith("Pojo(StateSchemas$CollectionPojo){")
    assert "counts: Kryo(java.util.HashMap)" in pojo["serializer"]
    assert [(k["path"], k["type"], k["collection_or_custom"]) for k in pojo["kryo"]] == [
        ("counts", "java.util.HashMap", True), ("history", "java.util.ArrayList", True)]
    assert [k["collection_or_custom"] for k in states["kryo-opaque"]["kryo"]] == [False]  # a plain Kryo generic
    assert states["pojo-primitives"]["kryo"] == [] and states["long-value"]["kryo"] == []
    assert states["pojo-list"]["distribution_mode"] == "SPLIT_DISTRIBUTE"
    assert states["union-longs"]["distribution_mode"] == "UNION" and states["union-longs"]["kind"] == "union"
    assert states["rules-pojo"]["distribution_mode"] == "BROADCAST"


def _row(table: str, state: str) -> str:
    return next(line for line in table.splitlines() if line.startswith(state + " "))


def test_table_reads_state_by_state_with_the_kryo_rule_and_the_key_serializer() -> None:
    """A 1.20 savepoint: Kryo collections and custom Kryo serializers are named CORRUPTED on Flink 2.x; the
    same states in a 2.3 savepoint (already Kryo 5) are only named. TTL state shows the user's type."""
    old = _cli("inspect", str(ROOT / "1.20.5" / "hashmap-canonical-p2"), "--format", "table").stdout
    new = _cli("inspect", str(ROOT / "2.3.0" / "rocksdb-native-p1"), "--format", "table").stdout
    for out in (old, new):
        assert "key serializer Long" in out
        assert "Kryo(java.util.HashMap)" in _row(out, "generic-hashmap")
        assert _row(out, "ttl-value").split()[1:5] == ["value", "Long", "Ttl", "v3"] and "TTL" in _row(out, "ttl-value")
        assert "list (split-distribute)" in _row(out, "pojo-list") and " union " in _row(out, "union-longs")
        assert " timers " in _row(out, "_timer_state/event_user-timers")
        assert "Pojo v2" in _row(out, "pojo-collections") and "counts: Kryo(java.util.HashMap)" in out
        assert _row(out, "long-value").split()[1:] == ["value", "Long", "Long", "v3", "-"]
        assert _row(out, "kryo-opaque").endswith("Kryo")
    assert _row(old, "pojo-collections").endswith("CORRUPTED on Flink 2.x (Kryo collection)")
    assert _row(old, "kryo-custom-serializer").endswith("CORRUPTED on Flink 2.x (custom Kryo serializer)")
    assert "CORRUPTED" not in new and _row(new, "pojo-collections").endswith(" Kryo collection")
    assert "schema-keyed / schema-keyed (f4268aa2b91cfb64b42fde656d3e73a0), key serializer Long" in new


def test_table_fits_100_columns() -> None:
    out = _cli("inspect", str(ROOT / "1.20.5" / "hashmap-canonical-p2"), "--format", "table", columns=100).stdout
    assert "States" in out and "CORRUPTED on Flink 2.x" in out
    assert max(len(line) for line in out.splitlines()) <= 100

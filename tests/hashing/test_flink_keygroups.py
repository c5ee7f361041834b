"""Key groups, Java hashCodes and key-group ranges against Flink's own `KeyGroupRangeAssignment`.

Expected values come from `tests/fixtures/flink/<release>/keygroups.json`, written by the
oracle generator with real Flink; the vectorised (NumPy) path must agree element by element.
"""

from __future__ import annotations

import struct

import numpy as np
import pytest

from hashing import vectorized
from hashing.errors import FlinkError
from hashing.java_hash import Row, Tuple, java_hash_code
from hashing.keygroups import (
    assign_key_to_parallel_operator,
    assign_to_key_group,
    compute_default_max_parallelism,
    compute_key_group_range_for_operator_index,
    murmur_hash,
)
from tests.conftest import FLINK_FIXTURES, FLINK_RELEASES, load_json


def _vectors(release: str) -> dict:
    path = FLINK_FIXTURES / release / "keygroups.json"
    assert path.is_file(), f"missing {path}: run `make fixtures`"
    return load_json(path)


def _python_key(case: dict):
    t, v = case["type"], case["value"]
    if t == "Double":
        return struct.unpack("<d", struct.pack("<q", case["bits"]))[0], "Double"
    if t.startswith("Tuple"):
        types = tuple(x.strip() for x in t[t.index("<") + 1:-1].split(","))
        return Tuple(tuple(v), types), None
    if t == "Row":
        return Row(tuple(v), case.get("row_kind", "INSERT"), tuple(case["field_types"])), None
    return v, t


@pytest.mark.parametrize("release", FLINK_RELEASES)
def test_hash_codes_key_groups_and_operator_indexes(release):
    keys = _vectors(release)["keys"]
    assert len(keys) > 3000
    for case in keys:
        key, key_type = _python_key(case)
        assert java_hash_code(key, key_type) == case["hash_code"], case
        assert murmur_hash(case["hash_code"]) == case["murmur"], case
        for max_p, kg in case["key_group"].items():
            assert assign_to_key_group(key, int(max_p), key_type) == kg, case
        for mp, idx in case["operator_index"].items():
            max_p, p = map(int, mp.split("/"))
            assert assign_key_to_parallel_operator(key, max_p, p, key_type) == idx, case


@pytest.mark.parametrize("release", FLINK_RELEASES)
def test_vectorised_path_agrees_with_flink(release):
    keys = _vectors(release)["keys"]
    for kind, to_codes in (("Integer", vectorized.int_hash_codes), ("Long", vectorized.long_hash_codes)):
        cases = [c for c in keys if c["type"] == kind]
        codes = to_codes(np.array([c["value"] for c in cases], dtype=np.int64))
        assert codes.tolist() == [c["hash_code"] for c in cases]
        for max_p in ("128", "4096", "32768"):
            assert vectorized.key_groups(codes, int(max_p)).tolist() == [c["key_group"][max_p] for c in cases]
    strings = [c for c in keys if c["type"] == "String"]
    values = [c["value"] for c in strings]
    codes = vectorized.string_hash_codes(values)
    assert codes.tolist() == [c["hash_code"] for c in strings]
    # what key_alignment hands over: Arrow's UTF-8 buffers, whole, sliced and with 64-bit offsets
    # (a lone surrogate, which Java strings allow, has no UTF-8 form, so Arrow data never holds one)
    import pyarrow as pa

    utf8 = [c for c in strings if not any(0xD800 <= ord(ch) <= 0xDFFF for ch in c["value"])]
    assert len(utf8) < len(strings) and any(ord(ch) > 0xFFFF for c in utf8 for ch in c["value"])
    values = [c["value"] for c in utf8]
    for arrow in (pa.array(values), pa.array(["pad", *values]).slice(1), pa.array(values, pa.large_string())):
        assert vectorized.string_hash_codes(arrow).tolist() == [c["hash_code"] for c in utf8]
    kgs = vectorized.key_groups(codes, 128)
    assert kgs.tolist() == [c["key_group"]["128"] for c in strings]
    assert vectorized.operator_indexes(kgs, 128, 3).tolist() == [c["operator_index"]["128/3"] for c in strings]


@pytest.mark.parametrize("release", FLINK_RELEASES)
def test_ranges_and_default_max_parallelism(release):
    vec = _vectors(release)
    for r in vec["ranges"]:
        assert compute_key_group_range_for_operator_index(r["max_parallelism"], r["parallelism"], r["index"]) == (
            r["start"], r["end"])
    for d in vec["default_max_parallelism"]:
        assert compute_default_max_parallelism(d["parallelism"]) == d["max_parallelism"]


@pytest.mark.parametrize("release", FLINK_RELEASES)
def test_bounds_errors_carry_flinks_messages(release):
    errors = {e["call"]: e for e in _vectors(release)["errors"]}
    calls = {
        "computeDefaultMaxParallelism(0)": lambda: compute_default_max_parallelism(0),
        "computeDefaultMaxParallelism(32769)": lambda: compute_default_max_parallelism(32769),
        "computeKeyGroupRangeForOperatorIndex(10, 11, 0)":
            lambda: compute_key_group_range_for_operator_index(10, 11, 0),
    }
    for call, fn in calls.items():
        assert call in errors, f"oracle did not record {call}"
        with pytest.raises(FlinkError) as err:
            fn()
        assert str(err.value) == errors[call]["message"]

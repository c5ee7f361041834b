"""The fast key-group paths key alignment runs (`hashing.vectorized`), against real Flink and each other.

Arrow strings get Java's `String.hashCode` from `hashing._javastrings` (hashing/_javastrings.c) when it
was built, else from NumPy; int/long keys and the murmur -> key group -> operator index chain run block
by block (`key_groups_and_operator_indexes`). Expected values come from real Flink's
`KeyGroupRangeAssignment` (`tests/fixtures/flink/<release>/keygroups.json`); random keys (non-ASCII,
surrogate pairs, empty strings, negative ints, Long.MIN_VALUE, block and chunk boundaries) must give the
same codes on the compiled and the NumPy path and in the scalar core (`hashing.java_hash`,
`hashing.keygroups`), which the Flink vectors pin down key by key; long keys also through
`long_key_groups_and_operator_indexes`, which hashes them inside the same blocks. Memory is asserted too: the chain's
peak stays near its outputs instead of array-sized temporaries (docs/performance.md, "Key groups").
"""

from __future__ import annotations

import os
import subprocess
import sys
import tracemalloc
import zipfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from bench.bench_keygroups import make_keys
from hashing import vectorized
from hashing.java_hash import long_hash, string_hash
from hashing.keygroups import assign_key_to_parallel_operator, assign_to_key_group
from tests.conftest import FLINK_FIXTURES, FLINK_RELEASES, REPO, load_json

PATHS = (True, False)  # compiled String.hashCode, NumPy's


def _keys(release: str, kind: str) -> list[dict]:
    path = FLINK_FIXTURES / release / "keygroups.json"
    assert path.is_file(), f"missing {path}: run `make fixtures`"
    return [c for c in load_json(path)["keys"] if c["type"] == kind]


def test_the_compiled_string_hash_is_built_and_used():
    """`pip install -e .` (or `setup.py build_ext --inplace`) builds it here; without it strings are 10x slower."""
    assert vectorized.STRING_HASH == "compiled", "hashing._javastrings was not built: run `pip install -e .`"


def _utf8_cases(release: str) -> list[dict]:
    # a lone surrogate has no UTF-8 form, so Arrow data never holds one (see _surrogate_bytes below)
    return [c for c in _keys(release, "String") if not any(0xD800 <= ord(ch) <= 0xDFFF for ch in c["value"])]


@pytest.mark.parametrize("compiled", PATHS)
@pytest.mark.parametrize("release", FLINK_RELEASES)
def test_arrow_strings_agree_with_flink(release: str, compiled: bool):
    cases = _utf8_cases(release)
    assert any(c["value"] == "" for c in cases) and any(ord(ch) > 0xFFFF for c in cases for ch in c["value"])
    values = [c["value"] for c in cases]
    for arrow in (pa.array(values), pa.array(["pad", *values]).slice(1), pa.array(values, pa.large_string()),
                  pa.chunked_array([values[:100], values[100:]])):
        codes = vectorized.string_hash_codes(arrow, compiled=compiled)
        assert codes.tolist() == [c["hash_code"] for c in cases]
    for max_p in ("128", "4096", "32768"):
        groups, _ = vectorized.key_groups_and_operator_indexes(codes, int(max_p), 1)
        assert groups.tolist() == [c["key_group"][max_p] for c in cases]
    for mp in ("128/3", "4096/7"):
        max_p, p = map(int, mp.split("/"))
        _, owners = vectorized.key_groups_and_operator_indexes(codes, max_p, p)
        assert owners.tolist() == [c["operator_index"][mp] for c in cases]


@pytest.mark.parametrize("release", FLINK_RELEASES)
def test_int_and_long_keys_agree_with_flink(release: str):
    for kind, to_codes in (("Integer", vectorized.int_hash_codes), ("Long", vectorized.long_hash_codes)):
        cases = _keys(release, kind)
        codes = to_codes(np.array([c["value"] for c in cases], dtype=np.int32 if kind == "Integer" else np.int64))
        assert codes.tolist() == [c["hash_code"] for c in cases]
        for mp in ("128/3", "4096/7"):
            max_p, p = map(int, mp.split("/"))
            groups, owners = vectorized.key_groups_and_operator_indexes(codes, max_p, p)
            assert groups.tolist() == [c["key_group"][str(max_p)] for c in cases]
            assert owners.tolist() == [c["operator_index"][mp] for c in cases]
            assert vectorized.key_groups(codes, max_p).tolist() == groups.tolist()
            assert vectorized.operator_indexes(groups, max_p, p).tolist() == owners.tolist()
            if kind == "Long":
                fused = vectorized.long_key_groups_and_operator_indexes(np.array([c["value"] for c in cases]), max_p, p)
                assert fused[0].tolist() == groups.tolist() and fused[1].tolist() == owners.tolist()


def _random_strings(n: int, seed: int) -> list[str]:
    """The benchmark's mix (mostly ASCII, Latin-1, CJK, an emoji) plus empty and one-char strings,
    a string of only supplementary characters and a long one."""
    keys = make_keys("string", n, seed)
    keys[::97] = [""] * len(keys[::97])
    keys[5::101] = ["\U0010FFFF\U0001F600"] * len(keys[5::101])
    keys[7] = "x" * 5000 + "é"
    keys[9] = "ÿ"
    return keys


def test_random_strings_same_on_both_paths_and_in_the_scalar_core():
    keys = _random_strings(3 * vectorized._STRINGS_PER_CHUNK + 5, seed=34)
    compiled = vectorized.string_hash_codes(pa.array(keys), compiled=True)
    numpy_ = vectorized.string_hash_codes(pa.array(keys), compiled=False)
    python = vectorized.string_hash_codes(keys)
    assert np.array_equal(compiled, numpy_) and np.array_equal(compiled, python)
    assert compiled.tolist() == [string_hash(k) for k in keys]
    ascii_only = [k for k in keys if k.isascii()]  # the NumPy path's ASCII shortcut per chunk
    assert np.array_equal(vectorized.string_hash_codes(pa.array(ascii_only), compiled=True),
                          vectorized.string_hash_codes(pa.array(ascii_only), compiled=False))


def _surrogate_bytes() -> pa.Array:
    """Strings whose UTF-8 holds an encoded surrogate (bytes Python's surrogatepass reads, as Java's strings can
    hold lone surrogates); built as binary and viewed as strings, since Arrow's Python conversion rejects them."""
    raw = ["a\ud800b", "\udfff", "x\ud83d\ude00"]
    return pa.array([s.encode("utf-8", errors="surrogatepass") for s in raw], pa.binary()).view(pa.string())


def test_encoded_surrogates_read_as_one_unit_on_both_paths():
    arrow = _surrogate_bytes()
    expected = [string_hash("a\ud800b"), string_hash("\udfff"), string_hash("x\ud83d\ude00")]
    assert vectorized.string_hash_codes(arrow, compiled=True).tolist() == expected
    assert vectorized.string_hash_codes(arrow, compiled=False).tolist() == expected


@pytest.mark.parametrize("bad", [b"\xff", b"ab\xc3", b"\xe0\x80\x80", b"\xf4\x90\x80\x80", b"\xc0\xaf", b"\x80"])
def test_malformed_utf8_gives_the_same_error_on_both_paths(bad: bytes):
    arrow = pa.array([b"ok", bad], pa.binary()).view(pa.string())
    errors = []
    for compiled in PATHS:
        with pytest.raises(UnicodeDecodeError) as err:
            vectorized.string_hash_codes(arrow, compiled=compiled)
        errors.append(str(err.value))
    assert errors[0] == errors[1]


@pytest.mark.parametrize("max_p, p", [(4096, 1000), (128, 3), (32768, 32768), (1000, 7), (200, 200), (129, 1)])
def test_random_ints_and_longs_match_the_scalar_core(max_p: int, p: int):
    rng = np.random.default_rng(max_p * 31 + p)
    n = 2 * vectorized._BLOCK + 3  # whole blocks and a short last one
    longs = rng.integers(-(1 << 63), (1 << 63) - 1, size=n, dtype=np.int64, endpoint=True)
    longs[:4] = [-(1 << 63), (1 << 63) - 1, -1, 0]
    ints = rng.integers(-(1 << 31), 1 << 31, size=n, dtype=np.int64).astype(np.int32)
    ints[:3] = [-(1 << 31), -1, (1 << 31) - 1]
    sample = np.r_[0:2000, n - 2000:n]
    for keys, java_type, to_codes in ((ints, "integer", vectorized.int_hash_codes),
                                      (longs, "long", vectorized.long_hash_codes)):
        codes = to_codes(keys)
        groups, owners = vectorized.key_groups_and_operator_indexes(codes, max_p, p)
        assert np.array_equal(groups, vectorized.key_groups(codes, max_p))
        assert np.array_equal(owners, vectorized.operator_indexes(groups, max_p, p))
        assert np.array_equal(owners, vectorized.operator_indexes(groups.astype(np.int64), max_p, p))
        if java_type == "long":
            fused = vectorized.long_key_groups_and_operator_indexes(keys, max_p, p)
            assert np.array_equal(fused[0], groups) and np.array_equal(fused[1], owners)
        for i in sample.tolist():
            key = int(keys[i])
            assert groups[i] == assign_to_key_group(key, max_p, java_type), (java_type, key)
            assert owners[i] == assign_key_to_parallel_operator(key, max_p, p, java_type), (java_type, key)
    assert vectorized.long_hash_codes(longs[:4]).tolist() == [long_hash(int(v)) for v in longs[:4]]


def _peak_bytes(fn) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_peak_memory_stays_near_the_outputs():
    """Before: 160-200 MB of temporaries for 10 M longs, 620 MB for 1 M strings. Now the outputs plus
    cache-sized scratch: codes, key groups and operator indexes, 4 bytes each per key."""
    n = 2_000_000
    longs = np.random.default_rng(1).integers(-(1 << 63), (1 << 63) - 1, size=n, dtype=np.int64)
    peak = _peak_bytes(lambda: vectorized.key_groups_and_operator_indexes(vectorized.long_hash_codes(longs),
                                                                          4096, 1000))
    assert peak < 3 * 4 * n + (2 << 20), peak  # codes, key groups, operator indexes
    peak = _peak_bytes(lambda: vectorized.long_key_groups_and_operator_indexes(longs, 4096, 1000))
    assert peak < 2 * 4 * n + (2 << 20), peak  # key groups and operator indexes only
    strings = pa.array(_random_strings(200_000, seed=7))
    for compiled in PATHS:
        peak = _peak_bytes(lambda c=compiled: vectorized.key_groups_and_operator_indexes(
            vectorized.string_hash_codes(strings, compiled=c), 4096, 1000))
        limit = 3 * 4 * len(strings) + ((2 << 20) if compiled else (24 << 20))
        assert peak < limit, (compiled, peak)


_EXECUTOR_PROBE = """
import sys, pyspark.files
# a cluster host has the third-party libraries, not this repository's editable install (its import hook)
sys.meta_path[:] = [f for f in sys.meta_path if "__editable__" not in getattr(f, "__module__", "")]
sys.path.insert(0, sys.argv[1])  # our packages as a cluster executor gets them: a zip (spark_jobs.common)
pyspark.files.SparkFiles._is_running_on_worker = True
pyspark.files.SparkFiles._root_directory = sys.argv[2]
import pyarrow as pa
import hashing.vectorized as v
print(v.STRING_HASH, sys.modules["hashing"].__file__.startswith(sys.argv[1]),
      v.string_hash_codes(pa.array(["key-1", "日本\U0001F600"])).tolist())
"""


@pytest.mark.parametrize("shipped", [True, False], ids=["extension-shipped", "nothing-shipped"])
def test_a_zipped_executor_runs_the_shipped_string_hash_else_numpy(shipped: bool, tmp_path: Path) -> None:
    """key_alignment's executors on a cluster import our code from a zip, which cannot hold the extension: the
    file the driver ships with `addFile` (`common.COMPILED_EXTENSIONS`) is loaded from SparkFiles; without it
    NumPy computes the same codes, and nothing fails."""
    from spark_jobs.common import COMPILED_EXTENSIONS, SHIPPED_PACKAGES, compiled_extension_file

    assert "hashing._javastrings" in COMPILED_EXTENSIONS
    packages = tmp_path / "packages.zip"
    with zipfile.ZipFile(packages, "w") as zf:
        for pkg in SHIPPED_PACKAGES:
            for path in (REPO / pkg).rglob("*.py"):
                zf.write(path, path.relative_to(REPO).as_posix())
    files = tmp_path / "files"
    files.mkdir()
    extension = compiled_extension_file("hashing._javastrings")
    assert extension is not None  # built by `pip install -e .`, as test_the_compiled_string_hash_is_built_and_used
    if shipped:
        (files / extension.name).write_bytes(extension.read_bytes())
    out = subprocess.run([sys.executable, "-c", _EXECUTOR_PROBE, str(packages), str(files)], capture_output=True,
                         text=True, cwd=tmp_path, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
                         check=True).stdout.split(maxsplit=2)
    assert out[:2] == ["compiled" if shipped else "numpy", "True"]
    assert out[2].strip() == str([string_hash("key-1"), string_hash("日本\U0001F600")])

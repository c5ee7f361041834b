"""Property-based fuzzing of the reader over real Flink files: truncations, bit flips and
inflated length fields either parse or raise `MetadataFormatError`, never anything else.

`UPGRADE_GATE_FUZZ_EXAMPLES` sets the number of inputs per strategy (default 150 in `make test`;
the long run uses e.g. 20000). Counts are appended to `.work/fuzz-report.jsonl`.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.metadata_support import fixture_dirs
from upgrade_gate.flink.metadata import MetadataFormatError, parse_metadata

EXAMPLES = int(os.environ.get("UPGRADE_GATE_FUZZ_EXAMPLES", "150"))
FILES = [(d / "_metadata").read_bytes() for d in fixture_dirs()]
REPORT = Path(__file__).resolve().parents[2] / ".work" / "fuzz-report.jsonl"
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
_counts = {"inputs": 0, "parsed": 0, "clean_errors": 0}


def _check(data: bytes) -> None:
    _counts["inputs"] += 1
    try:
        parse_metadata(data, "fuzz/_metadata", "/fuzz")
        _counts["parsed"] += 1
    except MetadataFormatError as exc:
        assert str(exc).startswith("fuzz/_metadata: offset ")
        _counts["clean_errors"] += 1


files = st.sampled_from(range(len(FILES)))


@SETTINGS
@given(files, st.floats(0, 1))
def test_truncation(i: int, frac: float) -> None:
    data = FILES[i]
    _check(data[: int(len(data) * frac)])


@SETTINGS
@given(files, st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.integers(0, 7)), min_size=1, max_size=8))
def test_bit_flips(i: int, flips: list[tuple[float, int]]) -> None:
    data = bytearray(FILES[i])
    for pos, bit in flips:
        data[int(pos * len(data))] ^= 1 << bit
    _check(bytes(data))


@SETTINGS
@given(files, st.floats(0, 1, exclude_max=True),
       st.sampled_from([2**31 - 1, 2**31 - 8, -1, -(2**31), 0xFFFF, 65536, 10**9]))
def test_inflated_lengths(i: int, pos: float, value: int) -> None:
    data = bytearray(FILES[i])
    at = min(int(pos * len(data)), len(data) - 4)
    data[at:at + 4] = struct.pack(">i", value)
    _check(bytes(data))


def test_zz_report() -> None:
    """Runs last in this module: records how many inputs ran and that all failures were clean."""
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    with REPORT.open("a") as f:
        f.write(json.dumps({"examples_per_strategy": EXAMPLES, **_counts}) + "\n")
    print(f"fuzz: {_counts}")
    assert _counts["inputs"] == _counts["parsed"] + _counts["clean_errors"]

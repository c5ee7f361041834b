"""Fuzzing the repair's own inputs: the keyed state files a max-parallelism rewrite reads entry by entry.

The `_metadata` and graph readers have their own fuzz tests; what the repair adds is reading every entry of a
canonical keyed-state stream (`upgrade_gate.flink.canonical`). Real state files Flink wrote
(`tests/fixtures/repairs/*/max-parallelism-*`) are truncated, bit-flipped and given inflated length fields; the
rewrite must then either succeed or refuse with one clean reason (`UnsupportedKey`, `MetadataFormatError`,
`StateFileError`), never raise anything else and never allocate what a length field claims.

`UPGRADE_GATE_FUZZ_EXAMPLES` sets the inputs per strategy (default 100 in `make test`; `make fuzz` runs 5,000).
A CLI test runs the command a user runs on a damaged savepoint: exit 1 or 2 and no traceback, nothing written.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import TESTS
from upgrade_gate.flink.metadata import MetadataFormatError, parse_metadata
from upgrade_gate.flink.metadata.model import ByteStreamStateHandle, KeyGroupsSavepointStateHandle
from upgrade_gate.flink.state_meta.streams import StateFileError, local_opener
from upgrade_gate.repair.max_parallelism import UnsupportedKey, rescale

EXAMPLES = int(os.environ.get("UPGRADE_GATE_FUZZ_EXAMPLES", "100"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture])
SAVEPOINTS = sorted(TESTS.glob("fixtures/repairs/*/max-parallelism-*/savepoint"))


def _first_keyed(sp: Path) -> tuple:  # type: ignore[type-arg]
    md = parse_metadata((sp / "_metadata").read_bytes(), str(sp / "_metadata"), str(sp))
    for op in md.operator_states:
        for i, st_ in op.subtask_states.items():
            for h in st_.managed_keyed_state:
                if isinstance(h, KeyGroupsSavepointStateHandle):
                    return md, op, i, h
    raise AssertionError(f"{sp}: no canonical keyed state")


CASES = [_first_keyed(sp) for sp in SAVEPOINTS]


def _with_stream(case: tuple, data: bytes) -> object:  # type: ignore[type-arg]
    """The savepoint with one keyed stream replaced by `data` (inline, so nothing touches the fixture)."""
    md, op, i, h = case
    handle = dataclasses.replace(h, delegate=ByteStreamStateHandle("fuzz", data))
    sub = dataclasses.replace(op.subtask_states[i], managed_keyed_state=(handle,))
    new_op = dataclasses.replace(op, subtask_states={**op.subtask_states, i: sub})
    return dataclasses.replace(md, operator_states=tuple(new_op if o is op else o for o in md.operator_states))


def _stream(case: tuple) -> bytes:  # type: ignore[type-arg]
    return Path(case[3].delegate.path).read_bytes()


def _check(case: tuple, data: bytes, tmp: Path) -> None:  # type: ignore[type-arg]
    md = _with_stream(case, data)
    target = 256 if case[1].max_parallelism == 128 else 128
    work = tmp / "w"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    try:
        rescale(md, target, work, local_opener)  # type: ignore[arg-type]
    except (UnsupportedKey, MetadataFormatError, StateFileError) as exc:
        assert str(exc) and "\n" not in str(exc)


cases = st.sampled_from(range(len(CASES)))


@SETTINGS
@given(cases, st.floats(0, 1))
def test_truncated_state_file(tmp_path: Path, i: int, frac: float) -> None:
    data = _stream(CASES[i])
    _check(CASES[i], data[: int(len(data) * frac)], tmp_path)


@SETTINGS
@given(cases, st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.integers(0, 7)), min_size=1, max_size=8))
def test_bit_flips_in_a_state_file(tmp_path: Path, i: int, flips: list[tuple[float, int]]) -> None:
    data = bytearray(_stream(CASES[i]))
    for pos, bit in flips:
        data[int(pos * len(data))] ^= 1 << bit
    _check(CASES[i], bytes(data), tmp_path)


@SETTINGS
@given(cases, st.floats(0, 1, exclude_max=True),
       st.sampled_from([2**31 - 1, 2**31 - 8, -1, -(2**31), 0xFFFF, 65536, 10**9]))
def test_inflated_length_fields(tmp_path: Path, i: int, pos: float, value: int) -> None:
    data = bytearray(_stream(CASES[i]))
    at = min(int(pos * len(data)), len(data) - 4)
    struct.pack_into(">i", data, at, value)
    _check(CASES[i], bytes(data), tmp_path)


def test_a_damaged_state_file_is_one_line_and_nothing_is_written(tmp_path: Path) -> None:
    d = SAVEPOINTS[0].parent
    sp = tmp_path / "savepoint"
    shutil.copytree(d / "savepoint", sp)
    case = _first_keyed(sp)
    data = bytearray(Path(case[3].delegate.path).read_bytes())
    first = next(o for o in case[3].offsets if o)
    struct.pack_into(">i", data, first + 2, 10**9)  # the first key's length
    Path(case[3].delegate.path).write_bytes(bytes(data))
    to = "256" if case[1].max_parallelism == 128 else "128"
    res = subprocess.run([sys.executable, "-m", "upgrade_gate", "repair", "--savepoint", str(sp), "--graph",
                          str(d / "graph-b.json"), "--max-parallelism", to, "-o", str(tmp_path / "out")],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode in (1, 2) and "Traceback" not in res.stderr, res.stderr
    assert "cannot change the max parallelism" in res.stdout or res.stderr.strip().count("\n") == 0
    assert not (tmp_path / "out").exists()

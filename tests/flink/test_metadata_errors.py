"""Bad `_metadata` input gets one clear error naming the file and offset: never a traceback,
never an allocation driven by a length field (docs/guarantees.md)."""

from __future__ import annotations

import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

from tests.metadata_support import MetadataBuilder, empty_subtask, fixture_dirs, header, v3_file
from upgrade_gate.flink.metadata import MetadataFormatError, parse_metadata

DIRS = fixture_dirs()
SMALLEST = min((d / "_metadata" for d in DIRS), key=lambda p: p.stat().st_size)


def _err(data: bytes, name: str = "bad/_metadata") -> MetadataFormatError:
    with pytest.raises(MetadataFormatError) as info:
        parse_metadata(data, name, "/tmp/sp")
    msg = str(info.value)
    assert msg.startswith(f"{name}: offset ") and "\n" not in msg
    return info.value


def test_every_truncation_of_a_real_file_is_a_clean_error() -> None:
    data = SMALLEST.read_bytes()
    for n in range(len(data)):
        e = _err(data[:n])
        assert 0 <= e.offset <= n


def test_wrong_magic() -> None:
    data = bytearray(SMALLEST.read_bytes())
    data[0] ^= 0xFF
    e = _err(bytes(data))
    assert e.offset == 0 and "magic number" in str(e)


@pytest.mark.parametrize("version", [0, 7, 99, -1])
def test_unknown_version_uses_flinks_message(version: int) -> None:
    data = header(version).long(1).bytes()
    e = _err(data)
    assert f"Unrecognized checkpoint version number: {version}" in str(e) and e.offset == 4


def test_version_1_is_no_longer_supported() -> None:
    assert "Flink 1.1 / 1.2" in str(_err(header(1).long(1).bytes()))


def test_unknown_operator_handle_tag() -> None:
    body = MetadataBuilder().int(1).byte(99).bytes()  # has managed operator state, tag 99
    e = _err(v3_file(body))
    assert "expected operator-state handle tag (0, 4 or 17), found 99" in str(e)
    assert e.offset == len(v3_file(b"")) + 4


def test_unknown_keyed_and_stream_handle_tags() -> None:
    e = _err(v3_file(MetadataBuilder().int(0).int(0).byte(42).bytes()))
    assert "keyed state handle tag" in str(e) and "found 42" in str(e)
    # key-groups handle with an unknown delegate tag
    body = MetadataBuilder().int(0).int(0).byte(3).int(0).int(1).long(0).byte(200).bytes()
    assert "stream state handle tag" in str(_err(v3_file(body)))


def test_unknown_distribution_mode() -> None:
    body = MetadataBuilder().int(1).byte(4).int(1).utf("s").byte(5).int(0).byte(0).bytes()
    assert "distribution mode" in str(_err(v3_file(body)))


@pytest.mark.parametrize("count", [2**31 - 1, -1, -(2**31)])
def test_huge_or_negative_counts_allocate_nothing(count: int) -> None:
    cases = [
        header(3).long(1).int(0).int(count).bytes(),  # operator states
        header(3).long(1).int(count).bytes(),  # master states
        v3_file(MetadataBuilder().int(1).byte(4).int(count).bytes()),  # state names
        v3_file(MetadataBuilder().int(0).int(0).byte(3).int(0).int(count).bytes()),  # key groups
        v3_file(MetadataBuilder().int(0).int(0).byte(0).byte(1).utf("inline").int(count).bytes()),  # stream bytes
    ]
    for data in cases:
        tracemalloc.start()
        try:
            _err(data)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 256 * 1024, f"peak {peak} bytes for count {count}"


def test_length_field_of_2_pow_31_in_master_state() -> None:
    data = header(3).long(1).int(1).int(0xC96B1696 - (1 << 32)).int(2**31 - 1).raw(bytes(8)).bytes()
    assert "master state length" in str(_err(data))


def test_trailing_garbage() -> None:
    data = SMALLEST.read_bytes() + b"garbage"
    e = _err(data)
    assert "trailing bytes" in str(e) and e.offset == len(data) - 7
    assert "trailing bytes" in str(_err(v3_file(empty_subtask(), trailer=b"\x00")))


def test_negative_checkpoint_id_and_bad_subtask_index() -> None:
    assert "invalid checkpoint ID: -5" in str(_err(header(3).long(-5).bytes()))
    data = header(3).long(1).int(0).int(1).raw(bytes(16)).int(2).int(128).byte(0).int(1).int(5).bytes()
    assert "subtask index 5" in str(_err(data))


def test_properties_trailer_must_be_checkpoint_properties() -> None:
    data = v3_file(empty_subtask(), version=4, trailer=b"\xac\xed\x00\x05t\x00\x03abc")
    assert "CheckpointProperties" in str(_err(data))


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "upgrade_gate", *args], capture_output=True, text=True, timeout=60)


def test_cli_exit_code_2_without_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "_metadata"
    bad.write_bytes(SMALLEST.read_bytes()[:100])
    proc = _cli("inspect", str(bad))
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and str(bad) in proc.stderr and "offset" in proc.stderr
    proc = _cli("inspect", str(tmp_path / "missing"))
    assert proc.returncode == 2 and "no such file" in proc.stderr and "Traceback" not in proc.stderr
    bad.write_bytes(header(99).long(1).bytes())
    proc = _cli("inspect", str(tmp_path))
    assert proc.returncode == 2 and "Unrecognized checkpoint version number: 99" in proc.stderr

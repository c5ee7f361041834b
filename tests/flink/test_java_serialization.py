"""The one Java serialization reader (upgrade_gate/flink/metadata/java_serialization.py) on hostile streams.

Its callers' tests read real streams (the `_metadata` trailer: test_metadata_*.py; RowData logical types:
test_state_meta.py); these build streams by hand for what real files never hold: nesting past the bound, lengths
of 2^31 and more, resets, proxies and a class that is its own superclass. Each ends in one error or in
`UnsupportedJavaStream`, allocating nothing for a hostile length.
"""

from __future__ import annotations

import struct
import tracemalloc

import pytest

from upgrade_gate.flink.metadata.checkpoint_properties import read_checkpoint_properties
from upgrade_gate.flink.metadata.errors import MetadataFormatError
from upgrade_gate.flink.metadata.java_serialization import (
    MAX_DEPTH,
    JavaEnum,
    JavaObject,
    UnsupportedJavaStream,
    read_stream,
)
from upgrade_gate.flink.metadata.reader import BoundedReader

HEADER = b"\xac\xed\x00\x05"
END, NULL = b"\x78", b"\x70"


def _utf(s: str) -> bytes:
    return struct.pack(">H", len(s)) + s.encode()


def _ref(handle: int) -> bytes:
    return b"\x71" + struct.pack(">i", 0x7E0000 + handle)


def _desc(name: str, fields: bytes = b"", count: int = 0, flags: int = 0x02, parent: bytes = NULL) -> bytes:
    return b"\x72" + _utf(name) + bytes(8) + bytes([flags]) + struct.pack(">h", count) + fields + END + parent


def _read(body: bytes) -> object:
    return read_stream(BoundedReader(HEADER + body, "t"), "test object")


def _error(body: bytes) -> str:
    with pytest.raises(MetadataFormatError) as exc:
        _read(body)
    return exc.value.detail


def _nested_arrays(n: int) -> bytes:
    """n `Object[]`s, each the only element of the one before; the descriptor is handle 0, then a reference."""
    one = struct.pack(">i", 1)
    return b"\x75" + _desc("[Ljava.lang.Object;") + one + (b"\x75" + _ref(0) + one) * (n - 1) + NULL


def test_an_object_with_fields_enums_and_a_list() -> None:
    enum = b"\x7e" + _desc("E", flags=0x12, parent=_desc("java.lang.Enum", flags=0x12)) + b"\x74" + _utf("A")
    body = (b"\x73" + _desc("C", b"I" + _utf("n") + b"L" + _utf("e") + b"\x74" + _utf("LE;"), count=2)
            + struct.pack(">i", -7) + enum)
    obj = _read(body)
    assert isinstance(obj, JavaObject) and obj.class_name == "C"
    assert obj.fields == {"n": -7, "e": JavaEnum("E", "A")}
    array_list = (b"\x73" + _desc("java.util.ArrayList", b"I" + _utf("size"), count=1, flags=0x03)
                  + struct.pack(">i", 1) + b"\x77\x04" + struct.pack(">i", 1) + b"\x74" + _utf("x") + END)
    assert _read(array_list).elements() == ["x"]


def test_nesting_is_bounded() -> None:
    value, levels = _read(_nested_arrays(MAX_DEPTH)), 0  # reads: the innermost element sits at MAX_DEPTH
    while isinstance(value, list):
        value, levels = value[0], levels + 1
    assert value is None and levels == MAX_DEPTH
    assert f"nested deeper than {MAX_DEPTH} levels" in _error(_nested_arrays(MAX_DEPTH + 1))
    assert f"nested deeper than {MAX_DEPTH} levels" in _error(_nested_arrays(100_000))


@pytest.mark.parametrize(("body", "expect"), [
    (b"\x7c" + struct.pack(">q", 2**62), "length of Java long string 4611686018427387904 exceeds the bytes left"),
    (b"\x7c" + struct.pack(">q", -1), "length of Java long string -1 exceeds"),
    (b"\x75" + _desc("[I") + struct.pack(">i", 2**31 - 1), "number of array elements 2147483647 needs"),
    (b"\x75" + _desc("[Ljava.lang.Object;") + struct.pack(">i", -1), "expected a number of array elements >= 0"),
    (b"\x73" + _desc("C", count=2**15 - 1), "invalid number of serializable fields 32767"),
    (b"\x73" + _desc("C", flags=0x03) + b"\x7a" + struct.pack(">i", 2**31 - 1),
     "number of block data bytes 2147483647 needs"),
    (_ref(5), "back-reference to unknown handle 0x7e0005"),
])
def test_hostile_lengths_allocate_nothing(body: bytes, expect: str) -> None:
    tracemalloc.start()
    try:
        detail = _error(body)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert expect in detail and peak < 64 * 1024


def test_reset_only_between_objects() -> None:
    """`ObjectInputStream.handleReset` accepts TC_RESET at the top level only ("unexpected reset; recursion depth")."""
    assert _read(b"\x79" + b"\x74" + _utf("s")) == "s"
    nested = b"\x73" + _desc("C", b"L" + _utf("f") + b"\x74" + _utf("Ljava/lang/Object;"), count=1) + b"\x79" + NULL
    assert "unexpected Java serialization reset inside an object" in _error(nested)


def test_a_class_that_is_its_own_superclass() -> None:
    assert "Java class hierarchy too deep" in _error(b"\x73" + _desc("C", parent=_ref(0)))


def test_what_is_not_modelled_is_unsupported_and_the_trailer_reports_it() -> None:
    proxy = b"\x73\x7d" + struct.pack(">i", 0)
    with pytest.raises(UnsupportedJavaStream):
        _read(proxy)
    with pytest.raises(UnsupportedJavaStream, match="externalizable class X without block data"):
        _read(b"\x73" + _desc("X", flags=0x04))
    with pytest.raises(MetadataFormatError, match="unsupported Java serialization type code 0x7d"):
        read_checkpoint_properties(BoundedReader(HEADER + proxy, "t"))

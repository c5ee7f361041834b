"""A bounded big-endian reader with the primitives of `java.io.DataInputStream`.

Flink writes `_metadata` with `DataOutputStream`. Every count and length read from the file is
checked against the bytes that remain *before* anything is allocated for it, so a corrupt
length (2^31, -1) costs an error message, never memory; every error names the offset.
"""

from __future__ import annotations

import struct
from typing import NoReturn

from upgrade_gate.flink.metadata.errors import MetadataFormatError

__all__ = ["BoundedReader", "decode_modified_utf8"]

_INT = struct.Struct(">i")
_LONG = struct.Struct(">q")
_SHORT = struct.Struct(">H")
_INT_INT = struct.Struct(">ii")


class BoundedReader:
    """Reads `data[pos:end]`; `source` names the file in errors."""

    __slots__ = ("data", "end", "pos", "source")

    def __init__(self, data: bytes, source: str, pos: int = 0, end: int | None = None) -> None:
        self.data = data
        self.source = source
        self.pos = pos
        self.end = len(data) if end is None else end

    # -- errors ---------------------------------------------------------------------------
    def fail(self, message: str, offset: int | None = None) -> NoReturn:
        raise MetadataFormatError(self.source, self.pos if offset is None else offset, message)

    def remaining(self) -> int:
        return self.end - self.pos

    def _need(self, n: int, what: str) -> int:
        pos = self.pos
        if self.end - pos < n:
            self.fail(f"truncated: expected {what} ({n} bytes), only {self.end - pos} left")
        self.pos = pos + n
        return pos

    # -- primitives -----------------------------------------------------------------------
    def read_int(self, what: str = "int") -> int:
        pos = self.pos
        if self.end - pos < 4:
            self._need(4, what)
        self.pos = pos + 4
        return _INT.unpack_from(self.data, pos)[0]

    def read_two_ints(self, what: str = "two ints") -> tuple[int, int]:
        pos = self.pos
        if self.end - pos < 8:
            self._need(8, what)
        self.pos = pos + 8
        return _INT_INT.unpack_from(self.data, pos)

    def read_long(self, what: str = "long") -> int:
        pos = self.pos
        if self.end - pos < 8:
            self._need(8, what)
        self.pos = pos + 8
        return _LONG.unpack_from(self.data, pos)[0]

    def read_byte(self, what: str = "byte") -> int:
        """A signed byte, as `DataInputStream.readByte()`."""
        pos = self.pos
        if pos >= self.end:
            self._need(1, what)
        self.pos = pos + 1
        b = self.data[pos]
        return b - 256 if b > 127 else b

    def read_ubyte(self, what: str = "byte") -> int:
        """An unsigned byte, as `InputStream.read()`."""
        pos = self.pos
        if pos >= self.end:
            self._need(1, what)
        self.pos = pos + 1
        return self.data[pos]

    def read_bool(self, what: str = "boolean") -> bool:
        return self.read_ubyte(what) != 0

    def read_count(self, what: str, item_bytes: int) -> int:
        """An int count of items of at least `item_bytes` each, checked against the bytes left."""
        at = self.pos
        left = self.end - at - 4
        if left >= 0:  # the usual case: no f-string for `what`, one bounds check
            n = _INT.unpack_from(self.data, at)[0]
            if n >= 0 and n * item_bytes <= left:
                self.pos = at + 4
                return n
        n = self.read_int(f"number of {what}")
        if n < 0:
            self.fail(f"expected a number of {what} >= 0, found {n}", at)
        if n * item_bytes > self.end - self.pos:
            self.fail(f"number of {what} {n} needs at least {n * item_bytes} bytes, "
                      f"only {self.end - self.pos} left", at)
        return n

    def skip(self, n: int, what: str) -> int:
        """Moves past `n` bytes that must be there; returns where they start (for a view of them)."""
        return self._need(n, what)

    def read_bytes(self, n: int, what: str) -> bytes:
        pos = self._need(n, what)
        return self.data[pos:pos + n]

    def read_long_array(self, n: int, what: str) -> tuple[int, ...]:
        if n == 0:
            return ()
        pos = self._need(8 * n, what)
        return struct.unpack_from(f">{n}q", self.data, pos)

    def read_utf(self, what: str = "string") -> str:
        """`DataInputStream.readUTF`: u16 length, then modified UTF-8."""
        at = self.pos
        data = self.data
        if self.end - at >= 2:  # the usual case, an ASCII string that is all there: no f-string, one slice
            stop = at + 2 + (data[at] << 8 | data[at + 1])
            if stop <= self.end:
                raw = data[at + 2:stop]
                if raw.isascii():
                    self.pos = stop
                    return raw.decode("ascii")
        pos = self._need(2, f"length of {what}")
        n = _SHORT.unpack_from(self.data, pos)[0]
        start = self._need(n, what)
        raw = self.data[start:start + n]
        if raw.isascii():
            return raw.decode("ascii")
        return decode_modified_utf8(raw, lambda msg: self.fail(f"{what}: {msg}", at))


def decode_modified_utf8(raw: bytes, fail) -> str:  # type: ignore[no-untyped-def]
    """Java's modified UTF-8: NUL as C0 80, supplementary characters as two 3-byte surrogates."""
    try:
        text = raw.replace(b"\xc0\x80", b"\x00").decode("utf-8", "surrogatepass")
        return text.encode("utf-16-be", "surrogatepass").decode("utf-16-be", "surrogatepass")
    except UnicodeError as exc:
        fail(f"malformed modified UTF-8 ({exc.reason})")
        raise  # unreachable: fail raises

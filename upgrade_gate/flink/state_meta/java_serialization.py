"""A small, bounded reader of Java object serialization streams (`java.io.ObjectOutputStream`).

Flink writes some snapshot parts with plain Java serialization: `RowDataSerializerSnapshot#writeSnapshot`
puts each row field's `LogicalType` through `InstantiationUtil.serializeObject`, one stream per type (magic
0xACED, version 5, one object). To read those types without a JVM this module parses the stream grammar of
the Java Object Serialization Specification (section 6.4): class descriptors, objects, strings, enums,
arrays, block data and back-references. It builds plain values (`JavaObject`, `JavaEnum`, str, lists), never
instantiates anything, and every length and count is checked against the bytes left, so a bad stream costs
at most its own size.

Malformed bytes fail through the reader (`MetadataFormatError`, the state file is broken); streams that are
well-formed but use what this reader does not model (proxy classes, old-style Externalizable data, resets,
exceptions) raise `UnsupportedJavaStream`, for callers to skip the value instead.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any, NoReturn

from upgrade_gate.flink.metadata.reader import BoundedReader, decode_modified_utf8

__all__ = ["JavaClassDesc", "JavaEnum", "JavaObject", "UnsupportedJavaStream", "read_stream"]

STREAM_MAGIC = 0xACED
STREAM_VERSION = 5
BASE_HANDLE = 0x7E0000
MAX_DEPTH = 64
TC_NULL, TC_REFERENCE, TC_CLASSDESC, TC_OBJECT, TC_STRING, TC_ARRAY, TC_CLASS = range(0x70, 0x77)
TC_BLOCKDATA, TC_ENDBLOCKDATA, TC_RESET, TC_BLOCKDATALONG, TC_EXCEPTION, TC_LONGSTRING = range(0x77, 0x7D)
TC_PROXYCLASSDESC, TC_ENUM = 0x7D, 0x7E
SC_WRITE_METHOD, SC_SERIALIZABLE, SC_EXTERNALIZABLE, SC_BLOCK_DATA = 0x01, 0x02, 0x04, 0x08
_PRIMITIVE_SIZES = {"B": 1, "C": 2, "D": 8, "F": 4, "I": 4, "J": 8, "S": 2, "Z": 1}


class UnsupportedJavaStream(Exception):
    """A well-formed stream using a feature this reader does not model."""


@dataclass(frozen=True, slots=True)
class JavaClassDesc:
    """A class descriptor: the class, its flags and serializable fields ((type code, name) in stream order)."""

    name: str
    flags: int
    fields: tuple[tuple[str, str], ...]
    parent: JavaClassDesc | None

    def hierarchy(self) -> list[JavaClassDesc]:
        """Superclass first, the order of the class data in the stream."""
        out: list[JavaClassDesc] = []
        d: JavaClassDesc | None = self
        while d is not None:
            out.append(d)
            d = d.parent
        return out[::-1]


@dataclass(eq=False, slots=True)
class JavaObject:
    """An object: field values of its whole hierarchy by name, and what its `writeObject` methods appended."""

    class_name: str
    fields: dict[str, Any] = field(default_factory=dict)
    annotations: list[Any] = field(default_factory=list)

    def elements(self) -> list[Any] | None:
        """The elements of a serialized `java.util` list (ArrayList, the unmodifiable wrappers, Arrays' list)."""
        if self.class_name in ("java.util.ArrayList", "java.util.LinkedList"):
            return [a for a in self.annotations if not isinstance(a, bytes)]
        inner = self.fields.get("c", self.fields.get("list", self.fields.get("a")))
        if isinstance(inner, JavaObject):
            return inner.elements()
        return list(inner) if isinstance(inner, list) else None


@dataclass(frozen=True, slots=True)
class JavaEnum:
    class_name: str
    constant: str


class _Stream:
    def __init__(self, r: BoundedReader) -> None:
        self.r = r
        self.handles: list[Any] = []

    def fail(self, message: str, at: int | None = None) -> NoReturn:
        self.r.fail(f"Java-serialized object: {message}", at)

    def _assign(self, value: Any) -> int:
        self.handles.append(value)
        return len(self.handles) - 1

    def _short(self, what: str) -> int:
        return int.from_bytes(self.r.read_bytes(2, what), "big", signed=True)

    def content(self, depth: int) -> Any:
        """One content element: an object, or block data (bytes)."""
        at = self.r.pos
        if depth > MAX_DEPTH:
            self.fail(f"objects nested deeper than {MAX_DEPTH}", at)
        tc = self.r.read_ubyte("type code")
        if tc == TC_BLOCKDATA:
            return self.r.read_bytes(self.r.read_ubyte("block data length"), "block data")
        if tc == TC_BLOCKDATALONG:
            return self.r.read_bytes(self.r.read_count("block data bytes", 1), "block data")
        return self.value(tc, at, depth)

    def obj(self, depth: int) -> Any:
        at = self.r.pos
        return self.value(self.r.read_ubyte("type code"), at, depth)

    def value(self, tc: int, at: int, depth: int) -> Any:
        if depth > MAX_DEPTH:
            self.fail(f"objects nested deeper than {MAX_DEPTH}", at)
        if tc == TC_NULL:
            return None
        if tc == TC_REFERENCE:
            return self._reference(at)
        if tc in (TC_STRING, TC_LONGSTRING):
            return self._string(tc)
        if tc in (TC_CLASSDESC, TC_PROXYCLASSDESC):
            return self._class_desc(tc, at, depth)
        if tc == TC_CLASS:
            desc = self._desc(depth)
            self._assign(desc)
            return desc
        if tc == TC_ENUM:
            return self._enum(at, depth)
        if tc == TC_ARRAY:
            return self._array(at, depth)
        if tc == TC_OBJECT:
            return self._object(at, depth)
        if tc in (TC_RESET, TC_EXCEPTION):
            raise UnsupportedJavaStream(f"type code {tc:#x} at offset {at}")
        self.fail(f"unknown type code {tc:#x}", at)

    def _reference(self, at: int) -> Any:
        handle = self.r.read_int("object handle") - BASE_HANDLE
        if not 0 <= handle < len(self.handles):
            self.fail(f"reference to unknown handle {handle + BASE_HANDLE:#x}", at)
        return self.handles[handle]

    def _string(self, tc: int) -> str:
        if tc == TC_STRING:
            s = self.r.read_utf("Java string")
        else:
            at = self.r.pos
            n = self.r.read_long("long string length")
            if not 0 <= n <= self.r.remaining():
                self.fail(f"long string of {n} bytes, only {self.r.remaining()} left", at)
            s = decode_modified_utf8(self.r.read_bytes(n, "long string"), lambda m: self.fail(m, at))
        self._assign(s)
        return s

    def _desc(self, depth: int) -> JavaClassDesc | None:
        at = self.r.pos
        d = self.obj(depth + 1)
        if d is not None and not isinstance(d, JavaClassDesc):
            self.fail("expected a class descriptor", at)
        return d

    def _class_desc(self, tc: int, at: int, depth: int) -> JavaClassDesc:
        if tc == TC_PROXYCLASSDESC:
            raise UnsupportedJavaStream(f"a proxy class descriptor at offset {at}")
        handle = self._assign(None)
        name = self.r.read_utf("class name")
        self.r.read_long("serialVersionUID")
        flags = self.r.read_ubyte("class descriptor flags")
        count_at = self.r.pos
        n = self._short("field count")
        if n < 0 or n * 3 > self.r.remaining():
            self.fail(f"field count {n} does not fit the bytes left", count_at)
        fields = []
        for _ in range(n):
            f_at = self.r.pos
            code = chr(self.r.read_ubyte("field type code"))
            fname = self.r.read_utf("field name")
            if code in "L[":
                if not isinstance(self.obj(depth + 1), str):
                    self.fail(f"field {fname}: expected its type name", f_at)
            elif code not in _PRIMITIVE_SIZES:
                self.fail(f"field {fname}: unknown type code {code!r}", f_at)
            fields.append((code, fname))
        self._annotation(depth)
        desc = JavaClassDesc(name, flags, tuple(fields), self._desc(depth))
        self.handles[handle] = desc
        return desc

    def _annotation(self, depth: int) -> list[Any]:
        """Contents up to TC_ENDBLOCKDATA (class annotations, `writeObject` data)."""
        out = []
        while True:
            if self.r.remaining() and self.r.data[self.r.pos] == TC_ENDBLOCKDATA:
                self.r.pos += 1
                return out
            out.append(self.content(depth + 1))

    def _enum(self, at: int, depth: int) -> JavaEnum:
        desc = self._desc(depth)
        handle = self._assign(None)
        name = self.obj(depth + 1)
        if desc is None or not isinstance(name, str):
            self.fail("expected an enum's class and constant name", at)
        e = JavaEnum(desc.name, name)
        self.handles[handle] = e
        return e

    def _array(self, at: int, depth: int) -> list[Any]:
        desc = self._desc(depth)
        if desc is None or not desc.name.startswith("["):
            self.fail("expected an array class", at)
        out: list[Any] = []
        self._assign(out)
        code = desc.name[1]
        n = self.r.read_count("array elements", _PRIMITIVE_SIZES.get(code, 1))
        out.extend(self._field(code, depth) for _ in range(n))
        return out

    def _field(self, code: str, depth: int) -> Any:
        size = _PRIMITIVE_SIZES.get(code)
        if size is None:
            return self.obj(depth + 1)
        raw = self.r.read_bytes(size, "primitive field")
        if code == "Z":
            return raw != b"\x00"
        if code in "DF":
            return struct.unpack(">d" if code == "D" else ">f", raw)[0]
        return int.from_bytes(raw, "big", signed=code != "C")

    def _object(self, at: int, depth: int) -> JavaObject:
        desc = self._desc(depth)
        if desc is None:
            self.fail("expected an object's class", at)
        o = JavaObject(desc.name)
        self._assign(o)
        for d in desc.hierarchy():
            if d.flags & SC_EXTERNALIZABLE:
                if not d.flags & SC_BLOCK_DATA:
                    raise UnsupportedJavaStream(f"Externalizable {d.name} without block data at offset {at}")
                o.annotations += self._annotation(depth)
                continue
            for code, name in d.fields:
                o.fields[name] = self._field(code, depth)
            if d.flags & SC_WRITE_METHOD:
                o.annotations += self._annotation(depth)
        return o


def read_stream(r: BoundedReader) -> Any:
    """One `ObjectOutputStream` holding one object (`InstantiationUtil.serializeObject`): its value."""
    at = r.pos
    magic = int.from_bytes(r.read_bytes(2, "Java serialization magic"), "big")
    version = int.from_bytes(r.read_bytes(2, "Java serialization version"), "big")
    if magic != STREAM_MAGIC or version != STREAM_VERSION:
        r.fail(f"expected a Java serialization stream (aced0005), found {magic:04x}{version:04x}", at)
    return _Stream(r).obj(0)

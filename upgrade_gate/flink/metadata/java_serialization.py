"""The one bounded reader of Java's object serialization stream (`java.io.ObjectOutputStream`).

Flink writes two things we read with plain Java serialization, each one stream holding one object (magic
0xACED, version 5): the `CheckpointProperties` trailer of a v4+ `_metadata` (`MetadataV4Serializer`,
read by checkpoint_properties.py) and, in state meta information, the `LogicalType` of each field of a
`RowDataSerializerSnapshot` (`InstantiationUtil.serializeObject`, read by state_meta/snapshots.py). This
module parses the stream grammar of the Java Object Serialization Specification (section 6.4, as
`ObjectInputStream.readObject0` reads it): class descriptors, objects, strings, enums, arrays, block data
and back-references. It builds plain values (`JavaObject`, `JavaEnum`, `JavaClassDesc`, str, lists, bytes
for block data), never instantiates anything, and checks every length and count against the bytes left
before allocating for it, so a hostile length field costs an error, never memory. It lives beside
`BoundedReader`, which it reads with; state_meta imports it from here (state_meta looks down on metadata).

Malformed bytes fail through the reader (`MetadataFormatError`: the file is broken). A well-formed stream
using what this reader does not model (proxy classes, exceptions, old-style `Externalizable` data) raises
`UnsupportedJavaStream` instead: the state meta reader then skips the value, the trailer reader reports it.

Nesting is limited to `MAX_DEPTH` levels, one level per object, class descriptor, field value, array
element, annotation or superclass descriptor entered (`java.io` itself has no limit but the JVM's stack).
The bound is the stricter of the two this reader replaced (32 for the trailer, 64 for logical types), and
it is ample: every Java stream in the committed real savepoints and checkpoints (tests/fixtures/) needs at
most 5 (the properties trailer: `CheckpointProperties` -> `SavepointType` -> its enum constants; a flat
`LogicalType` needs 4, for its class descriptor chain), and a ROW nested in a ROW adds 4 (`RowType.fields`
is an unmodifiable list around an `ArrayList` of `RowField`s), so types nested six deep still read. It also
keeps the recursion (at most three Python frames a level) far below the interpreter's limit.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any, NoReturn

from upgrade_gate.flink.metadata.reader import BoundedReader, decode_modified_utf8

__all__ = ["MAX_DEPTH", "JavaClassDesc", "JavaEnum", "JavaObject", "UnsupportedJavaStream", "read_stream"]

MAX_DEPTH = 32
STREAM_HEADER = 0xACED0005  # STREAM_MAGIC, STREAM_VERSION
BASE_WIRE_HANDLE = 0x7E0000
TC_NULL, TC_REFERENCE, TC_CLASSDESC, TC_OBJECT, TC_STRING, TC_ARRAY, TC_CLASS = range(0x70, 0x77)
TC_BLOCKDATA, TC_ENDBLOCKDATA, TC_RESET, TC_BLOCKDATALONG, TC_EXCEPTION, TC_LONGSTRING = range(0x77, 0x7D)
TC_PROXYCLASSDESC, TC_ENUM = 0x7D, 0x7E
SC_WRITE_METHOD, SC_EXTERNALIZABLE, SC_BLOCK_DATA = 0x01, 0x04, 0x08
# field type code -> (struct format, size); an array of n is read with one unpack of ">{n}{format}"
_PRIMITIVES = {"B": ("b", 1), "C": ("H", 2), "D": ("d", 8), "F": ("f", 4), "I": ("i", 4), "J": ("q", 8),
               "S": ("h", 2), "Z": ("?", 1)}
_PRIMITIVE_STRUCTS = {code: struct.Struct(">" + fmt) for code, (fmt, _) in _PRIMITIVES.items()}
_SHORT = struct.Struct(">h")


class UnsupportedJavaStream(Exception):
    """A well-formed stream using a feature this reader does not model; `message` and `offset` say which."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(f"{message} at offset {offset}")
        self.message = message
        self.offset = offset


@dataclass(eq=False, slots=True)
class JavaClassDesc:
    """A class descriptor: the class, its flags and serializable fields ((type code, name) in stream order)."""

    name: str
    flags: int = 0
    fields: tuple[tuple[str, str], ...] = ()
    super_desc: JavaClassDesc | None = None


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


def read_stream(r: BoundedReader, what: str) -> Any:
    """One `ObjectOutputStream` holding one object, `what` naming it in errors: its value."""
    at = r.pos
    header = r.read_int("Java serialization header (AC ED 00 05)") & 0xFFFFFFFF
    if header != STREAM_HEADER:
        r.fail(f"expected Java serialization header AC ED 00 05 ({what}), found {header:08X}", at)
    return _Stream(r).content(0)


class _Stream:
    __slots__ = ("handles", "r")

    def __init__(self, r: BoundedReader) -> None:
        self.r = r
        self.handles: list[Any] = []

    def _too_deep(self, at: int) -> NoReturn:
        self.r.fail(f"Java serialization stream nested deeper than {MAX_DEPTH} levels", at)

    def _new_handle(self, value: Any) -> int:
        self.handles.append(value)
        return len(self.handles) - 1

    def _reference(self) -> Any:
        r = self.r
        at = r.pos
        h = r.read_int("back-reference handle") - BASE_WIRE_HANDLE
        if not 0 <= h < len(self.handles):
            r.fail(f"Java serialization back-reference to unknown handle {h + BASE_WIRE_HANDLE:#x}", at)
        return self.handles[h]

    def content(self, depth: int) -> Any:
        """One object (`readObject0`): null, a back-reference, a string, class, descriptor, enum, array or object."""
        r = self.r
        at = r.pos
        if depth > MAX_DEPTH:
            self._too_deep(at)
        tc = r.read_ubyte("Java serialization type code")
        if tc == TC_OBJECT:
            return self._object(depth)
        if tc == TC_STRING:
            s = r.read_utf("Java string")
            self.handles.append(s)
            return s
        if tc == TC_REFERENCE:
            return self._reference()
        if tc == TC_NULL:
            return None
        if tc == TC_ENUM:
            return self._enum(at, depth)
        if tc == TC_ARRAY:
            return self._array(depth)
        if tc == TC_CLASSDESC:
            r.pos = at
            return self._class_desc(depth)
        if tc == TC_CLASS:
            desc = self._class_desc(depth + 1)
            self.handles.append(desc)
            return desc
        if tc == TC_LONGSTRING:
            s = self._long_string()
            self.handles.append(s)
            return s
        if tc == TC_RESET:
            if depth:  # ObjectInputStream.handleReset: "unexpected reset; recursion depth: ..."
                r.fail(f"unexpected Java serialization reset inside an object (depth {depth})", at)
            self.handles.clear()
            return self.content(depth)
        if tc in (TC_PROXYCLASSDESC, TC_EXCEPTION):
            raise UnsupportedJavaStream(f"unsupported Java serialization type code {tc:#04x}", at)
        r.fail(f"unsupported Java serialization type code {tc:#04x}", at)

    def _long_string(self) -> str:
        r = self.r
        at = r.pos
        n = r.read_long("length of Java long string")
        if n < 0 or n > r.remaining():
            r.fail(f"length of Java long string {n} exceeds the bytes left ({r.remaining()})", at)
        raw = r.read_bytes(n, "Java long string")
        return decode_modified_utf8(raw, lambda msg: r.fail(f"Java long string: {msg}", at))

    def _class_desc(self, depth: int) -> JavaClassDesc | None:
        """`readClassDesc`: null, a back-reference to a descriptor, or a new one with its superclass's."""
        r = self.r
        at = r.pos
        if depth > MAX_DEPTH:
            self._too_deep(at)
        tc = r.read_ubyte("Java class descriptor")
        if tc == TC_REFERENCE:
            ref = self._reference()
            if not isinstance(ref, JavaClassDesc):
                r.fail("back-reference is not a class descriptor", at)
            return ref
        if tc == TC_NULL:
            return None
        if tc == TC_PROXYCLASSDESC:
            raise UnsupportedJavaStream(f"unsupported Java serialization type code {tc:#04x}", at)
        if tc != TC_CLASSDESC:
            r.fail(f"expected a Java class descriptor (0x72, 0x71 or 0x70), found {tc:#04x}", at)
        desc = JavaClassDesc(r.read_utf("Java class name"))
        r.read_long("serialVersionUID")
        self.handles.append(desc)  # before its fields: they may refer back to it
        desc.flags = r.read_ubyte("class descriptor flags")
        count_at = r.pos
        n = _SHORT.unpack(r.read_bytes(2, "number of serializable fields"))[0]
        if n < 0 or n * 3 > r.remaining():
            r.fail(f"invalid number of serializable fields {n}", count_at)
        fields = []
        for _ in range(n):
            code_at = r.pos
            code = chr(r.read_ubyte("field type code"))
            name = r.read_utf("field name")
            if code == "L" or code == "[":
                if not isinstance(self.content(depth + 1), str):
                    r.fail("expected a field type name (a Java string)", code_at)
            elif code not in _PRIMITIVES:
                r.fail(f"unknown Java field type code {code!r}", code_at)
            fields.append((code, name))
        desc.fields = tuple(fields)
        self._annotation(depth)
        desc.super_desc = self._class_desc(depth + 1)
        return desc

    def _annotation(self, depth: int) -> list[Any]:
        """Contents up to TC_ENDBLOCKDATA (class annotations, `writeObject` data): objects, block data as bytes."""
        r = self.r
        out: list[Any] = []
        while True:
            at = r.pos
            if at < r.end and r.data[at] == TC_ENDBLOCKDATA:  # the usual case: nothing written
                r.pos = at + 1
                return out
            tc = r.read_ubyte("Java annotation or end-of-block marker")
            if tc == TC_BLOCKDATA:
                out.append(r.read_bytes(r.read_ubyte("block data length"), "block data"))
            elif tc == TC_BLOCKDATALONG:
                out.append(r.read_bytes(r.read_count("block data bytes", 1), "block data"))
            else:
                r.pos = at
                out.append(self.content(depth + 1))

    def _hierarchy(self, desc: JavaClassDesc) -> list[JavaClassDesc]:
        """Superclass first, the order of the class data in the stream."""
        chain = []
        d: JavaClassDesc | None = desc
        while d is not None:
            chain.append(d)
            if len(chain) > MAX_DEPTH:  # a descriptor that is its own superclass, by back-reference
                self.r.fail("Java class hierarchy too deep")
            d = d.super_desc
        chain.reverse()
        return chain

    def _object(self, depth: int) -> JavaObject:
        r = self.r
        desc = self._class_desc(depth + 1)
        if desc is None:
            r.fail("a Java object needs a class descriptor")
        obj = JavaObject(desc.name)
        self.handles.append(obj)
        values = obj.fields
        for d in self._hierarchy(desc):
            if d.flags & SC_EXTERNALIZABLE:
                if not d.flags & SC_BLOCK_DATA:
                    raise UnsupportedJavaStream(f"cannot read externalizable class {d.name} without block data",
                                                r.pos)
                obj.annotations += self._annotation(depth)
                continue
            for code, name in d.fields:
                if code == "L" or code == "[":
                    values[name] = self.content(depth + 1)
                else:
                    s = _PRIMITIVE_STRUCTS[code]
                    values[name] = s.unpack(r.read_bytes(s.size, f"field {d.name}.{name}"))[0]
            if d.flags & SC_WRITE_METHOD:
                obj.annotations += self._annotation(depth)
        return obj

    def _enum(self, at: int, depth: int) -> JavaEnum:
        r = self.r
        desc = self._class_desc(depth + 1)
        if desc is None:
            r.fail("a Java enum constant needs a class descriptor", at)
        handle = self._new_handle(None)
        name_at = r.pos
        constant = self.content(depth + 1)
        if not isinstance(constant, str):
            r.fail("expected the name of an enum constant (a Java string)", name_at)
        value = JavaEnum(desc.name, constant)
        self.handles[handle] = value
        return value

    def _array(self, depth: int) -> list[Any]:
        r = self.r
        desc = self._class_desc(depth + 1)
        if desc is None or not desc.name.startswith("["):
            r.fail("expected an array class descriptor")
        values: list[Any] = []
        self.handles.append(values)
        primitive = _PRIMITIVES.get(desc.name[1:2])
        if primitive is not None:
            fmt, size = primitive
            n = r.read_count("array elements", size)
            values.extend(struct.unpack(f">{n}{fmt}", r.read_bytes(n * size, "array elements")))
        else:
            n = r.read_count("array elements", 1)
            values.extend(self.content(depth + 1) for _ in range(n))
        return values

"""The classes Kryo wrote inside a canonical savepoint's keyed state values, by name or by registration id.

A Kryo serializer snapshot (`KryoSerializerSnapshot`) names only the state's declared class. What Kryo writes for
a value is more: for every field whose value's class is not the declared one (a `List` field holding an
`ArrayList`), Kryo's `DefaultClassResolver#writeClass` writes the class, by registration id when the class is
registered, else by name: the marker `NAME + 2` (1), a name id (varint) and the name as Kryo's ASCII string, whose
last byte carries the high bit (`Output#writeAscii`). Scanning a state's values for those names shows the
collections a non-POJO class holds in its object graph, which the snapshot does not (docs/guide.md, "Fleet: which
jobs hold Kryo state"). Only canonical savepoints' keyed state is read (`FullSnapshotAsyncWriter`'s key-group
stream, `canonical/format.py`).

A registered class (`registerKryoType`, `pipeline.serialization-config`) is written as the varint `id + 2` instead.
Its id is its place in the Kryo instance: Kryo's own registrations first (`Kryo()`: int, String, float, boolean, byte,
char, short, long, double, ids 0 to 8 in Kryo 2.24 and Kryo 5 alike), then whatever Flink's Kryo factory registers
(1.x: chill's Scala registrations when flink-scala is on the classpath), then `KryoSerializer`'s own registrations in
the order the `KryoSerializerSnapshot` lists them (`KryoSerializer#buildKryoRegistrations`: the serialized type
first, then the registered types, then the Avro `GenericData.Array` entry). The middle part depends on the
classpath, so the first registration's id is read from the values themselves: `KryoSerializer#serialize` writes
every value with `writeClassAndObject`, so a value of the state's own type starts with that type's `id + 2`. The
other registrations follow it. A registered class inside a value is then its `id + 2` followed by Kryo's
NOT_NULL reference marker (1: Flink's `KryoSerializer` keeps Kryo's reference tracking on), as real 1.20.5
savepoints show (tests/gate/test_kryo_nested_collections.py). Only the state's own Kryo value serializer is mapped
(a Kryo type nested in a list or map state has no value start to anchor on), and only its snapshot's registrations
(not chill's), which is where a user's registered collection is.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from upgrade_gate.flink.canonical.format import read_key_group
from upgrade_gate.flink.metadata.errors import MetadataFormatError
from upgrade_gate.flink.metadata.model import KeyGroupsSavepointStateHandle, OperatorState
from upgrade_gate.flink.metadata.reader import BoundedReader
from upgrade_gate.flink.state_meta.model import StateMetaInfo
from upgrade_gate.flink.state_meta.proxy import read_keyed_proxy
from upgrade_gate.flink.state_meta.streams import Opener, StateFileError, stream_of

__all__ = ["KRYO_DEFAULT_REGISTRATIONS", "MAX_SCANNED_BYTES", "kryo_written_classes"]

# per keyed stream: enough for many values of every key group; the scan is evidence, not a full read
MAX_SCANNED_BYTES = 16 << 20
# NAME + 2 (1), a small name id, then a dotted Java class name whose last character has its high bit set
_KRYO_NAME = re.compile(rb"\x01[\x00-\x7f]((?:[A-Za-z_$][\w$]*\.)+[\w$]*[\xa4-\xfa])")


# `Kryo()`'s own registrations, ids 0.. (Kryo 2.24's and Kryo 5's constructors register these first, in this order)
KRYO_DEFAULT_REGISTRATIONS = ("int", "java.lang.String", "float", "boolean", "byte", "char", "short", "long", "double")
_NOT_NULL = 1  # Kryo#NOT_NULL, written after a class when references are tracked


def _names(value: bytes) -> Iterable[str]:
    for m in _KRYO_NAME.finditer(value):
        raw = m.group(1)
        yield raw[:-1].decode("ascii") + chr(raw[-1] & 0x7F)


def _varint(n: int) -> bytes:
    """Kryo's `Output#writeVarInt(n, true)`: 7 bits a byte, least significant first."""
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _read_varint(value: bytes) -> int | None:
    n = shift = 0
    for i, b in enumerate(value[:5]):
        n |= (b & 0x7F) << shift
        if not b & 0x80:
            return n
        shift += 7
        if i == 4:
            break
    return None


def _registered(state: StateMetaInfo) -> tuple[str, ...]:
    """The registrations of the state's own Kryo value serializer, in the snapshot's order (empty: not Kryo)."""
    for role, snap in state.serializers:
        if role == "VALUE_SERIALIZER" and snap is not None and snap.is_kryo:
            return tuple(name for name, _, _ in snap.registrations)
    return ()


class _ById:
    """The registered classes one state's values write by id, their first registration's id read from the values."""

    def __init__(self, registrations: tuple[str, ...]) -> None:
        self.registrations = registrations
        self.first: int | None = None  # the id of registrations[0], the state's type

    def classes(self, value: bytes) -> Iterable[str]:
        head = _read_varint(value)
        if head is None or head < 2 + len(KRYO_DEFAULT_REGISTRATIONS):
            return  # null, written by name, or not a value of the state's own type: no anchor
        if self.first is None:
            self.first = head - 2
        if head - 2 != self.first:
            return  # a registered subclass: the anchor stays the first value's
        for i, name in enumerate(self.registrations[1:], start=1):
            if _varint(self.first + i + 2) + bytes((_NOT_NULL,)) in value[1:]:
                yield name


def kryo_written_classes(op: OperatorState, states: set[str], opener: Opener, source: str,
                         limit: int = MAX_SCANNED_BYTES) -> dict[str, set[str]]:
    """Per keyed state named in `states`, the class names Kryo wrote inside its values (in the first `limit` bytes
    of each subtask's stream). A stream that is not canonical, unreadable or cut short stops its own scan only."""
    found: dict[str, set[str]] = {s: set() for s in states}
    for index in sorted(op.subtask_states):
        for h in op.subtask_states[index].managed_keyed_state:
            if not isinstance(h, KeyGroupsSavepointStateHandle):
                continue
            ref = stream_of(h.delegate, source)
            if ref is None:
                continue
            try:
                data, _whole = opener(ref, limit)
                r = BoundedReader(data, ref.source)
                meta = read_keyed_proxy(r, h.kind)
                if meta.incomplete or meta.compression:
                    continue
                names = [s.name for s in meta.states]
                by_id = [_ById(_registered(s)) if s.name in found and len(_registered(s)) > 1 else None
                         for s in meta.states]
                for j, offset in enumerate(h.offsets):
                    if not offset or offset >= len(data):
                        continue
                    for e in read_key_group(r, offset, f"{ref.source}: key group {h.key_group_range.start + j}"):
                        if e.state < len(names) and names[e.state] in found:
                            found[names[e.state]].update(_names(e.value))
                            if by_id[e.state] is not None:
                                found[names[e.state]].update(by_id[e.state].classes(e.value))
            except (MetadataFormatError, StateFileError):
                continue  # what was read so far stands; the rest of this stream is not evidence
    return found

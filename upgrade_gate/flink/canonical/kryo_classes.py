"""The classes Kryo wrote by name inside a canonical savepoint's keyed state values.

A Kryo serializer snapshot (`KryoSerializerSnapshot`) names only the state's declared class. What Kryo writes for
a value is more: for every field whose value's class is not the declared one (a `List` field holding an
`ArrayList`), Kryo's `DefaultClassResolver#writeClass` writes the class, by registration id when the class is
registered, else by name: the marker `NAME + 2` (1), a name id (varint) and the name as Kryo's ASCII string, whose
last byte carries the high bit (`Output#writeAscii`). Scanning a state's values for those names shows the
collections a non-POJO class holds in its object graph, which the snapshot does not (docs/guide.md, "Fleet: which
jobs hold Kryo state"). Only canonical savepoints' keyed state is read (`FullSnapshotAsyncWriter`'s key-group
stream, `canonical/format.py`); a class written by registration id is not named, so it is not seen.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from upgrade_gate.flink.canonical.format import read_key_group
from upgrade_gate.flink.metadata.errors import MetadataFormatError
from upgrade_gate.flink.metadata.model import KeyGroupsSavepointStateHandle, OperatorState
from upgrade_gate.flink.metadata.reader import BoundedReader
from upgrade_gate.flink.state_meta.proxy import read_keyed_proxy
from upgrade_gate.flink.state_meta.streams import Opener, StateFileError, stream_of

__all__ = ["MAX_SCANNED_BYTES", "kryo_written_classes"]

# per keyed stream: enough for many values of every key group; the scan is evidence, not a full read
MAX_SCANNED_BYTES = 16 << 20
# NAME + 2 (1), a small name id, then a dotted Java class name whose last character has its high bit set
_KRYO_NAME = re.compile(rb"\x01[\x00-\x7f]((?:[A-Za-z_$][\w$]*\.)+[\w$]*[\xa4-\xfa])")


def _names(value: bytes) -> Iterable[str]:
    for m in _KRYO_NAME.finditer(value):
        raw = m.group(1)
        yield raw[:-1].decode("ascii") + chr(raw[-1] & 0x7F)


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
                for j, offset in enumerate(h.offsets):
                    if not offset or offset >= len(data):
                        continue
                    for e in read_key_group(r, offset, f"{ref.source}: key group {h.key_group_range.start + j}"):
                        if e.state < len(names) and names[e.state] in found:
                            found[names[e.state]].update(_names(e.value))
            except (MetadataFormatError, StateFileError):
                continue  # what was read so far stands; the rest of this stream is not evidence
    return found

"""Judgements on what the state *is*: serializers a new Flink would misread.

Flink 2.0 moved its bundled Kryo from 2 to 5. A savepoint written by Flink 1.x (`_metadata` format
v4 or older) restored on 2.x reads Kryo-serialized bytes with Kryo 5. Measured with real Flink (1.20
savepoints restored on 2.3, tests/fixtures/savepoints/state-schemas/restores.json): where Kryo wrote a
Java collection or a custom Kryo serializer was registered for the type, the value is misread: silently
(a generic `HashMap` value restored empty, a custom-serialized value restored as garbage) or loudly (a
POJO with `HashMap`/`ArrayList` fields fails the read, and with it the restore of heap, operator and
broadcast state). Kryo generics without collections, POJOs of primitives, tuples, rows, enums and Long
state restore correctly. Which of the two happens depends on the bytes, not on the schema, so the rule
names both. The serializer snapshots in every state handle (upgrade_gate/flink/state_meta/) name each
such state before the upgrade.

`upgrade_gate.gate.rules.state_schema.kryo_upgrade_misreads` turns these into findings:
- a Kryo snapshot (anywhere in a state's serializer tree: a POJO field, a list element, a map value...)
  whose type is a Java collection or map, or whose type has a registered or default custom Kryo serializer,
  -> a corrupted `Loss` (not orphaned: the state is restored, but wrong): verdict STATE_CORRUPTED;
- any other Kryo snapshot -> a `Note`: Kryo 5 reads it correctly unless the class holds collections (or
  values of classes with custom serializers) inside, which its snapshot does not show; what Kryo *wrote* shows
  them: a keyed state whose values name a java.util collection class (`flink/canonical/kryo_classes.py`, read by
  the rule) is blocking too (`nested_collections`; measured: a non-POJO class holding an `ArrayList`, written by
  1.20.5, restored by 2.3.0 with a list element missing: state-schemas/kryo-nested/outcomes.json);
- state files that could not be read -> a `Note` (the check cannot vouch for those states).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from upgrade_gate.flink.metadata.model import CheckpointMetadata
from upgrade_gate.flink.state_meta import OperatorSchemas, SerializerSnapshot, StateMetaInfo

__all__ = ["FIX", "KryoMisread", "crosses_kryo_upgrade", "describe", "kryo_misreads", "nested_collections"]

LAST_1X_METADATA_VERSION = 4  # Flink 1.17-1.20 write `_metadata` v4; 2.0 writes v5
# java.util (and java.util.concurrent) collections and maps, concrete or interfaces, inner classes included
_JAVA_COLLECTION = re.compile(
    r"^java\.util\.(concurrent\.)?[\w$]*(List|Map|Set|Collection|Queue|Deque|Vector|Stack|Hashtable|Properties)"
    r"[\w$]*$")
_COLLECTION_LIKE = re.compile(r"(List|Map|Set|Collection|Queue|Deque|Vector|Seq|Bag|Multimap|Table)[\w$]*$")
_NOT_COLLECTIONS = frozenset({"java.util.BitSet"})
# Flink's own registration, in every Kryo snapshot: Avro's GenericData.Array with a dummy (or Flink's) serializer
_FLINK_OWN_REGISTRATIONS = frozenset({"org.apache.avro.generic.GenericData$Array"})
FIX = ("migrate it on Flink 1.x first: rewrite the state with the State Processor API using a dedicated "
       "serializer (a POJO of Flink-serializable fields, ListTypeInfo/MapTypeInfo, or a custom TypeSerializer), "
       "take a new savepoint on 1.x, and upgrade from that one")


@dataclass(frozen=True, slots=True)
class KryoMisread:
    """One Kryo snapshot in one state's serializers: `blocking` when Kryo 5 misreads what Kryo 2 wrote."""

    operator: OperatorSchemas
    state: StateMetaInfo
    role: str  # VALUE_SERIALIZER, KEY_SERIALIZER (broadcast), ...
    path: str  # where in the serializer tree: "counts", "[1].history", "" (the state's own serializer)
    snapshot: SerializerSnapshot
    blocking: bool
    why: str

    def to_json(self) -> dict[str, Any]:
        return {"operator_id": self.operator.operator_id, "name": self.operator.name, "uid": self.operator.uid,
                "state": self.state.name, "kind": self.state.kind, "serializer": self.role,
                "path": self.path, "kryo_type": self.snapshot.type_name, "blocking": self.blocking, "why": self.why}


def crosses_kryo_upgrade(metadata: CheckpointMetadata, target_major: int) -> bool:
    """A savepoint written by Flink 1.x (format v4 or older) restored on Flink 2.x or newer."""
    return metadata.version <= LAST_1X_METADATA_VERSION and target_major >= 2


def _custom_serializers(s: SerializerSnapshot) -> tuple[list[str], list[str]]:
    """Custom Kryo serializers in a Kryo snapshot: (for its own type, for other classes). A snapshot carries
    every registration of the job's config, so one for another class matters only if this type holds it."""
    own: list[str] = []
    other: list[str] = []
    for cls, definition, ser in s.registrations:
        if definition in ("CLASS", "INSTANCE") and cls not in _FLINK_OWN_REGISTRATIONS:
            text = f"{cls} registered with {'serializer ' + ser if ser else 'a serializer instance'}"
            (own if cls == s.type_name else other).append(text)
    for cls in s.default_serializers:
        (own if cls == s.type_name else other).append(f"default Kryo serializer for {cls}")
    return own, other


def kryo_misreads(schemas: Iterable[OperatorSchemas]) -> list[KryoMisread]:
    """Every Kryo snapshot in every state, judged for a Kryo 2 -> Kryo 5 restore (no I/O: pure)."""
    out: list[KryoMisread] = []
    for op in schemas:
        for state in op.states:
            for role, root in state.serializers:
                for path, snap in root.walk():
                    if not snap.is_kryo:
                        continue
                    own, other = _custom_serializers(snap)
                    if own:
                        why = (f"custom Kryo serializer ({'; '.join(own)}): Kryo 5 reads what it wrote under Kryo 2 "
                               f"as garbage")
                        out.append(KryoMisread(op, state, role, path, snap, True, why))
                    elif (snap.type_name and _JAVA_COLLECTION.match(snap.type_name)
                          and snap.type_name not in _NOT_COLLECTIONS):
                        why = (f"Kryo-serialized Java collection {snap.type_name}: Kryo 5 misreads Kryo 2's "
                               f"collection encoding (elements go missing or change)")
                        out.append(KryoMisread(op, state, role, path, snap, True, why))
                    elif (snap.type_name and not snap.type_name.startswith("java.")
                          and _COLLECTION_LIKE.search(snap.type_name.rsplit(".", 1)[-1])):
                        why = (f"Kryo-serialized {snap.type_name}, a collection outside java.util: how Kryo 5 reads "
                               f"what Kryo 2 wrote for it has not been measured; test a restore before upgrading")
                        out.append(KryoMisread(op, state, role, path, snap, False, why))
                    else:
                        why = (f"Kryo-serialized {snap.type_name}: read correctly by Kryo 5 unless the class holds "
                               f"collections or maps inside, which its serializer snapshot does not show")
                        if other:
                            why += f", or values of classes with custom Kryo serializers ({'; '.join(other)})"
                        out.append(KryoMisread(op, state, role, path, snap, False, why))
    return out


def nested_collections(m: KryoMisread, written: Iterable[str]) -> KryoMisread:
    """`m` judged again with the classes Kryo wrote inside the state's values (`written`): a java.util collection
    among them is what Kryo 5 misreads, wherever in the object graph it sits."""
    collections = sorted(c for c in set(written) if _JAVA_COLLECTION.match(c) and c not in _NOT_COLLECTIONS)
    if m.blocking or not collections:
        return m
    why = (f"Kryo-serialized {m.snapshot.type_name} holds {', '.join(collections)} in its object graph (Kryo wrote "
           f"the class inside the state's values; its serializer snapshot does not show it): Kryo 5 misreads Kryo "
           f"2's collection encoding (elements go missing or change)")
    return replace(m, blocking=True, why=why)


def describe(m: KryoMisread) -> str:
    place = f" (field {m.path})" if m.path else ""
    return f"state '{m.state.name}' ({m.state.kind}{', ' + m.role if m.role != 'VALUE_SERIALIZER' else ''}){place}"

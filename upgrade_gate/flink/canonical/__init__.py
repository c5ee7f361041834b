"""Keyed state in the canonical savepoint format, entry by entry.

Flink's `FullSnapshotAsyncWriter` writes keyed state of canonical savepoints (HashMap and RocksDB alike, since
FLIP-41 unified the format) as: the `KeyedBackendSerializationProxy`, then per key group (at the offset the
`KeyGroupsSavepointStateHandle` records) a stream of `[short state id] ([int len][key][int len][value])...`,
where the key is RocksDB's composite key: the key-group prefix (1 byte up to max parallelism 128, else 2), the
serialized key, the namespace, and for map state the user key; the first key byte's high bit says a state id or
the end-of-key-group mark (0xFFFF) follows. Timers (`PRIORITY_QUEUE` states) are keys only: the prefix, the
timestamp with its sign bit flipped, the key, the namespace.

`format.py` reads and writes that stream; `keys.py` decodes the key a key serializer wrote and gives its Java
`hashCode`, which decides its key group (`hashing.keygroups`). Both are what `upgrade-gate repair
--max-parallelism` needs to move every entry into the key groups of another max parallelism.
"""

"""The canonical keyed-state stream and key hashing, against every canonical savepoint real Flink wrote here.

Flink wrote each entry's key-group prefix from `murmur(key.hashCode()) % maxParallelism`; decoding the key with
the codec of the savepoint's key serializer and hashing it must give that same key group, for every entry
(values, map entries and timers; Long, String, Tuple2 and SQL row keys; HashMap and RocksDB, Flink 1.20.5 and
2.3.0).
The stream must also read and write back byte for byte, and a max-parallelism rewrite must keep every entry.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from hashing.keygroups import compute_key_group_for_key_hash
from tests.conftest import TESTS
from upgrade_gate.flink.canonical.format import prefix_bytes, read_key_group, write_key_group
from upgrade_gate.flink.canonical.keys import UnsupportedKey, codec_for
from upgrade_gate.flink.metadata import CheckpointMetadata, parse_metadata
from upgrade_gate.flink.metadata.model import KeyGroupsSavepointStateHandle
from upgrade_gate.flink.metadata.reader import BoundedReader
from upgrade_gate.flink.state_meta.model import SerializerSnapshot
from upgrade_gate.flink.state_meta.proxy import read_keyed_proxy
from upgrade_gate.flink.state_meta.streams import StreamRef, local_opener
from upgrade_gate.repair.max_parallelism import cannot_rescale, rescale


def _canonical_streams() -> list[tuple[str, int, KeyGroupsSavepointStateHandle, bytes]]:
    """(savepoint, max parallelism, handle, stream bytes) of every uncompressed canonical keyed stream committed."""
    out = []
    for meta in sorted(TESTS.glob("fixtures/**/_metadata")):
        md = parse_metadata(meta.read_bytes(), str(meta), str(meta.parent.resolve()))
        for op in md.operator_states:
            for st in op.subtask_states.values():
                for h in st.managed_keyed_state:
                    if not isinstance(h, KeyGroupsSavepointStateHandle):
                        continue
                    d = h.delegate
                    path = getattr(d, "path", None)
                    if path is not None and not Path(path).is_file():
                        continue  # a fixture that keeps only `_metadata`
                    data = Path(path).read_bytes() if path is not None else d.data  # type: ignore[union-attr]
                    if not read_keyed_proxy(BoundedReader(data, str(meta)), h.kind).compression:
                        out.append((str(meta.relative_to(TESTS)), op.max_parallelism, h, data))
    return out


STREAMS = _canonical_streams()


def test_the_oracle_has_long_string_tuple_and_sql_row_keys_values_maps_and_timers() -> None:
    keys: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    for _, _, h, data in STREAMS:
        meta = read_keyed_proxy(BoundedReader(data, "x"), h.kind)
        keys[meta.key_serializer.class_name.rsplit(".", 1)[-1]] += 1  # type: ignore[union-attr]
        kinds.update(s.backend_type for s in meta.states)
    assert {"LongSerializer$LongSerializerSnapshot", "StringSerializer$StringSerializerSnapshot",
            "RowDataSerializer$RowDataSerializerSnapshot", "TupleSerializerSnapshot"} <= set(keys)
    assert kinds["PRIORITY_QUEUE"] and kinds["KEY_VALUE"]


@pytest.mark.parametrize("where, max_p, handle, data", STREAMS, ids=[f"{s[0]}@{s[2].key_group_range.start}"
                                                                      for s in STREAMS])
def test_every_entry_hashes_into_the_key_group_flink_wrote_and_reads_back_byte_for_byte(
        where: str, max_p: int, handle: KeyGroupsSavepointStateHandle, data: bytes) -> None:
    r = BoundedReader(data, where)
    meta = read_keyed_proxy(r, handle.kind)
    codec = codec_for(meta.key_serializer)
    timers = {i for i, s in enumerate(meta.states) if s.backend_type == "PRIORITY_QUEUE"}
    pb = prefix_bytes(max_p)
    ends = sorted([o for o in handle.offsets if o] + [len(data)])
    for j, offset in enumerate(handle.offsets):
        if not offset:
            continue
        kg = handle.key_group_range.start + j
        entries = list(read_key_group(r, offset, where))
        for e in entries:
            assert int.from_bytes(e.key[:pb], "big") == kg
            start = pb + (8 if e.state in timers else 0)  # a timer's key follows its timestamp
            assert compute_key_group_for_key_hash(codec.hash_code(e.key, start), max_p) == kg
        out = bytearray()
        write_key_group(out, entries)
        assert bytes(out) == data[offset:ends[ends.index(offset) + 1]]


def test_a_key_serializer_without_an_exact_codec_is_refused_by_name() -> None:
    pojo = SerializerSnapshot("org.apache.flink.api.java.typeutils.runtime.PojoSerializerSnapshot", 2)
    with pytest.raises(UnsupportedKey, match="PojoSerializerSnapshot"):
        codec_for(pojo)


@pytest.mark.parametrize("name, words", [("hashmap-snappy-p1", "compressed"),
                                         ("rocksdb-native-p1", "not in the canonical savepoint format")])
def test_a_snapshot_the_rewrite_cannot_read_entry_by_entry_is_refused_with_the_reason(name: str, words: str) -> None:
    sp = TESTS / "fixtures" / "savepoints" / "state-schemas" / "1.20.5" / name
    md = parse_metadata((sp / "_metadata").read_bytes(), str(sp / "_metadata"), str(sp))
    problems = cannot_rescale(md, local_opener)
    assert problems and all(words in p for p in problems)


REPAIRS = TESTS / "fixtures" / "repairs" / "2.3.0"


@pytest.mark.parametrize("name", ["max-parallelism-128-to-256-long-keys-hashmap",
                                  "max-parallelism-256-to-128-string-keys-hashmap"])
def test_a_rewrite_there_and_back_keeps_every_entry(name: str, tmp_path: Path) -> None:
    sp = REPAIRS / name / "savepoint"
    md = parse_metadata((sp / "_metadata").read_bytes(), str(sp / "_metadata"), str(sp))
    old_max = next(op.max_parallelism for op in md.operator_states)
    other = 256 if old_max == 128 else 128

    def entries(m: CheckpointMetadata) -> Counter[tuple[int, bytes, bytes]]:
        got: Counter[tuple[int, bytes, bytes]] = Counter()
        for op in m.operator_states:
            pb = prefix_bytes(op.max_parallelism)
            for st in op.subtask_states.values():
                for h in st.managed_keyed_state:
                    data = local_opener(StreamRef(h.delegate.path, path=h.delegate.path), 1 << 26)[0]
                    r = BoundedReader(data, "x")
                    read_keyed_proxy(r, h.kind)
                    for o in h.offsets:
                        if o:
                            got.update((e.state, e.key[pb:], e.value) for e in read_key_group(r, o, "x"))
        return got

    there = rescale(md, other, tmp_path, local_opener)
    back = rescale(there.metadata, old_max, tmp_path, local_opener)
    assert entries(there.metadata) == entries(md) == entries(back.metadata)
    assert {op.max_parallelism for op in there.metadata.operator_states} == {other}

"""The connector's committable serializer versions inside a Sink V2 committer's state.

`CommitterOperator` keeps its committables in the "streaming_committer_raw_states" operator list state through a
`SimpleVersionedListState` over Flink's own `CommittableCollectorSerializer`; the connector's committable serializer
(`SupportsCommitter#getCommittableSerializer()`) writes only the innermost level. Each list element, as Flink 1.20 and
2.3 write it (read from both releases' `CommittableCollectorSerializer` and its nested serializers):

    int length                           BytePrimitiveArraySerializer (the element)
    int 2, int length                    SimpleVersionedSerialization: CommittableCollectorSerializer#getVersion
    int 0xB91F252C                       its MAGIC_NUMBER
    list of CheckpointCommittableManagerImpl        (a "versioned list": int version, int count, count x
                                                     (int length, bytes), SimpleVersionedSerialization
                                                     #writeVersionAndSerializeList)
        long checkpoint id, [int number of subtasks: version >= 1]
        list of SubtaskCommittableManager
            [int subtask id: version >= 1], list of CommitRequestImpl, then counters
                int committable version, int length, the committable   <- the connector's version
                int retries, int request state

Version 1 of the collector is the 1.14 StreamingCommitterState, whose layout is not read (said as not read). Nothing
past the committables' headers is interpreted; each level is skipped by its length, so the counters after a
subtask's requests (three ints in 1.20, two in 2.3) do not matter.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from upgrade_gate.flink.state_meta.streams import MAX_PROXY_BYTES, Opener, StateFileError, StreamRef

__all__ = ["COLLECTOR_VERSION", "MAGIC", "committable_versions", "parse_collector"]

COLLECTOR_VERSION = 2  # CommittableCollectorSerializer#getVersion, 1.15 to 2.3
MAGIC = 0xB91F252C  # CommittableCollectorSerializer#MAGIC_NUMBER


class _Corrupt(ValueError):
    """The bytes do not follow CommittableCollectorSerializer's layout."""


def _versioned_list(data: bytes, pos: int, end: int) -> tuple[int, list[tuple[int, int]]]:
    """A `writeVersionAndSerializeList` at `pos`: its version and each element's (start, end)."""
    if pos + 8 > end:
        raise _Corrupt(f"list header at byte {pos} is past the element's end")
    version, count = struct.unpack_from(">ii", data, pos)
    pos += 8
    if count < 0:
        raise _Corrupt(f"negative list size {count} at byte {pos - 4}")
    out: list[tuple[int, int]] = []
    for _ in range(count):
        if pos + 4 > end:
            raise _Corrupt(f"list element at byte {pos} is past the element's end")
        (length,) = struct.unpack_from(">i", data, pos)
        if length < 0 or pos + 4 + length > end:
            raise _Corrupt(f"list element of {length} bytes at byte {pos} is past the element's end")
        out.append((pos + 4, pos + 4 + length))
        pos += 4 + length
    return version, out


def parse_collector(data: bytes, start: int, end: int) -> list[int]:
    """The committable versions of one CommittableCollectorSerializer v2 payload `data[start:end]` (after its
    SimpleVersionedSerialization header), in order. Raises ValueError naming what does not fit the layout."""
    if start + 4 > end or struct.unpack_from(">I", data, start)[0] != MAGIC:
        raise _Corrupt("no CommittableCollectorSerializer magic number")
    versions: list[int] = []
    checkpoint_version, checkpoints = _versioned_list(data, start + 4, end)
    for c_start, c_end in checkpoints:
        # CheckpointSimpleVersionedSerializer: long checkpoint id, then (version >= 1) int number of subtasks
        pos = c_start + 8 + (4 if checkpoint_version >= 1 else 0)
        subtask_version, subtasks = _versioned_list(data, pos, c_end)
        for s_start, s_end in subtasks:
            # SubtaskSimpleVersionedSerializer: (version >= 1) int subtask id, then the requests
            _, requests = _versioned_list(data, s_start + (4 if subtask_version >= 1 else 0), s_end)
            for r_start, r_end in requests:
                if r_start + 4 > r_end:
                    raise _Corrupt(f"commit request at byte {r_start} has no committable header")
                versions.append(struct.unpack_from(">i", data, r_start)[0])
    return versions


def committable_versions(ref: StreamRef, offsets: Sequence[int], name: str,
                         opener: Opener) -> tuple[list[int], str | None]:
    """The committable version of every committable in the elements of a committer's list state `name` at
    `offsets` of stream `ref`, and why they could not all be read, else None."""
    versions: list[int] = []
    try:
        data, _ = opener(ref, max(offsets) + 4)
        if max(offsets) + 4 > len(data):
            return versions, f"{ref.source}: list state {name} is past the stream's end"
        need = max(off + 4 + struct.unpack_from(">i", data, off)[0] for off in offsets)
        if need > MAX_PROXY_BYTES:
            return versions, f"{ref.source}: list state {name} ends past {MAX_PROXY_BYTES} bytes"
        if need > len(data):
            data, _ = opener(ref, need)
    except StateFileError as exc:
        return versions, str(exc)
    for off in offsets:
        (length,) = struct.unpack_from(">i", data, off)
        end = off + 4 + length
        if end > len(data) or length < 8:
            return versions, f"{ref.source}: element of {name} at offset {off} is past the stream's end"
        collector, inner = struct.unpack_from(">ii", data, off + 4)
        if collector != COLLECTOR_VERSION:
            return versions, (f"committer state written with CommittableCollectorSerializer version {collector} "
                              f"(a 1.14 StreamingCommitterState): its committables are not read")
        try:
            versions.extend(parse_collector(data, off + 12, min(end, off + 12 + inner)))
        except _Corrupt as exc:
            return versions, f"{ref.source}: element of {name} at offset {off}: {exc}"
    return versions, None

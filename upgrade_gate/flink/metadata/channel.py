"""Channel-state handles of unaligned checkpoints.

`ChannelStateHandleSerializerV1` (format v3–v5): no tag, one handle per channel.
`ChannelStateHandleSerializerV2` (v6): a type byte, and "merged" handles holding all channels
of a subtask in one delegate with opaque serialized offsets (FLINK-33734).
"""

from __future__ import annotations

from collections.abc import Callable

from upgrade_gate.flink.metadata.handles import DeserializationContext, read_stream_handle
from upgrade_gate.flink.metadata.model import (
    InputChannelStateHandle,
    InputStateHandle,
    MergedInputChannelStateHandle,
    MergedResultSubpartitionStateHandle,
    OutputStateHandle,
    ResultSubpartitionStateHandle,
)
from upgrade_gate.flink.metadata.reader import BoundedReader

__all__ = ["INPUT_CHANNEL_STATE_HANDLE", "MERGED_INPUT_CHANNEL_STATE_HANDLE",
           "MERGED_RESULT_SUBPARTITION_STATE_HANDLE", "RESULT_SUBPARTITION_STATE_HANDLE", "ChannelReader",
           "ChannelStateHandleSerializerV1", "ChannelStateHandleSerializerV2"]

INPUT_CHANNEL_STATE_HANDLE = 1
RESULT_SUBPARTITION_STATE_HANDLE = 2
MERGED_INPUT_CHANNEL_STATE_HANDLE = 3
MERGED_RESULT_SUBPARTITION_STATE_HANDLE = 4

ChannelReader = Callable[[BoundedReader, DeserializationContext], object]


def _v1_body(r: BoundedReader, ctx: DeserializationContext, cls: type) -> object:
    subtask, a = r.read_two_ints("channel handle subtask index and first info index")
    b = r.read_int("channel info index")
    k = r.read_count("channel state offsets", 8)
    offsets = r.read_long_array(k, "channel state offsets")
    size = r.read_long("channel state size")
    return cls(subtask, (a, b), read_stream_handle(r, ctx), offsets, size)


def _merged_body(r: BoundedReader, ctx: DeserializationContext, cls: type) -> object:
    subtask = r.read_int("channel handle subtask index")
    size = r.read_long("channel state size")
    delegate = read_stream_handle(r, ctx)
    n = r.read_count("serialized channel offsets bytes", 1)
    return cls(subtask, size, delegate, r.read_bytes(n, "serialized channel offsets"))


class ChannelStateHandleSerializerV1:
    def read_input(self, r: BoundedReader, ctx: DeserializationContext) -> InputStateHandle:
        return _v1_body(r, ctx, InputChannelStateHandle)  # type: ignore[return-value]

    def read_output(self, r: BoundedReader, ctx: DeserializationContext) -> OutputStateHandle:
        return _v1_body(r, ctx, ResultSubpartitionStateHandle)  # type: ignore[return-value]


class ChannelStateHandleSerializerV2:
    def _read(self, r: BoundedReader, ctx: DeserializationContext, plain: int, merged: int,
              plain_cls: type, merged_cls: type, what: str) -> object:
        at = r.pos
        tag = r.read_ubyte(f"{what} handle type")
        if tag == plain:
            return _v1_body(r, ctx, plain_cls)
        if tag == merged:
            return _merged_body(r, ctx, merged_cls)
        r.fail(f"expected {what} handle type ({plain} or {merged}), found {tag}", at)

    def read_input(self, r: BoundedReader, ctx: DeserializationContext) -> InputStateHandle:
        return self._read(r, ctx, INPUT_CHANNEL_STATE_HANDLE, MERGED_INPUT_CHANNEL_STATE_HANDLE,  # type: ignore[return-value]
                          InputChannelStateHandle, MergedInputChannelStateHandle, "input channel state")

    def read_output(self, r: BoundedReader, ctx: DeserializationContext) -> OutputStateHandle:
        return self._read(r, ctx, RESULT_SUBPARTITION_STATE_HANDLE,  # type: ignore[return-value]
                          MERGED_RESULT_SUBPARTITION_STATE_HANDLE, ResultSubpartitionStateHandle,
                          MergedResultSubpartitionStateHandle, "result subpartition state")

"""Reads the first bytes of state files for the state-meta reader (read-only): local files and S3 objects.

The state-meta reader (upgrade_gate/flink/state_meta/) reads inline handles and local files itself; this
opener adds `s3://` state files with ranged GETs (only the proxy at a stream's start is needed, never the
whole object), inside the same time budget as every other S3 read (`Deadline`).
"""

from __future__ import annotations

from typing import Any

from upgrade_gate.flink.state_meta.streams import Opener, StateFileError, StreamRef, local_opener
from upgrade_gate.storage.s3 import Deadline, StorageError, is_s3, s3_client, s3_error, split_s3

__all__ = ["state_stream_opener"]


def state_stream_opener(client: Any | None = None) -> Opener:
    """An opener for `read_state_schemas`: S3 objects by ranged GET, everything else as `local_opener`."""
    clients: list[Any] = [client] if client is not None else []

    def open_stream(ref: StreamRef, limit: int) -> tuple[bytes, bool]:
        if ref.path is None or not is_s3(ref.path):
            return local_opener(ref, limit)
        if not clients:
            clients.append(s3_client())
        want = limit if ref.size < 0 else min(limit, ref.size)
        bucket, key = split_s3("s3://" + ref.path.split("://", 1)[1])
        deadline = Deadline()
        try:
            byte_range = f"bytes={ref.start}-{ref.start + max(want, 1) - 1}"
            obj = clients[0].get_object(Bucket=bucket, Key=key, Range=byte_range)
            with obj["Body"] as body:
                data = body.read(want + 1)
        except StorageError as exc:
            raise StateFileError(str(exc)) from None
        except Exception as exc:
            raise StateFileError(str(s3_error(ref.path, exc, deadline))) from None
        data = data[:want]
        return data, len(data) < limit or 0 <= ref.size <= limit

    return open_stream

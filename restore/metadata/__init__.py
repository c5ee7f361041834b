"""Reader of Flink checkpoint/savepoint `_metadata` files (format versions 2–6, Flink 1.3 – 2.3).

Layout follows Flink's `org.apache.flink.runtime.checkpoint.metadata` package: a bounded binary
reader, per-version serializers looked up by version, handle deserializers, and a model whose
sizes equal Flink's `getStateSize()`.
"""

from restore.metadata.checkpoints import METADATA_FILE_NAME, parse_metadata
from restore.metadata.errors import MetadataFormatError
from restore.metadata.json_view import to_json
from restore.metadata.model import CheckpointMetadata, OperatorState, OperatorSubtaskState

__all__ = ["METADATA_FILE_NAME", "CheckpointMetadata", "MetadataFormatError", "OperatorState",
           "OperatorSubtaskState", "parse_metadata", "to_json"]

"""Reader of Flink checkpoint/savepoint `_metadata` files (format versions 2–6, Flink 1.3 – 2.3).

Layout follows Flink's `org.apache.flink.runtime.checkpoint.metadata` package: a bounded binary
reader, per-version serializers looked up by version, handle deserializers, and a model whose
sizes equal Flink's `getStateSize()`. `fast_reader.py` is an optimisation declared per serializer
version and checked against the serializers (tests/flink/test_metadata_fastpath.py); which Flink
release reads which format version is `hashing.versions.FlinkVersion`'s rule. `writer.py` is the
reader's inverse for versions 3–6 (`serialize_metadata`), imported by the one feature that writes.
"""

from upgrade_gate.flink.metadata.checkpoints import METADATA_FILE_NAME, parse_metadata
from upgrade_gate.flink.metadata.errors import MetadataFormatError
from upgrade_gate.flink.metadata.json_view import to_json
from upgrade_gate.flink.metadata.model import CheckpointMetadata, OperatorState, OperatorSubtaskState

__all__ = ["METADATA_FILE_NAME", "CheckpointMetadata", "MetadataFormatError", "OperatorState",
           "OperatorSubtaskState", "parse_metadata", "to_json"]

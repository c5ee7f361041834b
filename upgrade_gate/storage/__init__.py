"""Storage, split by what may be done to it: savepoints are only read; graphs and reports are read and written."""

from upgrade_gate.storage.objects import read_object, write_object
from upgrade_gate.storage.s3 import StorageError, is_s3, s3_client
from upgrade_gate.storage.savepoints import MAX_METADATA_BYTES, MetadataBlob, load_savepoint, read_metadata_blob

__all__ = ["MAX_METADATA_BYTES", "MetadataBlob", "StorageError", "is_s3", "load_savepoint", "read_metadata_blob",
           "read_object", "s3_client", "write_object"]

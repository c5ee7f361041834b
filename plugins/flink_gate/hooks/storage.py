"""Savepoints and job graphs in object storage, through an Airflow connection.

`s3://` URIs use the amazon provider's AWS connection (`aws_conn_id`): its keys, region and
`endpoint_url` extra (SeaweedFS, MinIO or AWS), so credentials live in the connection and never
in a DAG or a log line. `file://` URIs and plain paths need no connection. The reading itself
(finding the newest complete savepoint, bounded reads, clear errors) is the core's
`upgrade_gate.storage.savepoints`; this hook only hands it a boto3 client built from the connection.

Read-only by construction: savepoint prefixes are only listed and read (docs/guarantees.md).
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

from airflow.sdk import BaseHook

from hashing.readers.source import MAX_GRAPH_BYTES
from upgrade_gate.flink.metadata import CheckpointMetadata
from upgrade_gate.storage import MetadataBlob, is_s3, read_metadata_blob, read_object, write_object
from upgrade_gate.storage.savepoints import load_newest_complete


class SavepointStorageHook(BaseHook):
    """Reads `_metadata` and graph files from `s3://` (via `aws_conn_id`), `file://` or a path."""

    conn_name_attr = "aws_conn_id"
    default_conn_name = "aws_default"
    conn_type = "aws"
    hook_name = "Flink savepoint storage"

    def __init__(self, aws_conn_id: str | None = default_conn_name) -> None:
        super().__init__()
        self.aws_conn_id = aws_conn_id

    @cached_property
    def s3_client(self) -> Any:
        """A boto3 S3 client from the AWS connection (endpoint, region, keys, retries).

        The core's timeouts and retries (`UPGRADE_GATE_S3_TIMEOUT`) are merged over the connection's own
        botocore config, so a server that never answers fails a task in the same bounded time as the CLI."""
        from airflow.providers.amazon.aws.hooks.s3 import S3Hook

        from upgrade_gate.storage.s3 import client_config

        own = S3Hook(aws_conn_id=self.aws_conn_id).config
        return S3Hook(aws_conn_id=self.aws_conn_id, config=own.merge(client_config())).get_conn()

    @staticmethod
    def is_s3(uri: str) -> bool:
        return is_s3(uri)

    def read_metadata(self, uri: str, *, job_folder: bool = False) -> MetadataBlob:
        """The `_metadata` named by `uri` (a snapshot directory, the file itself, or a job prefix:
        then the newest complete savepoint under it; `job_folder`: see `read_metadata_blob`)."""
        return read_metadata_blob(uri, client=self.s3_client if self.is_s3(uri) else None, job_folder=job_folder)

    def load_savepoint(self, uri: str, *, job_folder: bool = False) -> tuple[CheckpointMetadata, str]:
        """The parsed savepoint and the exact `_metadata` it was read from (for reports and retries): for a
        prefix, the newest complete one; a newer one still being written is skipped and named in the log."""
        loaded = load_newest_complete(uri, client=self.s3_client if self.is_s3(uri) else None, job_folder=job_folder)
        for skipped in loaded.skipped:
            self.log.warning("savepoint %s", skipped)
        return loaded.metadata, loaded.source

    def read_bytes(self, uri: str, max_bytes: int = MAX_GRAPH_BYTES) -> bytes:
        """A whole small object or file (a job-graph spec, a plan, a jar), bounded in size."""
        return read_object(uri, max_bytes=max_bytes, client=self.s3_client if self.is_s3(uri) else None)

    def write_bytes(self, uri: str, data: bytes, content_type: str = "application/octet-stream") -> None:
        """Publish a report object. Never used on savepoint prefixes (the gate does not write there)."""
        write_object(uri, data, client=self.s3_client if self.is_s3(uri) else None, content_type=content_type)

    def s3_environment(self) -> dict[str, str]:
        """The connection as the standard AWS environment, for subprocesses (Spark, the CLI).

        Handed to child processes only, never logged (Airflow masks the secret in task logs)."""
        if not self.aws_conn_id:
            return {}
        from airflow.providers.amazon.aws.hooks.s3 import S3Hook

        hook = S3Hook(aws_conn_id=self.aws_conn_id)
        creds = hook.get_credentials()
        env = {"AWS_ACCESS_KEY_ID": creds.access_key, "AWS_SECRET_ACCESS_KEY": creds.secret_key}
        if creds.token:
            env["AWS_SESSION_TOKEN"] = creds.token
        wrapper = hook.conn_config
        if wrapper.endpoint_url:
            env["AWS_ENDPOINT_URL_S3"] = wrapper.endpoint_url
        if wrapper.region_name:
            env["AWS_REGION"] = wrapper.region_name
        return env

"""`spark-submit` of our Spark jobs (spark_jobs/) with object-storage access from a connection.

The Spark jobs read `s3://` with boto3 from the standard AWS environment of the driver and
executors. This operator turns the AWS connection into that environment at run time (never at
DAG-parse time, never as a templated field: rendered fields are stored and shown in the UI) and
hands it to the spark-submit process only.

`fleet_check` exits 1 when the fleet's gate is BLOCK: that is a verdict, not a failure, so
`accept_block=True` accepts exit code 1 when the job wrote its `summary.json`, and returns it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

from flink_gate.hooks.storage import SavepointStorageHook


class SparkGateJobOperator(SparkSubmitOperator):
    """SparkSubmitOperator + S3 environment from `aws_conn_id` (+ BLOCK-tolerant summary reading)."""

    template_fields = (*SparkSubmitOperator.template_fields, "aws_conn_id", "summary_path")

    def __init__(self, *, aws_conn_id: str | None = "aws_default", summary_path: str | None = None,
                 accept_block: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.aws_conn_id = aws_conn_id
        self.summary_path = summary_path
        self.accept_block = accept_block

    def execute(self, context: Any) -> Any:
        from airflow.sdk.exceptions import AirflowException

        if self.aws_conn_id:
            self.env_vars = {**(self.env_vars or {}), **SavepointStorageHook(self.aws_conn_id).s3_environment()}
            self._hook = None  # the hook is built from env_vars: build it after they are set
        try:
            super().execute(context)
        except AirflowException:
            summary = Path(self.summary_path) if self.summary_path else None
            if not (self.accept_block and summary and summary.is_file()):
                raise
            self.log.info("spark job exited non-zero with a summary: the fleet gate is BLOCK")
        if self.summary_path and Path(self.summary_path).is_file():
            return json.loads(Path(self.summary_path).read_text())
        return None

"""One local Spark session (`local[2]`) and one SeaweedFS S3 server for all Spark tests.

The S3 endpoint and keys must be in the environment when the JVM starts: the executors' Python
workers are started by the JVM and inherit *its* environment, and our jobs build their boto3
clients from the standard AWS variables inside the executors (docs/design.md, Real components), as on a cluster. The
test process' own environment is restored right after, so other tests do not see them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests import s3_server


@dataclass
class SparkEnv:
    spark: Any
    s3: s3_server.S3Server

    @property
    def aws_env(self) -> dict[str, str]:
        return {"AWS_ENDPOINT_URL_S3": self.s3.endpoint, "AWS_ACCESS_KEY_ID": s3_server.ACCESS_KEY,
                "AWS_SECRET_ACCESS_KEY": s3_server.SECRET_KEY, "AWS_REGION": "us-east-1"}


_ENV: SparkEnv | None = None


def _start(data_dir: Path) -> SparkEnv:
    server = s3_server.start(data_dir)
    aws = {"AWS_ENDPOINT_URL_S3": server.endpoint, "AWS_ACCESS_KEY_ID": s3_server.ACCESS_KEY,
           "AWS_SECRET_ACCESS_KEY": s3_server.SECRET_KEY, "AWS_REGION": "us-east-1"}
    saved = {k: os.environ.get(k) for k in aws}
    os.environ.update(aws)
    try:
        from spark_jobs.common import build_session

        spark = build_session("upgrade-gate-tests", "local[2]", shuffle_partitions=4,
                              extra_conf={"spark.sql.execution.arrow.maxRecordsPerBatch": "50000"})
    except BaseException:
        server.stop()
        raise
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return SparkEnv(spark, server)


@pytest.fixture(scope="session")
def spark_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkEnv]:
    global _ENV
    if _ENV is None:
        _ENV = _start(tmp_path_factory.mktemp("spark-weed"))
    yield _ENV
    if _ENV is not None:
        _ENV.spark.stop()
        _ENV.s3.stop()
        _ENV = None


@pytest.fixture(scope="session")
def spark(spark_env: SparkEnv) -> Any:
    return spark_env.spark

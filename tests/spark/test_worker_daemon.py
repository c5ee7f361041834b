"""The Python daemon of our local sessions (`spark_jobs.worker_daemon`): executors' Python imports PySpark from the
installed package, with its bytecode, instead of compiling it from the pyspark.zip Spark puts first on their path;
and it leaves the path as Spark set it whenever the zip is not that package's own."""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import pyspark

from spark_jobs.worker_daemon import installed_pyspark_first
from tests.spark_support import spark, spark_env  # noqa: F401  (fixtures)

INSTALLED = Path(pyspark.__file__).parent
OWN_ZIP = str(INSTALLED / "python" / "lib" / "pyspark.zip")
SITE = str(INSTALLED.parent)


def test_local_executors_import_the_installed_pyspark_with_its_bytecode(spark: Any) -> None:  # noqa: F811
    def where(_: Any) -> Any:
        import sys

        import pyspark.sql.types

        yield (pyspark.__file__, pyspark.sql.types.__spec__.cached,
               [p for p in sys.path if p.endswith("pyspark.zip")])

    rows = spark.sparkContext.parallelize(range(2), 2).mapPartitions(where).collect()
    assert spark.sparkContext.getConf().get("spark.python.daemon.module") == "spark_jobs.worker_daemon"
    for init, cached, zips in rows:
        assert init == pyspark.__file__  # the driver's own package, not a copy inside a zip
        assert cached is not None and Path(cached).is_file()  # its bytecode exists and is what was imported
        assert zips == []


def test_the_zip_of_the_installed_pyspark_is_dropped_and_nothing_else_moves() -> None:
    path = [OWN_ZIP, "/elsewhere/py4j-src.zip", "/work/repo", SITE]
    assert installed_pyspark_first(path) == ["/elsewhere/py4j-src.zip", "/work/repo", SITE]


def test_a_zip_of_another_pyspark_stays_where_spark_put_it(tmp_path: Path) -> None:
    """SPARK_HOME elsewhere (a Spark distribution's python/lib): its zip is the PySpark the executors must run."""
    other = tmp_path / "spark-home" / "python" / "lib" / "pyspark.zip"
    other.parent.mkdir(parents=True)
    zipfile.ZipFile(other, "w").close()
    path = [str(other), SITE]
    assert installed_pyspark_first(path) == path


def test_the_zip_stays_when_dropping_it_would_import_another_package(tmp_path: Path) -> None:
    """Without the zip, an earlier entry's pyspark would win over the installed one: keep Spark's order."""
    shadow = tmp_path / "shadow"
    (shadow / "pyspark").mkdir(parents=True)
    (shadow / "pyspark" / "__init__.py").write_text("")
    path = [OWN_ZIP, str(shadow), SITE]
    assert installed_pyspark_first(path) == path


def test_the_zip_reached_through_a_linked_folder_is_still_the_installed_packages(tmp_path: Path) -> None:
    """A virtual environment's lib64 is a link to its lib: SPARK_HOME and sys.path may name the package through
    either."""
    link = tmp_path / "lib64"
    link.symlink_to(INSTALLED.parent)
    path = [str(link / "pyspark" / "python" / "lib" / "pyspark.zip"), SITE]
    assert installed_pyspark_first(path) == [SITE]

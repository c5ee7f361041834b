"""The Python daemon of the local sessions we start (`spark.python.daemon.module`, `common.build_session`):
Spark's own `pyspark.daemon`, but with PySpark imported from its installed package instead of from the
`pyspark.zip` inside it.

Spark starts a local executor's Python daemon with `SPARK_HOME/python/lib/pyspark.zip` first on PYTHONPATH
(`PythonWorkerFactory` puts `PythonUtils.sparkPythonPath` before everything else). zipimport keeps no bytecode, so
the daemon and each worker it forks compiled PySpark's modules from source: 0.6 CPU-s more than from the installed
package for `pyspark.daemon` and `pyspark.worker` alone, and 1.5 CPU-s and 1.1 s of every local[2] fleet run (two
daemons, four workers), spent while the first tasks wait (docs/performance.md, "PySpark from its bytecode"). A
pip-installed PySpark, which is what `common.build_session` runs locally, carries that zip inside the very package
it was built from: `<site-packages>/pyspark/python/lib/pyspark.zip`. When the package beside it is the one Python
would import without the zip, the zip is dropped from `sys.path` and the same release is imported with its bytecode.
Anything else (a zip of another PySpark, SPARK_HOME elsewhere) is left exactly as Spark set it.
"""

from __future__ import annotations

import os
import sys
from importlib.machinery import PathFinder


def installed_pyspark_first(path: list[str]) -> list[str]:
    """`path` without the pyspark.zip entries that are the zip of the PySpark installed beside them."""
    zips = [p for p in path if os.path.basename(p) == "pyspark.zip"]
    kept = list(path)
    for entry in zips:
        # <package>/python/lib/pyspark.zip
        package = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(entry))))
        if os.path.basename(package) != "pyspark":
            continue
        trial = [p for p in kept if p != entry]
        found = _imported_from(trial)  # compared as real paths: a venv's lib64 is a link to its lib
        if found is not None and os.path.realpath(found) == os.path.realpath(os.path.join(package, "__init__.py")):
            kept = trial
    return kept


def _imported_from(path: list[str]) -> str | None:
    """The file `import pyspark` would load with `sys.path = path` (nothing is imported; `sys.modules` is not
    asked, so the answer holds in a process that has imported PySpark already)."""
    spec = PathFinder.find_spec("pyspark", path)
    return os.path.abspath(spec.origin) if spec is not None and spec.origin else None


if __name__ == "__main__":
    sys.path[:] = installed_pyspark_first(sys.path)
    from pyspark.daemon import manager

    manager()

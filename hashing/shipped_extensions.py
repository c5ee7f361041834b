"""Compiled extensions from the files Spark shipped to an executor: every one our code has, one loader.

On a cluster master our packages reach executors as a zip (`spark_jobs.common`, `addPyFile`), and a
compiled extension cannot be imported from a zip; the driver ships each built file beside it with
`addFile` (`spark_jobs.common.COMPILED_EXTENSIONS`: the hasher `hashing._fastids`, `hashing._javastrings`
and the `_metadata` reader's subtask loop `upgrade_gate.flink.metadata._fastsubtasks`). One loader for all
of them, so each extension's fallback behaves the same way.
"""

from __future__ import annotations

import os
import sys
from importlib.machinery import EXTENSION_SUFFIXES, ExtensionFileLoader
from importlib.util import module_from_spec, spec_from_file_location
from types import ModuleType


def load_shipped(module: str) -> ModuleType | None:
    """The extension `module` (its dotted name) from the files Spark shipped to this executor, or None.

    The shipped file is named after the module's last component (`_fastids.cpython-311-x86_64-linux-gnu.so`).
    Loaded only inside a Spark Python worker, only if the file's name carries one of this interpreter's
    extension suffixes (same Python version and platform ABI), and any failure leaves the pure-Python/NumPy
    rules in charge: a fallback must never stop a job."""
    files = sys.modules.get("pyspark.files")  # never import pyspark here: the CLI and tests do not need it
    if files is None or not getattr(files.SparkFiles, "_is_running_on_worker", False):
        return None
    try:
        root = files.SparkFiles.getRootDirectory()
        for suffix in EXTENSION_SUFFIXES:
            path = os.path.join(root, module.rpartition(".")[2] + suffix)
            if os.path.isfile(path):
                spec = spec_from_file_location(module, path, loader=ExtensionFileLoader(module, path))
                if spec is None or spec.loader is None:
                    return None
                loaded = module_from_spec(spec)
                spec.loader.exec_module(loaded)
                return loaded
    except (ImportError, OSError):  # another libc, a truncated copy...: the Python rules do the work
        return None
    return None

"""The compiled hot paths: the operator-ID hashers (hashing/_fastids.c), Java's String.hashCode over Arrow strings
(hashing/_javastrings.c) and the `_metadata` reader's subtask loop (upgrade_gate/flink/metadata/_fastsubtasks.c);
all metadata is in pyproject.toml.

`optional=True`: where no C compiler or Python headers exist the install still succeeds and the hashers and the
reader run their pure-Python code, String.hashCode its NumPy rules (docs/performance.md, "Operator IDs", "Key
groups" and "`_metadata`").
"""

from setuptools import Extension, setup

FLAGS = ["-O2", "-std=c11"]

setup(ext_modules=[Extension("hashing._fastids", ["hashing/_fastids.c"], optional=True, extra_compile_args=FLAGS),
                   Extension("hashing._javastrings", ["hashing/_javastrings.c"], optional=True,
                             extra_compile_args=FLAGS),
                   Extension("upgrade_gate.flink.metadata._fastsubtasks",
                             ["upgrade_gate/flink/metadata/_fastsubtasks.c"], optional=True,
                             extra_compile_args=FLAGS)])

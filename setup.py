"""The compiled hot paths: the operator-ID hashers (hashing/_fastids.c) and the `_metadata` reader's subtask
loop (upgrade_gate/flink/metadata/_fastsubtasks.c); all metadata is in pyproject.toml.

`optional=True`: where no C compiler or Python headers exist the install still succeeds and the
hashers and the reader run their pure-Python code (docs/performance.md, "Operator IDs" and issue 34).
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("hashing._fastids", ["hashing/_fastids.c"], optional=True,
                             extra_compile_args=["-O2", "-std=c11"]),
                   Extension("upgrade_gate.flink.metadata._fastsubtasks",
                             ["upgrade_gate/flink/metadata/_fastsubtasks.c"], optional=True,
                             extra_compile_args=["-O2", "-std=c11"])])

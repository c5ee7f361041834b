"""The compiled hot path of the operator-ID hashers (hashing/_fastids.c); all metadata is in pyproject.toml.

`optional=True`: where no C compiler or Python headers exist the install still succeeds and the
hashers run their pure-Python rules (docs/performance.md, "Operator IDs").
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("hashing._fastids", ["hashing/_fastids.c"], optional=True,
                             extra_compile_args=["-O2", "-std=c11"])])

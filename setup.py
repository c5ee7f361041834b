"""The compiled hot paths (hashing/_fastids.c, hashing/_javastrings.c); all metadata is in pyproject.toml.

`optional=True`: where no C compiler or Python headers exist the install still succeeds and the
hashers run their pure-Python rules (docs/performance.md, "Operator IDs"), String.hashCode its NumPy
rules (docs/performance.md, "Key groups").
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("hashing._fastids", ["hashing/_fastids.c"], optional=True,
                             extra_compile_args=["-O2", "-std=c11"]),
                   Extension("hashing._javastrings", ["hashing/_javastrings.c"], optional=True,
                             extra_compile_args=["-O2", "-std=c11"])])

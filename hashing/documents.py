"""One hardened reader for every document a user or a server hands us: graph files, Kubernetes resources,
Flink configuration files, REST answers.

Each of them arrives from outside (a CI job, a pasted `kubectl get -o yaml`, a JobManager behind a proxy),
so every step assumes a hostile document:

* only regular files are opened (a FIFO blocks `open` forever, `/dev/zero` never ends), and reads stop one
  byte past the size limit, so nothing is read that could not be kept;
* the number of values is estimated from the text before parsing, because every value becomes a Python
  object and that (not the byte size) is what a parse costs in memory;
* nesting is bounded (`Limits.max_depth`), so nothing that later walks or prints a value overflows the stack;
* YAML is built from libyaml's events by a loader that refuses aliases (a few hundred bytes of aliases
  expand to gigabytes: "billion laughs"), anchors, merge keys, non-string or duplicate keys and tags that
  build anything but plain data, and numbers longer than `Limits.max_number_chars` (YAML's base-60 integers
  cost quadratic time in their length, and Python refuses to print integers of more than 4,300 digits).

Every failure is one exception of the caller's class (an `InputError`), one line starting with the name of
the document. What differs per kind of document is only its `Limits` and the words `what` used in errors.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

from hashing.document_limits import Limits as Limits  # re-exported: the readers name it from here
from hashing.errors import InputError

_KIND = {stat.S_IFDIR: "a directory", stat.S_IFIFO: "a FIFO (named pipe)", stat.S_IFCHR: "a character device",
         stat.S_IFBLK: "a block device", stat.S_IFSOCK: "a socket"}


# ---- local files ---------------------------------------------------------------------------------
def read_local_file(path: str | Path, max_bytes: int, *, name: str | None = None, what: str = "a file",
                    error: type[InputError] = InputError) -> bytes:
    """The bytes of a local regular file, at most `max_bytes`; anything else is refused unopened.

    `os.stat` comes first because opening a FIFO blocks until a writer appears; the descriptor is
    then opened non-blocking and checked again with `fstat`, so a file swapped for a FIFO or a
    device between the two calls is refused too. `name` is how errors name the file (a URI)."""
    shown = name if name is not None else str(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise error(f"{shown}: no such file") from None
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        raise error(f"{shown}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    _require_regular(st.st_mode, shown, what, error)
    if st.st_size > max_bytes:
        raise error(f"{shown}: {st.st_size} bytes is larger than the {max_bytes}-byte limit for {what}")
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except FileNotFoundError:
        raise error(f"{shown}: no such file") from None
    except OSError as exc:
        raise error(f"{shown}: cannot read: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        _require_regular(st.st_mode, shown, what, error)
        chunks: list[bytes] = []
        left = max_bytes + 1
        want = st.st_size + 1  # one read holds the whole file unless it grows (or is a /proc file)
        while left > 0:
            chunk = os.read(fd, min(left, want))
            want = 1 << 20
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise error(f"{shown}: cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > max_bytes:
        raise error(f"{shown}: larger than the {max_bytes}-byte limit for {what}")
    return data


def _require_regular(mode: int, shown: str, what: str, error: type[InputError]) -> None:
    if not stat.S_ISREG(mode):
        kind = _KIND.get(stat.S_IFMT(mode), "a special file")
        raise error(f"{shown}: is {kind}, not a regular file; expected {what}")


def read_document(path: str | Path, *, what: str, limits: Limits = Limits(), error: type[InputError] = InputError,
                  name: str | None = None, yaml_first: bool | None = None, multi: bool = False) -> Any:
    """Read and parse a local JSON or YAML file (YAML first for `.yaml`/`.yml` unless `yaml_first` says).

    `multi=True` returns the list of a YAML stream's documents (`---`), as `kubectl get -o yaml` may print."""
    shown = name if name is not None else str(path)
    data = read_local_file(path, limits.max_bytes, name=shown, what=what, error=error)
    if yaml_first is None:
        yaml_first = Path(path).suffix.lower() in (".yaml", ".yml")
    return parse_bytes(data, shown, what=what, limits=limits, error=error, yaml_first=yaml_first, multi=multi)


# ---- text ----------------------------------------------------------------------------------------
def parse_bytes(data: bytes, origin: str, *, what: str, limits: Limits = Limits(),
                error: type[InputError] = InputError, yaml_first: bool = False, multi: bool = False) -> Any:
    """`parse_text` of UTF-8 bytes."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{origin}: not UTF-8 text (byte {exc.start}); expected {what}") from None
    except MemoryError:
        raise error(f"{origin}: {len(data)} bytes do not fit in this process's memory") from None
    return parse_text(text, origin, what=what, limits=limits, error=error, yaml_first=yaml_first, multi=multi)


def parse_text(text: str, origin: str, *, what: str, limits: Limits = Limits(), error: type[InputError] = InputError,
               yaml_first: bool = False, multi: bool = False) -> Any:
    """The document in `text` (JSON, else YAML), plain data only, within `limits`.

    A process with a memory limit (a Spark executor, a container) gets a one-line error instead of a
    traceback when a large document of tiny values (`[[],[],...]`, ~20 times its size in objects)
    does not fit: what was built is garbage once the exception leaves the parser."""
    try:
        if not text.strip():
            raise error(f"{origin}: empty file, expected {what}")
        count_values(text, origin, what=what, limits=limits, error=error)
        if not yaml_first:
            doc = _json_or_none(text, origin, limits, error)
            if doc is not _NOT_JSON:
                return [doc] if multi else doc
        return load_yaml(text, origin, what=what, limits=limits, error=error, multi=multi)
    except MemoryError:
        raise error(f"{origin}: a document of {len(text)} characters does not fit in this process's "
                    "memory") from None


def count_values(text: str, origin: str, *, what: str, limits: Limits, error: type[InputError]) -> None:
    """Refuse a text with more values than `limits.max_values` before any of them is built."""
    values = text.count(",") + text.count("[") + text.count("{") + text.count("\n")
    if values > limits.max_values:
        raise error(f"{origin}: about {values} values, more than the {limits.max_values} {what} may have")


_NOT_JSON = object()


def _json_or_none(text: str, origin: str, limits: Limits, error: type[InputError]) -> Any:
    """The JSON document, or `_NOT_JSON` when the text is not JSON and does not start like JSON."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        if text.lstrip()[:1] in "{[":
            raise error(f"{origin}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
        return _NOT_JSON
    except RecursionError:
        raise error(f"{origin}: invalid JSON: nested deeper than {limits.max_depth} levels") from None
    except ValueError:  # Python's limit on integer digits (sys.get_int_max_str_digits(), 4300)
        raise error(f"{origin}: invalid JSON: a number has more than {sys.get_int_max_str_digits()} "
                    "digits") from None
    check_depth(doc, origin, limits.max_depth, error)
    return doc


def parse_json(data: bytes, origin: str, *, what: str, limits: Limits = Limits(),
               error: type[InputError] = InputError) -> Any:
    """A JSON document only (a server's answer): not UTF-8, not JSON, too many values or too deep is one line."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{origin}: not UTF-8 text (byte {exc.start}); expected {what}") from None
    if not text.strip():
        raise error(f"{origin}: empty answer, expected {what}")
    try:
        count_values(text, origin, what=what, limits=limits, error=error)
        doc = _json_or_none(text, origin, limits, error)
    except MemoryError:
        raise error(f"{origin}: an answer of {len(text)} characters does not fit in this process's memory") from None
    if doc is _NOT_JSON:
        raise error(f"{origin}: not JSON; expected {what}")
    return doc


def check_depth(doc: Any, origin: str, max_depth: int, error: type[InputError] = InputError) -> None:
    """Refuse JSON nested deeper than `max_depth` (json.loads itself stops only near ~1000 levels)."""
    level = [doc] if type(doc) is dict or type(doc) is list else []
    depth = 0
    while level:  # one level at a time: no (value, depth) pair per container (a fleet parses one spec a job)
        depth += 1
        if depth > max_depth:
            raise error(f"{origin}: invalid JSON: nested deeper than {max_depth} levels")
        below = []
        push = below.append
        for value in level:
            for child in value.values() if type(value) is dict else value:
                if type(child) is dict or type(child) is list:
                    push(child)
        level = below


# ---- YAML ----------------------------------------------------------------------------------------
def load_yaml(text: str, origin: str, *, what: str = "a graph file", limits: Limits = Limits(),
              error: type[InputError] = InputError, multi: bool = False) -> Any:
    """One YAML document (or, with `multi`, the list of a stream's documents) as plain data, read by
    `hashing.yaml_loader` (which says what it refuses). PyYAML is imported there, when a YAML document is
    read: a check of JSON files never needs it, and its import (compiled regexes) was ~10 ms of every
    `check` (docs/performance.md, "A check's own cost")."""
    from hashing.yaml_loader import load_yaml as load

    return load(text, origin, what=what, limits=limits, error=error, multi=multi)

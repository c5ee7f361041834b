"""Reading a graph document with bounded time and memory, and one clear error per failure.

Graph files come from users (through S3, into Airflow workers and Spark executors), so every
step assumes a hostile file: only regular files are opened (a FIFO blocks `open` forever, a
device such as `/dev/zero` never ends), reads stop one byte past the size limit, nesting is
bounded, and YAML is built from the parser's events by a loader that refuses aliases (a few
hundred bytes of aliases expand to gigabytes), anchors, merge keys, non-string keys, duplicate
keys and tags that build anything but plain data. Every error is an `InputError` whose message
starts with the file's name.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

import yaml

from hashing.errors import InputError, describe

MAX_GRAPH_BYTES = 16 * 1024 * 1024  # a 200-operator spec is ~50 KB, a 2,000-operator SQL export ~5 MB
# Containers and separators a graph document may hold before it is parsed: every one becomes a Python
# object, so this (not the byte size) bounds the memory a parse takes (~60 MB at the cap; a spec node
# has about 12). A 2,000-operator graph has about 40,000.
MAX_VALUES = 1_000_000
# A spec is 5 levels deep (document, nodes, node, state, state entry) and Flink's execution plan 4;
# 100 leaves room for descriptive fields and stays far below Python's recursion limit, so nothing
# that later prints or walks a value can overflow the stack.
MAX_DEPTH = 100
# Java's long has 19 digits; a longer number is no id, parallelism or index, and YAML's base-60
# integers ("1:2:3:...") cost quadratic time in their length.
MAX_NUMBER_CHARS = 100

_KIND = {stat.S_IFDIR: "a directory", stat.S_IFIFO: "a FIFO (named pipe)", stat.S_IFCHR: "a character device",
         stat.S_IFBLK: "a block device", stat.S_IFSOCK: "a socket"}


def read_local_file(path: str | Path, max_bytes: int, *, name: str | None = None, what: str = "a graph file",
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


def read_document(path: str | Path) -> Any:
    """Parse JSON or YAML (by extension, falling back to content) and return the document."""
    p = Path(path)
    data = read_local_file(p, MAX_GRAPH_BYTES, what="a graph file (JSON or YAML)")
    return parse_bytes(data, str(p), yaml_first=p.suffix.lower() in (".yaml", ".yml"))


def parse_bytes(data: bytes, origin: str, yaml_first: bool = False) -> Any:
    """`parse_text` of UTF-8 bytes (what `read_object` returns)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{origin}: not UTF-8 text (byte {exc.start}); expected a JSON or YAML graph") from None
    except MemoryError:
        raise InputError(f"{origin}: {len(data)} bytes do not fit in this process's memory") from None
    return parse_text(text, origin, yaml_first=yaml_first)


def parse_text(text: str, origin: str, yaml_first: bool = False) -> Any:
    """The document in `text` (JSON, else YAML), plain data only, nested at most `MAX_DEPTH` deep.

    A process with a memory limit (a Spark executor, a container) gets a one-line error instead of a
    traceback when a large document of tiny values (`[[],[],...]`, ~20 times its size in objects)
    does not fit: what was built is garbage once the exception leaves the parser."""
    try:
        return _parse_text(text, origin, yaml_first)
    except MemoryError:
        raise InputError(f"{origin}: a document of {len(text)} characters does not fit in this process's "
                         "memory") from None


def _parse_text(text: str, origin: str, yaml_first: bool) -> Any:
    if not text.strip():
        raise InputError(f"{origin}: empty file, expected a JSON or YAML graph")
    values = text.count(",") + text.count("[") + text.count("{") + text.count("\n")
    if values > MAX_VALUES:
        raise InputError(f"{origin}: about {values} values, more than the {MAX_VALUES} a job graph may have")
    if not yaml_first:
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            if text.lstrip()[:1] in "{[":
                raise InputError(f"{origin}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
        except RecursionError:
            raise InputError(f"{origin}: invalid JSON: nested deeper than {MAX_DEPTH} levels") from None
        except ValueError:  # Python's limit on integer digits (sys.get_int_max_str_digits(), 4300)
            raise InputError(f"{origin}: invalid JSON: a number has more than {sys.get_int_max_str_digits()} "
                             "digits") from None
        else:
            _check_depth(doc, origin)
            return doc
    return load_yaml(text, origin)


def _check_depth(doc: Any, origin: str) -> None:
    """Refuse JSON nested deeper than `MAX_DEPTH` (json.loads itself stops only near ~1000 levels)."""
    if type(doc) is not dict and type(doc) is not list:
        return
    stack = [(doc, 1)]
    pop, push = stack.pop, stack.append
    while stack:
        value, depth = pop()
        if depth > MAX_DEPTH:
            raise InputError(f"{origin}: invalid JSON: nested deeper than {MAX_DEPTH} levels")
        children = value.values() if type(value) is dict else value
        for child in children:
            if type(child) is dict or type(child) is list:
                push((child, depth + 1))


# ---- YAML ----------------------------------------------------------------------------------------

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's event parser is iterative
_T = "tag:yaml.org,2002:"
_STR, _INT, _FLOAT, _BOOL, _NULL, _TIMESTAMP = (_T + t for t in ("str", "int", "float", "bool", "null", "timestamp"))
_SEQ, _MAP = _T + "seq", _T + "map"
_SCALAR_TAGS = {_STR, _INT, _FLOAT, _BOOL, _NULL, _TIMESTAMP}
_NO_KEY = object()


class _Refused(Exception):
    """A YAML construct we do not accept, raised with the event where it was found."""

    def __init__(self, event: Any, problem: str) -> None:
        super().__init__(problem)
        self.event, self.problem = event, problem


def load_yaml(text: str, origin: str) -> Any:
    """One YAML document as plain data (dict, list, str, int, float, bool, None, date/datetime).

    Built from libyaml's events with an explicit stack instead of PyYAML's composer, which
    recurses (libyaml's composer crashes the interpreter at ~100,000 levels) and shares aliased
    nodes (so an alias bomb expands when anything walks or prints the document)."""
    loader = _Loader(text)
    try:
        return _build(loader)
    except _Refused as exc:
        mark = getattr(exc.event, "start_mark", None)
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark else ""
        raise InputError(f"{origin}: invalid YAML{where}: {exc.problem}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or getattr(exc, "reason", None) or "cannot parse"
        raise InputError(f"{origin}: invalid YAML{where}: {' '.join(str(problem).split())}") from None
    except RecursionError:
        raise InputError(f"{origin}: invalid YAML: nested too deeply") from None
    finally:
        loader.dispose()


def _build(loader: Any) -> Any:
    get = loader.get_event
    get()  # StreamStartEvent
    if isinstance(loader.peek_event(), yaml.StreamEndEvent):
        return None
    get()  # DocumentStartEvent
    containers: list[Any] = []  # the open sequences and mappings, outermost first
    keys: list[Any] = []  # per open container: the mapping key waiting for its value, else _NO_KEY
    root: Any = None
    while True:
        event = get()
        cls = type(event)
        if cls is yaml.ScalarEvent:
            _no_anchor(event)
            value = _scalar(loader, event)
        elif cls is yaml.SequenceStartEvent or cls is yaml.MappingStartEvent:
            _no_anchor(event)
            is_map = cls is yaml.MappingStartEvent
            if event.tag not in (None, "!", _MAP if is_map else _SEQ):
                raise _Refused(event, f"tag {describe(event.tag)} is not supported in a graph file")
            if containers and type(containers[-1]) is dict and keys[-1] is _NO_KEY:
                raise _Refused(event, "a mapping key must be a string, not a list or mapping")
            if len(containers) >= MAX_DEPTH:
                raise _Refused(event, f"nested deeper than {MAX_DEPTH} levels")
            containers.append({} if is_map else [])
            keys.append(_NO_KEY)
            continue
        elif cls is yaml.SequenceEndEvent or cls is yaml.MappingEndEvent:
            keys.pop()
            value = containers.pop()
        elif cls is yaml.AliasEvent:
            raise _Refused(event, "aliases (*name) are not supported in a graph file")
        elif cls is yaml.DocumentEndEvent:
            if not isinstance(loader.peek_event(), yaml.StreamEndEvent):
                raise _Refused(loader.peek_event(), "expected a single document, found another one")
            return root
        else:  # pragma: no cover - libyaml emits nothing else inside a document
            raise _Refused(event, f"unexpected {cls.__name__}")
        if not containers:
            root = value
            continue
        top = containers[-1]
        if type(top) is list:
            top.append(value)
        elif keys[-1] is _NO_KEY:
            if type(value) is not str:
                raise _Refused(event, f"mapping key {describe(value)} is not a string (quote it)")
            if value in top:
                raise _Refused(event, f"duplicate key {describe(value)}")
            keys[-1] = value
        else:
            top[keys[-1]] = value
            keys[-1] = _NO_KEY


def _no_anchor(event: Any) -> None:
    if event.anchor is not None:
        raise _Refused(event, "anchors (&name) are not supported in a graph file")


def _scalar(loader: Any, event: Any) -> Any:
    """A scalar with YAML 1.1's plain-data types, as `yaml.safe_load` would build it."""
    tag = event.tag
    if tag is None or tag == "!":
        tag = loader.resolve(yaml.ScalarNode, event.value, event.implicit)
    if tag == _STR:
        return event.value
    if tag not in _SCALAR_TAGS:
        if tag in (_T + "merge", _T + "value"):
            raise _Refused(event, f"merge keys ({describe(event.value)}) are not supported in a graph file")
        raise _Refused(event, f"tag {describe(tag)} is not supported in a graph file")
    if tag in (_INT, _FLOAT) and len(event.value) > MAX_NUMBER_CHARS:
        raise _Refused(event, f"a number of {len(event.value)} characters (at most {MAX_NUMBER_CHARS})")
    node = yaml.ScalarNode(tag, event.value, event.start_mark, event.end_mark, event.style)
    try:
        return loader.yaml_constructors[tag](loader, node)
    except (ValueError, OverflowError, TypeError, AttributeError, KeyError):  # !!int abc, a 13th month...
        raise _Refused(event, f"cannot read {describe(event.value)} as {tag.rsplit(':', 1)[-1]}") from None

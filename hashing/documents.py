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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from hashing.errors import InputError, describe


@dataclass(frozen=True, slots=True)
class Limits:
    """What one kind of document may hold. The defaults are the graph reader's (docs/graph-spec.md)."""

    max_bytes: int = 16 * 1024 * 1024
    # containers, separators and lines counted in the text before it is parsed (~60 bytes of objects each)
    max_values: int = 1_000_000
    max_depth: int = 100
    # Java's long has 19 digits; a longer number is no id, count, timestamp or size
    max_number_chars: int = 100


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
    if type(doc) is not dict and type(doc) is not list:
        return
    stack = [(doc, 1)]
    pop, push = stack.pop, stack.append
    while stack:
        value, depth = pop()
        if depth > max_depth:
            raise error(f"{origin}: invalid JSON: nested deeper than {max_depth} levels")
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


def load_yaml(text: str, origin: str, *, what: str = "a graph file", limits: Limits = Limits(),
              error: type[InputError] = InputError, multi: bool = False) -> Any:
    """One YAML document (or, with `multi`, the list of a stream's documents) as plain data: dict, list,
    str, int, float, bool, None, date/datetime.

    Built from libyaml's events with an explicit stack instead of PyYAML's composer, which
    recurses (libyaml's composer crashes the interpreter at ~100,000 levels) and shares aliased
    nodes (so an alias bomb expands when anything walks or prints the document)."""
    loader = _Loader(text)
    try:
        docs = _Builder(loader, what, limits).stream(multi)
        return docs if multi else (docs[0] if docs else None)
    except _Refused as exc:
        mark = getattr(exc.event, "start_mark", None)
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark else ""
        raise error(f"{origin}: invalid YAML{where}: {exc.problem}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or getattr(exc, "reason", None) or "cannot parse"
        raise error(f"{origin}: invalid YAML{where}: {' '.join(str(problem).split())[:300]}") from None
    except RecursionError:
        raise error(f"{origin}: invalid YAML: nested too deeply") from None
    finally:
        loader.dispose()


class _Builder:
    """Plain data from one event stream, refusing what `load_yaml` says it refuses."""

    def __init__(self, loader: Any, what: str, limits: Limits) -> None:
        self.loader, self.what, self.limits = loader, what, limits

    def stream(self, multi: bool) -> list[Any]:
        get, peek = self.loader.get_event, self.loader.peek_event
        get()  # StreamStartEvent
        docs: list[Any] = []
        while not isinstance(peek(), yaml.StreamEndEvent):
            if docs and not multi:
                raise _Refused(peek(), "expected a single document, found another one")
            get()  # DocumentStartEvent
            docs.append(self.document())
        return docs

    def document(self) -> Any:
        get = self.loader.get_event
        containers: list[Any] = []  # the open sequences and mappings, outermost first
        keys: list[Any] = []  # per open container: the mapping key waiting for its value, else _NO_KEY
        root: Any = None
        while True:
            event = get()
            cls = type(event)
            if cls is yaml.ScalarEvent:
                self._no_anchor(event)
                value = self._scalar(event)
            elif cls is yaml.SequenceStartEvent or cls is yaml.MappingStartEvent:
                self._no_anchor(event)
                is_map = cls is yaml.MappingStartEvent
                if event.tag not in (None, "!", _MAP if is_map else _SEQ):
                    raise _Refused(event, f"tag {describe(event.tag)} is not supported in {self.what}")
                if containers and type(containers[-1]) is dict and keys[-1] is _NO_KEY:
                    raise _Refused(event, "a mapping key must be a string, not a list or mapping")
                if len(containers) >= self.limits.max_depth:
                    raise _Refused(event, f"nested deeper than {self.limits.max_depth} levels")
                containers.append({} if is_map else [])
                keys.append(_NO_KEY)
                continue
            elif cls is yaml.SequenceEndEvent or cls is yaml.MappingEndEvent:
                keys.pop()
                value = containers.pop()
            elif cls is yaml.AliasEvent:
                raise _Refused(event, f"aliases (*name) are not supported in {self.what}")
            elif cls is yaml.DocumentEndEvent:
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

    def _no_anchor(self, event: Any) -> None:
        if event.anchor is not None:
            raise _Refused(event, f"anchors (&name) are not supported in {self.what}")

    def _scalar(self, event: Any) -> Any:
        """A scalar with YAML 1.1's plain-data types, as `yaml.safe_load` would build it."""
        loader, tag = self.loader, event.tag
        if tag is None or tag == "!":
            tag = loader.resolve(yaml.ScalarNode, event.value, event.implicit)
        if tag == _STR:
            return event.value
        if tag not in _SCALAR_TAGS:
            if tag in (_T + "merge", _T + "value"):
                raise _Refused(event, f"merge keys ({describe(event.value)}) are not supported in {self.what}")
            raise _Refused(event, f"tag {describe(tag)} is not supported in {self.what}")
        if tag in (_INT, _FLOAT) and len(event.value) > self.limits.max_number_chars:
            raise _Refused(event, f"a number of {len(event.value)} characters (at most "
                                  f"{self.limits.max_number_chars})")
        node = yaml.ScalarNode(tag, event.value, event.start_mark, event.end_mark, event.style)
        try:
            return loader.yaml_constructors[tag](loader, node)
        except (ValueError, OverflowError, TypeError, AttributeError, KeyError):  # !!int abc, a 13th month...
            raise _Refused(event, f"cannot read {describe(event.value)} as {tag.rsplit(':', 1)[-1]}") from None

"""YAML as plain data for the hardened document reader (`hashing.documents.load_yaml`, which imports this module
only when a YAML document is read): built from libyaml's events, refusing aliases, anchors, merge keys, tags
that build anything but plain data, non-string or duplicate keys and over-long numbers (see `hashing.documents`).
"""

from __future__ import annotations

from typing import Any

import yaml

from hashing.document_limits import Limits
from hashing.errors import InputError, describe

__all__ = ["load_yaml"]

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


def load_yaml(text: str, origin: str, *, what: str, limits: Limits, error: type[InputError], multi: bool) -> Any:
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

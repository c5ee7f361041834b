"""Reading a graph document from disk with bounded memory and a clear error per failure."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from hashing.errors import InputError

MAX_GRAPH_BYTES = 64 * 1024 * 1024  # a 200-operator spec is ~50 KB; anything this big is not a graph


def read_document(path: str | Path) -> Any:
    """Parse JSON or YAML (by extension, falling back to content) and return the document."""
    p = Path(path)
    try:
        size = p.stat().st_size
    except FileNotFoundError:
        raise InputError(f"{p}: no such file") from None
    except OSError as exc:
        raise InputError(f"{p}: cannot read: {exc.strerror}") from None
    if p.is_dir():
        raise InputError(f"{p}: is a directory, expected a graph file (JSON or YAML)")
    if size > MAX_GRAPH_BYTES:
        raise InputError(f"{p}: {size} bytes is larger than the {MAX_GRAPH_BYTES} bytes a job graph may have")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{p}: not UTF-8 text (byte {exc.start}); expected a JSON or YAML graph") from None
    return parse_text(text, str(p), yaml_first=p.suffix.lower() in (".yaml", ".yml"))


def parse_text(text: str, origin: str, yaml_first: bool = False) -> Any:
    if not text.strip():
        raise InputError(f"{origin}: empty file, expected a JSON or YAML graph")
    if not yaml_first:
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            if text.lstrip()[:1] in "{[":
                raise InputError(f"{origin}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "cannot parse"
        raise InputError(f"{origin}: invalid YAML{where}: {problem}") from None

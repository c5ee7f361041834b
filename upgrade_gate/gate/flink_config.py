"""Parse a Flink job's configuration as Flink does: `config.yaml` (Flink 1.19+, the only file 2.x reads) or the
legacy `flink-conf.yaml`, plus `-D key=value` settings.

`config.yaml` is standard YAML whose nested maps spell dotted keys (`state: {backend: {type: x}}` is
`state.backend.type`), as `GlobalConfiguration` flattens it; `flink-conf.yaml` is Flink 1.x's line format
(`key: value`, `#` comments), parsed line by line the way `GlobalConfiguration#loadYAMLResource` did. A
directory is read like a `FLINK_CONF_DIR` (`storage.flink_config_file`). Bad input is an
`InputError` naming the file (one line, exit 2 at the CLI). Both are read by the shared hardened reader
(`hashing.documents`): a regular file only (a FIFO never blocks, `/dev/zero` is never read), at most
`MAX_CONFIG_BYTES`, and YAML without aliases, anchors or tags, at most `MAX_DEPTH` levels deep.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from hashing.documents import Limits, parse_text
from hashing.errors import InputError, describe

__all__ = ["CONFIG_YAML", "LEGACY_CONFIG", "FlinkConfig", "parse_flink_config", "parse_settings"]

CONFIG_YAML = "config.yaml"
LEGACY_CONFIG = "flink-conf.yaml"
MAX_CONFIG_BYTES = 1 << 20
MAX_DEPTH = 32
CONFIG_FILE = "a Flink configuration file"
CONFIG_LIMITS = Limits(max_bytes=MAX_CONFIG_BYTES, max_values=100_000, max_depth=MAX_DEPTH, max_number_chars=100)


@dataclass(frozen=True, slots=True)
class FlinkConfig:
    """Settings by key, each with where it came from (the file, or `-D`); `legacy_file`: a flink-conf.yaml."""

    source: str
    settings: tuple[tuple[str, str, str], ...]  # (key, value, origin)
    legacy_file: bool = False

    def get(self, key: str) -> str | None:
        return next((v for k, v, _ in reversed(self.settings) if k == key), None)

    def with_settings(self, pairs: Iterable[tuple[str, str]], origin: str = "-D") -> FlinkConfig:
        """`-D` settings override the file's, as `flink run -D` does."""
        return FlinkConfig(self.source, (*self.settings, *((k, v, origin) for k, v in pairs)), self.legacy_file)


def parse_settings(pairs: Iterable[str]) -> list[tuple[str, str]]:
    """`key=value` strings (`-D`), each checked."""
    out = []
    for p in pairs:
        key, sep, value = p.partition("=")
        if not sep or not key.strip():
            raise InputError(f"-D {p!r}: expected KEY=VALUE")
        out.append((key.strip(), value.strip()))
    return out


def _flatten(doc: Any, prefix: str, out: list[tuple[str, str]], origin: str, depth: int = 0) -> None:
    if depth > MAX_DEPTH:
        raise InputError(f"{origin}: nested deeper than {MAX_DEPTH} levels")
    if isinstance(doc, dict):
        for k, v in doc.items():
            if not isinstance(k, str | int | float | bool):
                raise InputError(f"{origin}: a key that is not a string under {describe(prefix or '(top)')}")
            _flatten(v, f"{prefix}.{k}" if prefix else str(k), out, origin, depth + 1)
    elif not prefix:
        raise InputError(f"{origin}: expected a map of settings at the top level")
    elif isinstance(doc, list):  # Flink's list syntax: items joined by ';'
        out.append((prefix, ";".join(_scalar(x, prefix, origin) for x in doc)))
    else:
        out.append((prefix, _scalar(doc, prefix, origin)))


def _scalar(v: Any, key: str, origin: str) -> str:
    if isinstance(v, dict | list):
        raise InputError(f"{origin}: {describe(key)} holds a nested structure inside a list")
    if isinstance(v, bool):
        return "true" if v else "false"
    return "" if v is None else str(v)


def _legacy_lines(text: str) -> list[tuple[str, str]]:
    """flink-conf.yaml as Flink 1.x read it: `key: value` per line, `#` starts a comment, others ignored."""
    out = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        key, sep, value = line.partition(": ")
        if sep and key.strip() and value.strip():
            out.append((key.strip(), value.strip()))
    return out


def parse_flink_config(data: bytes, origin: str, *, legacy: bool = False) -> FlinkConfig:
    """A configuration file's bytes (`storage.flink_config_file` reads them); `legacy`: flink-conf.yaml's line
    format."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{origin}: not UTF-8 text (byte {exc.start})") from None
    if legacy:
        return FlinkConfig(origin, tuple((k, v, origin) for k, v in _legacy_lines(text)), legacy_file=True)
    doc = parse_text(text, origin, what=CONFIG_FILE, limits=CONFIG_LIMITS, yaml_first=True) if text.strip() else {}
    flat: list[tuple[str, str]] = []
    if doc is not None and doc != {}:
        _flatten(doc, "", flat, origin)
    return FlinkConfig(origin, tuple((k, v, origin) for k, v in flat))

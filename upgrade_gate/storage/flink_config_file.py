"""Reading a Flink job's configuration file from disk: `config.yaml` (Flink 1.19+, the only file 2.x reads),
the legacy `flink-conf.yaml`, or a directory holding one, as a `FLINK_CONF_DIR` is read. The bytes go through the
shared hardened reader (`hashing.documents.read_local_file`: a regular file only, bounded) and are parsed by
`upgrade_gate.gate.flink_config.parse_flink_config`."""

from __future__ import annotations

from pathlib import Path

from hashing.documents import read_local_file
from hashing.errors import InputError
from upgrade_gate.gate.flink_config import (
    CONFIG_FILE,
    CONFIG_YAML,
    LEGACY_CONFIG,
    MAX_CONFIG_BYTES,
    FlinkConfig,
    parse_flink_config,
)

__all__ = ["read_flink_config"]


def read_flink_config(path: str | Path) -> FlinkConfig:
    """A config.yaml, a flink-conf.yaml, or a directory holding one (config.yaml wins, as in Flink 1.19+)."""
    p = Path(path)
    if p.is_dir():
        for name in (CONFIG_YAML, LEGACY_CONFIG):
            if (p / name).is_file():
                return read_flink_config(p / name)
        raise InputError(f"{p}: no {CONFIG_YAML} or {LEGACY_CONFIG} in this directory")
    return parse_flink_config(read_local_file(p, MAX_CONFIG_BYTES, what=CONFIG_FILE), str(p),
                              legacy=p.name == LEGACY_CONFIG)

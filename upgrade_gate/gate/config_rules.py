"""Crossing to Flink 2.x: the job's configuration against what 2.x removed or renamed.

Two kinds of facts, both from real Flink (`python -m flink_bridge.generate_savepoints --config-checks`):
- `flink_config_options.json` (beside this module): every `ConfigOption` of Flink 1.20.5's and 2.3.0's lib/,
  reflected by ConfigCheck.java and diffed: keys 2.3 knows in no spelling (`removed`: ignored at start, the
  setting silently has no effect), keys 2.3 reads only as another option's deprecated key (`renamed`), and
  options 2.3 itself deprecates;
- jobs started on configurations (tests/fixtures/savepoints/state-schemas/config/, outcomes.json): 2.3
  refuses `state.backend.type` (or its old key `state.backend`) set to `filesystem` or `jobmanager`
  (`StateBackendLoader`: "Cannot find configured state backend factory class"), and a configuration
  directory holding only the legacy `flink-conf.yaml` (2.x reads config.yaml only); 1.20 runs all of them.

The refused ones block (RESTORE_FAILS: the job will not start) with the option named and its replacement;
removed, renamed and deprecated options are warnings with the replacement where Flink names one.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hashing.versions import FlinkVersion
from upgrade_gate.gate.flink_config import CONFIG_YAML, LEGACY_CONFIG, FlinkConfig

__all__ = ["ConfigFinding", "backend_of", "check_config", "option_changes"]

TABLE = Path(__file__).with_name("flink_config_options.json")
BACKEND_KEY = "state.backend.type"
# state backend shortcut names Flink 1.x's StateBackendLoader mapped to HashMapStateBackend; 2.x has none
REMOVED_BACKENDS = {"filesystem": "hashmap", "jobmanager": "hashmap"}
BACKEND_ERROR = ("org.apache.flink.util.DynamicCodeLoadingException: Cannot find configured state backend factory "
                 "class: {value}")
LEGACY_FILE_ERROR = ("org.apache.flink.configuration.IllegalConfigurationException: The Flink config file "
                     "'{path}' ({path}) does not exist.")
# Replacements for removed options, from Flink 2.0's release notes (the table knows no successor for them)
# (each named key checked present in Flink 2.3.0's ConfigOptions when this table was written)
_KRYO = ("pipeline.serialization-config (the Kryo and POJO registrations of 1.x are ignored without it: state a "
         "custom Kryo serializer wrote is then read by Kryo's default one)")
REMOVED_REPLACEMENTS = {
    "state.backend.async": "nothing: snapshots are always asynchronous in Flink 2.x",
    "state.backend.rocksdb.checkpointdir": "state.backend.rocksdb.localdir",
    "execution.checkpointing.force": "nothing: forced checkpoints of iterative jobs went with the DataSet API",
    "pipeline.registered-kryo-types": _KRYO,
    "pipeline.default-kryo-serializers": _KRYO,
    "pipeline.registered-pojo-types": _KRYO,
    "pipeline.time-characteristic": "nothing: event time is the only time characteristic in Flink 2.x",
    "jobmanager.heap.size": "jobmanager.memory.process.size (or jobmanager.memory.heap.size)",
    "jobmanager.heap.mb": "jobmanager.memory.process.size (or jobmanager.memory.heap.size)",
    "taskmanager.heap.size": "taskmanager.memory.process.size",
    "taskmanager.heap.mb": "taskmanager.memory.process.size",
    "security.ssl.enabled": "security.ssl.internal.enabled and security.ssl.rest.enabled",
    "cluster.evenly-spread-out-slots": "taskmanager.load-balance.mode: SLOTS",
}


@functools.cache
def option_changes() -> dict[str, Any]:
    """The 1.20.5 -> 2.3.0 ConfigOption diff recorded from Flink's own classes."""
    return json.loads(TABLE.read_text(encoding="utf-8"))


@dataclass(frozen=True, slots=True)
class ConfigFinding:
    key: str
    value: str
    origin: str  # the file, or -D
    blocking: bool
    text: str
    remedy: str
    flink_error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "value": self.value, "origin": self.origin, "blocking": self.blocking,
                "text": self.text, "remedy": self.remedy, "flink_error": self.flink_error}


def _canonical(key: str) -> str:
    return option_changes()["renamed"].get(key, key)


def backend_of(config: FlinkConfig | None) -> str | None:
    """The state backend the new job runs with, when the configuration says (hashmap | rocksdb)."""
    if config is None:
        return None
    value = None
    for key, v, _ in config.settings:
        if _canonical(key) == BACKEND_KEY:
            value = v.strip().lower()
    if value in ("hashmap", "rocksdb"):
        return value
    if value and "rocksdb" in value.lower():
        return "rocksdb"
    return "hashmap" if value in REMOVED_BACKENDS else None


def check_config(config: FlinkConfig, target: FlinkVersion) -> list[ConfigFinding]:
    """What Flink `target` (2.x) makes of `config`: refused settings first, then the removed, renamed and
    deprecated options. Nothing for a 1.x target: these are 2.x's changes."""
    if target.major < 2:
        return []
    table = option_changes()
    out: list[ConfigFinding] = []
    if config.legacy_file:
        path = str(Path(config.source).with_name(CONFIG_YAML))
        out.append(ConfigFinding(LEGACY_CONFIG, "", config.source, True,
                                 f"Flink {target} reads {CONFIG_YAML} only: a configuration directory holding "
                                 f"{LEGACY_CONFIG} alone is refused and the cluster does not start",
                                 f"convert it with Flink's bin/migrate-config-file.sh (Flink 1.19+) to {CONFIG_YAML}",
                                 LEGACY_FILE_ERROR.format(path=path)))
    for key, value, origin in config.settings:
        canonical = _canonical(key)
        if canonical == BACKEND_KEY and value.strip().lower() in REMOVED_BACKENDS:
            new = REMOVED_BACKENDS[value.strip().lower()]
            out.append(ConfigFinding(key, value, origin, True,
                                     f"{key}: {value} is refused by Flink {target}: the job will not start",
                                     f"set {BACKEND_KEY}: {new} (state in the JobManager's or TaskManagers' heap, "
                                     f"as '{value}' was); checkpoints go to execution.checkpointing.storage: "
                                     f"filesystem with execution.checkpointing.dir",
                                     BACKEND_ERROR.format(value=value.strip())))
    for key, value, origin in config.settings:
        if key in table["removed"]:
            why = REMOVED_REPLACEMENTS.get(key, "no successor is named by Flink")
            out.append(ConfigFinding(key, value, origin, False,
                                     f"{key} ({table['removed'][key]}) was removed in Flink 2.x: Flink {target} "
                                     f"ignores it, so the setting silently has no effect", f"replace with {why}"))
        elif key in table["renamed"]:
            new = table["renamed"][key]
            out.append(ConfigFinding(key, value, origin, False,
                                     f"{key} is a deprecated spelling of {new} in Flink {target}",
                                     f"rename it to {new}"))
        elif key in table["deprecated"]:
            out.append(ConfigFinding(key, value, origin, False,
                                     f"{key} ({table['deprecated'][key]}) is deprecated in Flink {target}",
                                     "see Flink's configuration docs for its successor"))
    return out

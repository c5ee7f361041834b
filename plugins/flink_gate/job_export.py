"""The jar path of `flink_upgrade_gate`: the new job's graph, built by real Flink with the job's own settings.

Operators without a uid get IDs from the graph's shape, and the shape depends on chaining, which depends on the
job's parallelism and `-D` settings (docs/guide.md, "Export"). An export with other settings than the job runs
with gates a different job: IDs that will not match, or a rescale that never happens. So the export here is
`upgrade-gate export` itself (`flink_bridge.exporter.export_graph`, in the task's process: no second interpreter
start), given the run's `parallelism`, `flink_settings` and `flink_config` (the same params the check and the
upgrade read, `dag_parts.job_settings_params`) and the Flink release of the new job (`flink_version`, the
form's enum of the supported lines). What the export assumed and every warning it gave travel on: into the task
log here, into the check's warnings (report, alert, JSON) in `steps.simulate_restore`, and into the run note.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flink_gate.failures import BadInput
from flink_gate.hooks.storage import SavepointStorageHook
from upgrade_gate.vocabulary import DEFAULT_FLINK_VERSION

MAX_JAR_BYTES = 512 << 20
MAX_CONFIG_BYTES = 4 << 20
CONFIG_NAMES = ("config.yaml", "flink-conf.yaml")


@dataclass(frozen=True)
class JarExport:
    """A graph exported from the job jar, and what it rests on (the `export` field of the check's JSON)."""

    release: str
    assumptions: str
    warnings: tuple[str, ...]
    parallelism: int | None
    settings: tuple[str, ...]
    config: str | None

    def to_json(self) -> dict[str, Any]:
        return {"release": self.release, "assumptions": self.assumptions, "warnings": list(self.warnings),
                "parallelism": self.parallelism, "settings": list(self.settings), "config": self.config}


def local_config(p: dict[str, Any], rdir: Path, storage: SavepointStorageHook) -> str | None:
    """The `flink_config` param as a local file the exporter and the config rules can read (downloaded from
    object storage into the run's work directory under its own name: `flink-conf.yaml` is the 1.x format)."""
    uri = str(p.get("flink_config") or "").strip()
    if not uri:
        return None
    if "://" not in uri or uri.startswith("file:"):
        return uri.removeprefix("file://")
    name = uri.rstrip("/").rsplit("/", 1)[-1]
    if name not in CONFIG_NAMES:
        raise BadInput(f"flink_config {uri}: name the file itself ({' or '.join(CONFIG_NAMES)})")
    target = rdir / "conf" / name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(storage.read_bytes(uri, MAX_CONFIG_BYTES))
    return str(target)


def export_jar(p: dict[str, Any], rdir: Path, target: Path, storage: SavepointStorageHook, config: str | None,
               log: Any) -> JarExport:
    """Export the graph of `p["jar"]` into `target` with the job's settings (`config`: `local_config`'s file);
    log what was assumed and warned."""
    from flink_bridge.exporter import export_graph

    jar = str(p["jar"])
    if "://" in jar and not jar.startswith("file:"):
        local_jar = rdir / Path(jar).name
        local_jar.write_bytes(storage.read_bytes(jar, MAX_JAR_BYTES))
        jar = str(local_jar)
    settings = tuple(str(s) for s in p.get("flink_settings") or ())
    parallelism = int(p.get("parallelism") or 0) or None
    version = str(p.get("flink_version") or DEFAULT_FLINK_VERSION)
    log.info("exporting the graph of %s with Flink %s (-p %s, -D %s, config %s)", p["jar"], version,
             parallelism or "not given", list(settings) or "none", config or "none")
    result = export_graph("jar", jar.removeprefix("file://"), main_class=p.get("main_class") or None,
                          flink_version=version, parallelism=parallelism, config=config, dynamic=settings)
    target.write_text(json.dumps(result.spec, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    log.info("%s", result.assumptions())
    for warning in result.warnings():
        log.warning("%s", warning)
    return JarExport(result.release, result.assumptions(), tuple(result.warnings()), parallelism, settings,
                     str(p.get("flink_config") or "") or None)


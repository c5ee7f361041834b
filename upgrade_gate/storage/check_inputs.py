"""Reading everything a check names into one `CheckInputs` (`upgrade_gate.gate.inputs`): the gate judges, this
module reads (docs/design.md, "The check pipeline").

`read_check_inputs` takes what a user names (paths, `file://`, `s3://`, or what a caller has already parsed) and
reads each once: the savepoint's `_metadata`, the new and old graphs, a second savepoint for the state schema
diff, the Flink configuration with its `-D` settings, and the opener through which a rule reads state files (S3
objects by ranged GET, local files otherwise). `check_upgrade` is `gate.check.check` of it, for callers that hold
locations (the CLI's tests, the demo, the repair planner's re-check).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from hashing.errors import InputError
from hashing.graph import StreamGraph
from hashing.readers import LoadedGraph
from hashing.versions import FlinkVersion
from upgrade_gate.flink.metadata.model import CheckpointMetadata
from upgrade_gate.flink.state_meta.streams import Opener
from upgrade_gate.gate.check import CheckResult, check
from upgrade_gate.gate.flink_config import FlinkConfig
from upgrade_gate.gate.inputs import CheckInputs, CheckOptions, GraphSide, SecondSavepoint, side_of
from upgrade_gate.storage.flink_config_file import read_flink_config
from upgrade_gate.storage.objects import read_graph
from upgrade_gate.storage.savepoints import load_savepoint
from upgrade_gate.storage.state_files import state_stream_opener
from upgrade_gate.vocabulary import DEFAULT_HASHER, DEFAULT_MATCHING

__all__ = ["GraphSource", "SavepointSource", "check_upgrade", "read_check_inputs", "read_side"]

GraphSource = LoadedGraph | StreamGraph | GraphSide | str | Path
SavepointSource = str | CheckpointMetadata


def read_side(source: GraphSource) -> GraphSide:
    """The graph with its descriptive fields, reading a location once (a `LoadedGraph` is not read again)."""
    if isinstance(source, str | Path):
        return side_of(read_graph(str(source)))
    return side_of(source)


def _savepoint(source: SavepointSource) -> CheckpointMetadata:
    return load_savepoint(source) if isinstance(source, str) else source


def _config(flink_config: str | Path | FlinkConfig | None, settings: Sequence[tuple[str, str]]) -> FlinkConfig | None:
    """The new job's configuration, every `-D` / `flinkConfiguration` setting applied over the file's."""
    if flink_config is None and not settings:
        return None
    config = (flink_config if isinstance(flink_config, FlinkConfig)
              else read_flink_config(flink_config) if flink_config is not None else FlinkConfig("settings", ()))
    return config.with_settings(settings, "-D / flinkConfiguration") if settings else config


def read_check_inputs(savepoint: SavepointSource, graph: GraphSource, *,
                      options: CheckOptions | None = None, old_graph: GraphSource | None = None,
                      pointer: str | None = None,
                      old_savepoint: SavepointSource | None = None, new_job_savepoint: SavepointSource | None = None,
                      flink_config: str | Path | FlinkConfig | None = None,
                      settings: Sequence[tuple[str, str]] = (), open_state: Opener | None = None) -> CheckInputs:
    """`new_job_savepoint`: a savepoint the new job version wrote (staging); `old_savepoint`: one the job wrote
    before its change (docs/guide.md, "State schemas"). `open_state`: how a rule reads state files (default: S3
    objects with the default client, local files otherwise). Bad input raises `hashing.errors.InputError`."""
    if old_savepoint is not None and new_job_savepoint is not None:
        raise InputError("give --old-savepoint or --new-job-savepoint, not both (see docs/guide.md, State schemas)")
    metadata = _savepoint(savepoint)
    side = read_side(graph)
    old = None
    if old_graph is not None:
        try:
            old = read_side(old_graph)
        except InputError as exc:
            raise InputError(f"--old-graph: {exc}") from None
    second = (SecondSavepoint(_savepoint(new_job_savepoint), "new-job") if new_job_savepoint is not None
              else SecondSavepoint(_savepoint(old_savepoint), "old") if old_savepoint is not None else None)
    return CheckInputs(metadata, side, options or CheckOptions(), old, pointer, second,
                       _config(flink_config, settings), open_state or state_stream_opener())


def check_upgrade(savepoint: SavepointSource, graph: GraphSource, *, hasher: str = DEFAULT_HASHER,
                  matching: str = DEFAULT_MATCHING, allow_non_restored_state: bool = False,
                  flink_version: str | FlinkVersion | None = None, with_remedies: bool = True,
                  rescale_detail: bool = True, with_migration: bool = True, **sources: object) -> CheckResult:
    """`check(read_check_inputs(...))` with the options spelled as keywords; `sources` are
    `read_check_inputs`'s keywords (old_graph, pointer, old_savepoint, new_job_savepoint, flink_config,
    settings, open_state)."""
    version = flink_version if isinstance(flink_version, FlinkVersion) else FlinkVersion.parse(flink_version)
    options = CheckOptions(hasher, matching, version, allow_non_restored_state, with_remedies=with_remedies,
                           rescale_detail=rescale_detail, with_migration=with_migration)
    return check(read_check_inputs(savepoint, graph, options=options, **sources))  # type: ignore[arg-type]

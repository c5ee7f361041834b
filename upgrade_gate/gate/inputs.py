"""`CheckInputs`: everything one check reads, parsed, in one frozen object.

The gate judges; it never reads. Its callers (the CLI, the Airflow steps, the Spark fleet job, the repair planner)
build a `CheckInputs` with `upgrade_gate.storage.check_inputs.read_check_inputs` (which reads every location a
check names) or directly from what they already hold, so a new input is a new field here, read in one place
(docs/design.md, "The check pipeline"). The one read a rule may still cause is of state files named by the
savepoint (serializer snapshots, only when a rule needs them): it goes through `open_state`, the caller's opener,
as Flink's `StreamStateHandle` hands a backend its bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from hashing.graph import StreamGraph
from hashing.readers import LoadedGraph
from hashing.versions import FlinkVersion
from upgrade_gate.flink.assignment.keyed_state import has_keyed_input
from upgrade_gate.flink.metadata.model import CheckpointMetadata
from upgrade_gate.flink.state_meta.streams import Opener, local_opener
from upgrade_gate.gate.flink_config import FlinkConfig
from upgrade_gate.gate.upgrade_modes import RestorePath
from upgrade_gate.vocabulary import DEFAULT_HASHER, DEFAULT_MATCHING

__all__ = ["CheckInputs", "CheckOptions", "GraphSide", "SecondSavepoint", "side_of"]


@dataclass(frozen=True)
class GraphSide:
    """A graph plus the spec's descriptive node fields the hasher ignores (`kind`, `state`, `key_type`,
    `factory_class`): they are what tells two same-shaped operators apart."""

    graph: StreamGraph
    extras: dict[int, dict[str, Any]] = field(default_factory=dict)
    origin: str | None = None
    sql_state: dict[str, Any] | None = None  # `LoadedGraph.sql_state`: SQL operators' key and state row types

    def keyed(self, nid: int) -> bool:
        """Does the operator get a keyed state backend (can it read keyed state at all)? A keyBy input
        (`has_keyed_input`), or a planner's operator whose state key serializer the export recorded: a key-less
        aggregate, window or window join keys its state by the empty key behind a GLOBAL exchange (Flink sets the
        state key selector on the transformation, not only after a keyBy)."""
        if has_keyed_input(self.graph, nid):
            return True
        entry = (self.sql_state or {}).get(str(nid))
        return isinstance(entry, dict) and entry.get("key") is not None


def side_of(source: LoadedGraph | StreamGraph | GraphSide) -> GraphSide:
    """A graph already in memory as the gate's `GraphSide` (a location is read by `storage.check_inputs`)."""
    if isinstance(source, GraphSide):
        return source
    if isinstance(source, StreamGraph):
        return GraphSide(source)
    return GraphSide(source.graph, dict(source.extras), source.origin or None, source.sql_state)


@dataclass(frozen=True)
class CheckOptions:
    """How to judge, as the user chose it. `rescale_detail=False` leaves `operators[].rescale` null and
    `with_migration=False` leaves `migration[]` empty: a fleet scan needs the verdict and the bytes of thousands
    of jobs, not every subtask's key groups. `with_remedies=False` skips the pins and the remedied verdict."""

    hasher: str = DEFAULT_HASHER
    matching: str = DEFAULT_MATCHING
    flink_version: FlinkVersion = field(default_factory=lambda: FlinkVersion.parse(None))
    allow_non_restored_state: bool = False
    with_remedies: bool = True
    rescale_detail: bool = True
    with_migration: bool = True
    restore_path: RestorePath = RestorePath.SAVEPOINT  # by the Kubernetes operator's upgradeMode (upgrade_modes)


@dataclass(frozen=True)
class SecondSavepoint:
    """Another savepoint of the same job, for the state schema diff. `role` "new-job": the new job version wrote
    it (a staging run), so the checked savepoint is the baseline; "old": the job wrote it before its change, so
    it is the baseline and the checked savepoint the candidate."""

    metadata: CheckpointMetadata
    role: Literal["new-job", "old"]


@dataclass(frozen=True)
class CheckInputs:
    """`pointer`: the savepoint pointer Flink prints in its errors (`check.savepoint_pointer` when None).
    `flink_config`: the new job's configuration with every `-D` already applied (None: not given)."""

    savepoint: CheckpointMetadata
    graph: GraphSide
    options: CheckOptions = field(default_factory=CheckOptions)
    old_graph: GraphSide | None = None
    pointer: str | None = None
    second_savepoint: SecondSavepoint | None = None
    flink_config: FlinkConfig | None = None
    open_state: Opener = local_opener

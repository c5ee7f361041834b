"""The checks beside the restore simulation that read more than `_metadata`: a state schema diff against a
second savepoint of the job (`upgrade_gate.gate.state_schema_diff`) and the new Flink's view of the job's
configuration (`upgrade_gate.gate.config_rules`). `check_upgrade` calls `run` once and folds the result in:
anything here that Flink refuses makes the verdict RESTORE_FAILS with Flink's error, the rest are warnings.

Which savepoint is which: the *baseline* holds the state as the running job wrote it (what the upgrade
restores); the *candidate* was written by the new job version (a staging or test run from scratch), so its
serializer snapshots are the new job's serializers. `new_job_savepoint` names the candidate (the checked
savepoint is the baseline); `old_savepoint` names the baseline (the checked savepoint is the candidate: "would
this older savepoint still restore into the job that wrote the checked one?").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hashing.errors import InputError
from hashing.versions import FlinkVersion
from upgrade_gate.flink.metadata.model import CheckpointMetadata
from upgrade_gate.flink.simulation import Simulation
from upgrade_gate.flink.state_meta import read_state_schemas
from upgrade_gate.gate import config_rules
from upgrade_gate.gate.flink_config import FlinkConfig, read_flink_config
from upgrade_gate.gate.state_schema_diff import describe_diff, diff_schemas
from upgrade_gate.storage.savepoints import load_savepoint
from upgrade_gate.storage.state_files import state_stream_opener

__all__ = ["ExtraChecks", "run"]


@dataclass(frozen=True)
class ExtraChecks:
    """`errors`: Flink's errors for what it refuses (first one is the check's `flink_error`); `losses`: the
    states a refused schema change names (the `losses[]` shape); `schema_changes` / `config`: JSON rows."""

    errors: tuple[str, ...] = ()
    losses: tuple[dict[str, Any], ...] = ()
    warnings: tuple[str, ...] = ()
    schema_changes: tuple[dict[str, Any], ...] = ()
    config: tuple[dict[str, Any], ...] = ()

    @property
    def blocks(self) -> bool:
        return bool(self.errors)


def _schemas(metadata: CheckpointMetadata) -> Any:
    return read_state_schemas(metadata, state_stream_opener(), tolerant=True)


def _load(savepoint: str | CheckpointMetadata) -> CheckpointMetadata:
    return load_savepoint(savepoint) if isinstance(savepoint, str) else savepoint


def run(metadata: CheckpointMetadata, sim: Simulation, version: FlinkVersion, *,
        old_savepoint: str | CheckpointMetadata | None = None,
        new_job_savepoint: str | CheckpointMetadata | None = None,
        flink_config: str | FlinkConfig | None = None, settings: Sequence[tuple[str, str]] = ()) -> ExtraChecks:
    if old_savepoint is not None and new_job_savepoint is not None:
        raise InputError("give --old-savepoint or --new-job-savepoint, not both (see docs/guide.md, State schemas)")
    errors: list[str] = []
    losses: list[dict[str, Any]] = []
    warnings: list[str] = []
    config_rows: list[dict[str, Any]] = []
    config: FlinkConfig | None = None
    if flink_config is not None or settings:
        config = flink_config if isinstance(flink_config, FlinkConfig) else (
            read_flink_config(flink_config) if flink_config is not None else FlinkConfig("settings", ()))
        config = config.with_settings(settings, "-D / flinkConfiguration") if settings else config
        for f in config_rules.check_config(config, version):
            config_rows.append(f.to_json())
            if f.blocking:
                errors.append(f.flink_error or f.text)
            else:
                warnings.append(f"{f.text}; fix: {f.remedy}")
    backend = config_rules.backend_of(config)
    rows: list[dict[str, Any]] = []
    if old_savepoint is not None or new_job_savepoint is not None:
        if new_job_savepoint is not None:
            baseline, candidate = metadata, _load(new_job_savepoint)
            mapping = {r.old.operator_id_hex: r.pair.generated.hex() for r in
                       (sim.assignment.operators.values() if sim.assignment else ()) if r.old is not None}
        else:
            assert old_savepoint is not None
            baseline, candidate, mapping = _load(old_savepoint), metadata, {}
        diffs, notes = diff_schemas(_schemas(baseline), _schemas(candidate), mapping)
        warnings += notes
        sizes = {op.operator_id_hex: op.state_size for op in baseline.operator_states}
        for d in diffs:
            rows.append(d.to_json(backend))
            if d.blocking:
                errors.append(d.error(backend))
                losses.append({"operator_id": d.operator_id, "name": d.operator, "uid": None,
                               "bytes": sizes.get(d.operator_id, 0), "state_names": [d.state],
                               "reason": f"the restore fails: {describe_diff(d)}: Flink cannot migrate it "
                                         f"({d.error(backend)})"})
            else:
                warnings.append(f"{describe_diff(d)}: {d.compat.name.lower().replace('_', ' ')}"
                                f"{', Flink rewrites the state on restore' if d.compat.name == 'MIGRATION' else ''}")
    return ExtraChecks(tuple(errors), tuple(losses), tuple(warnings), tuple(rows), tuple(config_rows))

"""One repair, end to end: plan, check in memory, write, read back, check again.

Nothing is written unless the repaired metadata is `SAFE` for the new job in memory (`RepairPlan.repairable`).
After writing, the new `_metadata` is read back from the destination through the same reader every check uses,
compared byte for byte with what was written, and checked again; a destination that does not pass is
removed (it is ours: `savepoint_writer` refused to write into anything that existed).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hashing.versions import FlinkVersion
from upgrade_gate.flink.metadata import METADATA_FILE_NAME, CheckpointMetadata
from upgrade_gate.gate.check import CheckResult, savepoint_pointer
from upgrade_gate.gate.misrouting import GraphSide
from upgrade_gate.repair.plan import RepairPlan, plan_repair
from upgrade_gate.storage import savepoint_writer
from upgrade_gate.storage.check_inputs import check_upgrade
from upgrade_gate.storage.savepoint_writer import Progress, WriteResult
from upgrade_gate.storage.savepoints import read_metadata_blob
from upgrade_gate.storage.state_files import state_stream_opener
from upgrade_gate.vocabulary import Verdict

__all__ = ["RepairOutcome", "repair_savepoint", "source_dir_of"]


@dataclass(frozen=True)
class RepairOutcome:
    plan: RepairPlan
    written: WriteResult | None = None
    verified: CheckResult | None = None  # the check of what was read back from the destination

    def to_json(self) -> dict[str, Any]:
        doc = self.plan.to_json()
        w = self.written
        doc["written"] = None if w is None else {
            "destination": w.destination, "metadata_bytes": w.metadata_bytes, "state_files": len(w.copies),
            "state_file_bytes": w.copied_bytes, "external_files": list(w.external)}
        doc["verified_verdict"] = self.verified.verdict if self.verified is not None else None
        return doc


def source_dir_of(metadata: CheckpointMetadata) -> str:
    """The directory the savepoint's `_metadata` was read from (its relative handles' base)."""
    src = metadata.source
    return src[: -len(METADATA_FILE_NAME) - 1] if src.endswith("/" + METADATA_FILE_NAME) else src


def repair_savepoint(metadata: CheckpointMetadata, new: GraphSide, *, destination: str | None,
                     old: GraphSide | None = None, hasher: str = "v2", matching: str = "fixed",
                     flink_version: str | FlinkVersion | None = None, maps: tuple[str, ...] = (),
                     drops: tuple[str, ...] = (), max_parallelism: int | None = None,
                     progress: Progress | None = None, client: Any | None = None,
                     take_suggested: bool = False, rescale_progress: Callable[[str], None] | None = None
                     ) -> RepairOutcome:
    """Plan the repair; with a `destination`, write it there if the plan is repairable, then verify it. New state
    files (a max-parallelism rewrite) are made in a scratch directory that is removed before returning.

    `client`: the S3 client to read state files and write the new savepoint with (an Airflow connection's);
    default: the standard AWS environment. `take_suggested`: apply the options the plan finds missing (the new
    job's max parallelism) instead of stopping at them: for a caller whose user approved the offer that named
    them (the Airflow upgrade), never for the CLI, where the user types them."""
    if destination is not None:
        savepoint_writer.check_destination(destination, source_dir_of(metadata), client)  # before any work
    with tempfile.TemporaryDirectory(prefix="upgrade-gate-repair-") as scratch:
        out = _repair(metadata, new, destination, old, hasher, matching, flink_version, maps, drops,
                      max_parallelism, Path(scratch), progress, client, rescale_progress)
        if take_suggested and max_parallelism is None and "--max-parallelism" in out.plan.suggested:
            wanted = int(out.plan.suggested[out.plan.suggested.index("--max-parallelism") + 1])
            out = _repair(metadata, new, destination, old, hasher, matching, flink_version, maps, drops, wanted,
                          Path(scratch), progress, client, rescale_progress)
        return out


def _repair(metadata: CheckpointMetadata, new: GraphSide, destination: str | None, old: GraphSide | None,
            hasher: str, matching: str, flink_version: str | FlinkVersion | None, maps: tuple[str, ...],
            drops: tuple[str, ...], max_parallelism: int | None, scratch: Path,
            progress: Progress | None, client: Any | None,
            rescale_progress: Callable[[str], None] | None = None) -> RepairOutcome:
    version = flink_version if isinstance(flink_version, FlinkVersion) else FlinkVersion.parse(flink_version)
    pointer = savepoint_pointer(metadata)
    plan = plan_repair(metadata, new, old=old, hasher=hasher, matching=matching, flink_version=version,
                       pointer=pointer, maps=maps, drops=drops, max_parallelism=max_parallelism, workdir=scratch,
                       opener=state_stream_opener(client), rescale_progress=rescale_progress)
    if destination is None or not plan.repairable or plan.repaired is None:
        return RepairOutcome(plan)
    from upgrade_gate.flink.metadata.writer import serialize_metadata  # only a repair that writes needs it

    source_dir = source_dir_of(metadata)
    relocated, copies, external = savepoint_writer.relocate(plan.repaired, source_dir)
    data = serialize_metadata(relocated)
    written = savepoint_writer.write_savepoint(data, copies, destination, source_dir, external=external,
                                               progress=progress, client=client)
    try:
        verified = _verify(written, data, new, hasher, matching, version, client)
    except BaseException:
        savepoint_writer.remove_savepoint(written, client)
        raise
    if verified.verdict is not Verdict.SAFE:
        savepoint_writer.remove_savepoint(written, client)
    return RepairOutcome(plan, written, verified)


def _verify(written: WriteResult, data: bytes, new: GraphSide, hasher: str, matching: str,
            version: FlinkVersion, client: Any | None) -> CheckResult:
    blob = read_metadata_blob(written.destination, client=client)
    if blob.data != data:
        raise savepoint_writer.StorageError(f"{blob.source}: what was read back differs from what was written "
                                            f"({len(blob.data)} bytes read, {len(data)} written)")
    from upgrade_gate.flink.metadata import parse_metadata

    reread = parse_metadata(blob.data, blob.source, blob.base_dir)
    savepoint_writer.check_copies(written, client)
    return check_upgrade(reread, new, hasher=hasher, matching=matching, flink_version=version,
                         rescale_detail=False, with_migration=False, with_remedies=False)

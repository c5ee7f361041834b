"""The upgrade's repair step: when the stop-with-savepoint would not restore but `upgrade-gate repair` makes it
SAFE, write the repaired savepoint next to it and start the new job from that (docs/guide.md, "When the gate says
no"; in Airflow: the `repair_savepoint` option, behind the same approval as any upgrade).

The stop-with-savepoint itself is never touched: the repaired copy goes to `<savepoint>-repaired`, a location
that must not exist yet, and a rollback restarts the old version from the original. The destination is recorded
in the upgrade record before anything is written, so a retried task finds it: complete (it has `_metadata`), it
is read back and checked again instead of written twice; unfinished, it was this upgrade's own and is removed
and written again. The core does the rest (`upgrade_gate.repair.run`): plan, check in memory, write, read back,
check again.
"""

from __future__ import annotations

from typing import Any

from flink_gate.hooks.storage import SavepointStorageHook
from flink_gate.upgrade_records import UpgradeRecord
from upgrade_gate.repair.run import repair_savepoint
from upgrade_gate.storage import savepoint_writer
from upgrade_gate.storage.check_inputs import check_upgrade, read_side
from upgrade_gate.storage.objects import read_graph
from upgrade_gate.vocabulary import Verdict

__all__ = ["repaired_location", "repaired_savepoint"]


def repaired_location(savepoint: str) -> str:
    """Beside the stop-with-savepoint, in the job's savepoint folder (where the next check's `latest` looks)."""
    return savepoint.rstrip("/") + "-repaired"


def repaired_savepoint(p: dict[str, Any], record: UpgradeRecord, graph_path: str,
                       storage: SavepointStorageHook) -> tuple[str | None, str]:
    """(the repaired savepoint to start from, what was done) or (None, why not)."""
    source = record["savepoint"]
    dest = record.get("repaired") or repaired_location(source)
    client = storage.s3_client if storage.is_s3(source) else None
    new = read_side(read_graph(graph_path))
    options = {"hasher": p["hasher"], "matching": p["matching"], "flink_version": p.get("flink_version") or None}
    if record.get("repaired"):  # a retry: this upgrade already chose the destination
        try:
            metadata, _ = storage.load_savepoint(dest)
        except Exception:  # no complete savepoint there: ours, unfinished (savepoint_writer refuses to remove others)
            savepoint_writer.remove_unfinished(dest, client)
        else:
            again = check_upgrade(metadata, new, rescale_detail=False, with_migration=False, **options)
            if again.verdict is Verdict.SAFE:
                return dest, f"the repaired savepoint {dest} written by an earlier attempt, checked again: SAFE"
            return None, f"the repaired savepoint {dest} of an earlier attempt is {again.verdict} for the new graph"
    record.save(repaired=dest)
    metadata, _ = storage.load_savepoint(source)
    out = repair_savepoint(metadata, new, destination=dest, client=client, take_suggested=True, **options)
    plan = out.plan
    if out.written is None or out.verified is None or out.verified.verdict is not Verdict.SAFE:
        needs = [u.reason for u in plan.unresolved] + list(plan.refused)
        why = needs[0] if needs else f"the repaired savepoint would be {plan.after.verdict if plan.after else '?'}"
        return None, f"no repair makes {source} SAFE for the new graph: {why}"
    moved = ", ".join(f"{m.state.name or m.state.operator_id_hex} -> {m.node_name}" for m in plan.moves)
    what = [f"moved {moved}"] if moved else []
    if plan.max_parallelism is not None:
        what.append(f"keyed state rewritten for max parallelism {plan.max_parallelism}")
    return dest, f"repaired into {dest} ({'; '.join(what) or 'dropped by name'}), read back and checked: SAFE"

"""The rules on what the state *is*: serializers a new Flink misreads (Kryo 2 -> 5, `state_schema_rules`) and,
with a second savepoint of the job, every state whose serializers changed (`state_schema_diff`).

Which savepoint is which in the diff: the *baseline* holds the state as the running job wrote it (what the upgrade
restores); the *candidate* was written by the new job version (a staging or test run from scratch), so its
serializer snapshots are the new job's serializers (`inputs.SecondSavepoint.role`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from upgrade_gate.flink.assignment.load_validation import has_state
from upgrade_gate.flink.canonical.kryo_classes import kryo_written_classes
from upgrade_gate.flink.metadata.model import CheckpointMetadata, OperatorState
from upgrade_gate.flink.state_meta import OperatorSchemas, read_state_schemas
from upgrade_gate.gate.config_rules import backend_of
from upgrade_gate.gate.findings import Finding, Loss, Note, Refused, SavepointFacts, SchemaCompared, TypesNotCompared
from upgrade_gate.gate.rules import RuleContext, connector_versions
from upgrade_gate.gate.state_schema_diff import TtlContext, describe_diff, diff_schemas
from upgrade_gate.gate.state_schema_rules import (
    FIX,
    KryoMisread,
    crosses_kryo_upgrade,
    describe,
    kryo_misreads,
    nested_collections,
)

__all__ = ["kryo_upgrade_misreads", "renamed_schemas", "savepoint_schemas", "schema_diff", "state_types_not_compared"]


def savepoint_schemas(facts: SavepointFacts, ctx: RuleContext) -> tuple[OperatorSchemas, ...]:
    """`read_state_schemas` of the savepoint (tolerant, through the caller's opener), read at most once per check.

    The chain runs again on the remedied graph for the same savepoint (`verdict_with_remedies`), and the SQL state
    rule reads the same proxies; the state files are the same, so later readers reuse the first's proxies (kept on
    the `SavepointFacts` one check shares) instead of re-reading and re-parsing them (in a fleet check the second
    pass was 1 job in 6, each reading every proxy again: docs/performance.md, "Spark jobs")."""
    if facts.state_schemas is None:
        facts.state_schemas = read_state_schemas(facts.metadata, ctx.inputs.open_state, tolerant=True)
    return facts.state_schemas


def renamed_schemas(known: SavepointFacts, after: CheckpointMetadata) -> tuple[OperatorSchemas, ...] | None:
    """`after`'s schemas from those already read of `known.metadata`, when every operator of `after` holds the very
    subtask states of one of its operators (a repair's moves and whole-operator drops, `repair.rewrite.apply_plan`:
    the handles are shared, only the operator's id, name and uid change). The proxies are then the same streams,
    so `read_state_schemas` would read and parse the same bytes again; None when they were not read, or when a
    state was rewritten (a dropped part, new key groups): then it reads them."""
    before = known.metadata
    if known.state_schemas is None or after.source != before.source:
        return None
    by_hex = {s.operator_id: s for s in known.state_schemas}
    # id() of each subtask-state map -> its operator's schemas (None: nothing to read in it); `before` keeps them
    # alive for this call, so an id is not reused
    held = {id(op.subtask_states): by_hex.get(op.operator_id_hex) for op in before.operator_states}
    out = []
    for op in after.operator_states:
        key = id(op.subtask_states)
        if key not in held:
            return None
        schemas = held[key]
        if schemas is not None:
            out.append(dataclasses.replace(schemas, operator_id=op.operator_id_hex, name=op.name, uid=op.uid))
    return tuple(out)


def kryo_upgrade_misreads(ctx: RuleContext) -> Iterator[Finding]:
    """Crossing Flink 1.x -> 2.x, name every state Kryo 5 would restore corrupted.

    Reads the state handles' serialization proxies (only their first bytes) only when the upgrade crosses
    the Kryo 2 -> 5 line; otherwise yields nothing and reads nothing. Operators whose whole state earlier
    rules already found lost (no owner in the new job) are skipped: nothing restores them to be misread."""
    target = ctx.ids.flink_version
    if not crosses_kryo_upgrade(ctx.metadata, target.major):
        return
    lost = {s.operator_id_hex for s in ctx.found.lost_states}
    # tolerant: a state file we cannot parse is a warning on that operator, the rest is still judged
    schemas = tuple(op for op in savepoint_schemas(ctx.facts, ctx) if op.operator_id not in lost)
    by_id: dict[str, OperatorState] = {op.operator_id_hex: op for op in ctx.metadata.operator_states}
    blocking: dict[str, list[KryoMisread]] = {}
    for m in _with_written_classes(kryo_misreads(schemas), by_id, ctx):
        if m.blocking:
            blocking.setdefault(m.operator.operator_id, []).append(m)
        else:
            yield Note(f"operator {m.operator.uid or m.operator.name or m.operator.operator_id}: {describe(m)}: "
                       f"{m.why}")
    for op_id, found in blocking.items():
        op = by_id[op_id]
        names = tuple(dict.fromkeys(m.state.name for m in found))
        details = "; ".join(f"{describe(m)}: {m.why}" for m in found)
        yield Loss.of(op, op.name or op.uid, op.state_size,
                      f"restores CORRUPTED on Flink {target}, or the restore fails (savepoint written by Flink 1.x, "
                      f"Kryo 2 -> Kryo 5): {details}. Fix: {FIX}", names, orphaned=False, corrupted=True)
    for op in schemas:
        for note in op.incomplete:
            yield Note(f"operator {op.uid or op.name or op.operator_id}: state serializers not read ({note}); "
                       f"the check cannot tell whether Flink {target} reads this state correctly")


def _with_written_classes(misreads: list[KryoMisread], by_id: dict[str, OperatorState],
                          ctx: RuleContext) -> list[KryoMisread]:
    """The keyed states the snapshots alone let through, judged again by what Kryo wrote in their values (only
    those operators' streams are read, and only when such a state exists)."""
    open_keyed = {(m.operator.operator_id, m.state.name) for m in misreads
                  if not m.blocking and m.state.backend_type in ("KEY_VALUE", "KEY_VALUE_V2")}
    written: dict[tuple[str, str], set[str]] = {}
    for op_id in sorted({o for o, _ in open_keyed}):
        names = {n for o, n in open_keyed if o == op_id}
        for name, classes in kryo_written_classes(by_id[op_id], names, ctx.inputs.open_state,
                                                  ctx.metadata.source).items():
            written[(op_id, name)] = classes
    return [nested_collections(m, written.get((m.operator.operator_id, m.state.name), ())) for m in misreads]


def _schemas_of(metadata: CheckpointMetadata, ctx: RuleContext) -> tuple[OperatorSchemas, ...]:
    if metadata is ctx.metadata:
        return savepoint_schemas(ctx.facts, ctx)
    return tuple(read_state_schemas(metadata, ctx.inputs.open_state, tolerant=True))


def schema_diff(ctx: RuleContext) -> Iterator[Finding]:
    """Every state whose serializers differ between the baseline and the candidate; a change Flink cannot migrate
    refuses the restore with Flink's error for the new job's backend, the others are notes."""
    second = ctx.inputs.second_savepoint
    if second is None:
        return
    sim = ctx.sim
    if second.role == "new-job":
        baseline, candidate = ctx.metadata, second.metadata
        mapping = {r.old.operator_id_hex: r.pair.generated.hex() for r in
                   (sim.assignment.operators.values() if sim.assignment else ()) if r.old is not None}
    else:
        baseline, candidate, mapping = second.metadata, ctx.metadata, {}
    backend = backend_of(ctx.inputs.flink_config)
    # a TTL switch is judged by the new job's release (release_rules.TTL_RULES, recorded same-release restores)
    version = ctx.inputs.options.flink_version
    ttl = TtlContext(version, backend, baseline.version == version.metadata_version)
    diffs, notes = diff_schemas(_schemas_of(baseline, ctx), _schemas_of(candidate, ctx), mapping, ttl)
    yield from (Note(n) for n in notes)
    sizes = {op.operator_id_hex: op.state_size for op in baseline.operator_states}
    for d in diffs:
        yield SchemaCompared(d, backend)
        if d.blocking:
            yield Refused(d.error(backend), "state schema", d.operator_id)
            yield Loss(d.operator_id, d.operator, None, sizes.get(d.operator_id, 0),
                       f"the restore fails: {describe_diff(d)}: Flink cannot migrate it ({d.error(backend)})",
                       (d.state,), orphaned=False)
        else:
            yield Note(f"{describe_diff(d)}: {d.compat.name.lower().replace('_', ' ')}"
                       f"{', Flink rewrites the state on restore' if d.compat.name == 'MIGRATION' else ''}")


def state_types_not_compared(ctx: RuleContext) -> Iterator[Finding]:
    """Without a savepoint of the new job version the gate sees the old state's serializers only: a state whose
    type changed (a POJO field retyped, a row that gained a column) restores in the simulation and fails in Flink.
    Say so, with the cheapest way to compare (docs/guide.md, "State schemas"). SQL operators are compared from the
    exported graph's state rows (`rules.sql`), so they do not count."""
    if ctx.inputs.second_savepoint is not None or ctx.sim.assignment is None:
        return
    sql = ctx.side.sql_state or {}
    restored = [ctx.graph.by_id[nid].name for nid, r in sorted(ctx.sim.assignment.operators.items())
                if r.old is not None and has_state(r.old) and str(nid) not in sql]
    if restored:
        # connector states of a connector the gate does not know are the same gap: named here, in one note
        connectors = connector_versions.unknown_connectors(ctx.found.connector_versions)
        yield TypesNotCompared(tuple(restored))
        yield Note(f"state types not compared: {len(restored)} operator(s) restore state whose serializers were not "
                   f"compared with the new job's ({', '.join(restored[:5])}{', ...' if len(restored) > 5 else ''}); "
                   f"a changed state type that Flink refuses would not show here. Pass --new-job-savepoint: a "
                   f"savepoint the new job version wrote, e.g. from a short staging run (docs/guide.md, State "
                   f"schemas){'; ' + connectors if connectors else ''}")

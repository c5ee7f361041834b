"""Connector serializer versions: can the new job's connector read the split, enumerator and sink state the old
one wrote? (issue #33, docs/guide.md "Connector serializer versions")

A connector-only upgrade (a new Kafka, Kinesis, file or CDC connector release in the same job) keeps every operator
ID and every state name, so nothing else in the gate sees it; but the connector's `SimpleVersionedSerializer`s may
now write another version. The savepoint holds the version each split, enumerator checkpoint, writer state and
committable was written with (`upgrade_gate.flink.connector_state`; a committable's is nested inside Flink's own
CommittableCollectorSerializer, `upgrade_gate.flink.committables`); the version the new connector reads comes from
the new job's graph export (the node's `connector` field: the serializers' `getVersion()` read from its operator
factory) or, failing that, from a savepoint the new job version wrote (`--new-job-savepoint`).

* equal: nothing to say (a row in `serializer_versions[]`);
* the new reader is newer: a warning naming the operator, state, versions and connector: it must read the old
  version, which connectors normally do (a real restore of such an upgrade restores:
  tests/fixtures/savepoints/connector-versions/outcomes.json);
* the new reader is older (a connector downgrade): the restore fails at task start, as the recorded real restores
  of a source whose serializers, like Flink's connectors' (`FileSourceSplitSerializer`,
  `KafkaPartitionSplitSerializer`), refuse a version newer than their own show;
* no version known for the new connector: named as unknown, never called safe by default (without a second
  savepoint the "state types not compared" note names it: `unknown_connectors`, and the verdict reads
  "SAFE (state types not compared)").
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from hashing.errors import InputError
from upgrade_gate.flink.connector_state import ConnectorState, read_connector_versions
from upgrade_gate.gate.findings import ConnectorVersionCompared, Finding, Loss, Note, Refused
from upgrade_gate.gate.rules import RuleContext
from upgrade_gate.gate.state_roles import KAFKA_STARTING_OFFSETS

__all__ = ["EXPORT_KEYS", "RULE", "connector_serializer_versions", "unknown_connectors"]

RULE = "connector serializer version"
# the graph export's `connector` node field: which key holds the version of which state
EXPORT_KEYS: dict[ConnectorState, str] = {
    ConnectorState.SPLITS: "split_serializer",
    ConnectorState.ENUMERATOR: "enumerator_serializer",
    ConnectorState.WRITER_STATE: "writer_state_serializer",
    ConnectorState.COMMITTABLES: "committable_serializer",
}
PROOF = "tests/fixtures/savepoints/connector-versions/outcomes.json"


def _exported(ctx: RuleContext, nid: int) -> dict[str, Any] | None:
    """The node's `connector` field of the export, checked: bad input names the graph and the node."""
    raw = ctx.side.extras.get(nid, {}).get("connector")
    if raw is None:
        return None
    where = f"{ctx.side.origin or 'graph'}: node {nid}: connector"
    if not isinstance(raw, dict):
        raise InputError(f"{where} must be an object, got {type(raw).__name__}")
    for key, value in raw.items():
        if key == "class":
            if not isinstance(value, str):
                raise InputError(f"{where}.class must be a string")
        elif key == "starting_offsets":  # a KafkaSource's, for the consequence of a lost position (state_roles)
            if value is not None and value not in KAFKA_STARTING_OFFSETS:
                raise InputError(f"{where}.starting_offsets must be one of {', '.join(KAFKA_STARTING_OFFSETS)} or "
                                 f"null, got {value!r}")
        elif key in EXPORT_KEYS.values():
            if value is not None and (type(value) is not int or value < 0):
                raise InputError(f"{where}.{key} must be a non-negative integer or null, got {value!r}")
        else:
            raise InputError(f"{where}: unknown field {key!r}")
    return raw


def _from_new_job(ctx: RuleContext, restored: dict[str, int]) -> dict[tuple[str, ConnectorState], int]:
    """(old operator id, state) -> the version the new job wrote, from `--new-job-savepoint`."""
    second = ctx.inputs.second_savepoint
    if second is None or second.role != "new-job" or ctx.sim.assignment is None:
        return {}
    new_of_old = {r.old.operator_id_hex: r.pair.generated.hex() for r in ctx.sim.assignment.operators.values()
                  if r.old is not None and r.old.operator_id_hex in restored}
    old_of_new = {n: o for o, n in new_of_old.items()}
    out: dict[tuple[str, ConnectorState], int] = {}
    for w in read_connector_versions(second.metadata, ctx.inputs.open_state, set(old_of_new)):
        if w.versions and w.operator_id in old_of_new:
            out[(old_of_new[w.operator_id], w.state)] = max(w.versions)
    return out


def connector_serializer_versions(ctx: RuleContext) -> Iterator[Finding]:
    """Every connector state the new job restores, its written versions against the new connector's."""
    assignment = ctx.shown.assignment
    if assignment is None:
        return
    restored = {r.old.operator_id_hex: nid for nid, r in assignment.operators.items() if r.old is not None}
    written = read_connector_versions(ctx.metadata, ctx.inputs.open_state, set(restored),
                                      ctx.facts.connector_versions) if restored else ()
    if not written:
        return
    from_savepoint = _from_new_job(ctx, restored)
    unknown: list[ConnectorVersionCompared] = []
    for w in written:
        nid = restored[w.operator_id]
        exported = _exported(ctx, nid) or {}
        connector = exported.get("class")
        key = EXPORT_KEYS.get(w.state)
        reader, reader_from = (exported.get(key), "export") if key and exported.get(key) is not None else (None, None)
        if reader is None and (w.operator_id, w.state) in from_savepoint:
            reader, reader_from = from_savepoint[(w.operator_id, w.state)], "new-job savepoint"
        row = ConnectorVersionCompared(w, ctx.graph.by_id[nid].name, connector, reader, reader_from)
        yield row
        who = w.name or w.uid or w.operator_id
        if w.unread is not None:
            yield Note(f"operator {who}: {w.state} serializer versions not read ({w.unread})")
        elif reader is None and w.versions:
            unknown.append(row)
        elif row.outcome == "reader older":
            yield Refused(row.consequence, RULE, w.operator_id)
            yield Loss(w.operator_id, w.name, w.uid, 0, f"the restore fails: {row.consequence}", (w.state_name,),
                       orphaned=False)
        elif row.outcome == "reader newer":
            yield Note(f"operator {who}: {row.consequence}")
    if unknown and ctx.inputs.second_savepoint is not None:  # else the "state types not compared" note says it
        said = unknown_connectors(tuple(unknown))
        if said:
            yield Note(said)


def unknown_connectors(found: tuple[ConnectorVersionCompared, ...]) -> str | None:
    """The sentence naming connector states whose reader version nothing gave, or None."""
    unknown = [f"{c.written.name or c.written.uid or c.written.operator_id} ({c.written.state} "
               f"v{', v'.join(map(str, c.written.versions))})" for c in found if c.outcome == "unknown"]
    if not unknown:
        return None
    return (f"connector serializer versions not compared: {len(unknown)} connector state(s) of an unknown connector "
            f"({'; '.join(unknown[:5])}{'; ...' if len(unknown) > 5 else ''}): neither the graph export nor a "
            f"--new-job-savepoint says which version the new connector reads; a connector downgrade would fail the "
            f"restore at task start (docs/guide.md, Connector serializer versions)")

"""What the gate finds, as typed, frozen values that carry their own verdict.

Every rule (`upgrade_gate.gate.rules`) yields these; `upgrade_gate.gate.verdict.decide` turns them into the
check's verdict, the one place a verdict is made. A finding becomes JSON only through its own `to_json`, at the
edge (`CheckResult.to_json`). Adding a kind of finding is a class here with its `verdict`; adding a verdict is
`vocabulary.Verdict` plus the findings that carry it (docs/design.md, "The check pipeline").
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from hashing.frozen import fast_init
from upgrade_gate.flink.assignment.load_validation import has_state
from upgrade_gate.flink.connector_state import ConnectorState, WrittenVersions
from upgrade_gate.flink.metadata.model import CheckpointMetadata, OperatorState
from upgrade_gate.gate.annotations import SqlContext, SqlRemedy, StateRoles
from upgrade_gate.gate.config_rules import ConfigFinding
from upgrade_gate.gate.misrouting import Misrouted
from upgrade_gate.gate.state_schema_diff import StateDiff
from upgrade_gate.vocabulary import Verdict

__all__ = ["ConfigChecked", "ConnectorVersionCompared", "Finding", "Findings", "Loss", "MeaningChanged", "Misrouted",
           "Note", "Orphan", "PositionClaim", "Refused", "SavepointFacts", "SchemaCompared", "TypesNotCompared",
           "keyed_bytes", "state_names"]


def state_names(op: OperatorState) -> list[str]:
    """The names a person knows a snapshot's state by: declared operator-state names, plus the kinds."""
    if not op.has_state:  # most operators of a job (a check names the state of every one)
        return []
    names: set[str] = set()
    for s in op.subtask_states.values():
        if s.managed_keyed_state:
            names.add("keyed")
        if s.raw_keyed_state:
            names.add("raw keyed")
        for h in s.managed_operator_state:
            names.update(h.state_name_to_partition_offsets)
        for h in s.raw_operator_state:
            names.update(h.state_name_to_partition_offsets)
        if s.input_channel_state or s.result_subpartition_state:
            names.add("channel state")
    if op.coordinator_state is not None:
        names.add("coordinator")
    return sorted(names)


def keyed_bytes(op: OperatorState) -> int:
    """Bytes of keyed state (managed and raw) over all subtasks; a loop: asked of every restored operator."""
    total = 0
    for s in op.subtask_states.values():
        for h in s.managed_keyed_state:
            total += h.state_size
        for h in s.raw_keyed_state:
            total += h.state_size
    return total


@fast_init
@dataclass(frozen=True, slots=True)
class Loss:
    """State the new job will not have intact. `state`: the savepoint's snapshot, when the whole of it or a part
    (coordinator, keyed) is what is lost; `orphaned`: the whole snapshot is left without an owner, so a pin
    (`uid`/`setUidHash`) may route it back; partial losses (coordinator, an overwritten pair) and states a
    refused schema names are not routed. `corrupted`: the state is restored, but the new Flink reads its bytes
    wrong (`upgrade_gate.gate.state_schema_rules`)."""

    operator_id: str
    name: str | None
    uid: str | None
    nbytes: int
    reason: str
    names: tuple[str, ...]
    state: OperatorState | None = None
    orphaned: bool = True
    corrupted: bool = False
    sql: SqlContext | None = None  # `upgrade_gate.gate.annotations`, attached after the rule chain
    sql_remedy: SqlRemedy | None = None
    roles: StateRoles | None = None

    @classmethod
    def of(cls, op: OperatorState, name: str | None, nbytes: int, reason: str, names: Iterable[str] | None = None,
           *, orphaned: bool = True, corrupted: bool = False) -> Loss:
        """A loss of (part of) a savepoint snapshot; `names` default to all the snapshot's state names."""
        return cls(op.operator_id_hex, name, op.uid, nbytes, reason,
                   tuple(names if names is not None else state_names(op)), op, orphaned, corrupted)

    @property
    def verdict(self) -> Verdict:
        return Verdict.STATE_CORRUPTED if self.corrupted else Verdict.STATE_LOSS

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"operator_id": self.operator_id, "name": self.name, "uid": self.uid,
                               "bytes": self.nbytes, "state_names": list(self.names), "reason": self.reason}
        if self.corrupted:
            doc["corrupted"] = True
        if self.sql is not None:
            doc["sql"] = self.sql.to_json()
        if self.sql_remedy is not None:
            doc["sql_remedy"] = self.sql_remedy.to_json()
        if self.roles is not None:
            doc.update(self.roles.to_json())
        return doc


@fast_init
@dataclass(frozen=True, slots=True)
class Note:
    """A warning: something the evidence cannot settle, for a person to look at."""

    text: str
    verdict = Verdict.SAFE


@fast_init
@dataclass(frozen=True, slots=True)
class Orphan:
    """A snapshot left without an owner that an earlier, partial loss already named."""

    state: OperatorState
    verdict = Verdict.SAFE


@fast_init
@dataclass(frozen=True, slots=True)
class PositionClaim:
    """A uid-less operator holds a savepoint id by position only and should stop claiming it (a remedy
    gives it a uid). The first claim on a state wins."""

    state_id: bytes
    node_id: int
    verdict = Verdict.SAFE


@fast_init
@dataclass(frozen=True, slots=True)
class Refused:
    """Flink refuses to start the new job: `flink_error` is Flink's own message (the first refusal of a check is
    its `flink_error`). `rule`: which judgement found it (restore, config, state schema, SQL state)."""

    flink_error: str
    rule: str
    operator_id: str | None = None  # the state it refuses, where one is named
    verdict = Verdict.RESTORE_FAILS


@dataclass(frozen=True, slots=True)
class SchemaCompared:
    """One state whose serializers differ between the baseline and the candidate savepoint (a `schema_changes[]`
    row); it refuses the restore when Flink cannot migrate it (its `Refused` and `Loss` follow it)."""

    diff: StateDiff
    backend: str | None
    verdict = Verdict.SAFE

    def to_json(self) -> dict[str, Any]:
        return self.diff.to_json(self.backend)


@dataclass(frozen=True, slots=True)
class ConfigChecked:
    """One setting of the new job's configuration the new Flink refuses, renamed or removed (a `config[]` row);
    a refused one is followed by its `Refused`, the others by a `Note`."""

    finding: ConfigFinding
    verdict = Verdict.SAFE

    def to_json(self) -> dict[str, Any]:
        return self.finding.to_json()


@dataclass(frozen=True, slots=True)
class MeaningChanged:
    """A SQL operator kept its ID, so Flink restores its state, but the new query gives it another meaning (a group
    key, aggregate, window or top-N changed: `upgrade_gate.gate.sql_meaning`). `changes`: (aspect, old, new)."""

    state: OperatorState
    names: tuple[str, ...]
    writer: dict[str, Any]
    receiver: dict[str, Any]
    old: str
    new: str
    changes: tuple[tuple[str, str, str], ...]
    name: str | None
    sql: SqlContext | None = None
    roles: StateRoles | None = None
    verdict = Verdict.STATE_MISROUTED

    def to_json(self) -> dict[str, Any]:
        op, changes = self.state, [f"{asp}: {a} -> {b}" for asp, a, b in self.changes]
        head = (f"{'; '.join(changes)}: the operator kept its ID, so Flink restores the state and the new query "
                f"continues from values written under the old meaning")
        return {"operator_id": op.operator_id_hex, "name": self.name, "uid": op.uid, "bytes": op.state_size,
                "state_names": list(self.names), "writer": self.writer, "receiver": self.receiver,
                "counterpart": None, "detected_by": "sql-meaning",
                "evidence": [head, *changes, f"old: {self.old}", f"new: {self.new}"],
                "meaning": {"old": self.old, "new": self.new,
                            "changes": [{"aspect": asp, "old": a, "new": b} for asp, a, b in self.changes]},
                **({"sql": self.sql.to_json()} if self.sql is not None else {}),
                **({"role": self.roles.role, "state_roles": dict(self.roles.states)} if self.roles is not None else {})}


@dataclass(frozen=True, slots=True)
class TypesNotCompared:
    """Restored states whose serializers nothing compared with the new job's (no savepoint of the new job version,
    and not a SQL operator, whose state rows the exported graph carries): a change of a state's type that Flink
    refuses cannot be seen, so a SAFE says it compared less. `operators`: their names (or ids)."""

    operators: tuple[str, ...]
    verdict = Verdict.SAFE


@fast_init
@dataclass(frozen=True, slots=True)
class ConnectorVersionCompared:
    """One connector state the new job restores (splits, enumerator, writer state, committables), the serializer
    versions written in the savepoint against the version the new connector reads (a `serializer_versions[]` row,
    `rules.connector_versions`). `reader`: None when neither the export nor a new-job savepoint says; `connector`:
    the class the export names, None when not known."""

    written: WrittenVersions
    new_operator: str
    connector: str | None
    reader: int | None
    reader_from: str | None  # "export" | "new-job savepoint"
    verdict = Verdict.SAFE

    @property
    def outcome(self) -> str:
        """same | reader newer | reader older | unknown (no reader version) | not read (no header read)."""
        w = self.written
        if w.unread is not None or not w.versions:
            return "not read" if w.unread is not None else "same"
        if self.reader is None:
            return "unknown"
        if max(w.versions) > self.reader:
            return "reader older"
        return "reader newer" if min(w.versions) < self.reader else "same"

    @property
    def consequence(self) -> str:
        w, outcome = self.written, self.outcome
        who = f"'{w.name or w.uid or w.operator_id}'"
        by = f"the new connector ({self.connector or 'connector class unknown'})"
        versions = ", ".join(map(str, w.versions))
        # where a real restore failed (tests/fixtures/savepoints/connector-versions/outcomes.json): splits in
        # SourceOperator#open, the enumerator in SourceCoordinator#resetToCheckpoint on the coordinator's own thread
        where = ("shortly after the job starts (the JobManager restores the split enumerator on the coordinator's "
                 "thread, SourceCoordinator#resetToCheckpoint, while the tasks may already read records)"
                 if w.state is ConnectorState.ENUMERATOR else "at task start (SourceOperator#open)"
                 if w.state is ConnectorState.SPLITS else
                 "at task start (StatefulSinkWriterStateHandler reads it through the same SimpleVersionedListState "
                 "as a source's splits)" if w.state is ConnectorState.WRITER_STATE else
                 "at task start (CommitterOperator#initializeState reads each committable through Flink's "
                 "CommittableCollectorSerializer)" if w.state is ConnectorState.COMMITTABLES else "at task start")
        if outcome == "reader older":
            return (f"{w.state_name} ({w.state}) of {who} was written with serializer version {versions}; {by} "
                    f"reads version {self.reader} and cannot know a newer one: the restore fails {where} "
                    f"(a connector downgrade)")
        if outcome == "reader newer":
            return (f"{w.state_name} ({w.state}) of {who} was written with serializer version {versions}; {by} "
                    f"writes version {self.reader}: the new connector must read version {versions}; if it cannot, "
                    f"the restore fails {where}")
        if outcome == "unknown":
            return (f"{w.state_name} ({w.state}) of {who} was written with serializer version {versions} by a "
                    f"connector the gate does not know: whether the new connector reads it is not known")
        return ""

    def to_json(self) -> dict[str, Any]:
        w = self.written
        return {"operator_id": w.operator_id, "name": w.name, "uid": w.uid, "new_operator": self.new_operator,
                "state": str(w.state), "state_name": w.state_name, "written": list(w.versions),
                "elements": w.elements, "reader": self.reader, "reader_from": self.reader_from,
                "connector": self.connector, "outcome": self.outcome, "consequence": self.consequence or None}


Finding = (Loss | Note | Orphan | PositionClaim | Misrouted | Refused | SchemaCompared | ConfigChecked
           | MeaningChanged | TypesNotCompared | ConnectorVersionCompared)


@fast_init
@dataclass(frozen=True)
class Findings:
    """The findings of one check so far, in the order the rules found them, and the views the later rules and the
    outputs read. `items` holds every finding (what `decide` reads); the rest are that list sorted by kind, where
    a misrouted state found twice is one entry (`_merge`)."""

    items: tuple[Finding, ...] = ()
    losses: tuple[Loss, ...] = ()
    warnings: tuple[str, ...] = ()
    claims: tuple[PositionClaim, ...] = ()
    wrong_receiver: tuple[Misrouted, ...] = ()
    lost_states: tuple[OperatorState, ...] = ()  # orphaned snapshots, once each, in the order found
    refusals: tuple[Refused, ...] = ()
    schema_changes: tuple[SchemaCompared, ...] = ()
    config: tuple[ConfigChecked, ...] = ()
    meaning: tuple[MeaningChanged, ...] = ()
    connector_versions: tuple[ConnectorVersionCompared, ...] = ()

    @property
    def position_claims(self) -> dict[bytes, int]:
        out: dict[bytes, int] = {}
        for c in self.claims:
            out.setdefault(c.state_id, c.node_id)
        return out

    def lost_ids(self) -> set[bytes]:
        return {loss.state.operator_id for loss in self.losses if loss.state is not None}

    def with_(self, found: Iterable[Finding]) -> Findings:
        """These findings and `found`, sorted into the views; `self` itself when `found` is empty (most rules of
        most checks: the views are not rebuilt for nothing)."""
        found = tuple(found)
        if not found:
            return self
        items, losses, notes, claims = list(self.items), list(self.losses), list(self.warnings), list(self.claims)
        wrong, orphans, refusals = list(self.wrong_receiver), list(self.lost_states), list(self.refusals)
        schema, config, meaning = list(self.schema_changes), list(self.config), list(self.meaning)
        connectors = list(self.connector_versions)
        for f in found:
            items.append(f)
            if isinstance(f, Loss):
                losses.append(f)
                if f.orphaned and f.state is not None and f.state not in orphans:
                    orphans.append(f.state)
            elif isinstance(f, Orphan):
                if f.state not in orphans:
                    orphans.append(f.state)
            elif isinstance(f, Note):
                notes.append(f.text)
            elif isinstance(f, PositionClaim):
                claims.append(f)
            elif isinstance(f, Misrouted):
                _merge(wrong, f)
            elif isinstance(f, Refused):
                refusals.append(f)
            elif isinstance(f, SchemaCompared):
                schema.append(f)
            elif isinstance(f, ConfigChecked):
                config.append(f)
            elif isinstance(f, MeaningChanged):
                meaning.append(f)
            elif isinstance(f, ConnectorVersionCompared):
                connectors.append(f)
        return Findings(tuple(items), tuple(losses), tuple(notes), tuple(claims), tuple(wrong), tuple(orphans),
                        tuple(refusals), tuple(schema), tuple(config), tuple(meaning), tuple(connectors))


def _merge(wrong: list[Misrouted], m: Misrouted) -> None:
    """A state the keyed-input rule caught and the old-graph / savepoint-name evidence found again stays one
    entry carrying all the evidence and the later, better-informed writer and counterpart."""
    for i, k in enumerate(wrong):
        if k.state.operator_id == m.state.operator_id:
            wrong[i] = Misrouted(k.state, k.receiver, m.counterpart, m.counterpart_by, m.writer, m.detected_by,
                                 [*m.evidence, *k.evidence])
            return
    wrong.append(m)


class SavepointFacts:
    """What the rules ask of one parsed savepoint, worked out once per `check_upgrade` call.

    `check_upgrade` runs the rule chain once per graph (the new one, then the remedied one for
    `verdict_with_remedies`) against the same savepoint, and every pass asks which operators hold state
    (`present`); a fleet check asks it for thousands of jobs. `state_schemas` is the state-schema rules'
    slot for the proxies they read (`state_schema_rules.savepoint_schemas`: I/O, so read only when a rule
    needs them, and once for all passes and rules). `simulations` keeps each simulated restore of this savepoint
    (`check.restore_pass`): the repair plan of a blocked check (`repair.plan.plan_repair`, given the check's result)
    asks for the same ones again. (The passes themselves are kept by the check, `CheckResult.passes`: a pass holds
    these facts, so kept here they would make a reference cycle only the cyclic GC frees.)"""

    __slots__ = ("connector_versions", "metadata", "old_writers", "present", "simulations", "state_schemas")

    def __init__(self, metadata: CheckpointMetadata) -> None:
        self.metadata = metadata
        # savepoint operator ids that hold state
        self.present = frozenset(op.operator_id for op in metadata.operator_states if has_state(op))
        self.state_schemas: tuple[Any, ...] | None = None
        # savepoint operator id -> the old graph's node that wrote it (`sql_meaning.writers`): asked by the SQL meaning
        # rule, the SQL explanations and the state roles of one check, computed once
        self.old_writers: dict[bytes, int] | None = None
        self.simulations: dict[tuple[Any, ...], tuple[Any, ...]] = {}  # check._simulate
        # the connector serializer versions read per operator's state handles (`connector_state.VersionsMemo`)
        self.connector_versions: dict[int, tuple[Any, ...]] = {}

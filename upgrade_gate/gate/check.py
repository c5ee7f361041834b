"""`check`: will this savepoint restore into this job with zero state loss?

The one judgement entry point (the CLI, the Spark fleet check and the Airflow gate call exactly this):

    check(inputs: CheckInputs) -> CheckResult

`inputs` (`upgrade_gate.gate.inputs`) holds everything the check reads, parsed: the savepoint, the new graph and
optionally the old one (with it every state is traced to its writer, `upgrade_gate.gate.misrouting`; without it
the savepoint's own operator names, metadata v5+, are used and what cannot be verified is a warning), the
options (`hasher` "v2" = Flink's or "v3" = FLIP-411; `matching` "fixed" or "naive", V3 only; the Flink that will
run the new job), a second savepoint of the job for the state schema diff, and the new job's configuration. What
Flink refuses in the schema or the configuration makes the verdict RESTORE_FAILS with Flink's error;
`schema_changes[]` and `config[]` list every compared state and every configuration finding. Callers holding
locations build it with `upgrade_gate.storage.check_inputs.read_check_inputs` (or call its `check_upgrade`).

How it runs: `restore_pass` simulates the restore and runs `RESTORE_RULES`; remedies (uid / setUidHash pins) are
proposed from those findings and verified by a second `restore_pass` over the pinned graph; `CHECK_RULES` run
once; `verdict.decide` makes the verdict from the findings. docs/design.md, "The check pipeline".

`CheckResult.to_json()` is the `check` contract of docs/design.md (stable field names):
`verdict` (a `vocabulary.Verdict` name), `restore_succeeds`, `flink_error` (Flink's own message, or null),
`operators[]` ({operator_id, name, uid, matched_by: generated|alternative|none,
new_node_id, new_node_name, new_operator_id, state_bytes, lost_bytes, state_names, rescale{old_parallelism,
new_parallelism, old_max_parallelism, max_parallelism, subtasks[{index, key_groups, keyed_from[],
operator_state{name: {mode, elements, from}}, bytes}]}}), `losses[]` ({operator_id, name, bytes,
state_names, reason, corrupted?, role, consequence, state_roles{name: role}}), `remedies[]` ({operator_id, node_id,
node_name, action, matched_by, reason}),
`verdict_with_remedies`, `migration[]` ({node_id, name, uid, new_id, alternative_ids, v2_id,
savepoint_id, matched_by}), `warnings[]`, `misrouted[]` ({operator_id, name, uid, bytes, state_names,
writer{node_id?, name, uid, ...}, receiver{node_id, name, uid}, counterpart{node_id, name, uid, matched_by}|null,
detected_by: old-graph|savepoint|keyed-input|sql-meaning, evidence[], role, state_roles}), `old_graph` (its name or
null). `role` is the most consequential role of the states an entry names and `consequence` what losing them does to
the data (`gate.state_roles`).
SQL findings in `losses[]` / `misrouted[]` carry `sql{statement, operator, state, why}` (`gate.sql_explain`);
a SQL state that does not restore carries `sql_remedy{cause, keeps_state, text, apply, proven_by}`
(`gate.sql_remedies`: only remedies a real restore proved; otherwise "no remedy keeps this state" and what is
lost). `remedies[]` holds no pins for a planner's operators: SQL has no uid()/setUidHash().
`serializer_versions[]` ({operator_id, name, uid, new_operator, state: splits|enumerator|writer state|committables,
state_name, written[], elements, reader, reader_from: export|new-job savepoint|null, connector, outcome: same|reader
newer|reader older|unknown|not read, consequence}): every connector state the new job restores
(`rules.connector_versions`).
`rescale_detail=False` leaves `operators[].rescale` null and `with_migration=False` leaves
`migration[]` empty: a fleet scan needs the verdict and the bytes of thousands of jobs, not every
subtask's key groups (and its V2/V3 table comes from `fleet_ids`). Bad input raises `hashing.errors.InputError`.

Verdict precedence: `upgrade_gate.gate.verdict`. A misrouted state usually also appears in `losses` (its writer's
counterpart starts without it). Keyed state restored into an operator without keyed input (it took the id by
position) is misrouting, not loss.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any

from hashing.errors import InputError
from hashing.graph import StreamGraph
from hashing.operator_ids import compute_operator_ids
from upgrade_gate.flink.assignment.state_assignment import MATCHING_MODES
from upgrade_gate.flink.assignment.task_state_assignment import OperatorRestore
from upgrade_gate.flink.metadata.model import CheckpointMetadata
from upgrade_gate.flink.simulation import Simulation, simulate
from upgrade_gate.gate import remedies as remedies_mod
from upgrade_gate.gate import rules, sql_explain, sql_meaning, sql_remedies, state_roles
from upgrade_gate.gate.annotations import StateRoles
from upgrade_gate.gate.findings import Findings, SavepointFacts, TypesNotCompared, state_names
from upgrade_gate.gate.inputs import CheckInputs, GraphSide
from upgrade_gate.gate.rules import (
    Rule,
    RuleContext,
    autoscaler,
    config,
    connector_versions,
    misrouted,
    restore,
    restored_empty,
    sql,
    state_schema,
)
from upgrade_gate.gate.upgrade_modes import RestorePath
from upgrade_gate.gate.verdict import decide
from upgrade_gate.vocabulary import Verdict

__all__ = ["CHECK_RULES", "RESTORE_RULES", "CheckResult", "check", "restore_pass", "savepoint_pointer"]


def savepoint_pointer(metadata: CheckpointMetadata) -> str:
    """The savepoint pointer Flink prints: the qualified directory (`file:/abs/dir`, `s3://b/dir`)."""
    src = metadata.source or "_metadata"
    d = src.rsplit("/", 1)[0] if src.endswith("_metadata") and "/" in src else src
    if "://" in d:
        return d
    if metadata.base_dir is not None and "://" not in metadata.base_dir:  # the reader's realpath of that folder
        return "file:" + metadata.base_dir
    # `Path.resolve` is this realpath plus a pathlib object and a stat (for symlink loops, which a directory
    # the savepoint was just read from cannot hold)
    return "file:" + os.path.realpath(d)


Passes = dict[tuple[Any, ...], RuleContext]  # `_pass_key` -> the pass made with it


@dataclass(frozen=True)
class CheckResult:
    verdict: Verdict
    restore_succeeds: bool
    flink_error: str | None
    operators: tuple[dict[str, Any], ...]
    losses: tuple[dict[str, Any], ...]
    remedies: tuple[dict[str, Any], ...]
    verdict_with_remedies: Verdict | None
    migration: tuple[dict[str, Any], ...]
    warnings: tuple[str, ...]
    hasher: str
    matching: str
    flink_version: str
    savepoint: str
    graph_name: str
    simulation: Simulation | None = field(default=None, compare=False, repr=False)
    misrouted: tuple[dict[str, Any], ...] = ()
    old_graph_name: str | None = None
    schema_changes: tuple[dict[str, Any], ...] = ()  # rules.state_schema.schema_diff (--old/--new-job-savepoint)
    config: tuple[dict[str, Any], ...] = ()  # rules.config (--flink-config, -D)
    findings: Findings | None = field(default=None, compare=False, repr=False)  # typed, what the JSON was made of
    state_types_compared: bool = True  # False: restored states' serializers were compared with nothing
    serializer_versions: tuple[dict[str, Any], ...] = ()  # rules.connector_versions: connector state versions
    # the savepoint's facts (its simulations) and this check's restore passes: a repair plan of the same savepoint
    # reuses them (`restore_pass`)
    facts: SavepointFacts | None = field(default=None, compare=False, repr=False)
    passes: Passes = field(default_factory=dict, compare=False, repr=False)

    @property
    def verdict_text(self) -> str:
        """The verdict as people read it: a SAFE that compared less says so."""
        return (f"{self.verdict} (state types not compared)"
                if self.verdict is Verdict.SAFE and not self.state_types_compared else str(self.verdict))

    def to_json(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "restore_succeeds": self.restore_succeeds, "flink_error": self.flink_error,
                "hasher": self.hasher, "matching": self.matching, "flink_version": self.flink_version,
                "savepoint": self.savepoint, "graph": self.graph_name,
                "operators": list(self.operators), "losses": list(self.losses), "remedies": list(self.remedies),
                "verdict_with_remedies": self.verdict_with_remedies, "migration": list(self.migration),
                "warnings": list(self.warnings), "misrouted": list(self.misrouted), "old_graph": self.old_graph_name,
                "schema_changes": list(self.schema_changes), "config": list(self.config),
                "state_types_compared": self.state_types_compared,
                "serializer_versions": list(self.serializer_versions)}


def _rescale(r: OperatorRestore) -> dict[str, Any]:
    old = r.old
    subtasks = []
    for i, kg in enumerate(r.key_groups):
        keyed = r.keyed[i] if i < len(r.keyed) else []
        ops: dict[str, dict[str, Any]] = {}
        nbytes = sum(p.bytes for p in keyed)
        for group in (r.managed_operator, r.raw_operator):
            if i < len(group):
                nbytes += group[i].bytes()
                for p in group[i].pieces:
                    e = ops.setdefault(p.name, {"mode": p.mode.name, "elements": 0, "from": []})
                    e["elements"] += p.elements
                    if p.old_subtask not in e["from"]:
                        e["from"].append(p.old_subtask)
        subtasks.append({"index": i, "key_groups": list(kg),
                         "keyed_from": [{"old_subtask": p.old_subtask, "key_groups": list(p.key_groups),
                                         "bytes": p.bytes} for p in keyed],
                         "operator_state": ops, "bytes": nbytes})
    return {"old_parallelism": old.parallelism if old else None, "new_parallelism": r.vertex.parallelism,
            "old_max_parallelism": old.max_parallelism if old else None, "max_parallelism": r.max_parallelism,
            "finished_on_restore": r.finished_on_restore, "subtasks": subtasks}


def _operator_rows(metadata: CheckpointMetadata, graph: StreamGraph, sim: Simulation,
                   losses: list[dict[str, Any]], rescale_detail: bool = True) -> list[dict[str, Any]]:
    lost_by_id: dict[str, int] = {}
    for x in losses:
        lost_by_id[x["operator_id"]] = lost_by_id.get(x["operator_id"], 0) + x["bytes"]
    by_state: dict[bytes, OperatorRestore] = {}
    if sim.assignment is not None:
        for r in sim.assignment.operators.values():
            if r.old is not None:
                by_state[r.old.operator_id] = r
    rows = []
    for op in metadata.operator_states:  # one row per savepoint operator of every job a fleet checks
        r = by_state.get(op.operator_id)
        oid = op.operator_id_hex
        size = op.state_size
        lost = min(size, lost_by_id.get(oid, 0))
        if r is None:
            rows.append({"operator_id": oid, "name": op.name or None, "uid": op.uid or None, "matched_by": "none",
                         "new_node_id": None, "new_node_name": None, "new_operator_id": None, "state_bytes": size,
                         "lost_bytes": lost, "state_names": state_names(op), "rescale": None})
            continue
        node = graph.by_id[r.node_id]
        rows.append({"operator_id": oid, "name": op.name or node.name, "uid": op.uid or node.uid,
                     "matched_by": r.matched_by, "new_node_id": r.node_id, "new_node_name": node.name,
                     "new_operator_id": r.pair.generated.hex(), "state_bytes": size, "lost_bytes": lost,
                     "state_names": state_names(op), "rescale": _rescale(r) if rescale_detail else None})
    if sim.assignment is not None:
        for nid, r in sim.assignment.operators.items():
            if r.old is None:
                rows.append({"operator_id": r.pair.generated.hex(), "name": r.pair.name, "uid": r.pair.uid,
                             "matched_by": "none", "new_node_id": nid, "new_node_name": r.pair.name,
                             "new_operator_id": r.pair.generated.hex(),
                             "state_bytes": 0, "lost_bytes": 0, "state_names": [], "rescale": None,
                             "note": "new operator without savepoint state: starts empty"})
    return rows


def _migration(graph: StreamGraph, ids: Any, sim: Simulation) -> list[dict[str, Any]]:
    v2 = ids.v2_hashes
    rows = []
    for nid, pair in ids.pairs.items():
        r = sim.assignment.operators.get(nid) if sim.assignment else None
        rows.append({"node_id": nid, "name": pair.name, "uid": pair.uid, "new_id": pair.generated.hex(),
                     "alternative_ids": [a.hex() for a in pair.alternatives], "v2_id": v2[nid].hex(),
                     "savepoint_id": r.matched_id.hex() if r and r.matched_id else None,
                     # no assignment happens when the restore fails before it: say so, not "none"
                     "matched_by": r.matched_by if r else ("restore fails" if sim.failure else "none")})
    return rows


# the rules that depend on the graph, run again on the remedied graph, then those that read what no remedy changes
RESTORE_RULES: tuple[Rule, ...] = (*restore.RULES, state_schema.kryo_upgrade_misreads, misrouted.traced_to_writers,
                                   restored_empty.starts_empty)
CHECK_RULES: tuple[Rule, ...] = (restore.mixed_max_parallelism, config.configuration,
                                 autoscaler.orphaned_parallelism_overrides, state_schema.schema_diff,
                                 connector_versions.connector_serializer_versions, sql.sql_state_refused,
                                 sql.sql_meaning_changed,
                                 state_schema.state_types_not_compared)


EMPTY_START_CHECK_RULES: tuple[Rule, ...] = (  # nothing restored: only what fails or changes any start
    config.configuration, autoscaler.orphaned_parallelism_overrides)


def restore_pass(inputs: CheckInputs, side: GraphSide, facts: SavepointFacts, pointer: str,
                 passes: Passes | None = None) -> RuleContext:
    """Simulate the restore into `side` and run `RESTORE_RULES`; the context holds the ids, the simulation, what
    the user would see (`shown`: if Flink fails, what would match with --allowNonRestoredState, so losses and
    misrouting are still named) and the findings. `facts` are the savepoint's, shared by every pass of a check
    and by the repair plan of its result (`CheckResult.facts`), which keep each simulation (`_simulate`);
    `passes`: the passes already made of these facts (`CheckResult.passes`), where a pass over the same graph
    with the same options is found, and this one is kept (`_pass_key`)."""
    o = inputs.options
    key = _pass_key(inputs, side, pointer)
    made = passes.get(key) if passes is not None else None
    if made is not None and made.facts is facts and made.side == side and made.inputs.old_graph == inputs.old_graph:
        return made if made.inputs is inputs else dataclasses.replace(made, inputs=inputs)
    ids = compute_operator_ids(side.graph, o.hasher, o.flink_version)
    old_stream = inputs.old_graph.graph if inputs.old_graph is not None else None
    from_ha = o.restore_path is RestorePath.HA_METADATA
    allow = o.allow_non_restored_state and not from_ha  # restoreInitialCheckpointIfPresent passes false
    sim = _simulate(facts, side.graph, ids, pointer, allow, o.matching, old_stream, from_ha)
    shown = sim
    if sim.failure is not None and not allow:
        hypothetical = _simulate(facts, side.graph, ids, pointer, True, o.matching, old_stream, False)
        shown = hypothetical if hypothetical.failure is None else sim
    ctx = RuleContext.of(inputs, side, sim, shown, ids, facts)
    chain = restore.EMPTY_START_RULES if o.restore_path is RestorePath.EMPTY else RESTORE_RULES
    ctx = dataclasses.replace(ctx, found=rules.run(ctx, chain))
    if passes is not None:
        passes[key] = ctx
    return ctx


def _pass_key(inputs: CheckInputs, side: GraphSide, pointer: str) -> tuple[Any, ...]:
    """What a restore pass and `RESTORE_RULES` read besides the savepoint: the graphs (by identity; a hit is
    confirmed by comparing the sides, whose graphs the kept context holds alive), the options they read, the
    pointer Flink prints. The second savepoint and the configuration are read by `CHECK_RULES` only, but are part
    of the key all the same: a pass never answers for inputs it did not see."""
    o, old = inputs.options, inputs.old_graph
    return (id(side.graph), id(old.graph) if old is not None else None, id(inputs.second_savepoint),
            id(inputs.flink_config), pointer, o.hasher, o.matching, o.flink_version, o.allow_non_restored_state,
            o.restore_path)


def _simulate(facts: SavepointFacts, graph: StreamGraph, ids: Any, pointer: str, allow: bool, matching: str,
              old_graph: StreamGraph | None, from_ha: bool) -> Simulation:
    """`simulate` of the facts' savepoint, once per graph and options: a repair plan's pass without
    allowNonRestoredState asks again for the restore a check with it already simulated. The simulation is a value
    nobody changes; the kept entry holds its graphs, so the ids in the key stay theirs."""
    key = (id(graph), id(ids), id(old_graph), pointer, allow, matching, from_ha)
    made = facts.simulations.get(key)
    if made is None:
        sim = simulate(facts.metadata, graph, ids, pointer, allow_non_restored_state=allow, matching=matching,
                       old_graph=old_graph, from_ha_metadata=from_ha)
        made = facts.simulations[key] = (sim, graph, ids, old_graph)
    return made[0]


def check(inputs: CheckInputs, facts: SavepointFacts | None = None, *, verdict_only: bool = False) -> CheckResult:
    """Will `inputs.savepoint` restore into `inputs.graph` with zero state loss? Both rule chains, one verdict.
    `facts`: of `inputs.savepoint`, when the caller already knows some (the repair plan's re-check of the repaired
    savepoint gives it the proxies it already read, `rules.state_schema.renamed_schemas`). `verdict_only`: the
    verdict, refusal and findings as always, but no per-operator rows and no roles of lost state (neither changes a
    verdict): what a repair offer asks of the savepoint it would write, once per blocked job of a fleet."""
    o = inputs.options
    if o.matching not in MATCHING_MODES:
        raise InputError(f"--matching {o.matching!r}: expected one of {', '.join(MATCHING_MODES)}")
    metadata, side, old = inputs.savepoint, inputs.graph, inputs.old_graph
    graph = side.graph
    pointer = inputs.pointer or savepoint_pointer(metadata)
    if facts is None or facts.metadata is not metadata:
        facts = SavepointFacts(metadata)
    passes: Passes = {}
    ctx = restore_pass(inputs, side, facts, pointer, passes)
    found, ids, sim, shown = ctx.found, ctx.ids, ctx.sim, ctx.shown
    rows = [] if verdict_only else _operator_rows(metadata, graph, shown, [x.to_json() for x in found.losses],
                                                  o.rescale_detail)
    writers = {m.state.operator_id_hex: (m.writer or {}).get("name") for m in found.wrong_receiver}
    for row in rows:  # a v4 savepoint has no names: show the writer's, not the receiver's
        if writers.get(row["operator_id"]) and not any(op.name for op in metadata.operator_states
                                                     if op.operator_id_hex == row["operator_id"]):
            row["name"] = writers[row["operator_id"]]
    remedies: list[remedies_mod.Remedy] = []
    remedied: Findings | None = None
    empty_start = o.restore_path is RestorePath.EMPTY  # no remedy in the job helps: nothing is restored
    if o.with_remedies and not empty_start and (found.lost_states or found.wrong_receiver):
        remedies = remedies_mod.propose(list(found.lost_states), sim.assignment, graph, found.position_claims)
        remedies += remedies_mod.route_back(list(found.wrong_receiver), graph, remedies)
        if side.sql_state:  # a planner's operator takes no uid()/setUidHash(): its remedies are SQL (sql_remedies)
            remedies = [r for r in remedies if r.node_id is not None and str(r.node_id) not in side.sql_state]
        if any(r.action for r in remedies):
            fixed = GraphSide(remedies_mod.apply(graph, remedies), side.extras, side.origin, side.sql_state)
            remedied = restore_pass(inputs, fixed, facts, pointer, passes).found
    once = rules.run(dataclasses.replace(ctx, found=Findings()),
                     EMPTY_START_CHECK_RULES if empty_start else CHECK_RULES)
    found = found.with_(once.items)
    if not verdict_only:
        found = _with_roles(inputs, facts, shown, _in_query_terms(inputs, facts, shown, found))
    losses = [x.to_json() for x in found.losses]
    misrouted = [*(m.to_json(graph, state_names(m.state)) for m in found.wrong_receiver),
                 *(m.to_json() for m in found.meaning)]
    return CheckResult(
        verdict=decide(found.items), restore_succeeds=not found.refusals,
        flink_error=found.refusals[0].flink_error if found.refusals else None,
        operators=tuple(rows), losses=tuple(losses), remedies=tuple(r.to_json() for r in remedies),
        verdict_with_remedies=decide((*remedied.items, *once.items)) if remedied is not None else None,
        migration=tuple(_migration(graph, ids, sim)) if o.with_migration else (),
        warnings=found.warnings, hasher=o.hasher, matching=o.matching, flink_version=str(o.flink_version),
        savepoint=metadata.source, graph_name=graph.name, simulation=sim, misrouted=tuple(misrouted),
        old_graph_name=old.graph.name if old else None,
        schema_changes=tuple(x.to_json() for x in found.schema_changes),
        config=tuple(x.to_json() for x in found.config), findings=found,
        state_types_compared=not any(isinstance(f, TypesNotCompared) for f in found.items),
        serializer_versions=tuple(x.to_json() for x in found.connector_versions), facts=facts, passes=passes)


def _in_query_terms(inputs: CheckInputs, facts: SavepointFacts, shown: Simulation, found: Findings) -> Findings:
    """SQL findings in query terms, attached as values (`upgrade_gate.gate.annotations`): `sql` names the statement
    and operator (`sql_explain`); a SQL state that does not restore gets the remedy a real restore proved, if any
    (`sql_remedies`)."""
    side, old, o = inputs.graph, inputs.old_graph, inputs.options
    if not side.sql_state:
        return found
    metadata = inputs.savepoint
    writers = (sql_meaning.writers(facts, old, o.hasher, o.flink_version)
               if old is not None and old.sql_state else None)
    context = sql_explain.explainer(metadata, shown, side, old, writers)
    refused = {r.operator_id for r in found.refusals if r.rule == sql.SQL_STATE and r.operator_id}
    remedy = sql_remedies.proposer(side, old, writers, metadata, refused, o.hasher, o.flink_version)
    losses = []
    for loss in found.losses:
        explained = dataclasses.replace(loss, sql=context(loss.operator_id))
        losses.append(dataclasses.replace(explained, sql_remedy=remedy(explained.to_json())))
    wrong = [dataclasses.replace(m, sql=context(m.state.operator_id_hex)) for m in found.wrong_receiver]
    meaning = [dataclasses.replace(m, sql=context(m.state.operator_id_hex)) for m in found.meaning]
    swapped = {id(a): b for a, b in zip((*found.losses, *found.wrong_receiver, *found.meaning),
                                        (*losses, *wrong, *meaning), strict=True)}
    return dataclasses.replace(found, items=tuple(swapped.get(id(f), f) for f in found.items), losses=tuple(losses),
                               wrong_receiver=tuple(wrong), meaning=tuple(meaning))


def _with_roles(inputs: CheckInputs, facts: SavepointFacts, shown: Simulation, found: Findings) -> Findings:
    """Every lost or misrouted state with its role and what losing it does to the data (`state_roles`). Whether its
    operator is a source or a planner's operator is read from the node that receives the state in the new job, else
    from its writer in the old job (with `--old-graph`); else whether it is a source is not known, and its keyed state
    is SQL state when the new job is a SQL job."""
    side, old, o = inputs.graph, inputs.old_graph, inputs.options
    metadata = inputs.savepoint
    received = ({r.old.operator_id_hex: nid for nid, r in shown.assignment.operators.items() if r.old is not None}
                if shown.assignment is not None else {})
    by_hex = {op.operator_id_hex: op.operator_id for op in metadata.operator_states}
    stopped = state_roles.stopped_savepoint(metadata.properties.post_checkpoint_action
                                            if metadata.properties is not None else None)

    def node_of(oid: str) -> tuple[bool | None, bool]:
        nid = received.get(oid)
        if nid is not None and nid in side.graph.by_id:
            return not side.graph.in_edges[nid], bool(side.sql_state) and str(nid) in (side.sql_state or {})
        if old is None:  # a keyed state of a SQL job belongs to a planner's operator (its sources and sinks keep none)
            return None, bool(side.sql_state)
        w = sql_meaning.writers(facts, old, o.hasher, o.flink_version).get(by_hex.get(oid, b""))
        if w is None or w not in old.graph.by_id:
            return None, bool(side.sql_state)
        return not old.graph.in_edges[w], bool(old.sql_state) and str(w) in (old.sql_state or {})

    # a lost state re-keyed away from an operator of the new job (a source under a new uid): its connector
    moved = restored_empty.rekeyed(found.lost_states, shown, side.graph)

    def start_of(oid: str) -> state_roles.SourceStart | None:
        """The export's `connector` field of the node that takes the state, or that it was re-keyed away from, else
        of its writer in the old job: what decides where a source that lost its position starts."""
        nid = received.get(oid, moved.get(oid))
        connector = side.extras.get(nid, {}).get("connector") if nid is not None else None
        if connector is None and old is not None:
            w = sql_meaning.writers(facts, old, o.hasher, o.flink_version).get(by_hex.get(oid, b""))
            connector = old.extras.get(w, {}).get("connector") if w is not None else None
        if not isinstance(connector, dict):
            return None
        return state_roles.SourceStart(connector.get("class"), connector.get("starting_offsets"))

    def roles(oid: str, names: tuple[str, ...] | list[str], name: str | None) -> StateRoles:
        source, in_sql = node_of(oid)
        role, said, states = state_roles.describe(names, name or oid, source=source, sql=in_sql, stopped=stopped,
                                                  start=start_of(oid))
        return StateRoles(str(role), said, states)

    # a misrouted state's loss is named after its receiver (the row of the table), but the operator that goes
    # without it is its owner: the writer when the old graph or the savepoint names it, else its operator id
    owners = {m.state.operator_id_hex: (m.writer or {}).get("name") or m.state.name or m.state.operator_id_hex
              for m in found.wrong_receiver}
    losses = [dataclasses.replace(x, roles=roles(x.operator_id, x.names, owners.get(x.operator_id, x.name)))
              for x in found.losses]
    wrong = [dataclasses.replace(m, roles=roles(m.state.operator_id_hex, state_names(m.state), m.state.name))
             for m in found.wrong_receiver]
    meaning = [dataclasses.replace(m, roles=StateRoles(str(state_roles.Role.SQL_STATE), "", tuple(
        (n, str(state_roles.Role.SQL_STATE)) for n in m.names))) for m in found.meaning]
    return dataclasses.replace(found, losses=tuple(losses), wrong_receiver=tuple(wrong), meaning=tuple(meaning))

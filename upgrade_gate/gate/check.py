"""`check_upgrade`: will this savepoint restore into this job with zero state loss?

The one library entry point (the CLI, Spark jobs and Airflow DAGs call exactly this):

    check_upgrade(savepoint, graph, *, hasher="v2", matching="fixed", allow_non_restored_state=False,
                  flink_version=None, pointer=None, with_remedies=True, old_graph=None,
                  rescale_detail=True, with_migration=True) -> CheckResult

* `savepoint`: a path / file:// / s3:// name (read with `upgrade_gate.storage.savepoints.load_savepoint`) or a parsed
  `CheckpointMetadata`. `graph`: a `StreamGraph`, or a path to a graph spec / execution plan.
* `hasher`: "v2" (Flink) or "v3" (FLIP-411); `matching`: "fixed" or "naive" (V3 only; see
  `upgrade_gate.flink.assignment.state_assignment`). `flink_version`: the Flink that will run the new job
  (default 2.3). `pointer`: the savepoint pointer Flink prints in errors (default: derived from
  where the savepoint was read, as Flink prints it: `file:/abs/dir`, `s3://bucket/dir`).
* `old_graph`: the job graph that wrote the savepoint (same forms as `graph`). With it every state
  is traced to its writer and compared with its receiver (`upgrade_gate.gate.misrouting`); without it the
  savepoint's own operator names (metadata v5+) are used, and what cannot be verified is a warning.

`CheckResult.to_json()` is the `check` contract of design §4.2 (stable field names):
`verdict` (SAFE | STATE_LOSS | STATE_MISROUTED | RESTORE_FAILS), `restore_succeeds`, `flink_error` (Flink's own
message, or null), `operators[]` ({operator_id, name, uid, matched_by: generated|alternative|none,
new_node_id, new_node_name, new_operator_id, state_bytes, lost_bytes, state_names, rescale{old_parallelism,
new_parallelism, old_max_parallelism, max_parallelism, subtasks[{index, key_groups, keyed_from[],
operator_state{name: {mode, elements, from}}, bytes}]}}), `losses[]` ({operator_id, name, bytes,
state_names, reason}), `remedies[]` ({operator_id, node_id, node_name, action, matched_by, reason}),
`verdict_with_remedies`, `migration[]` ({node_id, name, uid, new_id, alternative_ids, v2_id,
savepoint_id, matched_by}), `warnings[]`, `misrouted[]` ({operator_id, name, uid, bytes, state_names,
writer{node_id?, name, uid, ...}, receiver{node_id, name, uid}, counterpart{node_id, name, uid, matched_by}|null,
detected_by: old-graph|savepoint|keyed-input, evidence[]}), `old_graph` (its name or null).
`rescale_detail=False` leaves `operators[].rescale` null and `with_migration=False` leaves
`migration[]` empty: a fleet scan needs the verdict and the bytes of thousands of jobs, not every
subtask's key groups (and its V2/V3 table comes from `fleet_ids`). Bad input raises `hashing.errors.InputError`.

Verdict precedence, worst first: RESTORE_FAILS > STATE_MISROUTED > STATE_LOSS > SAFE. Misrouting
outranks loss because it is silent twice over: the job runs, and an operator works on another
operator's data (a source reading the wrong topic's offsets). A misrouted state usually also
appears in `losses` (its writer's counterpart starts without it). Keyed state restored into an
operator without keyed input (it took the id by position) is misrouting: it used to be STATE_LOSS.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hashing.errors import InputError
from hashing.graph import StreamGraph
from hashing.operator_ids import compute_operator_ids
from hashing.versions import FlinkVersion
from upgrade_gate.flink.assignment.load_validation import has_state
from upgrade_gate.flink.assignment.state_assignment import MATCHING_MODES, OperatorRestore
from upgrade_gate.flink.metadata.model import CheckpointMetadata, OperatorState
from upgrade_gate.flink.simulation import Simulation, simulate
from upgrade_gate.gate import misrouting
from upgrade_gate.gate import remedies as remedies_mod
from upgrade_gate.storage.savepoints import load_savepoint

SAFE, STATE_LOSS, STATE_MISROUTED, RESTORE_FAILS = "SAFE", "STATE_LOSS", "STATE_MISROUTED", "RESTORE_FAILS"
VERDICTS = (RESTORE_FAILS, STATE_MISROUTED, STATE_LOSS, SAFE)  # worst first


def state_names(op: OperatorState) -> list[str]:
    names: set[str] = set()
    for s in op.subtask_states.values():
        if s.managed_keyed_state:
            names.add("keyed")
        if s.raw_keyed_state:
            names.add("raw keyed")
        for h in (*s.managed_operator_state, *s.raw_operator_state):
            names.update(h.state_name_to_partition_offsets)
        if s.input_channel_state or s.result_subpartition_state:
            names.add("channel state")
    if op.coordinator_state is not None:
        names.add("coordinator")
    return sorted(names)


def savepoint_pointer(metadata: CheckpointMetadata) -> str:
    """The savepoint pointer Flink prints: the qualified directory (`file:/abs/dir`, `s3://b/dir`)."""
    src = metadata.source or "_metadata"
    d = src.rsplit("/", 1)[0] if src.endswith("_metadata") and "/" in src else src
    if "://" in d:
        return d
    return "file:" + str(Path(d).resolve())


@dataclass(frozen=True)
class CheckResult:
    verdict: str
    restore_succeeds: bool
    flink_error: str | None
    operators: tuple[dict[str, Any], ...]
    losses: tuple[dict[str, Any], ...]
    remedies: tuple[dict[str, Any], ...]
    verdict_with_remedies: str | None
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

    def to_json(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "restore_succeeds": self.restore_succeeds, "flink_error": self.flink_error,
                "hasher": self.hasher, "matching": self.matching, "flink_version": self.flink_version,
                "savepoint": self.savepoint, "graph": self.graph_name,
                "operators": list(self.operators), "losses": list(self.losses), "remedies": list(self.remedies),
                "verdict_with_remedies": self.verdict_with_remedies, "migration": list(self.migration),
                "warnings": list(self.warnings), "misrouted": list(self.misrouted), "old_graph": self.old_graph_name}


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


def _keyed_bytes(op: OperatorState) -> int:
    return sum(h.state_size for s in op.subtask_states.values() for h in (*s.managed_keyed_state, *s.raw_keyed_state))


@dataclass
class _Findings:
    losses: list[dict[str, Any]]
    lost_states: list[OperatorState]
    misrouted: dict[bytes, int]  # keyed state id -> the node without keyed input that takes it
    warnings: list[str]
    wrong_receiver: list[misrouting.Misrouted] = field(default_factory=list)


def _loss(op: OperatorState, name: str | None, nbytes: int, reason: str, names: list[str] | None = None
          ) -> dict[str, Any]:
    return {"operator_id": op.operator_id_hex, "name": name, "uid": op.uid, "bytes": nbytes,
            "state_names": names if names is not None else state_names(op), "reason": reason}


def _findings(metadata: CheckpointMetadata, graph: StreamGraph, sim: Simulation, ids: Any, all_ids: set[bytes],
              claims: dict[bytes, list[int]]) -> _Findings:
    f = _Findings([], [], {}, [])
    if sim.failure is not None:
        for op in metadata.operator_states:
            if op.operator_id not in all_ids and has_state(op):
                f.losses.append(_loss(op, op.name, op.state_size,
                                      "not in the new program: the restore fails (state would be dropped with "
                                      "--allowNonRestoredState)"))
                f.lost_states.append(op)
        return f
    assert sim.load is not None and sim.assignment is not None
    for op in sim.load.dropped:
        f.losses.append(_loss(op, op.name, op.state_size, "not in the new program: dropped by --allowNonRestoredState"))
        f.lost_states.append(op)
    for op in sim.assignment.unconsumed.values():
        if has_state(op):
            f.losses.append(_loss(op, op.name, op.state_size, "validated but taken by no operator"))
            f.lost_states.append(op)
    for nid, r in sim.assignment.operators.items():
        node = graph.by_id[nid]
        if r.overwritten is not None:
            f.losses.append(_loss(r.overwritten, node.name, r.overwritten.state_size,
                                  "matched, then overwritten with an empty state by the next OperatorIDPair of the "
                                  "same operator (FLIP-411: one pair per legacy hasher)"))
        if r.old is None:
            continue
        if r.coordinator_restored is False and r.old.coordinator_state is not None:
            why = ("coordinator state is looked up by the generated id only; this state matched an alternative id"
                   if r.matched_by == "alternative" else "the new operator has no source coordinator")
            f.losses.append(_loss(r.old, node.name, r.old.coordinator_state.state_size, why, ["coordinator"]))
        if _keyed_bytes(r.old) and not remedies_mod.has_keyed_input(graph, nid):
            f.losses.append(_loss(r.old, node.name, _keyed_bytes(r.old),
                                  f"keyed state restored into '{node.name}', which has no keyed input: the operator "
                                  f"never reads it (it has this id by position)", ["keyed"]))
            f.misrouted[r.old.operator_id] = nid
            f.lost_states.append(r.old)
            f.wrong_receiver.append(misrouting.Misrouted(
                r.old, nid, None, "none", {"name": r.old.name, "uid": r.old.uid, "keyed_state": True}, "keyed-input",
                [f"the savepoint holds keyed state under {r.old.operator_id_hex}; '{node.name}' has that id by "
                 f"position but no keyed input, so it cannot be the operator that wrote it"]))
    present = {op.operator_id for op in metadata.operator_states if has_state(op)}
    for sid, nodes in claims.items():
        # A node takes its first alternative the savepoint holds, else its generated id: only nodes whose
        # *effective* id is the same compete (two setUidHash pins that swap ids back are deterministic).
        nodes = [n for n in nodes if _effective_id(ids.pairs[n], present) == sid]
        if sid in present and len(set(nodes)) > 1:
            names = ", ".join(f"'{graph.by_id[n].name}'" for n in sorted(set(nodes)))
            f.warnings.append(f"state {sid.hex()} is claimed by several operators ({names}); Flink visits job "
                              f"vertices in HashSet order, so which one gets it is not deterministic")
            op = next(o for o in metadata.operator_states if o.operator_id == sid)
            for n in set(nodes):  # a uid-less operator holding the id by position should stop claiming it
                if ids.pairs[n].generated == sid and graph.by_id[n].uid is None and len(set(nodes)) > 1:
                    f.misrouted.setdefault(sid, n)
            if op not in f.lost_states:
                f.lost_states.append(op)
            if not any(x["operator_id"] == sid.hex() for x in f.losses):
                f.losses.append(_loss(op, op.name, op.state_size, f"claimed by several operators ({names}); the "
                                                                  f"one Flink picks may not be the owner"))
    return f


def _effective_id(pair: Any, present: set[bytes]) -> bytes:
    return next((a for a in pair.alternatives if a in present), pair.generated)


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
    for op in metadata.operator_states:
        r = by_state.get(op.operator_id)
        node = graph.by_id[r.node_id] if r else None
        rows.append({"operator_id": op.operator_id_hex, "name": op.name or (node.name if node else None),
                     "uid": op.uid or (node.uid if node else None),
                     "matched_by": r.matched_by if r else "none", "new_node_id": r.node_id if r else None,
                     "new_node_name": node.name if node else None,
                     "new_operator_id": r.pair.generated.hex() if r else None,
                     "state_bytes": op.state_size,
                     "lost_bytes": min(op.state_size, lost_by_id.get(op.operator_id_hex, 0)),
                     "state_names": state_names(op), "rescale": _rescale(r) if r and rescale_detail else None})
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


def _evaluate(metadata: CheckpointMetadata, side: misrouting.GraphSide, hasher: str, matching: str,
              version: FlinkVersion, allow: bool, pointer: str, old: misrouting.GraphSide | None
              ) -> tuple[Any, Simulation, Simulation, _Findings, str]:
    """Simulate, collect losses and misrouting, and decide the verdict (precedence in the module docstring).

    Returns (ids, the simulation, the one to show: if Flink fails, what would match with
    --allowNonRestoredState, so losses and misrouting are still named, findings, verdict)."""
    graph = side.graph
    ids = compute_operator_ids(graph, hasher, version)
    sim = simulate(metadata, graph, ids, pointer, allow_non_restored_state=allow, matching=matching)
    shown = sim
    if sim.failure is not None and not allow:
        hypothetical = simulate(metadata, graph, ids, pointer, allow_non_restored_state=True, matching=matching)
        shown = hypothetical if hypothetical.failure is None else sim
    all_ids: set[bytes] = set()
    claims: dict[bytes, list[int]] = {}
    for pair in ids.pairs.values():
        for i in (pair.generated, *pair.alternatives):
            all_ids.add(i)
            claims.setdefault(i, []).append(pair.node_id)
    found = _findings(metadata, graph, sim, ids, all_ids, claims)
    if shown.assignment is not None:
        old_ids = []
        if old is not None:
            old_version = FlinkVersion.parse("1.20") if metadata.version <= 4 else version
            old_ids = [compute_operator_ids(old.graph, h, old_version) for h in dict.fromkeys(("v2", hasher))]
        wrong, notes = misrouting.find(metadata, shown.assignment, side, old, old_ids)
        found.warnings.extend(notes)
        by_id = {m.state.operator_id: m for m in found.wrong_receiver}
        for m in wrong:
            if m.state.operator_id in by_id:  # also caught by the keyed-input rule: one entry, all evidence
                k = by_id[m.state.operator_id]
                k.evidence = [*m.evidence, *k.evidence]
                k.counterpart, k.counterpart_by, k.writer, k.detected_by = (m.counterpart, m.counterpart_by,
                                                                            m.writer, m.detected_by)
            else:
                found.wrong_receiver.append(m)
    if sim.failure is not None:
        verdict = RESTORE_FAILS
    elif found.wrong_receiver:
        verdict = STATE_MISROUTED
    else:
        verdict = STATE_LOSS if found.losses else SAFE
    return ids, sim, shown, found, verdict


def check_upgrade(savepoint: str | CheckpointMetadata, graph: StreamGraph | str | Path, *, hasher: str = "v2",
                  matching: str = "fixed", allow_non_restored_state: bool = False,
                  flink_version: str | FlinkVersion | None = None, pointer: str | None = None,
                  with_remedies: bool = True,
                  old_graph: StreamGraph | misrouting.GraphSide | str | Path | None = None,
                  rescale_detail: bool = True, with_migration: bool = True) -> CheckResult:
    if matching not in MATCHING_MODES:
        raise InputError(f"--matching {matching!r}: expected one of {', '.join(MATCHING_MODES)}")
    metadata = load_savepoint(savepoint) if isinstance(savepoint, str) else savepoint
    side = misrouting.load_side(graph)
    graph = side.graph
    old = misrouting.old_graph_side(old_graph)
    version = flink_version if isinstance(flink_version, FlinkVersion) else FlinkVersion.parse(flink_version)
    pointer = pointer or savepoint_pointer(metadata)
    ids, sim, shown, found, verdict = _evaluate(metadata, side, hasher, matching, version, allow_non_restored_state,
                                                pointer, old)
    rows = _operator_rows(metadata, graph, shown, found.losses, rescale_detail)
    writers = {m.state.operator_id_hex: (m.writer or {}).get("name") for m in found.wrong_receiver}
    for row in rows:  # a v4 savepoint has no names: show the writer's, not the receiver's
        if writers.get(row["operator_id"]) and not any(o.name for o in metadata.operator_states
                                                     if o.operator_id_hex == row["operator_id"]):
            row["name"] = writers[row["operator_id"]]
    for v in sim.vertices:
        if v.mixed_max_parallelism:
            found.warnings.append(f"job vertex '{v.name}' chains operators whose own max parallelism differs from the "
                                  f"vertex's ({', '.join(v.mixed_max_parallelism)}): their state is snapshotted with "
                                  f"the vertex's max parallelism (FLINK-40113 kind); unchaining them later changes it")
    remedies: list[remedies_mod.Remedy] = []
    remedied = None
    if with_remedies and (found.lost_states or found.wrong_receiver):
        remedies = remedies_mod.propose(found.lost_states, sim.assignment, graph, found.misrouted)
        remedies += remedies_mod.route_back(found.wrong_receiver, graph, remedies)
        if any(r.action for r in remedies):
            fixed = misrouting.GraphSide(remedies_mod.apply(graph, remedies), side.extras, side.origin)
            remedied = _evaluate(metadata, fixed, hasher, matching, version, allow_non_restored_state, pointer, old)[4]
    misrouted = tuple(m.to_json(graph, state_names(m.state)) for m in found.wrong_receiver)
    return CheckResult(
        verdict=verdict, restore_succeeds=sim.failure is None,
        flink_error=sim.failure.message if sim.failure else None, operators=tuple(rows),
        losses=tuple(found.losses), remedies=tuple(r.to_json() for r in remedies), verdict_with_remedies=remedied,
        migration=tuple(_migration(graph, ids, sim)) if with_migration else (), warnings=tuple(found.warnings),
        hasher=hasher,
        matching=matching, flink_version=str(version), savepoint=metadata.source, graph_name=graph.name,
        simulation=sim, misrouted=misrouted, old_graph_name=old.graph.name if old else None)

"""`StateAssignmentOperation.assignStates`: which state each new subtask gets.

The per-vertex and per-operator records it fills (`TaskStateAssignment`, `OperatorRestore`) live in
`task_state_assignment`, which the checkers (`channel_state`, `finished_state`) read too.

Matching, per job vertex, over its `OperatorIDPair`s (tail first):

* `fixed` (Flink for V2, FLIP-411's intended V3): the first alternative id the savepoint holds
  state under wins, else the generated id (FLINK-13973, 1.14+); state is consumed (`remove`), so
  it is matched once. The task then sees it under the generated id.
* `naive` (V3 read literally: one pair per legacy hasher, `[user hash, V2]`, today's loop): every
  pair writes `perVertex[generated]`, so a later pair that finds nothing overwrites the state an
  earlier pair found with an empty one: the state loss FLIP-411 describes.

Then per vertex with state: max-parallelism preconditions (adopting the savepoint's value when the
vertex's was derived), key-group partitions, operator-state repartitioning, keyed state.
Coordinator state is looked up by the *generated* id only (`restoreStateToCoordinators`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from operator import attrgetter

from hashing.graph import Factory, StreamGraph
from hashing.job_graph import OperatorIDPair
from upgrade_gate.flink.assignment import errors
from upgrade_gate.flink.assignment.channel_state import ChannelTopology, check_channel_state
from upgrade_gate.flink.assignment.finished_state import validate_operators_finished_state
from upgrade_gate.flink.assignment.job import ExecutionJobVertex
from upgrade_gate.flink.assignment.keyed_state import key_group_partitions, reassign_keyed
from upgrade_gate.flink.assignment.load_validation import LoadResult
from upgrade_gate.flink.assignment.operator_state_repartitioner import NewSubtaskOperatorState, repartition_state
from upgrade_gate.flink.assignment.task_state_assignment import Handout, OperatorRestore, TaskStateAssignment
from upgrade_gate.flink.metadata.model import OperatorState

# OperatorRestore lives in task_state_assignment; it is re-exported here for the callers that take
# it together with the matching (`upgrade_gate.gate.check`, `upgrade_gate.gate.findings`).
__all__ = ["MATCHING_MODES", "Assignment", "OperatorRestore", "assign_states", "match_vertex"]

MATCHING_MODES = ("fixed", "naive")
_HAS_STATE = attrgetter("has_state")


def _pairs_of(pair: OperatorIDPair, matching: str, hasher: str) -> list[tuple[bytes, tuple[bytes, ...]]]:
    """The (generated, alternatives) entries Flink's loop sees for one operator."""
    if matching == "naive" and hasher == "v3":
        alts = pair.alternatives
        user, v2 = (alts[0], alts[1]) if len(alts) == 2 else (None, alts[0])
        return [(pair.generated, (user,) if user else ()), (pair.generated, (v2,))]
    return [(pair.generated, pair.alternatives)]


def match_vertex(vertex: ExecutionJobVertex, local: dict[bytes, OperatorState], matching: str,
                 hasher: str) -> list[OperatorRestore]:
    naive = matching == "naive" and hasher == "v3"  # the only case with several entries per pair
    out = []
    for pair in vertex.operators:
        r = OperatorRestore(pair, vertex, max_parallelism=vertex.max_parallelism)
        entries = _pairs_of(pair, matching, hasher) if naive else ((pair.generated, pair.alternatives),)
        for generated, alternatives in entries:
            chosen = generated
            for a in alternatives:  # the first alternative the savepoint holds
                if a in local:
                    chosen = a
                    break
            state = local.pop(chosen, None)
            if state is None:
                if r.old is not None:  # perVertex.put(generated, empty) overwrites what an earlier pair found
                    r.overwritten, r.old = r.old, None
                    r.matched_by, r.matched_id = "none", None
                continue
            r.old, r.matched_id = state, chosen
            r.matched_by = "generated" if chosen == generated else "alternative"
        out.append(r)
    return out


@dataclass
class Assignment:
    operators: dict[int, OperatorRestore]  # by node id
    vertices: list[ExecutionJobVertex]
    load: LoadResult
    unconsumed: dict[bytes, OperatorState]  # validated state no pair took (naive mode leftovers)


def _check_parallelism_preconditions(vertex: ExecutionJobVertex, states: list[OperatorState], maxp: int) -> int:
    for st in states:
        if st.max_parallelism < vertex.parallelism:
            raise errors.parallelism_above_restored_max(vertex.id_hex, st.max_parallelism, vertex.parallelism)
        if st.max_parallelism != maxp:
            if vertex.can_rescale_max_parallelism(st.max_parallelism):
                maxp = st.max_parallelism
            else:
                raise errors.max_parallelism_changed(vertex.name, st.max_parallelism, maxp)
    return maxp


def _repartition(st: OperatorState, kind: str, new_parallelism: int) -> list[NewSubtaskOperatorState]:
    """`repartition_state` of one kind of operator state, or [] when the operator holds none.

    Most operators hold none of a kind, and a fleet check asks this for every operator of every
    job: [] (nothing for any subtask) avoids building per-subtask lists that stay empty."""
    subtasks = st.subtask_states
    if not any(getattr(sub, kind) for sub in subtasks.values()):
        return []
    return repartition_state([list(getattr(subtasks[i], kind)) if i in subtasks else []
                              for i in range(st.parallelism)], st.parallelism, new_parallelism)


def _has_subtask_state(st: OperatorState) -> bool:
    """Any subtask with a handle of any kind (any() over a map: asked of every matched operator of every job)."""
    return any(map(_HAS_STATE, st.subtask_states.values()))


def _hand_out(old: OperatorState, partitions: list[tuple[int, int]], parallelism: int) -> Handout:
    """What each new subtask gets of `old`: its key-group ranges' keyed state (`reassign_keyed`) and its share of
    the managed and raw operator state (`repartition_state`)."""
    return (reassign_keyed(old, partitions), _repartition(old, "managed_operator_state", parallelism),
            _repartition(old, "raw_operator_state", parallelism))


def assign_states(load: LoadResult, vertices: list[ExecutionJobVertex], graph: StreamGraph,
                  matching: str = "fixed", hasher: str = "v2", old_graph: StreamGraph | None = None) -> Assignment:
    local = dict(load.kept)
    per_vertex = [match_vertex(v, local, matching, hasher) for v in vertices]
    validate_operators_finished_state(per_vertex, graph)
    channels = ChannelTopology.of(per_vertex, graph, old_graph)
    operators: dict[int, OperatorRestore] = {}
    for vertex, restores in zip(vertices, per_vertex, strict=True):
        task = TaskStateAssignment(vertex, restores)
        for r in restores:
            operators[r.node_id] = r
        if task.is_fully_finished:
            for r in restores:
                r.finished_on_restore = True
            continue
        if not task.has_non_finished_state:
            continue
        # `assignAttemptState`'s order: parallelism preconditions first, the channel-state check
        # (`reDistributeInputChannelStates` / `reDistributeResultSubpartitionStates`) after them
        maxp = _check_parallelism_preconditions(vertex, task.old_states, vertex.max_parallelism)
        check_channel_state(task, channels)
        partitions = key_group_partitions(maxp, vertex.parallelism)
        for r in restores:
            r.max_parallelism = maxp
            r.key_groups = partitions
            if r.old is None:
                continue
            if not _has_subtask_state(r.old):
                continue  # no handle of any kind (coordinator state aside): nothing to hand out
            r.hand_out_later(partial(_hand_out, r.old, partitions, vertex.parallelism))
    for r in operators.values():
        if r.old is not None and r.old.coordinator_state is not None:
            node = graph.by_id[r.node_id]
            r.coordinator_restored = r.matched_by == "generated" and node.factory is Factory.SOURCE
    channels.raise_task_failures()  # tasks fail only after every vertex was assigned
    return Assignment(operators, vertices, load, local)

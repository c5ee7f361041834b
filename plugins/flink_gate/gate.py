"""The gate's steps as plain functions over the core, so DAG tasks stay one-liners.

Each function is a pure function of its inputs (plus reads of storage), so a retried task gives
the same answer (docs/guarantees.md). The verdict itself is always the core's `upgrade_gate.gate.check`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from flink_gate.failures import BadInput
from hashing.errors import InputError
from hashing.operator_ids import compute_operator_ids
from hashing.readers import LoadedGraph
from hashing.versions import FlinkVersion
from upgrade_gate.flink.state_meta.streams import Opener
from upgrade_gate.gate import policy
from upgrade_gate.gate.check import check
from upgrade_gate.gate.flink_config import parse_settings
from upgrade_gate.gate.inputs import CheckOptions
from upgrade_gate.storage import discovery
from upgrade_gate.storage.check_inputs import read_check_inputs, read_side
from upgrade_gate.storage.objects import read_graph
from upgrade_gate.storage.waivers import read_policy_file

log = logging.getLogger(__name__)  # the task's log (Airflow 3 routes standard logging into it)
LATEST = "latest"
FROM_CATALOGUE = "catalogue"  # the `graph` param's default: <catalogue Variable>/<job>.json
FROM_JAR = "jar"  # export the graph from the `jar` param


def graph_location(graph: str | None, job: str, jar: str | None, catalogue: Callable[[], str]) -> str | None:
    """The graph URI to read, or None to export it from the jar.

    `catalogue` (the form's default) names the job's spec in the fleet catalogue (the Variable
    upgrade_gate_catalogue, the same folder `flink_fleet_scan` reads: one `<job>.json` per job), so a run
    triggered with the defaults checks the graph the fleet scan would; `jar` exports it from the jar."""
    graph = (graph or "").strip()
    if graph.lower() == FROM_JAR or (not graph and jar):
        if not jar:
            raise BadInput("graph is 'jar' but no jar is given: set `jar` (+ `main_class`) or a graph URI")
        return None
    if graph and graph.lower() != FROM_CATALOGUE:
        return graph
    root = catalogue().strip()
    if not root:
        raise BadInput("graph is 'catalogue' but the Airflow Variable upgrade_gate_catalogue is not set: give the "
                       "new graph's URI (spec or execution plan JSON) or `jar`")
    return f"{root.rstrip('/')}/{job}.json"


def savepoint_location(savepoint: str, job: str, savepoint_root: str, client: Any | None = None) -> str:
    """The URI to read: the one given; for "latest" the job's prefix under the savepoint root (the core
    then picks the newest complete savepoint below it); for "latest?job-id=<JobID>" the newest snapshot of
    that Flink job in a flat root (Flink's default state.savepoints.dir / state.checkpoints.dir layout);
    a discovery form (latest:DIR?job-id=..., flink-rest://HOST:PORT/JOB, k8s:FILE.yaml) is resolved to
    its snapshot directory here, listing S3 with `client` (the task's connection) when given."""
    savepoint = (savepoint or "").strip()
    head, _, query = savepoint.partition("?")
    if savepoint and head.lower() != LATEST:
        return _resolved(savepoint, client) if discovery.is_discovery(savepoint) else savepoint
    if not savepoint_root:
        raise BadInput("savepoint is 'latest' but no savepoint root is configured "
                         "(param savepoint_root or the Airflow Variable upgrade_gate_savepoint_root)")
    if query:  # a flat root: every job's savepoints side by side, told apart by JobID
        return _resolved(f"{discovery.LATEST}{savepoint_root.rstrip('/')}/?{query}", client)
    return f"{savepoint_root.rstrip('/')}/{job}/"


def _resolved(spec: str, client: Any | None) -> str:
    """A discovery form's snapshot; what was picked, and every warning (a skipped incomplete snapshot, a checkpoint
    that will not stay), go to the task log, as the CLI prints them on stderr."""
    found = discovery.resolve(spec, client=client)
    log.info("%s: %s", spec, found.how)
    for warning in found.warnings():
        log.warning("%s", warning)
    return found.location


def savepoint_summary(metadata: Any, source: str) -> dict[str, Any]:
    """What the check task logs of the savepoint it read: which `_metadata`, and how much state it holds."""
    ops = metadata.operator_states
    return {
        "metadata_uri": source,
        "checkpoint_id": int(metadata.checkpoint_id),
        "version": int(metadata.version),
        "operators": len(ops),
        "state_bytes": int(sum(o.state_size for o in ops)),
    }


def run_check(metadata: Any, graph: str | LoadedGraph, *, hasher: str, matching: str, allow_non_restored_state: bool,
              flink_version: str | None, settings: Iterable[str] = (), flink_config: str | None = None,
              opener: Opener | None = None) -> Any:
    """Simulate the restore with the core and return its `CheckResult` (the same call the CLI makes, with the
    CLI's `-D` pairs and `--flink-config`: the new job's configuration, judged by `upgrade_gate.gate.config_rules`).
    `graph`: read once by the caller and shared with `repair_offer`; `opener`: state files through the task's
    storage connection."""
    options = CheckOptions(hasher, matching, FlinkVersion.parse(flink_version or None), allow_non_restored_state)
    return check(read_check_inputs(metadata, graph, options=options, settings=tuple(parse_settings(settings)),
                                   flink_config=flink_config or None, open_state=opener))


def repair_offer(result: Any, metadata: Any, graph: str | LoadedGraph, *, hasher: str, matching: str,
                 flink_version: str | None, opener: Any, savepoint: str) -> dict[str, Any] | None:
    """The check's `repair` field (`upgrade_gate.repair.offer`, the CLI's and the fleet's): would `upgrade-gate
    repair` make this blocked upgrade SAFE, and the command. Planned in memory; nothing is written."""
    from upgrade_gate.repair.offer import repair_offer as offer
    side = read_side(graph)
    return offer(result, metadata, side, hasher=hasher, matching=matching, flink_version=flink_version or None,
                 opener=opener, savepoint=savepoint, graph=graph if isinstance(graph, str) else side.origin or "GRAPH")


def gate_decision(check: dict[str, Any], p: dict[str, Any], *, client: Any | None = None) -> policy.GateDecision:
    """May this run's upgrade go ahead (`upgrade_gate.gate.policy.decide`, as the CLI and the fleet scan decide)?
    The run's `waivers` (a path or `s3://` URI of the repository's `.upgrade-gate.yaml`, read through the storage
    layer with the task's S3 `client`) give the waivers and the threshold; its `accept_state_loss` adds waivers
    for this run only. A bad file fails the task as bad input, naming the file and the entry."""
    location = (p.get("waivers") or "").strip()
    try:
        found = read_policy_file(location, client=client) if location else None
    except InputError as exc:
        raise BadInput(str(exc)) from None
    return policy.decide(check, p.get("accept_state_loss"), waivers=found.waivers if found else (),
                         fail_on=(found.fail_on if found else None) or policy.DEFAULT_FAIL_ON,
                         job=p.get("job_name"))


def proceeds_by_repair(check: dict[str, Any], p: dict[str, Any]) -> bool:
    """A blocked upgrade the run still performs: it was asked to (`repair_savepoint`, upgrade mode) and the check's
    repair offer says a repaired savepoint makes it SAFE. The stop-with-savepoint is checked and repaired again
    before the new job starts (`flink_gate.repair_step`): this only decides whether to go on."""
    offer = check.get("repair") or {}
    return bool(p.get("repair_savepoint")) and p.get("mode") == "upgrade" and bool(offer.get("repairable"))


def graph_node_ids(graph_path: str, hasher: str, flink_version: str | None) -> dict[str, Any]:
    """Operator IDs of the new graph straight from the core (what the Spark job must agree with)."""
    return compute_operator_ids(read_graph(graph_path).graph, hasher, flink_version or None).to_json()


def write_json(path: Path, doc: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(doc, indent=2) + "\n")
    tmp.replace(path)


XCOM_CHECK_LIMIT = 256 << 10  # Airflow keeps XCom in its metadata database: a check is not a blob store


def for_xcom(check: dict[str, Any], full: str, limit: int = XCOM_CHECK_LIMIT) -> dict[str, Any]:
    """The check as the gate's downstream tasks need it, within `limit` bytes of JSON.

    A 5,000-operator job's check is ~3.7 MB, most of it per-subtask rescale detail the report shows and no task
    reads. Over the limit, that detail goes first, then every operator row that nothing at risk names (the
    alert, the policy and the approval read the losses, the misrouted and the at-risk rows); `trimmed` says
    what was left out and where the whole check is (`full`: the published report's check.json)."""
    if len(json.dumps(check)) <= limit:
        return check
    lean = {**check, "operators": [{**o, "rescale": None} if isinstance(o, dict) else o
                                   for o in check.get("operators", [])], "migration": []}
    trimmed = {"operators": len(check.get("operators", [])), "full": full, "rescale_detail": True,
               "migration": len(check.get("migration", []))}
    if len(json.dumps(lean)) > limit:
        named = {str(x.get("operator_id")) for key in ("losses", "misrouted") for x in check.get(key, [])
                 if isinstance(x, dict)}
        lean["operators"] = [o for o in lean["operators"] if isinstance(o, dict) and (
            str(o.get("operator_id")) in named or o.get("lost_bytes"))]
    trimmed["operators_kept"] = len(lean["operators"])
    return {**lean, "trimmed": trimmed}

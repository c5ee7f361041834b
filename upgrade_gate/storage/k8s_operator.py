"""Flink Kubernetes Operator resources (YAML from `kubectl get -o yaml`): where the savepoint is, what the job runs.

A `FlinkDeployment` or `FlinkSessionJob` records its savepoints in its status, and its spec holds what
the new job will run with; a `FlinkBlueGreenDeployment`'s `spec.template.spec` is the spec Green runs.
Field names follow the operator's CRD (`org.apache.flink.kubernetes.operator.
api.status.JobStatus`, `SavepointInfo`, `Savepoint`, `FlinkStateSnapshotStatus`; `api.spec.JobSpec`,
`FlinkStateSnapshotSpec`, `JobReference`, `FlinkStateSnapshotReference`):

* operator 1.10+ with snapshot resources: `FlinkStateSnapshot` objects (`spec.jobReference` names the
  resource, `status.state: COMPLETED`, `status.path`) and `status.jobStatus.upgradeSnapshotReference`
  (`path`, or `name` of a snapshot resource) for the savepoint taken when the job was suspended;
* older operators (and 1.10+ with snapshot resources disabled): `status.jobStatus.savepointInfo.
  lastSavepoint.location` (plus `savepointHistory`) and `status.jobStatus.upgradeSavepointPath`.

Which one is the job's state: a suspended job restarts from its upgrade savepoint, so that one wins;
a running job's newest completed snapshot holds the operators the next upgrade savepoint will hold
(same job, same graph), so the newest by timestamp wins, and the upgrade savepoint (the state the
running job started from) is the fallback. The operator writes `KUBERNETES_OPERATOR_LAST_STATE` as a
placeholder path for last-state upgrades (`AbstractJobReconciler.LAST_STATE_DUMMY_SP_PATH`); it is
not a savepoint and is skipped.

Bad input (not YAML, not an operator resource, no savepoint recorded) is a `StorageError`: exit 2 and
one line naming the file and the resource. The file is read by the shared hardened reader
(`hashing.documents`: a regular file only, bounded in size, values and depth, YAML without aliases,
anchors or tags), and every field is checked for its type before it is used or quoted (`_show`), so a
hand-edited or hostile resource is one line too, never a traceback.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from hashing.documents import Limits, parse_bytes, read_local_file
from hashing.errors import describe
from upgrade_gate.gate.upgrade_modes import UPGRADE_MODES
from upgrade_gate.storage.redact import one_line
from upgrade_gate.storage.s3 import StorageError, local_path

MAX_YAML_BYTES = 16 * 1024 * 1024
# `kubectl get -o yaml` of a deployment with a thousand snapshot resources is ~2 MB and ~15 levels deep
RESOURCE_LIMITS = Limits(max_bytes=MAX_YAML_BYTES, max_values=400_000, max_depth=64, max_number_chars=40)
RESOURCE_FILE = "Kubernetes resources (YAML)"
MAX_EPOCH_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z: a later "timestamp" is no time
JOB_KINDS = ("FlinkDeployment", "FlinkSessionJob", "FlinkBlueGreenDeployment")
BLUE_GREEN = "FlinkBlueGreenDeployment"  # operator 1.14+: spec.template.spec is a full FlinkDeployment spec
SNAPSHOT_KIND = "FlinkStateSnapshot"
LAST_STATE_PLACEHOLDER = "KUBERNETES_OPERATOR_LAST_STATE"
# JobReference.kind is serialised as the resource kind; the Java enum names appear in hand-written YAML
_KIND_ALIASES = {"FLINK_DEPLOYMENT": "FlinkDeployment", "FLINK_SESSION_JOB": "FlinkSessionJob"}
_VERSION = re.compile(r"v?(\d+)[_.](\d+)(?:[_.]\d+)?")  # v1_20 (the CRD's enum); v1alpha1 wrote 1.14.3


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One savepoint or checkpoint the resource's status (or a snapshot resource) points at."""

    path: str
    field: str  # where it was found, said to the user
    timestamp_ms: int | None = None


@dataclass(frozen=True, slots=True)
class JobSettings:
    """What the operator will run the job with, from the resource's spec."""

    resource: str  # "FlinkDeployment/orders" for messages
    jar_uri: str | None
    entry_class: str | None
    args: tuple[str, ...]
    parallelism: int | None
    flink_configuration: dict[str, str] = field(default_factory=dict)
    flink_version: str | None = None  # "1.20"; a FlinkSessionJob takes it from its FlinkDeployment
    allow_non_restored_state: bool = False
    upgrade_mode: str | None = None  # None: the operator's default, stateless (gate.upgrade_modes)

    @property
    def session_job(self) -> bool:
        return self.resource.startswith("FlinkSessionJob/")

    @property
    def blue_green(self) -> bool:
        """Green starts as a new FlinkDeployment from a savepoint of Blue: never through HA metadata."""
        return self.resource.startswith(f"{BLUE_GREEN}/")


@dataclass(frozen=True, slots=True)
class Resources:
    """The documents of one YAML file: the job resources and any FlinkStateSnapshot resources."""

    source: str
    jobs: tuple[dict[str, Any], ...]
    snapshots: tuple[dict[str, Any], ...]
    sessions: tuple[dict[str, Any], ...] = ()  # session-cluster FlinkDeployments (give session jobs their version)


def _yaml_documents(data: bytes, name: str) -> list[Any]:
    docs = parse_bytes(data, name, what=RESOURCE_FILE, limits=RESOURCE_LIMITS, error=StorageError, yaml_first=True,
                       multi=True)
    return [d for d in docs if d is not None]


def _show(value: Any, limit: int = 80) -> str:
    """A value from the file, for a one-line message: strings escaped and cut, anything else summarised."""
    return repr(one_line(value, limit)) if isinstance(value, str) else describe(value)


def _text(value: Any) -> str | None:
    """A string field, stripped; anything else is absent."""
    return value.strip() if isinstance(value, str) and value.strip() else None


def load_resources(name: str) -> Resources:
    """Every operator resource in a YAML file: one resource, several `---` documents, or a `kind: List`
    (what `kubectl get flinkdeployment,flinkstatesnapshot -o yaml` prints)."""
    return resources_from_items(load_items(name), name)


def parse_resources(data: bytes, name: str) -> Resources:
    """`load_resources` of a file's bytes (what the fuzz tests drive)."""
    return resources_from_items(parse_items(data, name), name)


def load_items(name: str) -> list[Any]:
    """The resources of a YAML file as written (a Blue/Green template not unwrapped): what `upgrade-gate apply`
    patches a live resource's spec with."""
    data = read_local_file(local_path(name), RESOURCE_LIMITS.max_bytes, name=name, what=RESOURCE_FILE,
                           error=StorageError)
    return parse_items(data, name)


def parse_items(data: bytes, name: str) -> list[Any]:
    """Every document of the file, a `kind: List`'s items in its place."""
    items: list[Any] = []
    for doc in _yaml_documents(data, name):
        if isinstance(doc, dict) and doc.get("kind") == "List" and isinstance(doc.get("items"), list):
            items.extend(doc["items"])
        else:
            items.append(doc)
    return items


def resources_from_items(items: list[Any], name: str) -> Resources:
    """The job, session-cluster and snapshot resources among `items`, however they were read: a YAML file
    (`load_resources`) or the live API (`upgrade_gate.storage.k8s_live`), so both choose the same savepoint and
    settings. `name` is what messages call the source."""
    jobs, snaps, sessions = [], [], []
    for item in items:
        if not isinstance(item, dict):
            continue
        if item.get("kind") == BLUE_GREEN:  # Green is a FlinkDeployment of the template: read it as one
            item = {**item, "spec": _dict(_dict(_dict(item.get("spec")).get("template")).get("spec"))}
        if item.get("kind") == "FlinkDeployment" and not _dict(item.get("spec")).get("job"):
            sessions.append(item)  # a session cluster: runs FlinkSessionJobs, is no job itself
        elif item.get("kind") in JOB_KINDS:
            jobs.append(item)
        elif item.get("kind") == SNAPSHOT_KIND:
            snaps.append(item)
    if not jobs:
        kinds = sorted({one_line(i.get("kind"), 40) for i in items if isinstance(i, dict)}) or ["nothing"]
        more = f" and {len(kinds) - 10} more" if len(kinds) > 10 else ""
        what = " (only a session cluster, without spec.job)" if sessions else ""
        raise StorageError(f"{name}: no FlinkDeployment or FlinkSessionJob with a job here "
                           f"(found {', '.join(kinds[:10])}{more}{what})")
    return Resources(name, tuple(jobs), tuple(snaps), tuple(sessions))


def _label(res: dict[str, Any]) -> str:
    name = _dict(res.get("metadata")).get("name")
    return f"{one_line(res.get('kind'), 40)}/{one_line(name, 80) if isinstance(name, str) and name else '?'}"


def pick_job(resources: Resources, name: str | None = None) -> dict[str, Any]:
    """The one job resource of the file (or the one called `name`); several without a name is ambiguous."""
    jobs = list(resources.jobs)
    if name:
        jobs = [j for j in jobs if _dict(j.get("metadata")).get("name") == name]
        if not jobs:
            have = ", ".join(_label(j) for j in resources.jobs[:10])
            raise StorageError(f"{resources.source}: no FlinkDeployment or FlinkSessionJob named {_show(name)} "
                               f"(the file holds {have})")
    if len(jobs) > 1:
        more = f" and {len(jobs) - 10} more" if len(jobs) > 10 else ""
        raise StorageError(f"{resources.source}: ambiguous, it holds several jobs "
                           f"({', '.join(_label(j) for j in jobs[:10])}{more}); name one (k8s:FILE#NAME)")
    return jobs[0]


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _ms(value: Any) -> int | None:
    """A timestamp as epoch milliseconds: the operator writes numbers (`Savepoint.timeStamp`) or
    strings (`JobStatus.startTime` as digits, `FlinkStateSnapshotStatus.resultTimestamp` as ISO-8601).
    Anything else, or a time before 1970 or after 9999, is no timestamp (None)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, float):
        ms = int(value) if math.isfinite(value) else None
    elif isinstance(value, int):
        ms = value
    elif isinstance(value, datetime):
        ms = _epoch_ms(value)
    elif isinstance(value, date):
        ms = _epoch_ms(datetime(value.year, value.month, value.day))
    elif isinstance(value, str):
        text = value.strip()
        if text.isdigit():
            ms = int(text) if len(text) <= 19 else None
        else:
            try:
                ms = _epoch_ms(datetime.fromisoformat(text.replace("Z", "+00:00")))
            except ValueError:
                ms = None
    else:
        ms = None
    return ms if ms is not None and 0 <= ms <= MAX_EPOCH_MS else None


def _epoch_ms(when: datetime) -> int | None:
    try:
        return int(when.timestamp() * 1000)
    except (OverflowError, OSError, ValueError):
        return None


def _usable(path: Any) -> bool:
    """A savepoint path: a non-empty one-line string that is not the operator's last-state placeholder."""
    return (isinstance(path, str) and bool(path.strip()) and path.strip() != LAST_STATE_PLACEHOLDER
            and len(path) <= 4096 and one_line(path.strip(), 4096) == path.strip())


def _snapshot_targets(snap: dict[str, Any], job: dict[str, Any]) -> bool:
    ref = _dict(_dict(snap.get("spec")).get("jobReference"))
    kind = _KIND_ALIASES.get(ref.get("kind"), ref.get("kind")) if isinstance(ref.get("kind"), str) else None
    meta, smeta = _dict(job.get("metadata")), _dict(snap.get("metadata"))
    namespace = ref.get("namespace") or smeta.get("namespace")
    return (kind == job.get("kind") and ref.get("name") == meta.get("name")
            and (not namespace or not meta.get("namespace") or namespace == meta.get("namespace")))


def _snapshot_path(snap: dict[str, Any]) -> str | None:
    """A snapshot resource's path: `status.path`, or for a savepoint declared with `alreadyExists: true`
    the `spec.savepoint.path` it was created with."""
    path = _dict(snap.get("status")).get("path")
    if not _usable(path):
        sp = _dict(_dict(snap.get("spec")).get("savepoint"))
        path = sp.get("path") if sp.get("alreadyExists") else None
    return path.strip() if _usable(path) else None


def snapshots_of(job: dict[str, Any], resources: Resources) -> tuple[list[Snapshot], list[Snapshot]]:
    """(newest-first completed snapshots of the running job, upgrade savepoints) found for `job`."""
    status = _dict(job.get("status"))
    job_status = _dict(status.get("jobStatus"))
    timed: list[Snapshot] = []
    info = _dict(job_status.get("savepointInfo"))
    last = _dict(info.get("lastSavepoint"))
    if _usable(last.get("location")):
        timed.append(Snapshot(last["location"].strip(), "status.jobStatus.savepointInfo.lastSavepoint",
                              _ms(last.get("timeStamp"))))
    history = info.get("savepointHistory")
    for i, sp in enumerate(history if isinstance(history, list) else ()):
        sp = _dict(sp)
        if _usable(sp.get("location")):
            timed.append(Snapshot(sp["location"].strip(), f"status.jobStatus.savepointInfo.savepointHistory[{i}]",
                                  _ms(sp.get("timeStamp"))))
    for snap in resources.snapshots:
        sst = _dict(snap.get("status"))
        path = _snapshot_path(snap)
        if _snapshot_targets(snap, job) and sst.get("state") == "COMPLETED" and path:
            kind = "checkpoint" if _dict(snap.get("spec")).get("checkpoint") is not None else "savepoint"
            timed.append(Snapshot(path, f"{_label(snap)} ({kind})", _ms(sst.get("resultTimestamp"))))
    timed.sort(key=lambda s: (s.timestamp_ms or 0), reverse=True)
    upgrade: list[Snapshot] = []
    ref = _dict(job_status.get("upgradeSnapshotReference"))
    if _usable(ref.get("path")):
        upgrade.append(Snapshot(ref["path"].strip(), "status.jobStatus.upgradeSnapshotReference.path"))
    elif _text(ref.get("name")):
        ref_name = ref["name"]
        match = [s for s in resources.snapshots if _dict(s.get("metadata")).get("name") == ref_name]
        path = _snapshot_path(match[0]) if match else None
        if path:
            upgrade.append(Snapshot(path, f"status.jobStatus.upgradeSnapshotReference -> {_label(match[0])}"))
        else:
            shown = one_line(ref_name, 80)
            raise StorageError(f"{resources.source}: {_label(job)} restores from FlinkStateSnapshot/{shown} "
                               f"(status.jobStatus.upgradeSnapshotReference), which is not in this file or has no "
                               f"path; add it: kubectl get {_label(job).split('/')[0].lower()}/"
                               f"{_label(job).split('/', 1)[1]},flinkstatesnapshot/{shown} -o yaml")
    if _usable(job_status.get("upgradeSavepointPath")):
        upgrade.append(Snapshot(job_status["upgradeSavepointPath"].strip(), "status.jobStatus.upgradeSavepointPath"))
    return timed, upgrade


def _suspended(job: dict[str, Any]) -> bool:
    spec_state = str(_dict(_dict(job.get("spec")).get("job")).get("state") or "").lower()
    lifecycle = str(_dict(job.get("status")).get("lifecycleState") or "").upper()
    return spec_state == "suspended" or lifecycle == "SUSPENDED"


def current_snapshot(resources: Resources, name: str | None = None) -> Snapshot:
    """The savepoint (or retained checkpoint) the job's next start would restore from, as the status says."""
    job = pick_job(resources, name)
    timed, upgrade = snapshots_of(job, resources)
    started = _ms(_dict(_dict(job.get("status")).get("jobStatus")).get("startTime"))
    if upgrade and (_suspended(job) or not timed):
        return upgrade[0]
    if timed:
        newest = timed[0]
        if upgrade and started is not None and newest.timestamp_ms is not None and newest.timestamp_ms < started:
            return upgrade[0]  # taken before the running job started: older than the state it restored
        return newest
    initial = _initial_state(job, resources)
    if initial is not None:
        return initial
    mode = str(_dict(_dict(job.get("spec")).get("job")).get("upgradeMode") or "")
    hint = (" (upgradeMode last-state restores from Flink's HA checkpoint, which the status does not name: "
            "pass that checkpoint with --savepoint)" if mode == "last-state" else "")
    raise StorageError(f"{resources.source}: {_label(job)} records no completed savepoint in its status "
                       f"(savepointInfo.lastSavepoint, upgradeSavepointPath, upgradeSnapshotReference) and the file "
                       f"holds no COMPLETED FlinkStateSnapshot for it{hint}; trigger one or pass --savepoint")


def _initial_state(job: dict[str, Any], resources: Resources) -> Snapshot | None:
    """A resource without any savepoint in its status (not deployed yet, or never snapshotted) starts
    from `spec.job.initialStateReference` (a path, or a FlinkStateSnapshot by name) or the older
    `spec.job.initialSavepointPath`."""
    job_spec = _dict(_dict(job.get("spec")).get("job"))
    ref = _dict(job_spec.get("initialStateReference"))
    if _usable(ref.get("path")):
        return Snapshot(ref["path"].strip(), "spec.job.initialStateReference.path")
    if _text(ref.get("name")):
        match = [s for s in resources.snapshots if _dict(s.get("metadata")).get("name") == ref["name"]]
        path = _snapshot_path(match[0]) if match else None
        if path:
            return Snapshot(path, f"spec.job.initialStateReference -> {_label(match[0])}")
    if _usable(job_spec.get("initialSavepointPath")):
        return Snapshot(job_spec["initialSavepointPath"].strip(), "spec.job.initialSavepointPath")
    return None


def flink_version_of(spec_value: Any) -> str | None:
    """`v1_20` (the operator's FlinkVersion enum) as `1.20`."""
    if not isinstance(spec_value, str | int | float) or isinstance(spec_value, bool):
        return None
    m = _VERSION.fullmatch(str(spec_value).strip()[:40])
    return f"{m.group(1)}.{m.group(2)}" if m else None


def _flatten(conf: Any, prefix: str = "") -> dict[str, str]:
    """`flinkConfiguration` as flat `key: value` strings; operator 1.11+ also accepts nested YAML (the reader
    bounds its depth, so this recursion is bounded too)."""
    out: dict[str, str] = {}
    for key, value in _dict(conf).items():
        full = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flatten(value, f"{full}."))
        elif isinstance(value, bool):
            out[full] = "true" if value else "false"
        elif isinstance(value, list):
            out[full] = ";".join(str(v) for v in value)
        elif value is not None:
            out[full] = str(value)
    return out


def job_settings(resources: Resources, name: str | None = None) -> JobSettings:
    """What the (new) spec runs: jar URI, entry class, args, parallelism, Flink configuration and version."""
    job = pick_job(resources, name)
    spec = _dict(job.get("spec"))
    job_spec = _dict(spec.get("job"))
    label = _label(job)
    raw_version = spec.get("flinkVersion")
    if raw_version is None and job.get("kind") == "FlinkSessionJob":  # the session cluster's version
        cluster = [d for d in resources.sessions
                   if _dict(d.get("metadata")).get("name") == spec.get("deploymentName")]
        raw_version = _dict(cluster[0].get("spec")).get("flinkVersion") if cluster else None
    version = flink_version_of(raw_version)
    if raw_version is not None and version is None:
        raise StorageError(f"{resources.source}: {label}: spec.flinkVersion {_show(raw_version)} is not a Flink "
                           f"version (expected e.g. v1_20)")
    conf = _flatten(spec.get("flinkConfiguration"))
    par = job_spec.get("parallelism")
    if par in (None, 0) and conf.get("parallelism.default"):
        par = conf["parallelism.default"]
    parallelism = _parallelism(par, f"{resources.source}: {label}: spec.job.parallelism")
    args = job_spec.get("args") or []
    if not isinstance(args, list) or not all(isinstance(a, str | int | float) for a in args):
        raise StorageError(f"{resources.source}: {label}: spec.job.args must be a list of strings")
    strings = {}
    for key in ("jarURI", "entryClass", "upgradeMode"):
        value = job_spec.get(key)
        if value is not None and not isinstance(value, str):
            raise StorageError(f"{resources.source}: {label}: spec.job.{key} is {_show(value)}, not a string")
        strings[key] = value
    if strings["upgradeMode"] is not None and strings["upgradeMode"] not in UPGRADE_MODES:
        raise StorageError(f"{resources.source}: {label}: spec.job.upgradeMode {_show(strings['upgradeMode'])} is not "
                           f"one of {', '.join(UPGRADE_MODES)}")
    return JobSettings(resource=label, jar_uri=strings["jarURI"], entry_class=strings["entryClass"],
                       args=tuple(str(a) for a in args), parallelism=parallelism, flink_configuration=conf,
                       flink_version=version, allow_non_restored_state=job_spec.get("allowNonRestoredState") is True,
                       upgrade_mode=strings["upgradeMode"])


def _parallelism(value: Any, field: str) -> int | None:
    """`spec.job.parallelism` (or `parallelism.default`): a positive int below Flink's 32768-task limit, or unset."""
    if value in (None, 0, "0"):
        return None
    text = value.strip() if isinstance(value, str) else value
    if type(text) is int:
        number = text
    elif isinstance(text, str) and text.isdigit() and len(text) <= 9:
        number = int(text)
    else:
        raise StorageError(f"{field} {_show(value)} is not a number")
    if not 1 <= number <= 32768:
        raise StorageError(f"{field} {_show(value)} must be between 1 and 32768")
    return number

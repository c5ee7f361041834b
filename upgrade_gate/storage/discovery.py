"""Savepoint discovery where Flink and the Kubernetes operator put savepoints (read-only).

`--savepoint` takes a location (a path, `file://`, `s3://`: read by `upgrade_gate.storage.savepoints`)
or one of three discovery forms, each resolved to one snapshot directory before anything is read:

* `latest:<dir>?job-id=<hex>`: a flat `state.savepoints.dir` and/or `state.checkpoints.dir`, where
  Flink writes every job's savepoints as `<dir>/savepoint-<first 6 hex of the JobID>-<12 hex>`
  (`AbstractFsCheckpointStorageAccess#createSavepointDirectory`) and retained checkpoints as
  `<dir>/<32-hex JobID>/chk-<n>` (`FsCheckpointStorageAccess`). The newest complete snapshot of that
  job is chosen. Without `job-id`, or when the id's first 6 hex digits are shared by several jobs, a
  directory holding more than one job is refused with the candidates listed. `kind=savepoint` or
  `kind=checkpoint` restricts the search to one of the two layouts. DIR may also be one job's own
  checkpoint folder (`<state.checkpoints.dir>/<JobID>`, holding `chk-<n>/`, `shared/`, `taskowned/`):
  `latest:DIR` then picks its latest complete retained checkpoint, what a restart or the Kubernetes
  operator's `last-state` upgrade restores. Checkpoints of one job are ordered by their number (Flink's
  checkpoint counter), not by file times, which copies and uploads do not keep.
* `flink-rest://host:port/<job name or JobID>` (`flink-rest+https://` for TLS; `user:password@` for
  basic auth): Flink's REST API. `/jobs/overview` finds the job, `/jobs/<id>/checkpoints` gives
  `latest.savepoint.external_path` and `latest.completed.external_path` (Flink's
  `CheckpointingStatistics`); the one with the higher checkpoint id (savepoints and checkpoints share
  one counter) is chosen, unless `?kind=savepoint` or `?kind=checkpoint` asks for one of them.
* `k8s:<file.yaml>[#name]`: a `FlinkDeployment` / `FlinkSessionJob` as `kubectl get -o yaml` prints
  it (optionally with its `FlinkStateSnapshot` resources): the savepoint its status records
  (`upgrade_gate.storage.k8s_operator`).
* `kube://[context@]namespace/kind/name`: the same resource read from the live Kubernetes API with its
  namespace's `FlinkStateSnapshot`s (`upgrade_gate.storage.k8s_live`), chosen by the same code.

Every answer says on one line which snapshot was chosen and why (`Found.how`), so a user sees it
before the verdict. Errors are `StorageError`s: exit 2, one line naming the location.

A flat directory's newest snapshot may still be being written: `load` then reads the newest *complete*
one and names the newer ones it skipped (`Found.skipped`). A JobManager's answers are read like any
document from outside (`upgrade_gate.storage.remote`: bounded size, depth and time, credentials only for
the host they were given for, never in a message), and every value used from them (job id, checkpoint id,
start time, path) is checked for type and range, so a hostile or broken server is one line naming the
server and the field.
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlparse

from hashing.errors import describe
from upgrade_gate.flink.metadata import METADATA_FILE_NAME, CheckpointMetadata
from upgrade_gate.storage import k8s_live, k8s_operator, remote
from upgrade_gate.storage.redact import one_line, redact
from upgrade_gate.storage.s3 import (
    Deadline,
    StorageError,
    head_object,
    is_s3,
    local_path,
    s3_client,
    s3_error,
    split_s3,
)
from upgrade_gate.storage.savepoints import (
    MAX_INCOMPLETE_SKIPPED,
    MAX_METADATA_BYTES,
    SHOWN_CANDIDATES,
    Skipped,
    first_complete,
    metadata_listing,
    read_metadata_blob,
)
from upgrade_gate.storage.watchdog import guard_boto_client

LATEST = "latest:"
FLINK_REST = ("flink-rest://", "flink-rest+https://")
K8S = "k8s:"
KUBE = k8s_live.KUBE
KINDS = ("savepoint", "checkpoint")
MAX_REST_BYTES = remote.MAX_ANSWER_BYTES
MAX_POINTER_CHARS = 4096  # a savepoint path; Flink's own are ~100 characters
JAVA_LONG = 2**63 - 1
REST = "Flink's REST API"
# Flink's placeholder for a checkpoint that has no external pointer (CheckpointStatsTracker / the web UI)
_NOT_ADDRESSABLE = "<checkpoint-not-externally-addressable>"
_SAVEPOINT_NAME = re.compile(r"savepoint-([0-9a-f]{6})-[0-9a-f]{12}")
_JOB_ID = re.compile(r"[0-9a-f]{32}")
_CHECKPOINT_NAME = re.compile(r"chk-(\d+)")
_HEX = re.compile(r"[0-9a-f]{6,32}")
TERMINAL = ("FINISHED", "CANCELED", "FAILED", "SUSPENDED")

SYNTAX_HELP = ("a savepoint or retained checkpoint: a directory, a _metadata file, file:// or s3:// (a job's own "
               "folder selects its newest), or discovery: latest:DIR?job-id=JOBID (a flat state.savepoints.dir / "
               "state.checkpoints.dir, newest of that job; DIR=<checkpoints dir>/<JOBID>: its latest complete retained "
               "checkpoint), flink-rest://HOST:PORT/JOB (JOB = name or id: its latest "
               "savepoint or retained checkpoint per Flink's REST API; flink-rest+https:// for TLS), k8s:FILE.yaml "
               "(the savepoint a FlinkDeployment/FlinkSessionJob's status records; #NAME picks one of several), "
               "kube://[CONTEXT@]NAMESPACE/KIND/NAME (the same, read from the live Kubernetes API)")


@dataclass(frozen=True, slots=True)
class Found:
    """The snapshot a discovery form resolved to, and the one line that tells the user why."""

    location: str  # a path, file: URI or s3:// URI of the snapshot directory (or its _metadata)
    how: str
    fallbacks: tuple[str, ...] = ()  # older complete-looking snapshots, newest first, if `location` is cut short
    skipped: tuple[Skipped, ...] = ()  # newer snapshots passed over because they are incomplete
    notes: tuple[str, ...] = ()  # what the user should know about the one chosen (a checkpoint that will go)

    def warnings(self) -> list[str]:
        """One line per skipped snapshot, and every note, for stderr and logs."""
        return [str(s) for s in self.skipped] + list(self.notes)


def is_discovery(spec: str) -> bool:
    return spec.startswith((LATEST, K8S, KUBE, *FLINK_REST))


def resolve(spec: str, *, client: Any | None = None) -> Found:
    """The snapshot a `--savepoint` value names; a plain location is returned unchanged."""
    spec = spec.strip()
    if spec.startswith(LATEST):
        return _latest(spec, client)
    if spec.startswith(FLINK_REST):
        return _flink_rest(spec)
    if spec.startswith(K8S):
        file, _, name = spec[len(K8S):].partition("#")
        if not file:
            raise StorageError(f"{spec}: expected k8s:FILE.yaml (the resource as `kubectl get -o yaml` prints it)")
        return k8s_found(k8s_operator.load_resources(file), name or None)
    if spec.startswith(KUBE):
        live = k8s_live.read_live(k8s_live.parse_ref(spec))
        return k8s_found(live.resources, live.ref.name)
    return Found(spec, "as given")


def k8s_found(resources: k8s_operator.Resources, name: str | None = None) -> Found:
    """The savepoint an operator resource's status records, however the resource was read (file or live API)."""
    snap = k8s_operator.current_snapshot(resources, name)
    return Found(normalise_pointer(snap.path), f"{resources.source}: {snap.field}")


def load(spec: str, *, client: Any | None = None,
         max_bytes: int = MAX_METADATA_BYTES) -> tuple[CheckpointMetadata, Found]:
    """Resolve and read: the parsed `_metadata` and where it came from. When the chosen snapshot's
    `_metadata` ends early (still being written or copied) and discovery found older ones, the newest
    complete one is read and the returned `Found` names what was skipped."""
    return load_found(resolve(spec, client=client), client=client, max_bytes=max_bytes)


def load_found(found: Found, *, client: Any | None = None,
               max_bytes: int = MAX_METADATA_BYTES) -> tuple[CheckpointMetadata, Found]:
    """`load` of a snapshot already resolved (an operator resource read once, gated and then patched)."""
    choices = [(loc, lambda loc=loc: read_metadata_blob(loc, max_bytes=max_bytes,
                                                        client=client if is_s3(loc) else None))
               for loc in (found.location, *found.fallbacks)]
    loaded = first_complete(choices, found.skipped)
    if loaded.skipped != found.skipped:
        found = dataclasses.replace(found, location=loaded.location, skipped=loaded.skipped)
    return loaded.metadata, found


def normalise_pointer(path: str) -> str:
    """Flink's external pointers as our reader takes them: `s3a://`/`s3p://` (Flink's S3 plugins) are S3."""
    path = path.strip()
    for scheme in ("s3a://", "s3p://", "s3n://"):
        if path.startswith(scheme):
            return "s3://" + path[len(scheme):]
    return path


# ---- latest:<dir>?job-id=<hex> ------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _Candidate:
    job: str  # full JobID for checkpoints, its first 6 hex digits for savepoints
    kind: str
    mtime: float
    number: int  # chk-<n>, 0 for savepoints
    location: str
    complete: bool = True  # False: Flink's directory is there, its _metadata not (yet)


def _query(spec: str, raw: str, allowed: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, values in parse_qs(raw, keep_blank_values=True).items():
        if key not in allowed:
            raise StorageError(f"{spec}: unknown option {key!r} (expected {', '.join(allowed)})")
        out[key] = values[-1].strip().lower()
    kind = out.get("kind")
    if kind is not None and kind not in KINDS:
        raise StorageError(f"{spec}: kind={kind}: expected savepoint or checkpoint")
    return out


def _classify(rel_dir: str) -> tuple[str, str, int] | None:
    """(job, kind, number) of a snapshot directory relative to the flat root, or None if Flink would not
    have named it so (anything else in the directory is not this layout's and is ignored)."""
    parts = rel_dir.split("/")
    if len(parts) == 1 and (m := _SAVEPOINT_NAME.fullmatch(parts[0])):
        return m.group(1), "savepoint", 0
    if len(parts) == 2 and _JOB_ID.fullmatch(parts[0]) and (c := _CHECKPOINT_NAME.fullmatch(parts[1])):
        return parts[0], "checkpoint", int(c.group(1))
    return None


def _local_flat(root: Path) -> list[_Candidate]:
    found: list[_Candidate] = []
    try:
        entries = list(os.scandir(root))
    except FileNotFoundError:
        raise StorageError(f"{root}: no such directory") from None
    except NotADirectoryError:
        raise StorageError(f"{root}: not a directory (latest: takes the state.savepoints.dir or "
                           f"state.checkpoints.dir)") from None
    except OSError as exc:
        raise StorageError(f"{root}: cannot list: {exc.strerror or exc}") from None
    dirs: list[str] = []
    for e in entries:
        if not e.is_dir(follow_symlinks=False):
            continue
        if _JOB_ID.fullmatch(e.name):
            try:
                dirs += [f"{e.name}/{c.name}" for c in os.scandir(e.path) if c.is_dir(follow_symlinks=False)]
            except OSError:
                continue
        else:
            dirs.append(e.name)
    own = root.name if _JOB_ID.fullmatch(root.name) else "?"
    for e in entries:  # DIR is one job's checkpoint folder: its chk-<n>/ directly
        if e.is_dir(follow_symlinks=False) and (c := _CHECKPOINT_NAME.fullmatch(e.name)):
            found.append(_local_candidate(root / e.name, own, "checkpoint", int(c.group(1))))
    for rel in dirs:
        info = _classify(rel)
        if info:
            found.append(_local_candidate(root / rel, *info))
    return found


def _local_candidate(folder: Path, job: str, kind: str, number: int) -> _Candidate:
    """A snapshot directory, complete when its `_metadata` is a regular file (timed by it, else by the folder)."""
    meta = folder / METADATA_FILE_NAME
    if meta.is_file():
        return _Candidate(job, kind, meta.stat().st_mtime, number, str(folder))
    try:
        mtime = folder.stat().st_mtime
    except OSError:
        mtime = 0.0
    return _Candidate(job, kind, mtime, number, str(folder), complete=False)


def _s3_folders(client: Any, bucket: str, prefix: str, deadline: Deadline) -> list[str]:
    """The "folders" (common prefixes, ending in /) directly under `prefix`: one level, never the
    objects below, so a checkpoint directory's `shared/` files (millions with incremental RocksDB
    checkpoints) are not listed."""
    uri = f"s3://{bucket}/{prefix}"
    out: list[str] = []
    try:
        with deadline.guard(uri):
            for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix,
                                                                         Delimiter="/"):
                deadline.check(uri)
                out += [cp["Prefix"] for cp in page.get("CommonPrefixes", ())]
    except StorageError:
        raise
    except Exception as exc:
        raise s3_error(uri, exc, deadline) from None
    return out


def _s3_flat(uri: str, client: Any | None, job_id: str | None) -> list[_Candidate]:
    """Savepoints by listing `savepoint-<6 hex>-*` (only that job's when the id is known); retained
    checkpoints folder by folder (`<JobID>/` then its `chk-<n>/`, one HEAD of `_metadata` each)."""
    client = client or s3_client()
    deadline = Deadline()
    bucket, key = split_s3(uri)
    root = key.rstrip("/") + "/" if key.strip("/") else ""
    found = []
    client = guard_boto_client(client)
    savepoints = f"{root}savepoint-{job_id[:6]}-" if job_id else f"{root}savepoint-"
    metas, incomplete = metadata_listing(client, bucket, savepoints, deadline)
    for modified, meta_key in metas:
        rel = meta_key[len(root):]
        info = _classify(rel.rsplit("/", 1)[0]) if "/" in rel else None
        if info:
            found.append(_Candidate(info[0], info[1], modified.timestamp(), info[2],
                                    f"s3://{bucket}/{root}{rel.rsplit('/', 1)[0]}"))
    for folder, modified in incomplete.items():
        info = _classify(folder[len(root):])
        if info:
            found.append(_Candidate(info[0], info[1], modified.timestamp(), info[2], f"s3://{bucket}/{folder}",
                                    complete=False))
    for folder in _s3_folders(client, bucket, root + (job_id or ""), deadline):
        job = folder[len(root):].rstrip("/")
        if not _JOB_ID.fullmatch(job):
            continue
        for chk in _s3_folders(client, bucket, f"{folder}chk-", deadline):
            info = _classify(chk[len(root):].rstrip("/"))
            if info:
                found.append(_s3_checkpoint(client, bucket, chk, info[0], info[2], deadline))
    own = root.rstrip("/").rsplit("/", 1)[-1]
    if not any(c.complete for c in found) or _JOB_ID.fullmatch(own):  # DIR may be one job's checkpoint folder
        for chk in _s3_folders(client, bucket, f"{root}chk-", deadline):
            c = _CHECKPOINT_NAME.fullmatch(chk[len(root):].rstrip("/"))
            if c:
                found.append(_s3_checkpoint(client, bucket, chk, own if _JOB_ID.fullmatch(own) else "?",
                                            int(c.group(1)), deadline))
    return found


def _s3_checkpoint(client: Any, bucket: str, chk: str, job: str, number: int, deadline: Deadline) -> _Candidate:
    head = head_object(client, bucket, f"{chk}{METADATA_FILE_NAME}", deadline)  # None: still being written
    return _Candidate(job, "checkpoint", head["LastModified"].timestamp() if head else 0.0, number,
                      f"s3://{bucket}/{chk.rstrip('/')}", complete=head is not None)


def _jobs_listing(cands: list[_Candidate]) -> str:
    full = {c.job for c in cands if c.kind == "checkpoint"}
    by_job: dict[str, list[_Candidate]] = {}
    for c in cands:  # a savepoint prefix joins the one checkpoint folder whose JobID it starts
        owners = [j for j in full if j.startswith(c.job)] if c.kind == "savepoint" else [c.job]
        by_job.setdefault(owners[0] if len(owners) == 1 else c.job, []).append(c)
    ordered = sorted(by_job.items(), key=lambda kv: -max(c.mtime for c in kv[1]))
    shown = [f"{job} ({_count(cs)}, newest {_newest(cs).location})" for job, cs in ordered]
    more = f" and {len(shown) - SHOWN_CANDIDATES} more" if len(shown) > SHOWN_CANDIDATES else ""
    return "; ".join(shown[:SHOWN_CANDIDATES]) + more


def _count(cands: list[_Candidate]) -> str:
    kinds = [k for k in KINDS if any(c.kind == k for c in cands)]
    return ", ".join(f"{n} {k}{'s' if n > 1 else ''}" for k in kinds if (n := sum(c.kind == k for c in cands)))


def _ordered(cands: list[_Candidate]) -> list[_Candidate]:
    """Newest first by file time; retained checkpoints of one job by their checkpoint number."""
    if all(c.kind == "checkpoint" for c in cands) and len({c.job for c in cands}) == 1:
        return sorted(cands, key=lambda c: (c.number, c.mtime, c.location), reverse=True)
    return sorted(cands, key=lambda c: (c.mtime, c.number, c.location), reverse=True)


def _newest(cands: list[_Candidate]) -> _Candidate:
    return _ordered(cands)[0]


def _newer(c: _Candidate, best: _Candidate) -> bool:
    """Is `c` (incomplete) a newer snapshot of `best`'s job: a higher checkpoint, or a later directory."""
    if c.kind == best.kind == "checkpoint" and c.job == best.job:
        return c.number > best.number
    return c.mtime > best.mtime and c.job[:6] == best.job[:6]


def _one_job(cands: list[_Candidate]) -> bool:
    """Savepoints carry 6 hex digits of the JobID, checkpoint folders all 32: one job when every full id
    is the same and every savepoint prefix is that id's (or the only) prefix."""
    full = {c.job for c in cands if c.kind == "checkpoint"}
    short = {c.job[:6] for c in cands}
    return len(full) <= 1 and len(short) <= 1


def _latest(spec: str, client: Any | None) -> Found:
    body = spec[len(LATEST):]
    where, _, raw = body.partition("?")
    if not where:
        raise StorageError(f"{spec}: expected latest:DIR?job-id=JOBID (DIR = state.savepoints.dir or "
                           f"state.checkpoints.dir, a path, file:// or s3://)")
    opts = _query(spec, raw, ("job-id", "kind"))
    job_id = opts.get("job-id")
    if job_id is not None and not _HEX.fullmatch(job_id):
        raise StorageError(f"{spec}: job-id={job_id}: expected a Flink JobID (32 hex digits; at least the first 6)")
    where_s3 = "s3://" + where.split("://", 1)[1] if where.startswith(("s3://", "s3a://")) else None
    if "://" in where and not where_s3 and not where.startswith("file:"):
        raise StorageError(f"{spec}: unsupported scheme (DIR is a path, file:// or s3://)")
    listed = _s3_flat(where_s3, client, job_id) if where_s3 else _local_flat(local_path(where))
    every = [c for c in listed if c.complete]
    if job_id and where_s3 and not any(c.kind == "checkpoint" or job_id.startswith(c.job) for c in every):
        listed = _s3_flat(where_s3, client, None)  # nothing of that job: list everything, to say what is there
        every = [c for c in listed if c.complete]
    if not every:
        raise StorageError(f"{where}: no complete savepoint (savepoint-<6 hex>-<12 hex>/{METADATA_FILE_NAME}) or "
                           f"retained checkpoint (<job id>/chk-<n>/{METADATA_FILE_NAME}) in this directory")
    def wanted(c: _Candidate) -> bool:
        if opts.get("kind") not in (None, c.kind):
            return False
        if not job_id:
            return True
        return (c.job.startswith(job_id) or c.job == "?" if c.kind == "checkpoint"
                else job_id.startswith(c.job) if len(job_id) >= 6 else False)

    cands = [c for c in every if wanted(c)]
    if not cands:
        what = f"{opts['kind']}s" if opts.get("kind") else "snapshots"
        raise StorageError(f"{where}: no complete {what} of job {job_id or '?'} here; it holds "
                           f"{_jobs_listing(every)}")
    if not _one_job(cands):
        hint = ("the JobID's first 6 hex digits are shared by several jobs' savepoints: give the full id, "
                "or name the savepoint directory" if job_id else "add ?job-id=<the Flink JobID>")
        raise StorageError(f"{where}: ambiguous, it holds complete snapshots of several jobs "
                           f"({_jobs_listing(cands)}); {hint}")
    ordered = _ordered(cands)
    best = ordered[0]
    skipped = [Skipped(c.location, f"no {METADATA_FILE_NAME} (still being written, or abandoned)")
               for c in sorted(listed, key=lambda c: (c.number, c.mtime), reverse=True)
               if not c.complete and wanted(c) and _newer(c, best)]
    return Found(best.location, f"newest complete {best.kind} of job {job_id or best.job} in {where} "
                                f"({len(cands)} found)",
                 fallbacks=tuple(c.location for c in ordered[1:MAX_INCOMPLETE_SKIPPED + 1]),
                 skipped=tuple(skipped[:MAX_INCOMPLETE_SKIPPED]))


# ---- flink-rest://host:port/<job> ---------------------------------------------------------
class _Rest:
    """GETs against Flink's REST API, bounded in time (`UPGRADE_GATE_S3_TIMEOUT`, for all of them together,
    however slowly the answers trickle), size and depth (`upgrade_gate.storage.remote`)."""

    def __init__(self, spec: str) -> None:
        shown = redact(spec)
        try:
            has_host = bool(urlparse(spec).hostname)
        except ValueError:
            has_host = False
        if not has_host:
            raise StorageError(f"{shown}: expected flink-rest://HOST:PORT/JOB")
        scheme = "https" if spec.startswith("flink-rest+https://") else "http"
        self.base = remote.endpoint(spec, scheme=scheme, default_port=8081, shown=shown)
        self.deadline = Deadline()
        host = f"[{self.base.host}]" if ":" in self.base.host else self.base.host
        self.where = f"{urlparse(shown).scheme}://{host}:{self.base.port}"

    def get(self, path: str) -> Any:
        answer = remote.get(self.base, path, deadline=self.deadline, service=REST, max_bytes=MAX_REST_BYTES,
                            label=self.where)
        here = f"{self.where}{path}"
        if answer.status == 404:
            raise StorageError(f"{here}: not found (HTTP 404{remote.error_detail(answer.body)})")
        if answer.status in (401, 403):
            raise StorageError(f"{here}: access denied (HTTP {answer.status}); put user:password@ in the "
                               f"flink-rest:// URI")
        if answer.status >= 300 or answer.status < 200:
            raise StorageError(f"{here}: HTTP {answer.status}{remote.error_detail(answer.body)}")
        try:
            return remote.json_answer(answer, REST)
        except StorageError as exc:
            raise StorageError(f"{here}: not {REST} ({str(exc).removeprefix(answer.where + ': ')})") from None


def _integer(value: Any, where: str, field: str, low: int = 0, high: int = JAVA_LONG) -> int:
    """A number the server sent, checked: an integer (not a bool, float or string) in [low, high]."""
    if type(value) is not int or not low <= value <= high:
        raise StorageError(f"{where}: field {field} is {describe(value)}; expected an integer from {low} to {high} "
                           f"(is this {REST}?)")
    return value


def _job_id(job: dict[str, Any], where: str) -> str:
    jid = job.get("jid")
    if not isinstance(jid, str) or not _JOB_ID.fullmatch(jid.lower()):
        raise StorageError(f"{where}: job {one_line(job.get('name'), 80)!r} has field jid {describe(jid)}; expected "
                           f"a JobID of 32 hex digits (is this {REST}?)")
    return jid.lower()


def _pick_job(rest: _Rest, wanted: str) -> dict[str, Any]:
    return pick_job(rest.get("/jobs/overview"), wanted, rest.where)


def pick_job(overview: Any, wanted: str, server: str) -> dict[str, Any]:
    """The job `wanted` (a JobID or a name) in a `/jobs/overview` answer of `server`, its `jid` checked."""
    where = f"{server}/jobs/overview"
    raw = overview.get("jobs") if isinstance(overview, dict) else None
    if not isinstance(raw, list):
        raise StorageError(f"{where}: no list of jobs in the answer (field jobs is {describe(raw)}; is this {REST}?)")
    jobs = [j for j in raw if isinstance(j, dict)]
    by_id = [j for j in jobs if isinstance(j.get("jid"), str) and j["jid"].lower() == wanted.lower()]
    if by_id:
        return {**by_id[0], "jid": _job_id(by_id[0], where)}
    named = [j for j in jobs if j.get("name") == wanted]
    if not named:
        if _JOB_ID.fullmatch(wanted.lower()):  # an id the JobManager no longer lists: ask directly
            return {"jid": wanted.lower(), "name": "?", "state": "?"}
        known = ", ".join(sorted({f"{one_line(j.get('name'), 60)} ({one_line(j.get('state'), 20)})"
                                  for j in jobs[:1000]})[:10]) or "none"
        raise StorageError(f"{server}: no job named or with id {one_line(wanted, 100)!r} (jobs: {known})")
    running = [j for j in named if j.get("state") not in TERMINAL]
    if len(running) > 1:
        ids = ", ".join(f"{one_line(j.get('jid'), 40)} ({one_line(j.get('state'), 20)})" for j in running[:10])
        raise StorageError(f"{server}: ambiguous, {len(running)} jobs named {one_line(wanted, 100)!r} are not "
                           f"finished ({ids}); give the job id instead of the name")
    if running:
        job = running[0]
    else:  # the latest run of a stopped job
        job = max(named, key=lambda j: _integer(j.get("start-time", 0), where, "start-time", low=-1))
    return {**job, "jid": _job_id(job, where)}


def _usable_pointer(entry: Any, where: str, field: str) -> str | None:
    if not isinstance(entry, dict) or entry.get("discarded") is True:
        return None
    path = entry.get("external_path")
    if not isinstance(path, str) or not path.strip() or path.strip() == _NOT_ADDRESSABLE:
        return None
    path = path.strip()
    if len(path) > MAX_POINTER_CHARS or one_line(path, MAX_POINTER_CHARS) != path:
        raise StorageError(f"{where}: field {field}.external_path is {describe(path)}; expected one path of at most "
                           f"{MAX_POINTER_CHARS} characters without control characters")
    return path


def _flink_rest(spec: str) -> Found:
    head, _, raw = spec.partition("?")
    rest = _Rest(head)
    opts = _query(redact(spec), raw, ("kind",))
    wanted = unquote(urlparse(head).path.strip("/"))
    if not wanted:
        raise StorageError(f"{redact(spec)}: expected flink-rest://HOST:PORT/JOB (the job's name or id)")
    job = _pick_job(rest, wanted)
    return latest_snapshot(rest.get(f"/jobs/{quote(job['jid'])}/checkpoints"), job, opts.get("kind"), rest.where)


def latest_snapshot(stats: Any, job: dict[str, Any], kind: str | None, server: str) -> Found:
    """The snapshot to check in a `/jobs/<id>/checkpoints` answer of `server` (Flink's
    `CheckpointingStatistics`): the savepoint or retained checkpoint with the higher checkpoint id, or the
    `kind` asked for; every field used is checked."""
    jid = job["jid"]
    where = f"{server}/jobs/{jid}/checkpoints"
    latest = stats.get("latest") if isinstance(stats, dict) else None
    latest = latest if isinstance(latest, dict) else {}
    options = []
    for this, key in (("savepoint", "savepoint"), ("checkpoint", "completed")):
        entry = latest.get(key)
        path = _usable_pointer(entry, where, f"latest.{key}")
        if path and kind in (None, this):
            number = _integer(entry.get("id"), where, f"latest.{key}.id")  # type: ignore[union-attr]
            options.append((number, this, path))
    name, state = one_line(job.get("name"), 100), one_line(job.get("state"), 30)
    if not options:
        what = kind or "savepoint or retained checkpoint"
        raise StorageError(f"{server}: job {name} ({jid}, {state}) has no completed {what} with an external "
                           f"path (/jobs/{jid}/checkpoints); take one: flink savepoint {jid}")
    number, chosen, path = max(options)
    notes = ()
    if chosen == "checkpoint" and any(this == "savepoint" for _, this, _ in options):
        older = max(n for n, this, _ in options if this == "savepoint")
        # issue 32: a checkpoint is chosen over a savepoint taken moments before; say that it will not stay
        notes = (f"warning: checked checkpoint {number}, newer than savepoint {older}: Flink discards a checkpoint "
                 f"once newer ones complete (state.checkpoints.num-retained) and, unless retained on cancellation, "
                 f"when the job is cancelled; to check the savepoint that stays, add ?kind=savepoint",)
    return Found(normalise_pointer(path), f"latest {chosen} (checkpoint id {number}) of job {name} "
                                          f"({jid}, {state}) per {server}", notes=notes)

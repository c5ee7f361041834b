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

Every answer says on one line which snapshot was chosen and why (`Found.how`), so a user sees it
before the verdict. Errors are `StorageError`s: exit 2, one line naming the location.
"""

from __future__ import annotations

import base64
import json
import os
import re
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlparse

from upgrade_gate.flink.metadata import METADATA_FILE_NAME, CheckpointMetadata, parse_metadata
from upgrade_gate.storage import k8s_operator
from upgrade_gate.storage.s3 import Deadline, StorageError, is_s3, local_path, s3_client, s3_error, split_s3
from upgrade_gate.storage.savepoints import (
    MAX_METADATA_BYTES,
    SHOWN_CANDIDATES,
    metadata_candidates,
    read_metadata_blob,
)

LATEST = "latest:"
FLINK_REST = ("flink-rest://", "flink-rest+https://")
K8S = "k8s:"
KINDS = ("savepoint", "checkpoint")
MAX_REST_BYTES = 8 * 1024 * 1024
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
               "(the savepoint a FlinkDeployment/FlinkSessionJob's status records; #NAME picks one of several)")


@dataclass(frozen=True, slots=True)
class Found:
    """The snapshot a discovery form resolved to, and the one line that tells the user why."""

    location: str  # a path, file: URI or s3:// URI of the snapshot directory (or its _metadata)
    how: str


def is_discovery(spec: str) -> bool:
    return spec.startswith((LATEST, K8S, *FLINK_REST))


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
        snap = k8s_operator.current_snapshot(k8s_operator.load_resources(file), name or None)
        return Found(normalise_pointer(snap.path), f"{file}: {snap.field}")
    return Found(spec, "as given")


def load(spec: str, *, client: Any | None = None,
         max_bytes: int = MAX_METADATA_BYTES) -> tuple[CheckpointMetadata, Found]:
    """Resolve and read: the parsed `_metadata` and where it came from."""
    found = resolve(spec, client=client)
    loc = found.location
    blob = read_metadata_blob(loc, max_bytes=max_bytes, client=client if is_s3(loc) else None)
    return parse_metadata(blob.data, blob.source, blob.base_dir), found


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
            meta = root / e.name / METADATA_FILE_NAME
            if meta.is_file():
                found.append(_Candidate(own, "checkpoint", meta.stat().st_mtime, int(c.group(1)), str(root / e.name)))
    for rel in dirs:
        info = _classify(rel)
        meta = root / rel / METADATA_FILE_NAME
        if info and meta.is_file():
            found.append(_Candidate(info[0], info[1], meta.stat().st_mtime, info[2], str(root / rel)))
    return found


def _s3_folders(client: Any, bucket: str, prefix: str, deadline: Deadline) -> list[str]:
    """The "folders" (common prefixes, ending in /) directly under `prefix`: one level, never the
    objects below, so a checkpoint directory's `shared/` files (millions with incremental RocksDB
    checkpoints) are not listed."""
    uri = f"s3://{bucket}/{prefix}"
    out: list[str] = []
    try:
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix, Delimiter="/"):
            deadline.check(uri)
            out += [cp["Prefix"] for cp in page.get("CommonPrefixes", ())]
    except StorageError:
        raise
    except Exception as exc:
        raise s3_error(uri, exc, deadline) from None
    return out


def _s3_modified(client: Any, bucket: str, key: str, deadline: Deadline) -> float | None:
    """LastModified of an object, None if it does not exist (a snapshot still being written)."""
    from botocore.exceptions import ClientError

    deadline.check(f"s3://{bucket}/{key}")
    try:
        return client.head_object(Bucket=bucket, Key=key)["LastModified"].timestamp()
    except ClientError as exc:
        if str(exc.response.get("Error", {}).get("Code")) in ("404", "NoSuchKey", "NotFound"):
            return None
        raise s3_error(f"s3://{bucket}/{key}", exc, deadline) from None
    except Exception as exc:
        raise s3_error(f"s3://{bucket}/{key}", exc, deadline) from None


def _s3_flat(uri: str, client: Any | None, job_id: str | None) -> list[_Candidate]:
    """Savepoints by listing `savepoint-<6 hex>-*` (only that job's when the id is known); retained
    checkpoints folder by folder (`<JobID>/` then its `chk-<n>/`, one HEAD of `_metadata` each)."""
    client = client or s3_client()
    deadline = Deadline()
    bucket, key = split_s3(uri)
    root = key.rstrip("/") + "/" if key.strip("/") else ""
    found = []
    savepoints = f"{root}savepoint-{job_id[:6]}-" if job_id else f"{root}savepoint-"
    for modified, meta_key in metadata_candidates(client, bucket, savepoints, deadline):
        rel = meta_key[len(root):]
        info = _classify(rel.rsplit("/", 1)[0]) if "/" in rel else None
        if info:
            found.append(_Candidate(info[0], info[1], modified.timestamp(), info[2],
                                    f"s3://{bucket}/{root}{rel.rsplit('/', 1)[0]}"))
    for folder in _s3_folders(client, bucket, root + (job_id or ""), deadline):
        job = folder[len(root):].rstrip("/")
        if not _JOB_ID.fullmatch(job):
            continue
        for chk in _s3_folders(client, bucket, f"{folder}chk-", deadline):
            info = _classify(chk[len(root):].rstrip("/"))
            modified = _s3_modified(client, bucket, f"{chk}{METADATA_FILE_NAME}", deadline) if info else None
            if info and modified is not None:
                found.append(_Candidate(info[0], info[1], modified, info[2], f"s3://{bucket}/{chk.rstrip('/')}"))
    own = root.rstrip("/").rsplit("/", 1)[-1]
    if not found or _JOB_ID.fullmatch(own):  # DIR may be one job's checkpoint folder: its chk-<n>/ directly
        for chk in _s3_folders(client, bucket, f"{root}chk-", deadline):
            c = _CHECKPOINT_NAME.fullmatch(chk[len(root):].rstrip("/"))
            modified = _s3_modified(client, bucket, f"{chk}{METADATA_FILE_NAME}", deadline) if c else None
            if c and modified is not None:
                found.append(_Candidate(own if _JOB_ID.fullmatch(own) else "?", "checkpoint", modified,
                                        int(c.group(1)), f"s3://{bucket}/{chk.rstrip('/')}"))
    return found


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


def _newest(cands: list[_Candidate]) -> _Candidate:
    """The newest by file time; among retained checkpoints of one job, the highest checkpoint number."""
    if all(c.kind == "checkpoint" for c in cands) and len({c.job for c in cands}) == 1:
        return max(cands, key=lambda c: (c.number, c.mtime, c.location))
    return max(cands, key=lambda c: (c.mtime, c.number, c.location))


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
    every = _s3_flat(where_s3, client, job_id) if where_s3 else _local_flat(local_path(where))
    if job_id and where_s3 and not any(c.kind == "checkpoint" or job_id.startswith(c.job) for c in every):
        every = _s3_flat(where_s3, client, None)  # nothing of that job: list everything, to say what is there
    if not every:
        raise StorageError(f"{where}: no complete savepoint (savepoint-<6 hex>-<12 hex>/{METADATA_FILE_NAME}) or "
                           f"retained checkpoint (<job id>/chk-<n>/{METADATA_FILE_NAME}) in this directory")
    cands = [c for c in every if opts.get("kind") in (None, c.kind)]
    if job_id:
        cands = [c for c in cands if (c.job.startswith(job_id) or c.job == "?" if c.kind == "checkpoint"
                                      else job_id.startswith(c.job) if len(job_id) >= 6 else False)]
    if not cands:
        what = f"{opts['kind']}s" if opts.get("kind") else "snapshots"
        raise StorageError(f"{where}: no complete {what} of job {job_id or '?'} here; it holds "
                           f"{_jobs_listing(every)}")
    if not _one_job(cands):
        hint = ("the JobID's first 6 hex digits are shared by several jobs' savepoints: give the full id, "
                "or name the savepoint directory" if job_id else "add ?job-id=<the Flink JobID>")
        raise StorageError(f"{where}: ambiguous, it holds complete snapshots of several jobs "
                           f"({_jobs_listing(cands)}); {hint}")
    best = _newest(cands)
    return Found(best.location, f"newest complete {best.kind} of job {job_id or best.job} in {where} "
                                f"({len(cands)} found)")


# ---- flink-rest://host:port/<job> ---------------------------------------------------------
class _Rest:
    """GETs against Flink's REST API, bounded in time (`UPGRADE_GATE_S3_TIMEOUT`) and size."""

    def __init__(self, spec: str) -> None:
        self.spec = spec
        parsed = urlparse(spec)
        scheme = "https" if parsed.scheme == "flink-rest+https" else "http"
        if not parsed.hostname:
            raise StorageError(f"{spec}: expected flink-rest://HOST:PORT/JOB")
        port = parsed.port or 8081
        host = f"[{parsed.hostname}]" if ":" in parsed.hostname else parsed.hostname
        self.base = f"{scheme}://{host}:{port}"
        self.headers = {"Accept": "application/json"}
        if parsed.username:
            token = f"{unquote(parsed.username)}:{unquote(parsed.password or '')}".encode()
            self.headers["Authorization"] = "Basic " + base64.b64encode(token).decode()
        self.deadline = Deadline()
        self.where = f"{parsed.scheme}://{host}:{port}"

    def get(self, path: str) -> Any:
        url = self.base + path
        remaining = self.deadline.remaining()
        if remaining <= 0:
            raise self.deadline.timed_out(self.where + path, "Flink's REST API was too slow")
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=self.headers),
                                        timeout=min(30.0, remaining)) as resp:
                data = resp.read(MAX_REST_BYTES + 1)
        except urllib.error.HTTPError as exc:
            detail = _flink_errors(exc)
            if exc.code == 404:
                raise StorageError(f"{self.where}{path}: not found (HTTP 404{detail})") from None
            if exc.code in (401, 403):
                raise StorageError(f"{self.where}{path}: access denied (HTTP {exc.code}); put user:password@ in "
                                   f"the flink-rest:// URI") from None
            raise StorageError(f"{self.where}{path}: HTTP {exc.code}{detail}") from None
        except TimeoutError:
            raise self.deadline.timed_out(self.where + path, "Flink's REST API did not answer") from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            if isinstance(reason, TimeoutError):
                raise self.deadline.timed_out(self.where + path, "Flink's REST API did not answer") from None
            raise StorageError(f"{self.where}: cannot reach Flink's REST API ({reason}); check host, port and "
                               f"that the JobManager is up") from None
        if len(data) > MAX_REST_BYTES:
            raise StorageError(f"{self.where}{path}: answer larger than {MAX_REST_BYTES} bytes")
        try:
            return json.loads(data)
        except ValueError:
            raise StorageError(f"{self.where}{path}: not Flink's REST API (the answer is not JSON)") from None


def _flink_errors(exc: urllib.error.HTTPError) -> str:
    try:
        errors = json.loads(exc.read(65536)).get("errors") or []
    except Exception:
        return ""
    first = str(errors[0]).strip().splitlines()[0] if errors else ""
    return f": {first[:200]}" if first else ""


def _pick_job(rest: _Rest, wanted: str) -> dict[str, Any]:
    overview = rest.get("/jobs/overview")
    jobs = [j for j in (overview.get("jobs") or []) if isinstance(j, dict)] if isinstance(overview, dict) else []
    by_id = [j for j in jobs if str(j.get("jid", "")).lower() == wanted.lower()]
    if by_id:
        return by_id[0]
    named = [j for j in jobs if j.get("name") == wanted]
    if not named:
        if _JOB_ID.fullmatch(wanted.lower()):  # an id the JobManager no longer lists: ask directly
            return {"jid": wanted.lower(), "name": "?", "state": "?"}
        known = ", ".join(sorted({f"{j.get('name')} ({j.get('state')})" for j in jobs})[:10]) or "none"
        raise StorageError(f"{rest.where}: no job named or with id {wanted!r} (jobs: {known})")
    running = [j for j in named if j.get("state") not in TERMINAL]
    if len(running) > 1:
        ids = ", ".join(f"{j.get('jid')} ({j.get('state')})" for j in running)
        raise StorageError(f"{rest.where}: ambiguous, {len(running)} jobs named {wanted!r} are not finished ({ids}); "
                           f"give the job id instead of the name")
    if running:
        return running[0]
    return max(named, key=lambda j: int(j.get("start-time") or 0))  # the latest run of a stopped job


def _usable_pointer(entry: Any) -> str | None:
    if not isinstance(entry, dict) or entry.get("discarded"):
        return None
    path = entry.get("external_path")
    if not isinstance(path, str) or not path.strip() or path.strip() == _NOT_ADDRESSABLE:
        return None
    return path.strip()


def _flink_rest(spec: str) -> Found:
    head, _, raw = spec.partition("?")
    rest = _Rest(head)
    opts = _query(spec, raw, ("kind",))
    wanted = unquote(urlparse(head).path.strip("/"))
    if not wanted:
        raise StorageError(f"{spec}: expected flink-rest://HOST:PORT/JOB (the job's name or id)")
    job = _pick_job(rest, wanted)
    jid = str(job["jid"])
    stats = rest.get(f"/jobs/{quote(jid)}/checkpoints")
    latest = stats.get("latest") if isinstance(stats, dict) else None
    latest = latest if isinstance(latest, dict) else {}
    options = []
    for kind, key in (("savepoint", "savepoint"), ("checkpoint", "completed")):
        entry = latest.get(key)
        path = _usable_pointer(entry)
        if path and opts.get("kind") in (None, kind):
            options.append((int(entry.get("id") or 0), kind, path))
    if not options:
        what = opts.get("kind") or "savepoint or retained checkpoint"
        raise StorageError(f"{rest.where}: job {job.get('name')} ({jid}, {job.get('state')}) has no completed "
                           f"{what} with an external path (/jobs/{jid}/checkpoints); take one: "
                           f"flink savepoint {jid}")
    number, kind, path = max(options)
    return Found(normalise_pointer(path), f"latest {kind} (checkpoint id {number}) of job {job.get('name')} "
                                          f"({jid}, {job.get('state')}) per {rest.where}")

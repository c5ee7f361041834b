"""Durable upgrade records and the one-upgrade-per-job lease, in the object store the gate already uses.

Why not a file on the worker: a Celery retry may run on another worker, which would not see it,
and two DAG runs for the same job would not see each other. So every job has, under the state
root (the Airflow Variable `upgrade_gate_state_root`, e.g. `s3://<bucket>/upgrade-gate/`):

    upgrades/<job key>/record.json   what the current (or last) upgrade of the job did, step by step
    upgrades/<job key>/lease.json    who is upgrading the job now, and until when

`<job key>` is `<readable prefix>-<sha256(exact job name)[:16]>`: `orders v2` and `orders_v2`
share the readable prefix but never the key.

Both objects are written with conditional writes, so two writers can never both win: creation
with `If-None-Match: *`, every update with `If-Match: <the ETag we read>`; the loser gets HTTP 412
and sees `Conflict`. (Checked against SeaweedFS, the S3 server of the tests and of `docker/`: it
answers 412 PreconditionFailed to a second create, to a stale If-Match and to If-Match on a missing
key.) Every document carries a fresh `write_id`, so (a) two different writes never share an ETag
(S3's ETag is the MD5 of the body) and (b) a write whose answer was lost and that the SDK retried
is recognised as ours when the retry gets 412.

Without an object store (no state root configured) records fall back to the local work
directory, with the same compare-and-swap done under a file lock: correct on ONE worker only.

The lease: created with If-None-Match, renewed (If-Match) by a heartbeat thread while the task
works, deleted at the end when the upgrade reached a final state, or when the task failed for good
(`release_after_final_failure`, the DAG's failure callback: a failed run never keeps the job). A
second run for the same job is refused at once, naming the DAG run that holds the lease and when it
expires. The same DAG run (an Airflow retry) takes its own lease back. A lease that expired may be
taken over, and the taker must reconcile the record with the cluster before doing anything (see
`rollback.begin`).

Fencing (docs/guarantees.md, "A paused holder"): a heartbeat alone does not stop a holder that was
paused (a long GC pause, a frozen VM) and does not know it. So immediately before every call that acts
on the cluster the holder *fences*: a conditional write of its lease (`Lease.fence`). A holder whose
lease was taken while it was paused loses that write and stops before acting.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import socket
import threading
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from flink_gate.reports import job_key, report_name  # noqa: F401  (re-exported: records and work files)
from upgrade_gate.storage.redact import redact_value

TERMINAL_STATES = ("running-verified", "rolled-back-verified", "not-started")


class Conflict(Exception):
    """A conditional write lost: someone else wrote the object since we read it."""


class LeaseHeld(RuntimeError):
    """Another DAG run is upgrading this job now."""


class LeaseLost(RuntimeError):
    """Our lease was taken over (it had expired): stop before touching the job again."""


class StoreUnavailable(RuntimeError):
    """The object store did not answer (after the client's own retries): nothing is decided on it; the task
    fails saying where the job stands, and its retry resumes from the record."""


class LeaseSlow(RuntimeError):
    """The store answered the fencing write too late to prove the lease is still ours (a retry resumes)."""


# a fencing write must come back within this fraction of the lease's TTL to count (see `Lease.fence`)
FENCE_FRESH = 0.5
FENCE_ATTEMPTS = 3


def now() -> float:
    return time.time()


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


# ---- stores ---------------------------------------------------------------------------------------
class Store(ABC):
    """Compare-and-swap on small JSON documents: S3 conditional writes, or a locked local directory."""

    @abstractmethod
    def get(self, key: str) -> tuple[dict[str, Any] | None, str | None]: ...

    @abstractmethod
    def put(self, key: str, doc: dict[str, Any], etag: str | None) -> str:
        """Create (etag None: only if absent) or replace (only if still `etag`); returns the new etag."""

    @abstractmethod
    def delete(self, key: str, etag: str) -> None: ...

    @abstractmethod
    def describe(self, key: str) -> str: ...


class S3Store(Store):
    """`s3://bucket/prefix/` with S3 conditional writes (If-None-Match / If-Match)."""

    def __init__(self, client: Any, root: str) -> None:
        bucket, _, prefix = root.removeprefix("s3://").partition("/")
        self.client, self.bucket = client, bucket
        self.prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""

    def _key(self, key: str) -> str:
        return self.prefix + key

    def describe(self, key: str) -> str:
        return f"s3://{self.bucket}/{self._key(key)}"

    def get(self, key: str) -> tuple[dict[str, Any] | None, str | None]:
        try:
            resp = self.client.get_object(Bucket=self.bucket, Key=self._key(key))
            body = resp["Body"].read()
        except Exception as exc:
            if _code(exc) in ("NoSuchKey", "404", "NotFound"):
                return None, None
            raise self._unavailable(key, exc) from exc
        return json.loads(body), str(resp["ETag"])

    def _unavailable(self, key: str, exc: Exception) -> StoreUnavailable:
        return StoreUnavailable(f"the object store did not answer for {self.describe(key)} "
                                f"({type(exc).__name__}: {str(exc)[:300]})")

    def put(self, key: str, doc: dict[str, Any], etag: str | None) -> str:
        cond = {"IfNoneMatch": "*"} if etag is None else {"IfMatch": etag}
        body = json.dumps(doc, indent=1, sort_keys=True).encode()
        try:
            resp = self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=body,
                                          ContentType="application/json", **cond)
        except Exception as exc:
            if _code(exc) in ("PreconditionFailed", "412", "ConditionalRequestConflict", "409"):
                current, current_etag = self.get(key)
                if current is not None and current.get("write_id") == doc.get("write_id"):
                    return str(current_etag)  # our own write, retried by the SDK after a lost answer
                raise Conflict(f"{self.describe(key)} changed since it was read") from exc
            raise self._unavailable(key, exc) from exc
        return str(resp["ETag"])

    def delete(self, key: str, etag: str) -> None:
        try:
            self.client.delete_object(Bucket=self.bucket, Key=self._key(key), IfMatch=etag)
        except Exception as exc:
            if _code(exc) in ("PreconditionFailed", "412"):
                raise Conflict(f"{self.describe(key)} changed since it was read") from exc
            if _code(exc) not in ("NoSuchKey", "404"):
                raise self._unavailable(key, exc) from exc


class LocalStore(Store):
    """A directory, with compare-and-swap under an flock. Single worker only: another host's
    worker (a Celery retry elsewhere) does not see these files."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def describe(self, key: str) -> str:
        return str(self.root / key)

    @contextlib.contextmanager
    def _locked(self, key: str) -> Iterator[Path]:
        path = self.root / key
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path.parent / ".lock", "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield path
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    @staticmethod
    def _read(path: Path) -> tuple[dict[str, Any] | None, str | None]:
        if not path.is_file():
            return None, None
        data = path.read_bytes()
        return json.loads(data), hashlib.md5(data).hexdigest()

    def get(self, key: str) -> tuple[dict[str, Any] | None, str | None]:
        with self._locked(key) as path:
            return self._read(path)

    def put(self, key: str, doc: dict[str, Any], etag: str | None) -> str:
        with self._locked(key) as path:
            _, current = self._read(path)
            if current != etag:
                raise Conflict(f"{path} changed since it was read")
            data = json.dumps(doc, indent=1, sort_keys=True).encode()
            tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}")
            tmp.write_bytes(data)
            os.replace(tmp, path)
            return hashlib.md5(data).hexdigest()

    def delete(self, key: str, etag: str) -> None:
        with self._locked(key) as path:
            _, current = self._read(path)
            if current is None:
                return
            if current != etag:
                raise Conflict(f"{path} changed since it was read")
            path.unlink()


def _code(exc: Exception) -> str:
    resp = getattr(exc, "response", None) or {}
    return str((resp.get("Error") or {}).get("Code") or (resp.get("ResponseMetadata") or {}).get("HTTPStatusCode"))


def state_root(p: dict[str, Any]) -> str:
    """Where records live: the `state_root` param, else the Variable `upgrade_gate_state_root`."""
    if p.get("state_root"):
        return str(p["state_root"])
    try:
        from airflow.sdk import Variable

        return str(Variable.get("upgrade_gate_state_root", default="") or "")
    except Exception:  # outside a task (tests driving the steps directly): no Variable backend
        return ""


def open_store(p: dict[str, Any]) -> Store:
    root = state_root(p)
    if root.startswith("s3://"):
        from flink_gate.hooks.storage import SavepointStorageHook

        return S3Store(SavepointStorageHook(p.get("aws_conn_id") or None).s3_client, root)
    if root:
        return LocalStore(Path(root.removeprefix("file://")))
    from flink_gate.paths import work_root

    return LocalStore(work_root() / "_records")


# ---- the record -----------------------------------------------------------------------------------
@dataclass
class UpgradeRecord:
    """The upgrade record of one job: `doc` as last read or written, saved only with If-Match."""

    store: Store
    job_name: str
    doc: dict[str, Any] = field(default_factory=dict)
    etag: str | None = None

    @property
    def key(self) -> str:
        return f"upgrades/{job_key(self.job_name)}/record.json"

    @property
    def where(self) -> str:
        return self.store.describe(self.key)

    def load(self) -> UpgradeRecord:
        doc, self.etag = self.store.get(self.key)
        self.doc = doc or {}
        return self

    @property
    def state(self) -> str | None:
        return self.doc.get("state")

    def get(self, name: str, default: Any = None) -> Any:
        return self.doc.get(name, default)

    def __getitem__(self, name: str) -> Any:
        return self.doc[name]

    def __contains__(self, name: str) -> bool:
        return name in self.doc

    def save(self, **changes: Any) -> None:
        """Apply `changes` and write them, only if nobody wrote the record since we read it.

        Every string is stripped of URL credentials first (`user:password@` in a connection's host reaches
        error texts, and error texts reach `outcome`): the record is read by people and by later runs."""
        changes = redact_value(changes)
        doc = {**self.doc, **changes, "job_name": self.job_name, "write_id": uuid.uuid4().hex,
               "updated_at": iso(now())}
        if "state" in changes and changes["state"] != self.doc.get("state"):
            doc["history"] = [*self.doc.get("history", []), {"state": changes["state"], "at": doc["updated_at"]}]
        self.etag = self.store.put(self.key, doc, self.etag)
        self.doc = doc


# ---- the lease ------------------------------------------------------------------------------------
@dataclass
class Lease:
    """One upgrade per job at a time. `holder` names the DAG run (`dag_id/run_id`)."""

    store: Store
    job_name: str
    holder: str
    ttl: float = 900.0
    etag: str | None = None
    doc: dict[str, Any] = field(default_factory=dict)
    taken_over_from: dict[str, Any] | None = None
    lost: str | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _writing: threading.Lock = field(default_factory=threading.Lock)

    @property
    def key(self) -> str:
        return f"upgrades/{job_key(self.job_name)}/lease.json"

    def _doc(self) -> dict[str, Any]:
        t = now()
        return {"job_name": self.job_name, "holder": self.holder, "host": socket.gethostname(), "pid": os.getpid(),
                "acquired_at": self.doc.get("acquired_at") or iso(t), "renewed_at": iso(t), "expires_at": t + self.ttl,
                "expires": iso(t + self.ttl), "write_id": uuid.uuid4().hex}

    def held_by_other(self, current: dict[str, Any] | None) -> bool:
        return current is not None and current.get("holder") != self.holder and current.get("expires_at", 0) > now()

    def refusal(self, current: dict[str, Any]) -> LeaseHeld:
        return LeaseHeld(f"Flink job {self.job_name!r} is being upgraded by DAG run {current.get('holder')} "
                         f"(lease renewed {current.get('renewed_at')}, expires {current.get('expires')}, "
                         f"{self.store.describe(self.key)}); refusing a second upgrade of the same job")

    def acquire(self) -> Lease:
        """Take the lease, or raise `LeaseHeld` naming the run that holds it and its expiry."""
        for _ in range(5):
            current, etag = self.store.get(self.key)
            if self.held_by_other(current):
                raise self.refusal(current)  # type: ignore[arg-type]
            if current is not None and current.get("holder") != self.holder:
                self.taken_over_from = current  # expired: the caller reconciles before acting
            try:
                doc = self._doc()
                self.etag = self.store.put(self.key, doc, etag)
                self.doc = doc
                return self
            except Conflict:
                continue  # someone wrote it between our read and our write: look again
        raise LeaseHeld(f"Flink job {self.job_name!r}: the lease {self.store.describe(self.key)} keeps changing; "
                        "another run is taking it")

    def renew(self) -> None:
        # one writer at a time: the heartbeat and a fence both write If-Match the same etag, and the
        # loser of that race would wrongly conclude the lease was taken
        with self._writing:
            if self.lost:
                raise LeaseLost(self.lost)
            doc = self._doc()
            try:
                self.etag = self.store.put(self.key, doc, self.etag)
                self.doc = doc
            except Conflict as exc:
                current, _ = self.store.get(self.key)
                taker = (current or {}).get("holder") or "another run (which has finished and released it since)"
                self.lost = (f"the upgrade lease of {self.job_name!r} was taken by {taker} while this run "
                             f"({self.holder}) was not looking (paused, or cut off from the store); this run "
                             "stopped before acting again and the new holder settles what it did")
                raise LeaseLost(self.lost) from exc

    def check(self) -> None:
        """Raise `LeaseLost` if the heartbeat already found the lease taken."""
        if self.lost:
            raise LeaseLost(self.lost)

    def fence(self) -> None:
        """The fencing step, called immediately before every request that acts on the cluster: a
        conditional write of the lease. It fails (`LeaseLost`) if another run took the lease since our last
        write, however long this process was paused in between; the heartbeat cannot tell a paused
        holder, because it was paused too.

        A write that succeeded proves the lease was ours when the store applied it, and for `ttl` after we
        built it. If the answer took long to come back (the holder was paused while the write was in flight,
        or the store was slow), that time may have run out and another run may hold the lease now: so such a
        write proves nothing and is made again, and a takeover makes the second write lose."""
        for _ in range(FENCE_ATTEMPTS):
            started = time.monotonic()
            self.renew()
            if time.monotonic() - started < self.ttl * FENCE_FRESH:
                return
        raise LeaseSlow(f"the upgrade lease of {self.job_name!r} ({self.store.describe(self.key)}): {FENCE_ATTEMPTS} "
                        f"fencing writes in a row each took more than {self.ttl * FENCE_FRESH:.0f}s; this run sent "
                        "nothing to the cluster, since it cannot be sure it still holds the lease")

    def start_heartbeat(self) -> None:
        def beat() -> None:
            while not self._stop.wait(max(1.0, self.ttl / 3)):
                try:
                    self.renew()
                except LeaseLost:
                    return
                except Exception:  # the store is briefly unreachable: try again next beat
                    continue

        self._thread = threading.Thread(target=beat, name=f"lease-{job_key(self.job_name)}", daemon=True)
        self._thread.start()

    def stop_heartbeat(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def release(self) -> None:
        self.stop_heartbeat()
        if self.lost or self.etag is None:
            return
        with contextlib.suppress(Conflict):
            self.store.delete(self.key, self.etag)


def refuse_if_leased(p: dict[str, Any], holder: str) -> None:
    """Raise `LeaseHeld` now if another run holds the job's lease (a look, not a take)."""
    lease = Lease(open_store(p), p["job_name"], holder)
    current, _ = lease.store.get(lease.key)
    if lease.held_by_other(current):
        raise lease.refusal(current)  # type: ignore[arg-type]


@contextlib.contextmanager
def exclusive(p: dict[str, Any], holder: str, ttl: float | None = None) -> Iterator[tuple[UpgradeRecord, Lease]]:
    """Hold the job's lease (renewed in the background) around the block; yield its record.

    The lease is released when the block leaves the record in a final state; otherwise it is
    kept until it expires, so no other run starts on a half-done upgrade while this run's
    Airflow retry (the same holder) can resume at once."""
    store = open_store(p)
    ttl = float(ttl if ttl is not None else p.get("lease_ttl_s") or max(900.0, 3 * float(p.get("timeout_s", 600))))
    lease = Lease(store, p["job_name"], holder, ttl).acquire()
    lease.start_heartbeat()
    record = UpgradeRecord(store, p["job_name"]).load()
    try:
        yield record, lease
    finally:
        lease.stop_heartbeat()
        with contextlib.suppress(Exception):  # unreachable store: the lease simply expires
            record.load()
            if record.state in TERMINAL_STATES or record.get("run") != holder:
                lease.release()


def release_after_final_failure(p: dict[str, Any], holder: str) -> bool:
    """Give the job's lease back when the run's upgrade task failed for good (no retry left).

    The lease outlives a failed attempt so that the run's own retry resumes at once and nobody else starts
    on a half-done upgrade; once no retry is left, keeping it would only lock the job out for the rest of its
    TTL (16 minutes with the job stopped, as measured before this existed). The next run takes the lease and
    settles the record with the cluster (`rollback.settle`). Returns whether a lease was released."""
    store = open_store(p)
    lease = Lease(store, p["job_name"], holder)
    current, etag = store.get(lease.key)
    if current is None or current.get("holder") != holder or etag is None:
        return False
    with contextlib.suppress(Conflict):  # renewed or taken meanwhile: not ours to delete any more
        store.delete(lease.key, etag)
        return True
    return False

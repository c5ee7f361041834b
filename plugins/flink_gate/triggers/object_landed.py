"""An asset-watcher trigger that fires once per object newly written under an object-storage prefix.

Why polling: Airflow 3 starts an asset-scheduled DAG from an `AssetWatcher`, whose trigger must be a
`BaseEventTrigger` (airflow.triggers.base). The amazon provider's event triggers read SQS or Kinesis; SeaweedFS,
MinIO without a notification target and many on-premise stores have neither, while every S3 store can list a
prefix. So this trigger lists the prefix (boto3 `list_objects_v2`, through the gate's own AWS connection and
`SavepointStorageHook`) every `poll_interval` seconds and yields one `TriggerEvent` per object that is new or
rewritten: payload `{"uri", "bucket", "key", "etag", "last_modified", "size"}`.

What it remembers (docs/guide.md, "The asset-driven gate"): the objects it has seen, in Airflow's asset state
store (`asset_state_store`, one row per watched asset in the metadata database, Airflow 3.3), written after each
poll's events were handed to the triggerer. Hence:

* the first poll of an asset (nothing remembered) takes what is there as seen and fires nothing: a graph
  pushed last month does not start a gate when the DAG is deployed;
* a triggerer restart resumes from the stored objects: what landed while it was down fires once it is back,
  and what it had fired before does not fire again, unless the restart fell between an event and the save
  (then that object fires twice: at least once, and a gate run is idempotent);
* an object counts as new when its (ETag, LastModified) pair was not seen; only objects modified within
  `lookback_s` of the newest one seen are remembered, so the state stays small on a prefix that holds years
  of savepoints, while an upload whose LastModified lags (S3 dates a multipart upload by its start) or a
  listing that is late to show an object is still caught if it appears within that window.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator, Iterable
from typing import Any

from airflow.triggers.base import BaseEventTrigger, TriggerEvent

STATE_KEY = "objects_seen"  # {key: [etag, last_modified epoch seconds]} in the asset state store
DEFAULT_POLL_S = 60.0
DEFAULT_LOOKBACK_S = 3600.0

Seen = dict[str, list[Any]]


def split_uri(prefix: str) -> tuple[str, str]:
    """`s3://bucket/some/prefix/` -> ("bucket", "some/prefix/")."""
    if not prefix.startswith("s3://"):
        raise ValueError(f"watch prefix {prefix!r}: not an s3:// URI")
    bucket, _, key = prefix.removeprefix("s3://").partition("/")
    if not bucket:
        raise ValueError(f"watch prefix {prefix!r}: no bucket")
    return bucket, key


def listed(pages: Iterable[dict[str, Any]], suffixes: tuple[str, ...], top_level: bool, prefix: str) -> Seen:
    """The objects of `list_objects_v2` pages that the watch is about: {key: [etag, last_modified]}."""
    out: Seen = {}
    for page in pages:
        for obj in page.get("Contents") or ():
            key = str(obj["Key"])
            if suffixes and not key.endswith(suffixes):
                continue
            if top_level and "/" in key[len(prefix):]:
                continue
            modified = obj["LastModified"]
            stamp = modified.timestamp() if isinstance(modified, dt.datetime) else float(modified)
            out[key] = [str(obj.get("ETag") or "").strip('"'), stamp, int(obj.get("Size") or 0)]
    return out


def landed(now: Seen, before: Seen | None, lookback_s: float) -> tuple[list[str], Seen]:
    """Which keys of `now` landed since `before` (none on a first poll), and what to remember next.

    Remembered: every object modified within `lookback_s` of the newest one listed."""
    newest = max((v[1] for v in now.values()), default=0.0)
    horizon = newest - lookback_s
    keep = {k: v[:2] for k, v in now.items() if v[1] >= horizon}
    if before is None:
        return [], keep
    old_horizon = max((v[1] for v in before.values()), default=0.0) - lookback_s
    new = [k for k, v in sorted(now.items(), key=lambda kv: (kv[1][1], kv[0]))
           if (before.get(k) or [None, None])[:2] != v[:2] and v[1] >= old_horizon]
    return new, keep


class ObjectLandedTrigger(BaseEventTrigger):
    """Fire once per object newly written under `prefix` (see the module docstring for what "new" means).

    :param prefix: `s3://bucket/prefix/` to watch.
    :param aws_conn_id: the Airflow AWS connection (the gate's `aws_default`): endpoint, keys, region.
    :param suffixes: only keys ending so (e.g. `("/_metadata",)`, `(".json", ".yaml")`); empty: all.
    :param top_level: only keys directly under the prefix (a catalogue of `<job>.json`), not in sub-folders.
    :param poll_interval: seconds between listings.
    :param lookback_s: how far behind the newest object a late-appearing one is still recognised as new.
    """

    def __init__(self, prefix: str, aws_conn_id: str | None = "aws_default", suffixes: Iterable[str] = (),
                 top_level: bool = False, poll_interval: float = DEFAULT_POLL_S,
                 lookback_s: float = DEFAULT_LOOKBACK_S) -> None:
        super().__init__()
        split_uri(prefix)
        self.prefix = prefix
        self.aws_conn_id = aws_conn_id
        self.suffixes = tuple(suffixes)
        self.top_level = top_level
        self.poll_interval = float(poll_interval)
        self.lookback_s = float(lookback_s)
        self._memory: Seen | None = None  # used only when Airflow hands no asset state store

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{type(self).__module__}.{type(self).__qualname__}",
                {"prefix": self.prefix, "aws_conn_id": self.aws_conn_id, "suffixes": list(self.suffixes),
                 "top_level": self.top_level, "poll_interval": self.poll_interval, "lookback_s": self.lookback_s})

    def _list(self) -> Seen:
        from flink_gate.hooks.storage import SavepointStorageHook

        bucket, key = split_uri(self.prefix)
        client = SavepointStorageHook(self.aws_conn_id).s3_client
        pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=key)
        return listed(pages, self.suffixes, self.top_level, key)

    async def _load(self) -> Seen | None:
        store = self.asset_state_store
        if store is None:
            return self._memory
        value = await store.aget(STATE_KEY, default=None)
        return value if isinstance(value, dict) else None

    async def _save(self, seen: Seen) -> None:
        self._memory = seen
        if self.asset_state_store is not None:
            await self.asset_state_store.aset(STATE_KEY, seen)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        bucket, _ = split_uri(self.prefix)
        if self.asset_state_store is None:
            self.log.warning("no asset state store: objects seen are remembered in memory only")
        while True:
            try:
                now = await asyncio.to_thread(self._list)
            except Exception as exc:  # a store that is down for a while is not the end of the watch
                self.log.warning("listing %s failed, retrying in %.0fs: %s", self.prefix, self.poll_interval, exc)
                await asyncio.sleep(self.poll_interval)
                continue
            before = await self._load()
            new, keep = landed(now, before, self.lookback_s)
            if before is None:
                self.log.info("watching %s: %d object(s) already there are taken as seen", self.prefix, len(now))
            for key in new:
                etag, stamp, size = now[key]
                self.log.info("landed: s3://%s/%s (ETag %s)", bucket, key, etag)
                yield TriggerEvent({"uri": f"s3://{bucket}/{key}", "bucket": bucket, "key": key, "etag": etag,
                                    "last_modified": dt.datetime.fromtimestamp(stamp, dt.UTC).isoformat(),
                                    "size": size})
            await self._save(keep)
            await asyncio.sleep(self.poll_interval)

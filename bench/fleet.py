"""A realistic Flink fleet on disk, for the Spark jobs' tests and benchmarks (never product code).

`generate_fleet(root, jobs=N)` writes N jobs:

* `specs/<job>.json`: the job graph running today (docs/graph-spec.md), built from the graph shapes
  real Flink produced for the conformance catalogue (`tests/fixtures/flink/2.3.0/graphs/*.json`),
  composed into jobs of 3 to 200 operators (or exactly `ops` operators);
* `savepoints/<job>/savepoint-<hex>-<hex>/_metadata`: a savepoint of that job, in the binary
  format real Flink 1.20 (v4) or 2.3 (v6) writes, under the operator ids our V2 hasher gives
  (which real Flink gives, see the conformance tests); state handles are shaped like the real
  fixtures' (`tests/fixtures/savepoints/`): source reader splits plus coordinator state, legacy
  source offsets, keyed state in canonical key-group handles (inline below 4 KB, else relative
  files), list/union/broadcast operator state. Every state stream starts with the serialization
  proxy real Flink wrote (`RealStreams`: the operator streams are real Flink's bytes whole, a keyed
  stream is real Flink's `KeyedBackendSerializationProxy` followed by random key-group bytes), so
  the state-schema rule reads every state (upgrade_gate/flink/state_meta/). A relative file holds
  that proxy and a short tail, not the whole declared size (the readers read only the proxy).
  Some jobs also get an older savepoint and an incomplete one (no `_metadata`), so "newest
  complete savepoint" is exercised;
* `upgrades/<job>.json`: the graph of the next version of the job, made by one scenario with a
  known outcome (`SCENARIOS`), and `plan.csv` / `fleet.json`: per job the hasher, the
  `allowNonRestoredState` flag, the Flink version to run and the expected verdict.

Every `_metadata` is read back with the product's reader and compared with what was written;
every scenario's intended effect on operator ids is asserted with the hasher (so an expected
verdict is never a guess). The expected verdicts follow Flink's restore rules
(`Checkpoints.loadAndValidateCheckpoint`, `StateAssignmentOperation`; docs/design.md, "The check").

Usage: python -m bench.fleet OUT --jobs 300 [--ops 50] [--seed 7]
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import random
import struct
import sys
import time
import uuid
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from hashing.graph import StreamGraph
from hashing.keygroups import compute_default_max_parallelism, compute_key_group_range_for_operator_index
from hashing.operator_ids import OperatorIds, compute_operator_ids
from hashing.readers import parse_graph
from upgrade_gate.flink.metadata import parse_metadata
from upgrade_gate.flink.metadata.reader import BoundedReader
from upgrade_gate.flink.state_meta import read_state_schemas
from upgrade_gate.flink.state_meta.proxy import read_keyed_proxy

REPO = Path(__file__).resolve().parent.parent
TEMPLATE_DIR = REPO / "tests" / "fixtures" / "flink" / "2.3.0" / "graphs"
SAVEPOINT_FIXTURES = REPO / "tests" / "fixtures" / "savepoints"
MAGIC = 0x4960672D
INLINE_LIMIT = 4096  # bytes; larger state goes to "files" (relative handles), as Flink's memory threshold does
MAX_OPS = 200
FLEET_FORMAT = 2  # bumped when the files change (2: real serialization proxies); names the benchmarks' cache
FILE_TAIL = 256  # bytes after the proxy in a relative state file (the declared size is the state's)

# scenario -> (weight, expected verdict without / with allowNonRestoredState)
SCENARIOS: dict[str, tuple[float, str, str]] = {
    "unchanged": (0.22, "SAFE", "SAFE"),
    "rescale": (0.14, "SAFE", "SAFE"),
    "v3_hasher": (0.14, "SAFE", "SAFE"),
    # derived from v3_hasher when a FLIP-27 source has no uid: its V3 id differs, the task state restores
    # through the V2 alternative, but coordinator state is looked up by the generated id only
    # (`StateAssignmentOperation#restoreStateToCoordinators`)
    "v3_hasher_coordinator_reset": (0.0, "STATE_LOSS", "STATE_LOSS"),
    "insert_stateless_with_uids": (0.10, "SAFE", "SAFE"),
    "insert_before_stateful_no_uids": (0.12, "RESTORE_FAILS", "STATE_LOSS"),
    "uid_changed": (0.12, "RESTORE_FAILS", "STATE_LOSS"),
    "max_parallelism_changed": (0.07, "RESTORE_FAILS", "RESTORE_FAILS"),
    "parallelism_above_max": (0.05, "RESTORE_FAILS", "RESTORE_FAILS"),
    "flink_downgrade": (0.04, "RESTORE_FAILS", "RESTORE_FAILS"),
}


# ---- graph templates and composition -----------------------------------------------------
def load_templates(directory: Path = TEMPLATE_DIR) -> list[dict[str, Any]]:
    """The conformance catalogue's specs that Flink built and that run in streaming mode."""
    out = []
    for path in sorted(directory.glob("*.json")):
        doc = json.loads(path.read_text(encoding="utf-8"))
        flink = doc.get("flink") or {}
        if doc.get("spec") is None or flink.get("error") or (flink.get("stream_graph") or {}).get("dynamic"):
            continue
        spec = doc["spec"]
        spec["_case"] = doc.get("case", path.stem)
        out.append(spec)
    if not out:
        raise RuntimeError(f"no graph templates in {directory}")
    return out


def _synthetic_pipeline(n: int, rng: random.Random) -> dict[str, Any]:
    """source -> map* -> keyBy -> process -> sink, `n` nodes (fills a job up to its exact size)."""
    p = rng.choice((1, 2, 4, 8))
    nodes = [{"id": 1, "name": "Source: events", "parallelism": p, "factory": "source"}]
    edges: list[dict[str, Any]] = []
    for i in range(2, n + 1):
        last = i == n
        keyed = i == max(2, n - 1) and n >= 3
        name = "Sink: Writer" if last and n >= 3 else ("KeyedProcess" if keyed else f"Map-{i}")
        nodes.append({"id": i, "name": name, "parallelism": p})
        edges.append({"source": i - 1, "target": i, "partitioner": "HASH" if keyed else "FORWARD"})
    return {"_case": "synthetic", "nodes": nodes, "edges": edges}


def compose_job(templates: list[dict[str, Any]], size: int, rng: random.Random, name: str) -> dict[str, Any]:
    """Independent pipelines from the catalogue, renumbered, uids made unique, exactly `size` nodes."""
    nodes: list[dict[str, Any]] = []
    edges: list[dict[str, Any]] = []
    used_uid_hashes: set[str] = set()
    component = 0
    while len(nodes) < size:
        room = size - len(nodes)
        fitting = [t for t in templates if len(t["nodes"]) <= room]
        template = rng.choice(fitting) if fitting and rng.random() < 0.85 else _synthetic_pipeline(room, rng)
        if not fitting and template["_case"] != "synthetic":
            template = _synthetic_pipeline(room, rng)
        base = len(nodes) + 1
        remap = {n["id"]: base + i for i, n in enumerate(sorted(template["nodes"], key=lambda n: n["id"]))}
        for raw in template["nodes"]:
            node = {k: v for k, v in raw.items() if k not in ("factory_class", "description")}
            node["id"] = remap[raw["id"]]
            if node.get("uid") is not None:
                node["uid"] = f"c{component}-{node['uid']}"
            if node.get("uid_hash") is not None:
                if node["uid_hash"].lower() in used_uid_hashes:
                    node["uid_hash"] = None
                else:
                    used_uid_hashes.add(node["uid_hash"].lower())
            nodes.append(node)
        for raw in template["edges"]:
            edges.append({**raw, "source": remap[raw["source"]], "target": remap[raw["target"]]})
        component += 1
    nodes.sort(key=lambda n: n["id"])
    return {"name": name, "chaining_enabled": True, "max_parallelism": None, "nodes": nodes, "edges": edges}


# ---- state a job holds ------------------------------------------------------------------
@dataclass
class NodeState:
    """What one operator keeps in a savepoint, per subtask (sizes in bytes)."""

    kind: str  # source | legacy_source | keyed | broadcast | list | none
    keyed_bytes: list[int] = field(default_factory=list)


def state_kind(spec: dict[str, Any], node: dict[str, Any], rng: random.Random) -> str:
    ins = [e for e in spec["edges"] if e["target"] == node["id"]]
    factory = node.get("factory", "operator")
    if factory == "source":
        return "source"
    if factory == "legacy_source":
        return "legacy_source"
    if any(e.get("partitioner") == "HASH" for e in ins):
        return "keyed"
    if len(ins) >= 2 and any(e.get("partitioner") == "BROADCAST" for e in ins):
        return "broadcast"
    if "sink" in node.get("name", "").lower() or "writer" in node.get("name", "").lower():
        return "none"
    return "list" if rng.random() < 0.12 else "none"


def is_stateful(kind: str) -> bool:
    return kind != "none"


# ---- the _metadata writer (test tooling: the product only reads) ------------------------
def modified_utf8(s: str) -> bytes:
    """`DataOutputStream.writeUTF`: u16 length + modified UTF-8 (NUL as C0 80, surrogates as 3 bytes each)."""
    out = bytearray()
    for ch in s:
        cp = ord(ch)
        if cp == 0:
            out += b"\xc0\x80"
        elif cp > 0xFFFF:
            cp -= 0x10000
            for unit in (0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF)):
                out += chr(unit).encode("utf-8", "surrogatepass")
        else:
            out += ch.encode("utf-8", "surrogatepass")
    if len(out) > 0xFFFF:
        raise ValueError("string too long for writeUTF")
    return struct.pack(">H", len(out)) + bytes(out)


def _properties_trailer(version: int) -> bytes:
    """The Java-serialized `CheckpointProperties` of a canonical savepoint, as real Flink wrote it."""
    release = "1.20.5" if version == 4 else "2.3.0"
    data = (SAVEPOINT_FIXTURES / release / "hashmap-canonical-p2" / "_metadata").read_bytes()
    at = data.rfind(b"\xac\xed\x00\x05")
    if at < 0:
        raise RuntimeError(f"no Java-serialized CheckpointProperties in the {release} fixture")
    return data[at:]


_TRAILERS: dict[int, bytes] = {}
# the savepoint real Flink wrote, per `_metadata` version, whose state-handle bytes the fleet reuses
REAL_STATE_RELEASES = {4: "1.20.5", 6: "2.3.0"}
# the operator state names in that savepoint -> the fleet's state kind
_OPERATOR_KINDS = {"SourceReaderState": "source", "legacy-offset": "legacy_source", "rules": "broadcast",
                   "split-list": "list"}


@dataclass(frozen=True)
class RealStreams:
    """State-handle bytes real Flink wrote into `hashmap-canonical-p2` (tests/fixtures/savepoints/).

    `operator[kind]`: the `OperatorStreamStateHandle`'s state map (name -> mode ordinal, offsets) and its
    whole stream (an `OperatorBackendSerializationProxy` and the elements); `keyed_proxy`: the
    `KeyedBackendSerializationProxy` a HashMap backend's canonical keyed stream starts with."""

    operator: dict[str, tuple[dict[str, tuple[int, list[int]]], bytes]]
    keyed_proxy: bytes


_REAL: dict[int, RealStreams] = {}


def real_streams(version: int) -> RealStreams:
    """The real state bytes for `_metadata` version 4 (Flink 1.20) or 6 (Flink 2.3), read once."""
    if version in _REAL:
        return _REAL[version]
    path = SAVEPOINT_FIXTURES / REAL_STATE_RELEASES[version] / "hashmap-canonical-p2" / "_metadata"
    meta = parse_metadata(path.read_bytes(), str(path), str(path.parent))
    operator: dict[str, tuple[dict[str, tuple[int, list[int]]], bytes]] = {}
    keyed_proxy = b""
    for op in meta.operator_states:
        if not op.subtask_states:
            continue
        first = op.subtask_states[min(op.subtask_states)]
        for h in first.managed_operator_state:
            kind = next(_OPERATOR_KINDS[n] for n in h.state_name_to_partition_offsets if n in _OPERATOR_KINDS)
            states = {n: (i.mode.value, list(i.offsets)) for n, i in h.state_name_to_partition_offsets.items()}
            operator[kind] = (states, h.delegate.data)
        for h in first.managed_keyed_state:
            data = h.delegate.data
            reader = BoundedReader(data, str(path))
            if read_keyed_proxy(reader, h.kind).incomplete is not None:
                raise RuntimeError(f"{path}: keyed proxy not read whole")
            keyed_proxy = data[:reader.pos]
    if set(operator) != set(_OPERATOR_KINDS.values()) or not keyed_proxy:
        raise RuntimeError(f"{path}: expected source, legacy source, list, broadcast and keyed state")
    _REAL[version] = RealStreams(operator, keyed_proxy)
    return _REAL[version]


class MetadataWriter:
    """Writes `_metadata` v4 (Flink 1.16–1.20) or v6 (Flink 2.1–2.3) as Flink's serializers lay it out."""

    def __init__(self, version: int, base_dir: str, rng: random.Random) -> None:
        if version not in (4, 6):
            raise ValueError("only versions 4 and 6 are written")
        self.version = version
        self.base_dir = base_dir
        self.rng = rng
        self.buf = bytearray()
        self.real = real_streams(version)
        self.files: list[tuple[str, bytes]] = []  # relative state files to write beside `_metadata`

    def _int(self, v: int) -> None:
        self.buf += struct.pack(">i", v)

    def _long(self, v: int) -> None:
        self.buf += struct.pack(">q", v)

    def _byte(self, v: int) -> None:
        self.buf += struct.pack(">b", v)

    def _utf(self, s: str) -> None:
        self.buf += modified_utf8(s)

    def _file_name(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def stream_handle(self, head: bytes, size: int) -> int:
        """A stream of `size` bytes starting with `head` (the proxy real Flink wrote), random after it:
        inline (tag 1) up to INLINE_LIMIT, else a file relative to the savepoint (tag 6) holding `head` and
        FILE_TAIL random bytes (the state readers read a stream's proxy, never the rest)."""
        if size <= INLINE_LIMIT:
            self._byte(1)
            self._utf(f"file:{self.base_dir}/{self._file_name()}")
            self._int(size)
            self.buf += head + self.rng.randbytes(size - len(head))
        else:
            name = self._file_name()
            self._byte(6)
            self._utf(name)
            self._long(size)
            self.files.append((name, head + self.rng.randbytes(FILE_TAIL)))
        return size

    def operator_handle(self, kind: str) -> int:
        """Tag 4: name -> (mode ordinal, partition offsets), then the stream, as real Flink wrote both."""
        states, stream = self.real.operator[kind]
        self._byte(4)
        self._int(len(states))
        for name, (mode, offsets) in states.items():
            self._utf(name)
            self._byte(mode)
            self._int(len(offsets))
            for off in offsets:
                self._long(off)
        return self.stream_handle(stream, len(stream))

    def keyed_handle(self, key_groups: tuple[int, int], size: int) -> int:
        """Tag 7 (canonical savepoint key groups): range, one offset per key group (after the proxy), delegate."""
        start, end = key_groups
        num = end - start + 1
        proxy = self.real.keyed_proxy
        size = max(size, len(proxy) + num)
        self._byte(7)
        self._int(start)
        self._int(num)
        step = max(1, (size - len(proxy)) // max(1, num))
        for i in range(num):
            self._long(len(proxy) + i * step)
        return self.stream_handle(proxy, size)

    def write(self, checkpoint_id: int, operators: list[dict[str, Any]]) -> bytes:
        self._int(MAGIC)
        self._int(self.version)
        self._long(checkpoint_id)
        self._int(0)  # master states
        self._int(len(operators))
        for op in operators:
            if self.version >= 5:
                self._utf(op["name"] or "")
                self._utf(op["uid"] or "")
            self.buf += op["id"]
            self._int(op["parallelism"])
            self._int(op["max_parallelism"])
            if op["coordinator_bytes"]:
                self._byte(1)
                self._utf(f"coordinator-{op['id'].hex()}")
                self._int(op["coordinator_bytes"])
                self.buf += self.rng.randbytes(op["coordinator_bytes"])
            else:
                self._byte(0)
            self._int(op["parallelism"])
            for index in range(op["parallelism"]):
                self._int(index)
                self._subtask(op, index)
        if self.version not in _TRAILERS:
            _TRAILERS[self.version] = _properties_trailer(self.version)
        self.buf += _TRAILERS[self.version]
        return bytes(self.buf)

    def _subtask(self, op: dict[str, Any], index: int) -> None:
        kind = op["kind"]
        if kind in ("source", "legacy_source", "list", "broadcast"):
            self._int(1)
            op["written"] += self.operator_handle(kind)
        else:
            self._int(0)
        self._int(0)  # raw operator state
        if kind == "keyed":
            rng_range = compute_key_group_range_for_operator_index(op["max_parallelism"], op["parallelism"], index)
            op["written"] += self.keyed_handle(rng_range, op["keyed_bytes"][index])
        else:
            self._byte(0)
        self._byte(0)  # raw keyed state
        self._int(0)  # input channel state
        self._int(0)  # result subpartition state


def savepoint_operators(graph: StreamGraph, ids: OperatorIds, kinds: dict[int, str],
                        rng: random.Random) -> list[dict[str, Any]]:
    """One entry per operator, with its job vertex's parallelism and (derived) max parallelism."""
    ops = []
    for vertex in ids.job_vertices:
        max_p = vertex.max_parallelism or compute_default_max_parallelism(vertex.parallelism)
        for pair in reversed(vertex.operators):
            kind = kinds[pair.node_id]
            per_subtask = [int(math.exp(rng.gauss(math.log(2e6), 2.5))) + 64 for _ in range(vertex.parallelism)]
            ops.append({"id": pair.generated, "name": pair.name, "uid": pair.uid, "node_id": pair.node_id,
                        "parallelism": vertex.parallelism, "max_parallelism": max_p, "kind": kind,
                        "coordinator_bytes": 16 if kind == "source" else 0,
                        "keyed_bytes": per_subtask if kind == "keyed" else [], "written": 0})
    return ops


def write_savepoint(directory: Path, version: int, checkpoint_id: int, operators: list[dict[str, Any]],
                    rng: random.Random) -> bytes:
    """Write and validate one `_metadata`: read back, every id, parallelism and byte count must match."""
    for op in operators:
        op["written"] = 0
    writer = MetadataWriter(version, str(directory), rng)
    data = writer.write(checkpoint_id, operators)
    directory.mkdir(parents=True, exist_ok=True)
    for name, content in writer.files:
        (directory / name).write_bytes(content)
    target = directory / "_metadata"
    target.write_bytes(data)
    meta = parse_metadata(data, str(target), str(directory))
    if meta.version != version or meta.checkpoint_id != checkpoint_id or len(meta.operator_states) != len(operators):
        raise AssertionError(f"{target}: read back differently")
    for op, got in zip(operators, meta.operator_states, strict=True):
        expect = op["written"] + op["coordinator_bytes"]
        if (got.operator_id != op["id"] or got.parallelism != op["parallelism"]
                or got.max_parallelism != op["max_parallelism"] or got.state_size != expect):
            raise AssertionError(f"{target}: operator {op['id'].hex()} read back as {got.operator_id.hex()} "
                                 f"p={got.parallelism} maxp={got.max_parallelism} bytes={got.state_size}, "
                                 f"wrote p={op['parallelism']} maxp={op['max_parallelism']} bytes={expect}")
        if version >= 5 and (got.name != (op["name"] or None) or got.uid != (op["uid"] or None)):
            raise AssertionError(f"{target}: name/uid of {op['id'].hex()} read back differently")
    # every state stream's proxy reads back whole, inline and in files (what the state-schema rule reads)
    stateful = [op for op in operators if op["written"]]
    schemas = read_state_schemas(meta, strict=True)
    if len(schemas) != len(stateful) or any(s.incomplete or not s.states for s in schemas):
        raise AssertionError(f"{target}: state serialization proxies read back incomplete")
    return data


# ---- upgrade scenarios ------------------------------------------------------------------
@dataclass(frozen=True)
class FleetJob:
    job: str
    scenario: str
    hasher: str
    allow_non_restored_state: bool
    flink_version: str
    expected_verdict: str
    operators: int
    metadata_version: int
    state_bytes: int
    spec: str
    upgrade: str
    savepoint: str


def _graph(spec: dict[str, Any]) -> StreamGraph:
    return parse_graph(spec, spec.get("name", "job")).graph


def _clone(spec: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(spec))


def _insert_after_source(spec: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """A new chained map right after a source: its out-edges move to the new node, in place."""
    new = _clone(spec)
    sources = sorted({n["id"] for n in new["nodes"]} - {e["target"] for e in new["edges"]})
    src = rng.choice(sources)
    src_node = next(n for n in new["nodes"] if n["id"] == src)
    nid = max(n["id"] for n in new["nodes"]) + 1
    new["nodes"].append({"id": nid, "name": "Map: enrich", "parallelism": src_node.get("parallelism", 1),
                         "max_parallelism": src_node.get("max_parallelism")})
    edges = []
    placed = False
    for e in new["edges"]:
        if e["source"] == src:
            if not placed:
                edges.append({"source": src, "target": nid, "partitioner": "FORWARD"})
                placed = True
            e = {**e, "source": nid}
        edges.append(e)
    if not placed:
        edges.append({"source": src, "target": nid, "partitioner": "FORWARD"})
    new["edges"] = edges
    return new


def _scale(spec: dict[str, Any], factor: int) -> dict[str, Any]:
    new = _clone(spec)
    for n in new["nodes"]:
        n["parallelism"] = n.get("parallelism", 1) * factor
    return new


def _state_ids(operators: list[dict[str, Any]]) -> set[bytes]:
    return {op["id"] for op in operators if op["written"] + op["coordinator_bytes"] > 0}


def _restorable(ids: OperatorIds, state: set[bytes]) -> set[bytes]:
    known = set()
    for p in ids.pairs.values():
        known.add(p.generated)
        known.update(p.alternatives)
    return state & known


def make_job(job: str, templates: list[dict[str, Any]], size: int, rng: random.Random, root: Path,
             scenario: str | None = None) -> FleetJob:
    """Build one job: today's graph, its savepoint(s), the upgrade and the expected verdict."""
    names = list(SCENARIOS)
    scenario = scenario or rng.choices(names, weights=[SCENARIOS[s][0] for s in names])[0]
    version = rng.choice((4, 6))
    if scenario == "flink_downgrade":
        version = 6
    anrs = rng.random() < 0.5
    spec = compose_job(templates, size, rng, job)
    kinds = {n["id"]: state_kind(spec, n, rng) for n in spec["nodes"]}
    for n in spec["nodes"]:  # uid discipline the scenario needs, on today's graph
        if scenario in ("insert_stateless_with_uids", "uid_changed") and is_stateful(kinds[n["id"]]):
            n["uid"] = n.get("uid") or f"{job}-op-{n['id']}"
        if scenario == "insert_before_stateful_no_uids":
            n["uid"] = None
            n["uid_hash"] = None
    graph = _graph(spec)
    ids = compute_operator_ids(graph, "v2", "2.3" if version == 6 else "1.20")
    operators = savepoint_operators(graph, ids, kinds, rng)

    sp_root = root / "savepoints" / job
    if rng.random() < 0.2:  # an older complete savepoint, and sometimes an incomplete newer one
        old_dir = sp_root / f"savepoint-{rng.getrandbits(24):06x}-{rng.getrandbits(48):012x}"
        write_savepoint(old_dir, version, 1, operators, rng)
        past = time.time() - 3600
        os.utime(old_dir / "_metadata", (past, past))
    sp_dir = sp_root / f"savepoint-{rng.getrandbits(24):06x}-{rng.getrandbits(48):012x}"
    write_savepoint(sp_dir, version, rng.randrange(2, 10_000), operators, rng)
    if rng.random() < 0.1:
        incomplete = sp_root / f"savepoint-{rng.getrandbits(24):06x}-{rng.getrandbits(48):012x}"
        incomplete.mkdir(parents=True, exist_ok=True)
        (incomplete / "9f0c8e3a-state").write_bytes(b"\0" * 64)
    with_state = _state_ids(operators)

    hasher, flink_version = "v2", "2.3"
    upgrade = _clone(spec)
    if not with_state and scenario not in ("unchanged", "v3_hasher", "flink_downgrade"):
        scenario = "unchanged"
    if scenario == "rescale":
        max_ps = [op["max_parallelism"] for op in operators if op["id"] in with_state]
        top = max(n.get("parallelism", 1) for n in spec["nodes"])
        explicit_ok = all(n.get("max_parallelism") is None or n["parallelism"] * 2 <= n["max_parallelism"]
                          for n in spec["nodes"])
        if max_ps and top * 2 <= min(max_ps) and explicit_ok:
            upgrade = _scale(spec, 2)
        else:
            scenario = "unchanged"
    elif scenario == "v3_hasher":
        hasher = "v3"
    elif scenario in ("insert_stateless_with_uids", "insert_before_stateful_no_uids"):
        upgrade = _insert_after_source(spec, rng)
    elif scenario == "uid_changed":
        target = rng.choice([op for op in operators if op["id"] in with_state])
        node = next(n for n in upgrade["nodes"] if n["id"] == target["node_id"])
        node["uid"] = f"{node['uid']}-v2"
        node["uid_hash"] = None
    elif scenario == "max_parallelism_changed":
        keyed = [op for op in operators if op["kind"] == "keyed" and op["id"] in with_state]
        if keyed:
            target = rng.choice(keyed)
            node = next(n for n in upgrade["nodes"] if n["id"] == target["node_id"])
            node["max_parallelism"] = min(32768, target["max_parallelism"] * 2)
        else:
            scenario = "unchanged"
    elif scenario == "parallelism_above_max":
        stateful = [op for op in operators if op["id"] in with_state]
        target = min(stateful, key=lambda op: op["max_parallelism"] / op["parallelism"])
        factor = target["max_parallelism"] // target["parallelism"] + 1
        if max(n.get("parallelism", 1) for n in spec["nodes"]) * factor <= 32768 and all(
                n.get("max_parallelism") is None for n in spec["nodes"]):
            upgrade = _scale(spec, factor)
        else:
            scenario = "uid_changed" if any(op["uid"] for op in operators if op["id"] in with_state) else "unchanged"
            if scenario == "uid_changed":
                target = next(op for op in operators if op["id"] in with_state and op["uid"])
                node = next(n for n in upgrade["nodes"] if n["id"] == target["node_id"])
                node["uid"] = f"{node['uid']}-v2"
                node["uid_hash"] = None
    elif scenario == "flink_downgrade":
        flink_version = "1.20"

    # assert the scenario did to the operator ids what it is meant to do
    new_ids = compute_operator_ids(_graph(upgrade), hasher, flink_version)
    kept = _restorable(new_ids, with_state)
    if scenario in ("insert_before_stateful_no_uids", "uid_changed"):
        if kept == with_state:  # nothing lost after all: the job is, in fact, safe
            scenario = "unchanged"
            upgrade = _clone(spec)
    elif kept != with_state:
        raise AssertionError(f"{job}: scenario {scenario} unexpectedly re-keys state")
    generated = {p.generated for p in new_ids.pairs.values()}
    if scenario == "v3_hasher" and any(op["coordinator_bytes"] and op["id"] not in generated for op in operators):
        scenario = "v3_hasher_coordinator_reset"
    expected = SCENARIOS[scenario][2 if anrs else 1]
    # ground truth of misrouting: state whose id another node of the new graph now claims (node ids are
    # kept between the versions; the inserted node is new)
    claimed_by = {i: p.node_id for p in new_ids.pairs.values() for i in (p.generated, *p.alternatives)}
    if expected == "STATE_LOSS" and any(claimed_by.get(op["id"], op["node_id"]) != op["node_id"]
                                        for op in operators if op["id"] in with_state):
        expected = "STATE_MISROUTED"

    (root / "specs").mkdir(parents=True, exist_ok=True)
    (root / "upgrades").mkdir(parents=True, exist_ok=True)
    (root / "specs" / f"{job}.json").write_text(json.dumps(spec), encoding="utf-8")
    (root / "upgrades" / f"{job}.json").write_text(json.dumps(upgrade), encoding="utf-8")
    return FleetJob(job, scenario, hasher, anrs, flink_version, expected, len(spec["nodes"]), version,
                    sum(op["written"] + op["coordinator_bytes"] for op in operators),
                    f"specs/{job}.json", f"upgrades/{job}.json", f"savepoints/{job}")


def _sizes(jobs: int, ops: int | None, rng: random.Random) -> Iterable[int]:
    for _ in range(jobs):
        yield ops if ops else min(MAX_OPS, max(3, int(math.exp(rng.uniform(math.log(3), math.log(MAX_OPS + 1))))))


def generate_fleet(root: str | Path, jobs: int, *, ops: int | None = None, seed: int = 7) -> list[FleetJob]:
    """Write a fleet of `jobs` jobs under `root` (see the module docstring); returns the plan."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    templates = load_templates()
    fleet = [make_job(f"job-{i:05d}", templates, size, rng, root)
             for i, size in enumerate(_sizes(jobs, ops, rng))]
    with open(root / "plan.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["job", "hasher", "allow_non_restored_state", "flink_version"])
        for j in fleet:
            w.writerow([j.job, j.hasher, str(j.allow_non_restored_state).lower(), j.flink_version])
    (root / "fleet.json").write_text(json.dumps([asdict(j) for j in fleet], indent=1), encoding="utf-8")
    return fleet


def replicate_fleet(source: str | Path, root: str | Path, times: int) -> list[dict[str, Any]]:
    """A fleet `times` as large: every job of `source` again as `<job>-r<k>`, by reference.

    Writes only `fleet.json` and `plan.csv` under `root`; each replica's spec, upgrade and savepoint
    paths point at its original's files (relative to `root`), so the benchmark hands the Spark jobs
    explicit (job, path) rows rather than a folder to list. Each replica costs the Spark jobs exactly
    the work of its original: every job is read, parsed, hashed and simulated on its own, and the
    core's only caches are keyed by values every fleet repeats (such as `murmur.traverse_id_hash`).
    A 100,000-job benchmark then needs 10,000 generated jobs, not hours of generation on a loaded
    machine. What it does not reproduce: ten times the distinct bytes in the page cache."""
    source, root = Path(source).resolve(), Path(root)
    root.mkdir(parents=True, exist_ok=True)
    jobs = json.loads((source / "fleet.json").read_text(encoding="utf-8"))
    rel = os.path.relpath(source, root.resolve())
    out = [{**j, "job": j["job"] if k == 0 else f"{j['job']}-r{k}",
            **{part: f"{rel}/{j[part]}" for part in ("spec", "upgrade", "savepoint")}}
           for k in range(times) for j in jobs]
    with open(root / "plan.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["job", "hasher", "allow_non_restored_state", "flink_version"])
        for j in out:
            w.writerow([j["job"], j["hasher"], str(j["allow_non_restored_state"]).lower(), j["flink_version"]])
    (root / "fleet.json").write_text(json.dumps(out, indent=1), encoding="utf-8")
    return out


def _linked_complete(root: Path) -> bool:
    """Every job of a linked fleet still has its spec, upgrade and savepoint entry: files under `.work/` can
    be removed by other work, and a fleet missing some would make a run report "no savepoint" errors."""
    jobs = int((root / "_linked").read_text() or 0)
    return all((root / part).is_dir() and len(os.listdir(root / part)) == jobs
               for part in ("specs", "upgrades", "savepoints"))


def link_fleet(source: str | Path, root: str | Path, times: int) -> Path:
    """`replicate_fleet` as folders a Spark job can list: every replica's spec, upgrade and savepoint files
    are hard links to its original's, under the replica's name (`<job>-r<k>`), so `fleet_ids --catalogue`
    and `savepoint_scan --savepoints` (which list folders, as on a real cluster) see `times` as many jobs
    without `times` as many bytes. Hard links keep the files' mtimes, so each job's latest savepoint is its
    original's. Resumable: a finished fleet has `_linked`."""
    source, root = Path(source).resolve(), Path(root)
    if (root / "_linked").is_file() and _linked_complete(root):
        return root
    replicate_fleet(source, root, times)  # plan.csv and fleet.json under the replicas' names
    jobs = json.loads((source / "fleet.json").read_text(encoding="utf-8"))
    for k in range(times):
        for j in jobs:
            name = j["job"] if k == 0 else f"{j['job']}-r{k}"
            for part in ("spec", "upgrade", "savepoint"):
                original = source / j[part]
                target = root / Path(j[part]).parent / Path(j[part]).name.replace(j["job"], name, 1)
                files = [original] if original.is_file() else [f for f in original.rglob("*") if f.is_file()]
                for f in files:
                    dest = target / f.relative_to(original) if original.is_dir() else target
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    if not dest.exists():
                        os.link(f, dest)
    out = [{**j, **{part: str(Path(j[part]).parent / Path(j[part]).name.replace(j["job"], n, 1))
                    for part in ("spec", "upgrade", "savepoint")}, "job": n}
           for k in range(times) for j in jobs for n in [j["job"] if k == 0 else f"{j['job']}-r{k}"]]
    (root / "fleet.json").write_text(json.dumps(out, indent=1), encoding="utf-8")
    (root / "_linked").write_text(str(len(out)))
    return root


def upload_fleet(client: Any, bucket: str, root: Path, prefix: str, parts: tuple[str, ...] = ("savepoints",)) -> int:
    """Copy the fleet's files below `parts` to `s3://bucket/prefix/...` (test helper); returns the count.

    S3 orders savepoints by LastModified (one-second resolution), so files the generator backdated
    (older savepoints) are uploaded first and the rest more than a second later.
    """
    from concurrent.futures import ThreadPoolExecutor

    files = [p for part in parts for p in sorted((root / part).rglob("*")) if p.is_file()]
    cutoff = time.time() - 600
    older = [p for p in files if p.stat().st_mtime < cutoff]
    newer = [p for p in files if p.stat().st_mtime >= cutoff]

    def put(p: Path) -> None:
        client.put_object(Bucket=bucket, Key=f"{prefix}/{p.relative_to(root).as_posix()}", Body=p.read_bytes())

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(put, older))
        if older:
            time.sleep(1.1)
        list(pool.map(put, newer))
    return len(files)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="directory to write the fleet into")
    ap.add_argument("--jobs", type=int, default=300)
    ap.add_argument("--ops", type=int, default=None, help="operators per job (default: 3 to 200, varied)")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)
    t = time.perf_counter()
    fleet = generate_fleet(args.out, args.jobs, ops=args.ops, seed=args.seed)
    counts: dict[str, int] = {}
    for j in fleet:
        counts[j.expected_verdict] = counts.get(j.expected_verdict, 0) + 1
    print(f"{len(fleet)} jobs, {sum(j.operators for j in fleet)} operators in {time.perf_counter() - t:.1f} s; "
          f"expected verdicts {counts}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

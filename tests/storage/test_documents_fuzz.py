"""Seeded fuzzing of every input kind the shared reader serves besides graphs (tests/hashing/test_graph_fuzz.py):
Kubernetes operator resources, Flink REST answers and Flink configuration files.

Each input is a real document of its kind, mutated (fields set to values of any type, removed, nested deep,
hostile YAML/JSON tokens dropped into the text, bits flipped, cut short) or random bytes and alias bombs, and
goes through the same code the CLI runs on it: the parser, then what reads the fields (`current_snapshot` and
`job_settings`; `pick_job` and `latest_snapshot`; the 2.x configuration rules). Each must either succeed or
raise an `InputError` of one line starting with the input's name, never anything else, within 2 s of CPU.

`UPGRADE_GATE_DOC_FUZZ_EXAMPLES` is the number of inputs per kind (default 5,000 in `make test`, a few
seconds each; `make fuzz` runs 100,000). Counts go to `.work/fuzz-report.jsonl`.
"""

from __future__ import annotations

import copy
import json
import os
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from hashing.errors import InputError
from hashing.versions import FlinkVersion
from upgrade_gate.gate.config_rules import check_config
from upgrade_gate.gate.flink_config import parse_flink_config
from upgrade_gate.storage import k8s_operator
from upgrade_gate.storage.discovery import REST, latest_snapshot, pick_job
from upgrade_gate.storage.remote import Answer, json_answer

EXAMPLES = int(os.environ.get("UPGRADE_GATE_DOC_FUZZ_EXAMPLES", "5000"))  # inputs per kind
MAX_CPU_S = 2.0
REPO = Path(__file__).resolve().parents[2]
REPORT = REPO / ".work" / "fuzz-report.jsonl"
ORIGIN = "fuzz/input.yaml"
SERVER = "flink-rest://127.0.0.1:8081"
JID = "c9dfb5e1a3f04b6e9d2c7a8b5e4f3d21"

EDGE_VALUES: list[Any] = [None, True, False, 0, -1, 1, 2**31, 2**63, -(2**63) - 1, 10**30, 1.5, float("inf"),
                          float("nan"), "", " ", "x\ny", "\x00", "9" * 30, "2024-13-45T99:99:99Z", "v1_20", "v9_99",
                          "local:///opt/x.jar", "KUBERNETES_OPERATOR_LAST_STATE", "s3://b/sp", "COMPLETED",
                          "../../etc/passwd", JID, JID.upper(), [], {}, [1, [2]], {"a": {"b": 1}}, "x" * 5000]
HOSTILE_TOKENS = ["&a ", "*a", "&a [1, 2]", "<<: *a\n", "<<: {id: 1}\n", "[" * 150, "{" * 150, "- " * 150,
                  "9" * 5000, "0x" + "f" * 90, "1" + ":59" * 400, "1e999999", ".nan", ".inf",
                  "!!python/object:os.system ", "!!binary ", "!!set ", "!foo ", "? [1, 2]\n", "~: 1\n", "on: 1\n",
                  "1: 2\n", "2020-13-45", "\t",
                  "\x00", "\ufeff", "---\n", "...\n", "\n  - ", ": ", "'", '"', "#", "%YAML 1.1\n", "\\ud800",
                  '{"jid": [1]}', "NaN", "Infinity", "-Infinity", "\r\n", "\u2028"]


# ---- mutation ---------------------------------------------------------------------------------------------
def _containers(doc: Any) -> list[Any]:
    found, stack = [], [doc]
    while stack:
        value = stack.pop()
        if isinstance(value, dict | list):
            found.append(value)
            stack.extend(value.values() if isinstance(value, dict) else value)
    return found


def _value(rng: random.Random, keys: list[str], depth: int = 0) -> Any:
    kind = rng.randrange(6 if depth < 3 else 4)
    if kind <= 1:
        return copy.deepcopy(rng.choice(EDGE_VALUES))  # never share a mutable edge value between documents
    if kind == 2:
        return rng.randint(-5, 50)
    if kind == 3:
        return "".join(rng.choice("ab1 \n\t'\"{[&*:#\u00e9\u2028") for _ in range(rng.randrange(8)))
    if kind == 4:
        return [_value(rng, keys, depth + 1) for _ in range(rng.randrange(4))]
    if rng.random() < 0.1:
        nested: Any = 1
        for _ in range(rng.randint(50, 150)):
            nested = [nested]
        return nested
    return {rng.choice(keys): _value(rng, keys, depth + 1) for _ in range(rng.randrange(4))}


def _mutate(doc: Any, rng: random.Random, keys: list[str]) -> Any:
    """A valid document with 1-4 edits: a field set to anything, removed, or replaced by a container."""
    doc = copy.deepcopy(doc)
    for _ in range(rng.randint(1, 4)):
        containers = _containers(doc)
        if not containers:
            break
        target = rng.choice(containers)
        op = rng.choice(["set", "set", "set", "delete"])
        if isinstance(target, dict):  # mostly a field the document has: that is what the reader looks at
            own = sorted(map(str, target))
            key = rng.choice(own if own and rng.random() < 0.75 else keys or ["x"])
            if op == "delete":
                target.pop(key, None)
            else:
                target[key] = _value(rng, keys)
        elif target and op == "delete":
            del target[rng.randrange(len(target))]
        elif target:
            target[rng.randrange(len(target))] = _value(rng, keys)
        else:
            target.append(_value(rng, keys))
    return doc


def _keys(docs: list[Any]) -> list[str]:
    out: set[str] = set()
    for doc in docs:
        out.update(k for c in _containers(doc) if isinstance(c, dict) for k in c)
    return sorted(out)


def _as_text(doc: Any, rng: random.Random, json_only: bool = False) -> bytes:
    try:
        if json_only or rng.random() < 0.3:
            return json.dumps(doc).encode()
        return yaml.dump_all(doc if isinstance(doc, list) and rng.random() < 0.3 else [doc],
                             Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), default_flow_style=None).encode()
    except (RecursionError, ValueError, yaml.YAMLError):
        return b"[" * 1000


def _tokens(text: bytes, rng: random.Random) -> bytes:
    s = text.decode("utf-8", "replace")
    for _ in range(rng.randint(1, 3)):
        at = rng.randint(0, len(s))
        s = s[:at] + rng.choice(HOSTILE_TOKENS) + s[at:]
    return s.encode("utf-8", "surrogatepass")


def _flip(data: bytes, rng: random.Random) -> bytes:
    out = bytearray(data or b" ")
    for _ in range(rng.randint(1, 6)):
        out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
    return bytes(out[: rng.randint(1, len(out))] if rng.random() < 0.3 else out)


def alias_bomb(levels: int) -> bytes:
    return (f"a0: &a0 [{', '.join(['lol'] * 9)}]\n"
            + "".join(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, levels + 1))
            + f"kind: *a{levels}\n").encode()


def inputs(bases: list[Any], seed: int, count: int, json_only: bool = False) -> Any:
    """`count` inputs derived from `bases`: mutated documents (as text), hostile tokens, bit flips, random bytes."""
    keys = _keys(bases)
    for i in range(count):
        rng = random.Random(seed * 1_000_003 + i)
        base = rng.choice(bases)
        how = rng.randrange(10)
        if how == 0:
            yield bytes(rng.randrange(256) for _ in range(rng.randrange(200)))
        elif how == 1:
            yield alias_bomb(rng.randint(1, 9))
        elif how <= 5:
            yield _as_text(_mutate(base, rng, keys), rng, json_only)
        elif how <= 7:
            yield _tokens(_as_text(base, rng, json_only), rng)
        else:
            yield _flip(_as_text(_mutate(base, rng, keys) if rng.random() < 0.5 else base, rng, json_only), rng)


# ---- the property -------------------------------------------------------------------------------------------
class Counts:
    def __init__(self) -> None:
        self.inputs = self.accepted = self.clean_errors = 0
        self.max_cpu_s = 0.0


def _check(run: Callable[[], Any], names: tuple[str, ...], counts: Counts) -> None:
    counts.inputs += 1
    start = time.process_time()
    try:
        run()
        counts.accepted += 1
    except InputError as exc:
        message = str(exc)
        assert message.startswith(names), message[:300]
        assert len(message.splitlines()) == 1 and len(message) < 2000, message[:300]
        counts.clean_errors += 1
    finally:
        counts.max_cpu_s = max(counts.max_cpu_s, time.process_time() - start)
    assert time.process_time() - start < MAX_CPU_S


def _report(kind: str, counts: Counts) -> None:
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    with REPORT.open("a") as f:
        f.write(json.dumps({"suite": f"documents-{kind}", "examples": EXAMPLES, **vars(counts)}) + "\n")
    print(f"{kind} fuzz: {vars(counts)}")
    assert counts.inputs == counts.accepted + counts.clean_errors >= EXAMPLES
    assert counts.max_cpu_s < MAX_CPU_S


# ---- Kubernetes operator resources ---------------------------------------------------------------------------
def _resource_bases() -> list[Any]:
    docs = []
    for path in sorted((REPO / "tests" / "fixtures" / "k8s").glob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    return [*docs, {"apiVersion": "v1", "kind": "List", "items": docs[:3]}]


def _resources(data: bytes) -> None:
    res = k8s_operator.parse_resources(data, ORIGIN)
    snap = k8s_operator.current_snapshot(res)
    assert isinstance(snap.path, str) and "\n" not in snap.path and snap.path.strip() == snap.path
    settings = k8s_operator.job_settings(res)
    for value in (settings.jar_uri, settings.entry_class, settings.upgrade_mode):
        assert value is None or isinstance(value, str)
    assert settings.parallelism is None or 1 <= settings.parallelism <= 32768
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in settings.flink_configuration.items())


@pytest.mark.timeout(3600)
def test_kubernetes_resources() -> None:
    counts = Counts()
    for data in inputs(_resource_bases(), 1, EXAMPLES):
        _check(lambda data=data: _resources(data), (f"{ORIGIN}: ",), counts)
    _report("k8s", counts)


# ---- Flink REST answers ---------------------------------------------------------------------------------------
OVERVIEWS = [{"jobs": [{"jid": JID, "name": "orders", "state": "RUNNING", "start-time": 1_763_900_000_000,
                        "end-time": -1, "duration": 5, "tasks": {"running": 2}},
                       {"jid": "f" * 32, "name": "orders", "state": "FINISHED", "start-time": 1_763_000_000_000}]}]
STATS = [{"counts": {"completed": 3}, "latest": {
    "completed": {"id": 12, "external_path": "s3://b/checkpoints/" + JID + "/chk-12", "discarded": False},
    "savepoint": {"id": 9, "external_path": "s3://b/savepoints/savepoint-c9dfb5-aaaaaaaaaaaa", "discarded": False},
    "restored": None, "failed": None}}]


def _rest(data: bytes, which: str, rng: random.Random) -> None:
    path = "/jobs/overview" if which == "overview" else f"/jobs/{JID}/checkpoints"
    doc = json_answer(Answer(200, data, f"{SERVER}{path}"), REST)
    if which == "overview":
        job = pick_job(doc, rng.choice(["orders", JID, "missing", JID.upper()]), SERVER)
        assert isinstance(job["jid"], str) and len(job["jid"]) == 32
    else:
        found = latest_snapshot(doc, {"jid": JID, "name": "orders", "state": "RUNNING"},
                                rng.choice([None, "savepoint", "checkpoint"]), SERVER)
        assert "\n" not in found.location and "\n" not in found.how


@pytest.mark.timeout(3600)
def test_flink_rest_answers() -> None:
    counts = Counts()
    half = EXAMPLES // 2
    for which, bases, seed, count in (("overview", OVERVIEWS, 2, half), ("checkpoints", STATS, 3, EXAMPLES - half)):
        rng = random.Random(seed)
        for data in inputs(bases, seed, count, json_only=True):
            _check(lambda data=data, which=which, rng=rng: _rest(data, which, rng), (f"{SERVER}/", f"{SERVER}: "),
                   counts)
    _report("rest", counts)


# ---- Flink configuration files ----------------------------------------------------------------------------------
CONFIGS = [{"state": {"backend": {"type": "rocksdb", "incremental": True}},
            "execution": {"checkpointing": {"interval": "10 s", "dir": "s3://b/checkpoints"}},
            "parallelism.default": 4, "pipeline.jars": ["a.jar", "b.jar"], "state.backend": "filesystem"}]
LEGACY = b"state.backend: filesystem\nstate.checkpoints.dir: s3://b/c\n# comment\nparallelism.default: 2\n"


def _config(data: bytes, legacy: bool) -> None:
    config = parse_flink_config(data, ORIGIN, legacy=legacy)
    for target in ("1.20", "2.3"):
        check_config(config, FlinkVersion.parse(target))


@pytest.mark.timeout(3600)
def test_flink_configuration_files() -> None:
    counts = Counts()
    for i, data in enumerate(inputs(CONFIGS, 4, EXAMPLES)):
        legacy = i % 5 == 0
        if legacy and i % 10 == 0:
            data = _flip(LEGACY, random.Random(i))
        _check(lambda data=data, legacy=legacy: _config(data, legacy), (f"{ORIGIN}: ",), counts)
    _report("config", counts)

"""Property-based fuzzing of the graph readers: specs and execution plans, valid ones mutated
(wrong types, missing fields, huge integers, deep nesting, cycles, YAML aliases and tags, random
bytes). Every input either becomes a graph or raises `InputError` with one line starting with the
file name, never any other exception, and no input takes more than 2 s of CPU time.

`UPGRADE_GATE_GRAPH_FUZZ_EXAMPLES` is the total number of inputs over the strategies below (default
5,000, i.e. 500 drawn examples, in `make test`; `make fuzz` runs 100,000). Each drawn example fans out
into `FANOUT` inputs derived from one document and a seed: drawing costs hypothesis ~10x a reader call.
Counts are appended to `.work/fuzz-report.jsonl`.
"""

from __future__ import annotations

import copy
import json
import os
import random
import time
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from hashing.errors import InputError
from hashing.readers import parse_graph
from hashing.readers.source import parse_bytes

EXAMPLES = int(os.environ.get("UPGRADE_GATE_GRAPH_FUZZ_EXAMPLES", "5000"))  # inputs in all
STRATEGIES = 5  # the @given tests below share EXAMPLES
FANOUT = 10  # inputs per drawn example: hypothesis' own drawing costs ~10x a reader call
PER_STRATEGY = max(1, -(-EXAMPLES // (STRATEGIES * FANOUT)))
ORIGIN = "fuzz/graph.json"
REPORT = Path(__file__).resolve().parents[2] / ".work" / "fuzz-report.jsonl"
SETTINGS = settings(max_examples=PER_STRATEGY, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])
MAX_CPU_S = 2.0
_counts = {"inputs": 0, "graphs": 0, "clean_errors": 0, "max_cpu_s": 0.0}

NODE_KEYS = ["id", "name", "parallelism", "max_parallelism", "uid", "uid_hash", "chaining_strategy",
             "slot_sharing_group", "factory", "state", "kind", "key_type"]
EDGE_KEYS = ["source", "target", "partitioner", "exchange_mode", "type_number"]
PLAN_KEYS = ["id", "type", "pact", "contents", "parallelism", "predecessors", "ship_strategy", "side"]
ENUMS = ["ALWAYS", "NEVER", "HEAD", "HEAD_WITH_SOURCES", "FORWARD", "HASH", "REBALANCE", "BROADCAST", "PIPELINED",
         "BATCH", "UNDEFINED", "source", "legacy_source", "yielding", "operator", "Data Source", "Operator",
         "Data Sink", "always", "", "nope"]
EDGE_INTS = [0, -1, 1, 2**31 - 1, 2**31, -(2**31), -(2**31) - 1, 32768, 32769, 2**63, 10**30, 10**400]
# written into the text of a document: what a hostile file holds that no JSON/YAML dumper writes
HOSTILE_TOKENS = [
    "&a ", "*a", "&a [1, 2]", "<<: *a\n", "<<: {id: 1}\n", "[" * 150, "{" * 150, "- " * 150, "9" * 5000,
    "-" + "9" * 4400, "0x" + "f" * 90, "1" + ":59" * 400, "1e999999", "NaN", "Infinity", "!!python/object:os.system ",
    "!!binary ", "!!set ", "!!omap ", "!!timestamp x", "!!int abc", "!!float x", "!!bool maybe", "!foo ",
    "? [1, 2]\n", "? {a: 1}\n", "~: 1\n", "on: 1\n", "1: 2\n", "2020-13-45", "2020-01-01", "\t", "\x00", "\ufeff",
    "---\n", "...\n", "\n  - ", ": ", "'", '"', "#", "%YAML 1.1\n", "%TAG ! tag:x,2000:\n", "\\u0000", "\\ud800",
    '{"id": [1]}', '{"id": {"a": 1}}', '"nodes": [], "nodes": []', "\r\n", "\u2028",
]


def _check_graph(run: Any) -> None:
    """One input: a graph or one clean line naming the file; anything else fails the test."""
    _counts["inputs"] += 1
    start = time.process_time()
    try:
        loaded = run()
        assert loaded.graph.nodes
        _counts["graphs"] += 1
    except InputError as exc:
        message = str(exc)
        assert message.startswith(ORIGIN + ": "), message
        assert len(message.splitlines()) == 1 and len(message) < 2000, message[:300]
        _counts["clean_errors"] += 1
    finally:
        _counts["max_cpu_s"] = max(_counts["max_cpu_s"], time.process_time() - start)
    assert time.process_time() - start < MAX_CPU_S


def _check_doc(doc: Any) -> None:
    _check_graph(lambda: parse_graph(doc, ORIGIN))


def _check_bytes(data: bytes, yaml_first: bool) -> None:
    _check_graph(lambda: parse_graph(parse_bytes(data, ORIGIN, yaml_first=yaml_first), ORIGIN))


# ---- documents shaped like what users hand us ----------------------------------------------------

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 40), st.sampled_from(EDGE_INTS),
    st.integers(min_value=-(2**70), max_value=2**70), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12), st.sampled_from(ENUMS),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.one_of(st.text(max_size=6), st.sampled_from(NODE_KEYS + PLAN_KEYS)),
                                            inner, max_size=4)),
    max_leaves=10,
)


@st.composite
def specs(draw: Any) -> dict[str, Any]:
    """A valid graph spec: 1-8 nodes with optional fields, edges only forward (a DAG)."""
    n = draw(st.integers(1, 8))
    ids = draw(st.lists(st.integers(-3, 60), min_size=n, max_size=n, unique=True))
    nodes = []
    for nid in ids:
        node: dict[str, Any] = {"id": nid, "name": draw(st.text(max_size=8))}
        if draw(st.booleans()):
            node["parallelism"] = draw(st.integers(1, 32768))
        if draw(st.booleans()):
            node["uid"] = draw(st.text(max_size=8))
        if draw(st.booleans()):
            node["chaining_strategy"] = draw(st.sampled_from(["ALWAYS", "NEVER", "HEAD", "HEAD_WITH_SOURCES"]))
        if draw(st.booleans()):
            node["uid_hash"] = draw(st.sampled_from(["0" * 32, "aB" * 16, "xyz"]))
        if draw(st.booleans()):
            node["state"] = [{"name": "s", "kind": "value"}]
        nodes.append(node)
    edges = []
    for _ in range(draw(st.integers(0, 10))):
        a, b = sorted(draw(st.lists(st.integers(0, n - 1), min_size=2, max_size=2, unique=True))) if n > 1 else (0, 0)
        if a != b:
            edges.append({"source": ids[a], "target": ids[b],
                          "partitioner": draw(st.sampled_from(["FORWARD", "HASH", "REBALANCE", "forward"])),
                          "type_number": draw(st.integers(0, 2))})
    doc: dict[str, Any] = {"name": draw(st.text(max_size=8)), "nodes": nodes, "edges": edges}
    if draw(st.booleans()):
        doc["max_parallelism"] = draw(st.integers(1, 32768))
    return doc


@st.composite
def plans(draw: Any) -> dict[str, Any]:
    """A valid Flink execution plan (`env.getExecutionPlan()`): predecessors only point backwards."""
    n = draw(st.integers(1, 8))
    ids = draw(st.lists(st.integers(1, 60), min_size=n, max_size=n, unique=True))
    nodes = []
    for i, nid in enumerate(ids):
        earlier = sorted(set(draw(st.lists(st.integers(0, i - 1), max_size=2)))) if i else []
        preds = [{"id": ids[k], "ship_strategy": draw(st.sampled_from(["FORWARD", "HASH", "REBALANCE"])),
                  "side": "second"} for k in earlier]
        node = {"id": nid, "type": draw(st.text(max_size=8)), "pact": "Data Source" if not i else "Operator",
                "contents": "x", "parallelism": draw(st.sampled_from([1, 2, 4, -1]))}
        if preds:
            node["predecessors"] = preds
        nodes.append(node)
    return {"nodes": nodes}


def _containers(doc: Any) -> list[Any]:
    found, stack = [], [doc]
    while stack:
        value = stack.pop()
        if isinstance(value, (dict, list)):
            found.append(value)
            stack.extend(value.values() if isinstance(value, dict) else value)
    return found


def _nest(depth: int, leaf: Any) -> Any:
    for _ in range(depth):
        leaf = [leaf]
    return leaf


def _value(rng: random.Random, depth: int = 0) -> Any:
    """Any JSON value, biased to what breaks readers: Java-int edges, huge ints, enum names, nesting."""
    kind = rng.randrange(12 if depth < 3 else 9)
    if kind == 0:
        return None
    if kind == 1:
        return rng.random() < 0.5
    if kind == 2:
        return rng.randint(-3, 40)
    if kind == 3:
        return rng.choice(EDGE_INTS)
    if kind == 4:
        return rng.choice([0.5, -0.0, 1e308, float("inf"), float("-inf"), float("nan"), 3.0])
    if kind == 5:
        return "".join(rng.choice("ab1 \n\t'\"{[&*:\u00e9\u2028\x00") for _ in range(rng.randrange(8)))
    if kind in (6, 7, 8):
        return rng.choice(ENUMS)
    if kind == 9:
        return [_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    if kind == 10:
        return {rng.choice(NODE_KEYS + PLAN_KEYS + ["x", ""]): _value(rng, depth + 1) for _ in range(rng.randrange(4))}
    return _nest(rng.randint(90, 300), rng.choice([1, "x", None, {}]))


def _mutate(doc: Any, rng: random.Random) -> Any:
    """A valid document with 1-3 edits: a field set to anything, removed, nested deep, or a cycle added."""
    doc = copy.deepcopy(doc)
    for _ in range(rng.randint(1, 3)):
        containers = _containers(doc)
        if not containers:
            break
        target = rng.choice(containers)
        op = rng.choice(["set", "set", "set", "delete", "loop"])
        nodes = doc.get("nodes") if isinstance(doc, dict) else None
        if op == "loop" and isinstance(nodes, list) and nodes:
            a, b = rng.choice(nodes), rng.choice(nodes)
            if isinstance(a, dict) and isinstance(b, dict):
                if isinstance(doc.get("edges"), list):  # a spec: an edge back (or onto itself)
                    doc["edges"].append({"source": a.get("id"), "target": b.get("id")})
                elif isinstance(a.setdefault("predecessors", []), list):  # a plan: a predecessor closing a cycle
                    a["predecessors"].append({"id": b.get("id"), "ship_strategy": "FORWARD"})
            continue
        if isinstance(target, dict):
            key = rng.choice(sorted(map(str, target)) + NODE_KEYS + EDGE_KEYS + PLAN_KEYS + ["nodes", "edges"])
            if op == "delete":
                target.pop(key, None)
            else:
                target[key] = _value(rng)
        elif target and op == "delete":
            del target[rng.randrange(len(target))]
        elif target:
            target[rng.randrange(len(target))] = _value(rng)
        else:
            target.append(_value(rng))
    return doc


def _text(doc: Any, as_yaml: bool) -> str:
    if as_yaml:
        return yaml.dump(doc, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), default_flow_style=None)
    return json.dumps(doc)


def _flip(data: bytes, rng: random.Random) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 6)):
        out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
    return bytes(out[: rng.randint(1, len(out))] if rng.random() < 0.3 else out)


def _insert_tokens(text: str, rng: random.Random) -> bytes:
    for _ in range(rng.randint(1, 3)):
        at = rng.randint(0, len(text))
        text = text[:at] + rng.choice(HOSTILE_TOKENS) + text[at:]
    return text.encode("utf-8", "surrogatepass")


documents = st.one_of(specs(), plans())
seeds = st.integers(0, 2**32 - 1)


# ---- the properties: each example is FANOUT inputs derived from one drawn document and seed -------

@SETTINGS
@given(documents, seeds)
def test_mutated_documents(doc: Any, seed: int) -> None:
    """In memory, as the Spark jobs hand documents over: wrong types, missing fields, deep values, cycles."""
    rng = random.Random(seed)
    _check_doc(doc)
    for _ in range(FANOUT - 1):
        _check_doc(_mutate(doc, rng))


@SETTINGS
@given(st.one_of(documents, json_values), seeds, st.booleans())
def test_documents_as_files(doc: Any, seed: int, yaml_first: bool) -> None:
    """The same documents, mutated, written as JSON or YAML and read back through the file parser."""
    rng = random.Random(seed)
    for i in range(FANOUT):
        as_yaml = i % 2 == 1
        try:
            text = _text(_mutate(doc, rng) if i > 1 else doc, as_yaml)
        except (RecursionError, ValueError):  # the dumpers themselves refuse what is too deep or too long
            text = "[" * 1000
        _check_bytes(text.encode(), yaml_first or as_yaml)


@SETTINGS
@given(documents, seeds, st.booleans())
def test_hostile_tokens_in_text(doc: Any, seed: int, as_yaml: bool) -> None:
    """Anchors, aliases, tags, merge keys, non-string keys, huge numbers, deep brackets dropped anywhere."""
    rng = random.Random(seed)
    text = _text(doc, as_yaml)
    for _ in range(FANOUT):
        _check_bytes(_insert_tokens(text, rng), as_yaml)


@SETTINGS
@given(documents, seeds, st.booleans())
def test_bit_flips_and_truncation(doc: Any, seed: int, as_yaml: bool) -> None:
    rng = random.Random(seed)
    data = _text(doc, as_yaml).encode()
    for _ in range(FANOUT):
        _check_bytes(_flip(data, rng), as_yaml)


def alias_bomb(levels: int, word: str = "lol") -> bytes:
    """The "billion laughs" YAML: `levels` anchors of nine aliases each, 9**levels words expanded."""
    return (f"a0: &a0 [{', '.join([word] * 9)}]\n"
            + "".join(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, levels + 1))
            + f"nodes:\n  - id: 1\n    name: *a{levels}\n").encode()


@SETTINGS
@given(st.lists(st.one_of(st.binary(max_size=200), st.builds(alias_bomb, st.integers(1, 9), st.text(min_size=1,
                                                                                                   max_size=3))),
                min_size=FANOUT, max_size=FANOUT), st.booleans())
@example([b"0", b"null", b'"x"', b"[]", b"- 1", b"{}", b"1e999", b"-", b"~", b"[[]]"], False)
@example([b"0", b"null", b'"x"', b"[]", b"- 1", b"{}", b"1e999", b"-", b"~", b"[[]]"], True)
def test_random_bytes_and_alias_bombs(inputs: list[bytes], yaml_first: bool) -> None:
    for data in inputs:
        _check_bytes(data, yaml_first)


def test_billion_laughs_is_refused_at_the_first_anchor() -> None:
    """The classic 9-level bomb (9**9 strings once expanded) costs milliseconds, not gigabytes."""
    bomb = alias_bomb(9)
    assert len(bomb) < 600
    start = time.process_time()
    try:
        parse_bytes(bomb, ORIGIN, yaml_first=True)
    except InputError as exc:
        assert str(exc).startswith(f"{ORIGIN}: invalid YAML at line 1") and "anchors" in str(exc)
    else:
        raise AssertionError("the alias bomb was accepted")
    assert time.process_time() - start < 0.05


def test_zz_report() -> None:
    """Runs last in this module: records how many inputs ran and that every failure was clean."""
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    with REPORT.open("a") as f:
        f.write(json.dumps({"suite": "graph", "examples": EXAMPLES, **_counts}) + "\n")
    print(f"graph fuzz: {_counts}")
    assert _counts["inputs"] == _counts["graphs"] + _counts["clean_errors"]
    assert _counts["inputs"] >= EXAMPLES
    assert _counts["max_cpu_s"] < MAX_CPU_S

"""What a user sees when a graph file is wrong: one line naming the node or edge, exit code 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hashing.errors import InputError
from hashing.readers import load_graph, parse_graph

GOOD = {"name": "j", "nodes": [{"id": 1, "name": "src"}, {"id": 2, "name": "map"}],
        "edges": [{"source": 1, "target": 2}]}


def _bad(doc, match):
    with pytest.raises(InputError, match=match):
        parse_graph(doc, "job.json")


def _with(**changes):
    doc = json.loads(json.dumps(GOOD))
    for k, v in changes.items():
        doc[k] = v
    return doc


def test_defaults_follow_the_design():
    g = parse_graph(GOOD, "job.json").graph
    n = g.by_id[1]
    assert (n.parallelism, n.max_parallelism, n.uid, n.chaining_strategy.value, n.slot_sharing_group,
            n.factory.value) == (1, None, None, "ALWAYS", "default", "operator")
    e = g.edges[0]
    assert (e.partitioner.value, e.exchange_mode.value, e.type_number) == ("FORWARD", "UNDEFINED", 0)


@pytest.mark.parametrize("doc, match", [
    (_with(edges=[{"source": 1, "target": 9}]), r"job.json: edge #0 \(1 -> 9\): target 9 is not the id of any node"),
    (_with(nodes=[{"id": 1}, {"id": 1}]), r"job.json: node 1: duplicate node id"),
    (_with(nodes=[{"id": 1}, {"id": 2}, {"id": 3}],
           edges=[{"source": 1, "target": 2}, {"source": 2, "target": 3}, {"source": 3, "target": 2}]),
     r"job.json: the graph has a cycle: 2 -> 3 -> 2"),
    # node 1 hangs below the cycle 3 -> 4 -> 3 and is the lowest id left: it used to crash the walk
    (_with(nodes=[{"id": 1}, {"id": 2}, {"id": 3}, {"id": 4}],
           edges=[{"source": 2, "target": 3}, {"source": 3, "target": 4}, {"source": 4, "target": 3},
                  {"source": 4, "target": 1}]),
     r"job.json: the graph has a cycle: 3 -> 4 -> 3"),
    (_with(nodes=[{"id": 1, "chaining_strategy": "SOMETIMES"}]),
     r"job.json: node 1: chaining_strategy 'SOMETIMES' is not one of ALWAYS, NEVER, HEAD, HEAD_WITH_SOURCES"),
    (_with(edges=[{"source": 1, "target": 2, "partitioner": "ROUND_ROBIN"}]),
     r"job.json: edge #0 \(1 -> 2\): partitioner 'ROUND_ROBIN' is not one of FORWARD"),
    (_with(nodes=[{"id": 1, "parallelism": 0}]), r"job.json: node 1: parallelism 0 is out of range \[1, 32768\]"),
    (_with(nodes=[{"id": 1, "uid_hash": "xyz"}]),
     r"job.json: node 1: Node hash must be a 32 character String that describes a hex code. Found: xyz"),
    (_with(nodes=[{"id": 1, "paralelism": 2}]), r"job.json: node 1: unknown field\(s\) paralelism"),
    (_with(nodes=[]), r"'nodes' must be a non-empty list"),
    ([1, 2], r"a graph spec must be an object"),
])
def test_invalid_specs_name_the_culprit(doc, match):
    _bad(doc, match)


def test_yaml_is_accepted(tmp_path: Path):
    p = tmp_path / "job.yaml"
    p.write_text("name: j\nnodes:\n  - {id: 1, name: src}\n  - {id: 2, name: map, uid: m}\n"
                 "edges:\n  - {source: 1, target: 2}\n")
    assert load_graph(p).graph.by_id[2].uid == "m"


@pytest.mark.parametrize("content, match", [
    ("", "empty file"),
    ("{\"nodes\": [", "invalid JSON at line 1"),
    ("nodes: [a, b", "invalid YAML"),
])
def test_unparseable_files(tmp_path: Path, content, match):
    p = tmp_path / "job.json"
    p.write_text(content)
    with pytest.raises(InputError, match=match):
        load_graph(p)


def test_execution_plan_is_detected_and_defaults_are_reported():
    plan = {"nodes": [
        {"id": 1, "type": "Source: Custom Source", "pact": "Data Source", "contents": "Source", "parallelism": 4},
        {"id": 2, "type": "Map", "pact": "Operator", "contents": "Map", "parallelism": 4,
         "predecessors": [{"id": 1, "ship_strategy": "FORWARD", "side": "second"}]},
        {"id": 4, "type": "Map", "pact": "Operator", "contents": "Map", "parallelism": 4,
         "predecessors": [{"id": 2, "ship_strategy": "HASH", "side": "second"}]},
        {"id": 5, "type": "Sink: Print to Std. Out", "pact": "Data Sink", "contents": "Sink", "parallelism": 4,
         "predecessors": [{"id": 4, "ship_strategy": "FORWARD", "side": "second"}]}]}
    loaded = parse_graph(plan, "plan.json")
    assert loaded.kind == "execution-plan"
    assert any("uid" in a for a in loaded.assumptions)
    assert [(e.source, e.target, e.partitioner.value) for e in loaded.graph.edges] == [
        (1, 2, "FORWARD"), (2, 4, "HASH"), (4, 5, "FORWARD")]


def test_compiled_plan_points_to_the_exporter():
    _bad({"flinkVersion": "2.3", "nodes": [], "edges": []}, "compiled SQL plan.*upgrade-gate export")

"""`upgrade-gate ids` and `mapping` as a user runs them: output fields, tables, exit codes."""

from __future__ import annotations

import json

from tests.conftest import REPO

EXAMPLE = str(REPO / "hashing" / "examples" / "orders-enrichment.json")


def test_ids_json_has_the_contract_fields(cli):
    res = cli("ids", EXAMPLE, "--format", "json")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["hasher"] == "v2"
    node = out["nodes"][0]
    assert set(node) >= {"node_id", "name", "uid", "generated_id", "alternative_ids"}
    assert node["uid"] == "orders-source" and len(node["generated_id"]) == 32
    vertex_nodes = sorted(n for v in out["job_vertices"] for n in v["node_ids"])
    assert vertex_nodes == sorted(n["node_id"] for n in out["nodes"])
    head = next(v for v in out["job_vertices"] if v["node_ids"][0] == 1)
    assert head["id"] == node["generated_id"] and head["node_ids"] == [1, 2, 3]


def test_v3_keeps_uid_ids_and_lists_v2_id_as_alternative(cli):
    v2 = {n["node_id"]: n for n in json.loads(cli("ids", EXAMPLE, "--format", "json").stdout)["nodes"]}
    res = cli("ids", EXAMPLE, "--hasher", "v3", "--format", "json")
    v3 = {n["node_id"]: n for n in json.loads(res.stdout)["nodes"]}
    for nid, n in v3.items():
        assert n["alternative_ids"][-1] == v2[nid]["generated_id"]
        if n["uid"]:
            assert n["generated_id"] == v2[nid]["generated_id"]


def test_table_and_mapping_are_readable(cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "160")  # a wide terminal: the chain stays on one line
    res = cli("ids", EXAMPLE)
    assert res.returncode == 0
    assert "operator id" in res.stdout and "Source: orders -> Map: parse-order -> Filter: valid-orders" in res.stdout
    res = cli("mapping", EXAMPLE)
    assert res.returncode == 0 and "V2 -> V3 mapping (5 of 9 ids change)" in res.stdout


def test_bad_input_is_one_line_and_exit_2(cli, tmp_path):
    bad = tmp_path / "g.json"
    bad.write_text('{"nodes": [{"id": 1}], "edges": [{"source": 1, "target": 3}]}')
    res = cli("ids", str(bad))
    assert res.returncode == 2
    expected = f"upgrade-gate: error: {bad}: edge #0 (1 -> 3): target 3 is not the id of any node"
    assert res.stderr.strip().splitlines() == [expected]
    assert "Traceback" not in res.stderr
    res = cli("ids", EXAMPLE, "--flink-version", "1.9")
    assert res.returncode == 2 and "supported Flink versions" in res.stderr

"""`upgrade-gate lint`: stateful operators without a uid, with the operator ID Flink gives each today.

The graphs are the real-Flink restore fixtures' exported jobs; the IDs lint names must be the ones under which
those jobs' real savepoints hold the state (so the ID a user sees is the one their savepoint uses).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.restore_support import RESTORES
from upgrade_gate.storage.savepoints import load_newest_complete


def _state_ids(savepoint: Path) -> set[str]:
    return {op.operator_id.hex() for op in load_newest_complete(str(savepoint)).metadata.operator_states
            if op.state_size}


def _savepoint_of(case: Path) -> Path:
    return (case / json.loads((case / "outcome.json").read_text())["savepoint"]["fixture"]).resolve()


@pytest.mark.parametrize("release", ["1.20.5", "2.3.0"])
def test_uidless_stateful_operators_are_flagged_with_the_ids_their_savepoint_uses(cli, release: str) -> None:
    case = RESTORES / release / "identical-no-uids"
    graph = case / "graph-a.json"
    p = cli("lint", str(graph), "--flink-version", release.rsplit(".", 1)[0], "--format", "json")
    assert p.returncode == 1, p.stderr
    source, keyed = json.loads(p.stdout)["graphs"][0]["unpinned"]
    assert source["name"] == "Source: numbers" and "SourceReaderState" in source["why"]
    assert keyed["name"] == "keyed" and "keyBy" in keyed["why"]
    ids = json.loads(cli("ids", str(graph), "--flink-version", release.rsplit(".", 1)[0], "--format", "json").stdout)
    for found in (source, keyed):
        assert found["operator_id"] in _state_ids(_savepoint_of(case))
        assert found["operator_id"] == next(n["generated_id"] for n in ids["nodes"] if n["name"] == found["name"])
    table = cli("lint", str(graph), "--flink-version", release.rsplit(".", 1)[0])
    assert table.returncode == 1
    assert f"{graph}: node {source['node_id']} 'Source: numbers' keeps state without a uid" in table.stdout
    assert source["operator_id"] in table.stdout and keyed["operator_id"] in table.stdout
    assert "2 stateful operator(s) without a uid in 1 graph(s)" in table.stdout


def test_a_keyed_operator_that_lost_its_uid_is_flagged(cli) -> None:
    """`uid-removed`: the change real Flink refuses the savepoint for (RESTORE_FAILS) is caught without one."""
    p = cli("lint", str(RESTORES / "2.3.0" / "uid-removed" / "graph-b.json"), "--format", "json")
    assert p.returncode == 1, p.stderr
    assert [u["name"] for u in json.loads(p.stdout)["graphs"][0]["unpinned"]] == ["keyed"]


def test_a_sql_aggregate_is_flagged(cli) -> None:
    case = RESTORES / "2.3.0" / "sql-identical"
    p = cli("lint", str(case / "graph-a.json"), "--flink-version", "2.3", "--format", "json")
    assert p.returncode == 1, p.stderr
    (found,) = json.loads(p.stdout)["graphs"][0]["unpinned"]
    assert found["name"].startswith("GroupAggregate") and found["operator_id"] in _state_ids(_savepoint_of(case))


def test_a_job_with_uids_passes_silently(cli) -> None:
    p = cli("lint", str(RESTORES / "2.3.0" / "identical" / "graph-a.json"), str(RESTORES / "1.20.5" / "identical" /
                                                                               "graph-a.json"))
    assert p.returncode == 0 and p.stdout == "" and p.stderr == ""


def test_state_declared_in_a_yaml_spec_counts(cli, tmp_path: Path) -> None:
    """The spec's `state` field (docs/graph-spec.md) marks an operator stateful; removing its uid exposes it."""
    spec = json.loads((RESTORES / "2.3.0" / "identical" / "graph-a.json").read_text())
    keyed = next(n for n in spec["nodes"] if n["name"] == "keyed")
    keyed["uid"], keyed["state"] = None, [{"name": "count", "kind": "value"}]
    path = tmp_path / "orders.graph.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    p = cli("lint", str(path), "--format", "json")
    assert p.returncode == 1, p.stderr
    (found,) = json.loads(p.stdout)["graphs"][0]["unpinned"]
    ids = json.loads(cli("ids", str(path), "--format", "json").stdout)
    assert found == {"node_id": keyed["id"], "name": "keyed", "why": "declares state: count:value",
                     "operator_id": next(n["generated_id"] for n in ids["nodes"] if n["name"] == "keyed")}


def test_a_bad_graph_exits_2_and_the_others_are_still_linted(cli, tmp_path: Path) -> None:
    bad = tmp_path / "broken.json"
    bad.write_text("{", encoding="utf-8")
    good = RESTORES / "2.3.0" / "identical-no-uids" / "graph-a.json"
    p = cli("lint", str(bad), str(good))
    assert p.returncode == 2 and "Traceback" not in p.stderr
    (line,) = p.stderr.splitlines()
    assert line.startswith(f"upgrade-gate: error: {bad}: ")
    assert "'Source: numbers' keeps state without a uid" in p.stdout

"""The autoscaler's `pipeline.jobvertex-parallelism-overrides` after a graph change (`gate/rules/autoscaler.py`).

Graphs and savepoints are real Flink 2.3.0 restore fixtures; the JobVertexIDs are the head operators' generated
IDs, which `tests/hashing/test_flink_graph_ids.py` proves bit-exact with Flink. Flink's `Dispatcher` applies an
override by `JobVertexID.toHexString()` and ignores one that names no vertex.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.restore_support import RESTORES

R23 = RESTORES / "2.3.0"
OVERRIDES = "pipeline.jobvertex-parallelism-overrides"
KEYED = "3a434c34ffe2fe820735436a4ca97107"  # job A's vertex 'keyed' (a uid-less keyed operator)
SOURCE = "ca88eee0095684d687a1b6495617f957"  # 'Source: numbers -> throttle', in job A and job B
KEYED_WITH_UID = "e7beec23fd9f6ed5e1b8395129d43728"  # 'keyed' with uid 'keyed', which uid-removed takes away


def _warnings(cli, scenario: str, overrides: str) -> tuple[str, list[str]]:
    job_a = json.loads((R23 / scenario / "outcome.json").read_text())["savepoint"]["job_a"]
    p = cli("check", "--graph", str(R23 / scenario / "graph-b.json"), "--savepoint", str(R23 / "savepoints" / job_a),
            "-D", f"{OVERRIDES}={overrides}", "--format", "json")
    assert p.returncode in (0, 1), p.stderr
    doc = json.loads(p.stdout)
    return doc["verdict"], [w for w in doc["warnings"] if OVERRIDES in w]


def test_an_override_whose_vertex_is_gone_is_named_with_where_its_operator_went(cli) -> None:
    """A map inserted before the uid-less keyed operator: job A's vertex id now belongs to the inserted map, chained
    into the source's vertex. The override no longer applies to anything; the gate says so, and that the ID's new
    holder has no uid (its ID is positional), so moving the override there is the user's call."""
    verdict, said = _warnings(cli, "map-inserted-before-uidless-keyed", f"{KEYED}:3,{SOURCE}:2")
    assert verdict == "STATE_MISROUTED"
    assert len(said) == 1, said  # the source's vertex kept its id: its override still applies
    assert said[0].startswith(f"autoscaler override {KEYED}:3 ({OVERRIDES}) names no job vertex of the new job")
    assert f"operator 'inserted' holds that ID now, in job vertex 'Source: numbers -> throttle -> inserted' ({SOURCE}" \
        in said[0]
    assert "it has no uid, so its ID comes from its position" in said[0] and f"{SOURCE}:3" in said[0]


def test_an_override_of_a_re_keyed_operator_is_named_and_a_matching_one_is_not(cli) -> None:
    verdict, said = _warnings(cli, "uid-removed", f"{KEYED_WITH_UID}:4,{SOURCE}:2")
    assert verdict == "RESTORE_FAILS"
    assert len(said) == 1 and said[0].startswith(f"autoscaler override {KEYED_WITH_UID}:4")
    assert "no operator of the new job has that ID" in said[0]
    verdict, said = _warnings(cli, "identical", f"{SOURCE}:2")
    assert verdict == "SAFE" and said == []


def test_overrides_from_a_deployment_are_read_like_dash_d(cli, tmp_path: Path) -> None:
    """The autoscaler writes the overrides into the FlinkDeployment's flinkConfiguration."""
    import yaml

    from tests.conftest import REPO

    doc = yaml.safe_load((REPO / "tests" / "fixtures" / "k8s" / "orders-new.yaml").read_text())
    doc["spec"]["flinkConfiguration"][OVERRIDES] = f"{KEYED_WITH_UID}:4"
    doc["spec"]["flinkVersion"] = "v2_3"
    (tmp_path / "new.yaml").write_text(yaml.safe_dump(doc))
    job_a = json.loads((R23 / "uid-removed" / "outcome.json").read_text())["savepoint"]["job_a"]
    p = cli("check", "--deployment", str(tmp_path / "new.yaml"), "--graph", str(R23 / "uid-removed" / "graph-b.json"),
            "--savepoint", str(R23 / "savepoints" / job_a), "--format", "json")
    assert p.returncode == 1, p.stderr
    assert any(w.startswith(f"autoscaler override {KEYED_WITH_UID}:4") for w in json.loads(p.stdout)["warnings"])

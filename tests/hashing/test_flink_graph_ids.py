"""Our V2 hasher, user-hash hasher and chaining against real Flink 1.20.5 and 2.3.0.

Every expected value comes from a fixture written by `flink_bridge/generate_fixtures.py`,
which asks Flink's own `StreamGraphHasherV2`, `StreamGraphUserHashHasher` and
`StreamingJobGraphGenerator` (see test_oracle_regenerate.py, which re-runs it).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from hashing.errors import FlinkError
from hashing.hashers import StreamGraphUserHashHasher
from hashing.operator_ids import compute_operator_ids
from hashing.readers import parse_graph
from tests.conftest import FLINK_RELEASES, graph_fixture_files, load_json

FILES = graph_fixture_files()
# graphs Flink accepted (the others carry Flink's error text, asserted in test_operator_ids_match_flink)
ACCEPTED = [p for p in FILES if not load_json(p)["flink"].get("error")]


def test_at_least_40_real_flink_graphs_per_release():
    per_release = Counter(p.parent.parent.name for p in FILES)
    for release in FLINK_RELEASES:
        assert per_release[release] >= 40, f"only {per_release[release]} graph fixtures for Flink {release}"


def _load(path: Path):
    fx = load_json(path)
    graph = parse_graph(fx["spec"], str(path)).graph
    return fx, graph, fx["flink_version"]


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.parent.name}/{p.stem}")
def test_operator_ids_match_flink(path: Path):
    fx, graph, version = _load(path)
    flink = fx["flink"]
    if flink.get("error"):
        with pytest.raises(FlinkError) as err:
            compute_operator_ids(graph, "v2", version)
        assert str(err.value) == flink["error"]["message"]
        return
    ids = compute_operator_ids(graph, "v2", version)
    ours = {str(nid): h.hex() for nid, h in ids.v2_hashes.items()}
    assert ours == flink["hashes"], "V2 hashes differ from Flink's StreamGraphHasherV2"
    # traverse order (dict insertion order) is part of Flink's semantics; same set is checked above
    user_hashes = StreamGraphUserHashHasher().traverse_stream_graph_and_generate_hashes(graph)
    users = {str(k): v.hex() for k, v in user_hashes.items()}
    assert users == flink["user_hashes"]


@pytest.mark.parametrize("path", ACCEPTED, ids=lambda p: f"{p.parent.parent.name}/{p.stem}")
def test_job_vertices_and_operator_id_pairs_match_flink(path: Path):
    fx, graph, version = _load(path)
    flink = fx["flink"]
    ids = compute_operator_ids(graph, "v2", version)
    ours = {v.id.hex(): [(op.generated.hex(), op.user_defined.hex() if op.user_defined else None)
                         for op in v.operators] for v in ids.job_vertices}
    theirs = {v["id"]: [(op["generated"], op["user_defined"]) for op in v["operators"]]
              for v in flink["job_vertices"]}
    assert ours == theirs, "job vertices or their tail-first OperatorIDPair lists differ from Flink's JobGraph"
    # In BATCH runtime mode Flink leaves vertex parallelism at -1 for the adaptive batch
    # scheduler to decide at runtime; streaming jobs (what the gate is for) get the head's.
    par = {v.id.hex(): v.parallelism for v in ids.job_vertices}
    assert par == {v["id"]: (par[v["id"]] if v["parallelism"] == -1 else v["parallelism"])
                   for v in flink["job_vertices"]}

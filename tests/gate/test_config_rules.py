"""The 1.x -> 2.x configuration rule agrees with what real Flink did on each recorded configuration.

`generate_savepoints --config-checks` (ConfigCheck.java) loaded every configuration of
tests/fixtures/savepoints/state-schemas/config/ with Flink's own GlobalConfiguration and started a checkpointed
keyed job on it, with 1.20.5 and 2.3.0. The rule must block exactly the ones 2.3 refused, with Flink's error
text (found in the recorded exception chain), and never block on 1.20.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hashing.errors import InputError
from hashing.versions import FlinkVersion
from upgrade_gate.gate.config_rules import backend_of, check_config, option_changes
from upgrade_gate.storage.flink_config_file import read_flink_config

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "savepoints" / "state-schemas"
CONFIG = FIXTURES / "config"
OUTCOMES = json.loads((CONFIG / "outcomes.json").read_text())


def portable(text: str) -> str:
    """Flink's message names the config file by its absolute path: the generator's checkout then, this one now."""
    return re.sub(r"[^\s'()]*/state-schemas/config/", "", text)


@pytest.mark.parametrize("outcome", OUTCOMES, ids=lambda o: f"{o['release']}-{o['case']}")
def test_rule_agrees_with_what_flink_did(outcome: dict) -> None:  # type: ignore[type-arg]
    config = read_flink_config(CONFIG / outcome["case"] / outcome["file"])
    found = check_config(config, FlinkVersion.parse(outcome["release"].rsplit(".", 1)[0]))
    blocking = [f for f in found if f.blocking]
    if outcome["status"] == "RUNNING":
        assert not blocking, blocking
    else:
        assert blocking and blocking[0].flink_error, outcome
        assert portable(blocking[0].flink_error) in portable(outcome["status"]), (blocking[0].flink_error,
                                                                                 outcome["status"])
        assert blocking[0].remedy


def test_recorded_outcomes_are_the_issues_facts() -> None:
    """filesystem / jobmanager backends start on 1.20 and are refused by 2.3, under either key, nested or not."""
    by = {(o["release"], o["case"]): o["status"] for o in OUTCOMES}
    assert all(by[("1.20.5", c)] == "RUNNING" for c in {c for _, c in by})
    for case in ("backend-type-filesystem", "legacy-key-filesystem", "nested-filesystem", "backend-type-jobmanager"):
        assert "Cannot find configured state backend factory class" in by[("2.3.0", case)]
    assert by[("2.3.0", "backend-type-hashmap")] == "RUNNING"


def test_renamed_and_removed_options_are_notes_with_their_replacement(tmp_path: Path) -> None:
    table = option_changes()
    assert table["from"] == "1.20.5" and table["to"] == "2.3.0"
    assert table["renamed"]["state.checkpoints.dir"] == "execution.checkpointing.dir"
    conf = tmp_path / "config.yaml"
    conf.write_text("state.checkpoints.dir: s3://b/cp\nstate.backend.async: true\nstate.backend.type: rocksdb\n")
    config = read_flink_config(conf)
    found = {f.key: f for f in check_config(config, FlinkVersion.parse("2.3"))}
    assert not any(f.blocking for f in found.values())
    assert found["state.checkpoints.dir"].remedy == "rename it to execution.checkpointing.dir"
    assert "removed" in found["state.backend.async"].text
    assert backend_of(config) == "rocksdb"
    assert check_config(config, FlinkVersion.parse("1.20")) == []


def test_bad_config_is_one_line_naming_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "config.yaml"
    bad.write_text("state: [unclosed\n")
    with pytest.raises(InputError, match=str(bad)):
        read_flink_config(bad)
    proc = subprocess.run([sys.executable, "-m", "upgrade_gate", "check", "--savepoint",
                           str(FIXTURES / "changes" / "2.3.0" / "hashmap" / "none"), "--graph",
                           str(FIXTURES / "graph-2.3.0.json"), "--flink-config", str(bad)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and str(bad) in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_check_refuses_a_filesystem_backend_crossing_to_2x() -> None:
    """What a user runs: the 1.20 savepoint, the job for 2.3, and its old configuration."""
    conf = CONFIG / "legacy-key-filesystem" / "config.yaml"
    proc = subprocess.run([sys.executable, "-m", "upgrade_gate", "check", "--savepoint",
                           str(FIXTURES / "1.20.5" / "hashmap-canonical-p2"), "--graph",
                           str(FIXTURES / "graph-2.3.0.json"), "--flink-version", "2.3", "--flink-config", str(conf),
                           "--format", "json"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["verdict"] == "RESTORE_FAILS" and not doc["restore_succeeds"]
    assert doc["flink_error"] == ("org.apache.flink.util.DynamicCodeLoadingException: Cannot find configured state "
                                  "backend factory class: filesystem")
    [row] = [c for c in doc["config"] if c["blocking"]]
    assert row["key"] == "state.backend" and "state.backend.type: hashmap" in row["remedy"]


def test_a_deployments_flink_configuration_is_the_new_jobs_configuration(tmp_path: Path) -> None:
    """`check --deployment NEW.yaml` (Flink Kubernetes Operator): spec.flinkConfiguration is checked like a file."""
    deployment = tmp_path / "new.yaml"
    deployment.write_text("""apiVersion: flink.apache.org/v1beta1
kind: FlinkDeployment
metadata:
  name: state-schemas
spec:
  image: registry.example.com/state-schemas:2.3
  flinkVersion: v2_3
  flinkConfiguration:
    state.backend: jobmanager
    state.checkpoints.dir: s3://flink-state/checkpoints
  job:
    jarURI: local:///opt/flink/usrlib/state-schemas.jar
    parallelism: 2
    upgradeMode: savepoint
""")
    proc = subprocess.run([sys.executable, "-m", "upgrade_gate", "check", "--savepoint",
                           str(FIXTURES / "1.20.5" / "hashmap-canonical-p2"), "--graph",
                           str(FIXTURES / "graph-2.3.0.json"), "--deployment", str(deployment), "--format", "json"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["verdict"] == "RESTORE_FAILS" and doc["flink_error"].endswith("factory class: jobmanager")
    assert any("state.checkpoints.dir" in w and "execution.checkpointing.dir" in w for w in doc["warnings"])


@pytest.mark.parametrize(("name", "content"), [
    ("config.yaml", "a: &x {b: 1}\nc: *x\n"),  # aliases are refused, not expanded
    ("config.yaml", "a:\n" + "".join("  " * i + f"k{i}:\n" for i in range(1, 60)) + "  " * 60 + "v: 1\n"),
    ("config.yaml", "- just\n- a list\n"),
    ("config.yaml", "\udcff"),
    ("flink-conf.yaml", "\udcff"),
])
def test_hostile_config_files_are_one_line_naming_the_file(tmp_path: Path, name: str, content: str) -> None:
    path = tmp_path / name
    path.write_bytes(content.encode("utf-8", "surrogateescape"))
    with pytest.raises(InputError) as err:
        read_flink_config(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)


def test_special_files_and_empty_directories_are_refused(tmp_path: Path) -> None:
    import os
    fifo = tmp_path / "config.yaml"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="not a regular file"):
        read_flink_config(fifo)
    empty = tmp_path / "conf"
    empty.mkdir()
    with pytest.raises(InputError, match=r"no config\.yaml or flink-conf\.yaml"):
        read_flink_config(empty)

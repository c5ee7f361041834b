"""The Airflow jar path gates the job that will run (issue 32, point 2).

A real Flink 2.3 standalone cluster runs v1 of the counter job (tests/jobs/upgrade/) at parallelism 2 and takes a
savepoint; `airflow dags test` of `flink_upgrade_gate` then exports the new graph from the job jar. The oracle is
the CLI with the same settings (`upgrade-gate export -p 2 --config …` then `upgrade-gate check --flink-config …`),
itself built by real Flink: the DAG must give the same operator IDs, matches, rescale and verdict. Before, the DAG
exported without `-p` or the config, so its report of this job showed a rescale 2 -> 1 that would never happen.
A uid-less variant exported without its chaining setting must carry the exporter's warning into the task log,
the check's warnings (JSON, report) and the run note.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from typing import Any

import pytest

from tests.upgrade_jobs import JOB_NAME, build_jobs, main_class, savepoint_of_v1

pytestmark = pytest.mark.flink

DAG = "flink_upgrade_gate"
BUCKET = "gate-jar-export"
CONFIG = "parallelism.default: 2\nstate.backend.type: hashmap\n"


@pytest.fixture(scope="module")
def savepoint_at_p2(stack, tmp_path_factory):
    """v1 run at parallelism 2 on a real cluster, one savepoint under the job's prefix; the cluster is stopped
    once the savepoint is written (the gate reads only files)."""
    jars = build_jobs("2.3")
    root = tmp_path_factory.mktemp("jar-export")
    savepoint_of_v1(root, parallelism=2, workdir_name="gate-jar-export")
    try:
        stack.s3.client().create_bucket(Bucket=BUCKET)
    except Exception as exc:  # created by an earlier run of the module in this session
        if "BucketAlready" not in type(exc).__name__ + str(exc):
            raise
    stack.s3.client().put_object(Bucket=BUCKET, Key="conf/config.yaml", Body=CONFIG.encode())
    (root / "config.yaml").write_text(CONFIG)
    return {"jars": jars, "root": root, "savepoint_root": (root / "savepoints").as_uri()}


def _conf(sp: dict[str, Any], variant: str, **extra: Any) -> dict[str, Any]:
    conf = {"job_name": JOB_NAME, "savepoint": "latest", "savepoint_root": sp["savepoint_root"], "graph": "jar",
            "jar": str(sp["jars"][variant]), "main_class": main_class(variant), "hasher": "v2", "matching": "fixed",
            "allow_non_restored_state": False, "flink_version": "2.3", "mode": "check"}
    conf.update(extra)
    return conf


def _run(stack, conf: dict[str, Any]) -> dict[str, Any]:
    """One DAG run: its state, tasks, output, the check it published and the run's note."""
    from flink_gate.reports import ReportStore

    state, tasks, output = stack.dags_test(DAG, conf, timeout=600)
    run_id = stack._last_run_id(DAG)
    entry = next((e for e in ReportStore(stack.reports_dir).entries() if e.meta.get("run_id") == run_id), None)
    assert entry is not None, f"{state} {tasks}\n{output[-6000:]}"
    with sqlite3.connect(stack.home / "airflow.db") as db:
        note = db.execute("select n.content from dag_run_note n join dag_run r on r.id = n.dag_run_id "
                          "where r.dag_id=? and r.run_id=?", (DAG, run_id)).fetchone()
    return {"state": state, "tasks": tasks, "output": output, "entry": entry, "note": note[0] if note else None,
            "check": json.loads((entry.path / "check.json").read_text()),
            "html": (entry.path / "report.html").read_text() if (entry.path / "report.html").is_file() else ""}


def _cli(sp: dict[str, Any], variant: str, *settings: str) -> dict[str, Any]:
    """The oracle: the CLI's export and check with the same settings, in a separate process as a user runs it."""
    spec = sp["root"] / f"{variant}.json"
    subprocess.run([sys.executable, "-m", "upgrade_gate", "export", "--jar", str(sp["jars"][variant]),
                    "--main-class", main_class(variant), "--flink-version", "2.3", *settings, "-o", str(spec)],
                   check=True, capture_output=True, text=True, timeout=600)
    savepoint = next((sp["root"] / "savepoints" / JOB_NAME).glob("savepoint-*"))
    proc = subprocess.run([sys.executable, "-m", "upgrade_gate", "check", "--savepoint", str(savepoint), "--graph",
                           str(spec), "--flink-version", "2.3", "--flink-config", str(sp["root"] / "config.yaml"),
                           "--format", "json"], capture_output=True, text=True, timeout=600)
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)


def _shape(check: dict[str, Any]) -> list[tuple[Any, ...]]:
    return sorted((o["operator_id"], o["new_operator_id"], o["matched_by"],
                   (o["rescale"] or {}).get("old_parallelism"), (o["rescale"] or {}).get("new_parallelism"))
                  for o in check["operators"])


def test_a_jar_gated_with_the_jobs_parallelism_and_config_is_the_job_the_cli_gates(stack, savepoint_at_p2):
    sp = savepoint_at_p2
    run = _run(stack, _conf(sp, "v1", parallelism=2, flink_config=f"s3://{BUCKET}/conf/config.yaml",
                            flink_settings=["pipeline.operator-chaining.enabled=true"]))

    assert run["state"] == "success" and run["tasks"]["check"] == "success", run["output"][-4000:]
    check = run["check"]
    cli = _cli(sp, "v1", "-p", "2", "--config", str(sp["root"] / "config.yaml"),
               "-D", "pipeline.operator-chaining.enabled=true")
    # the same job as the CLI gates: ids, matches, rescale and verdict
    assert check["verdict"] == cli["verdict"] == "SAFE", (check["verdict"], check["warnings"])
    assert _shape(check) == _shape(cli)
    # and no rescale: the savepoint was written at parallelism 2, the job runs at 2
    stateful = [o for o in check["operators"] if o["rescale"]]
    assert stateful and all(o["rescale"]["old_parallelism"] == o["rescale"]["new_parallelism"] == 2
                            for o in stateful), [o["rescale"] for o in stateful]
    # what the export rested on is recorded, in the report too; it guessed nothing
    assert check["export"]["release"] == "2.3.0" and check["export"]["parallelism"] == 2
    assert "parallelism.default=2 (-p)" in check["export"]["assumptions"]
    assert check["export"]["warnings"] == []
    assert "Graph built from the job jar by real Flink" in run["html"] and "parallelism.default=2" in run["html"]
    assert run["note"] and run["note"].startswith("SAFE") and "CAUTION" not in run["note"], run["note"]


def test_a_jar_export_that_guessed_a_setting_says_so_in_the_log_the_report_and_the_note(stack, savepoint_at_p2):
    sp = savepoint_at_p2
    run = _run(stack, _conf(sp, "v2-broken", parallelism=2))

    assert run["tasks"]["check"] == "success", run["output"][-4000:]
    check = run["check"]
    warned = [w for w in check["export"]["warnings"] if "pipeline.operator-chaining.enabled" in w]
    assert warned, check["export"]
    assert warned[0] in check["warnings"]  # the check's warnings: JSON, alert, report
    assert "depend on pipeline.operator-chaining.enabled" in run["html"]
    assert "depend on pipeline.operator-chaining.enabled" in run["output"]  # the task log
    assert check["verdict"] != "SAFE"  # uid-less ids: v1's state does not map (as the CLI says)
    assert run["note"] and run["note"].startswith("BLOCKED") and "CAUTION: the jar export guessed" in run["note"]
    assert " — report: " in run["note"]

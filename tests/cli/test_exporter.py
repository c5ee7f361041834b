"""`upgrade-gate export`: a user's jar, SQL script or compiled plan becomes a spec, via real Flink.

The job jar is built from `tests/jobs/` with javac + jar against Flink's own lib jars, the way a
user's build would; nothing here is a stub of Flink.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from flink_bridge.dist import classpath
from flink_bridge.exporter import export_spec
from flink_bridge.jvm import run_tool
from hashing.errors import InputError
from tests.conftest import TESTS, run_cli
from tests.restore_support import Scenario, scenarios

pytestmark = pytest.mark.flink

JOB_SOURCES = TESTS / "jobs"
MAIN = "com.example.orders.OrdersJob"

SQL = """
-- totals per customer, with planner-generated uids
SET 'table.exec.uid.generation' = 'ALWAYS';
CREATE TABLE orders (id BIGINT, customer INT, amount DOUBLE)
  WITH ('connector' = 'datagen', 'number-of-rows' = '10');
CREATE TABLE totals (customer INT, total DOUBLE) WITH ('connector' = 'blackhole');
INSERT INTO totals SELECT customer, SUM(amount) FROM orders WHERE amount > 0 GROUP BY customer;
"""


@pytest.fixture(scope="module")
def job_jar(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("job")
    classes = work / "classes"
    sources = [str(p) for p in JOB_SOURCES.rglob("*.java")]
    subprocess.run(["javac", "-nowarn", "--release", "17", "-cp", classpath("2.3"), "-d", str(classes), *sources],
                   check=True, capture_output=True, text=True)
    jar = work / "orders.jar"
    subprocess.run(["jar", "--create", "--file", str(jar), "-C", str(classes), "."], check=True)
    return jar


@pytest.fixture(scope="module")
def sql_script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sql") / "totals.sql"
    path.write_text(SQL, encoding="utf-8")
    return path


def _edges(spec: dict) -> list[tuple[str, str, str]]:
    name = {n["id"]: n["name"] for n in spec["nodes"]}
    return [(name[e["source"]], name[e["target"]], e["partitioner"]) for e in spec["edges"]]


def test_jar_export_shows_the_users_operators_uids_and_exchanges(job_jar: Path) -> None:
    spec = export_spec("jar", job_jar, main_class=MAIN, args=["3"], flink_version="2.3")
    assert spec["name"] == "orders-enrichment"
    nodes = {n["name"]: n for n in spec["nodes"]}
    assert {name: n["uid"] for name, n in nodes.items()} == {
        "Source: orders": "orders-source", "enrich": "enrich",
        "count-per-customer": None, "results: Writer": "results"}
    assert nodes["enrich"]["parallelism"] == 3  # the program argument reached main()
    assert nodes["Source: orders"]["factory"] == "source"
    assert _edges(spec) == [("Source: orders", "enrich", "REBALANCE"),
                            ("enrich", "count-per-customer", "HASH"),
                            ("count-per-customer", "results: Writer", "FORWARD")]


def test_cli_writes_a_spec_that_ids_can_read(job_jar: Path, tmp_path: Path) -> None:
    out = tmp_path / "spec.json"
    proc = run_cli("export", "--jar", str(job_jar), "--main-class", MAIN, "--flink-version", "1.20",
                   "-o", str(out), "--", "1")
    assert proc.returncode == 0, proc.stderr
    spec = json.loads(out.read_text(encoding="utf-8"))
    assert _edges(spec)[0] == ("Source: orders", "enrich", "FORWARD")  # same parallelism: chainable
    ids = run_cli("ids", str(out), "--format", "json")
    assert ids.returncode == 0, ids.stderr
    assert {n["name"] for n in json.loads(ids.stdout)["nodes"]} == {n["name"] for n in spec["nodes"]}


def test_missing_main_class_is_bad_input_with_one_line(job_jar: Path) -> None:
    proc = run_cli("export", "--jar", str(job_jar), "--main-class", "com.example.Missing")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert str(job_jar) in lines[0] and "com.example.Missing" in lines[0]
    assert proc.stdout == ""


def test_sql_script_export_has_planner_uids(sql_script: Path) -> None:
    spec = export_spec("sql", sql_script, flink_version="1.20")
    uids = [n["uid"] for n in spec["nodes"]]
    assert [u.split("_", 1)[1] for u in uids] == ["source", "calc", "group-aggregate", "sink"]
    assert [n["name"].split("[")[0] for n in spec["nodes"]] == ["Source: orders", "Calc", "GroupAggregate",
                                                                  "totals"]
    assert [e["partitioner"] for e in spec["edges"]] == ["FORWARD", "HASH", "FORWARD"]


def test_sql_syntax_error_names_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.sql"
    bad.write_text("CREATE TABLE t (a INT) WITH ('connector' = 'datagen');\nINSERT INTO t SELEC a FROM t;\n")
    with pytest.raises(InputError) as err:
        export_spec("sql", bad)
    assert str(err.value).startswith(f"{bad}: ")
    assert "\n" not in str(err.value)


def test_compiled_plan_export_uses_the_plans_uids(sql_script: Path, tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    run_tool("streamgraph", "2.3", "upgradegate.bridge.PlanCompiler", [str(sql_script), str(plan)])
    assert json.loads(plan.read_text())["flinkVersion"] == "2.3"
    spec = export_spec("compiled-plan", plan, flink_version="2.3")
    assert [n["uid"] for n in spec["nodes"]] == ["1_source", "2_calc", "4_group-aggregate", "5_sink"]


PYFLINK_JOB = JOB_SOURCES / "pyflink" / "orders_job.py"


def test_pyflink_program_export_applies_pyflinks_own_operator_chaining(tmp_path: Path) -> None:
    """PyFlink fuses consecutive Python functions into one operator before hashing; the spec must show that."""
    out = tmp_path / "spec.json"
    res = run_cli("export", "--pyflink", str(PYFLINK_JOB), "-o", str(out))
    assert res.returncode == 0, res.stderr
    spec = json.loads(out.read_text())
    names = {n["name"]: n for n in spec["nodes"]}
    assert spec["name"] == "pyflink-orders"
    assert names["Source: Collection Source"]["uid"] == "orders"
    assert names["per-customer"]["uid"] == "per-customer"
    assert "parse, _stream_key_by_map_operator" in names  # the map and the key selector, fused by PyFlink
    ids = run_cli("ids", str(out), "--format", "json")
    assert ids.returncode == 0, ids.stderr
    assert len(json.loads(ids.stdout)["nodes"]) == len(spec["nodes"])


def test_failing_pyflink_program_is_bad_input_naming_the_file(tmp_path: Path) -> None:
    prog = tmp_path / "broken_job.py"
    prog.write_text("from pyflink.datastream import StreamExecutionEnvironment\n"
                    "raise ValueError('no topic configured')\n")
    with pytest.raises(InputError, match=r"broken_job.py: ValueError: no topic configured \(line 2\)"):
        export_spec("pyflink", prog)


UNBOUNDED = """
CREATE TABLE orders (id BIGINT, customer INT, amount DOUBLE) WITH ('connector' = 'datagen');
CREATE TABLE totals (customer INT, total DOUBLE) WITH ('connector' = 'blackhole');
CREATE TABLE big (id BIGINT, amount DOUBLE) WITH ('connector' = 'blackhole');
"""


def test_execute_statement_set_exports_every_insert_as_one_job(tmp_path: Path) -> None:
    script = tmp_path / "set.sql"
    script.write_text(UNBOUNDED + """
EXECUTE STATEMENT SET BEGIN
  INSERT INTO totals SELECT customer, SUM(amount) FROM orders GROUP BY customer;
  INSERT INTO big SELECT id, amount FROM orders WHERE amount > 10;
END;
""")
    out = tmp_path / "spec.json"
    proc = run_cli("export", "--sql", str(script), "-p", "2", "-o", str(out), "--timeout", "120")
    assert proc.returncode == 0, proc.stderr
    spec = json.loads(out.read_text())
    sinks = sorted(n["name"].split("[")[0] for n in spec["nodes"] if "Writer" in n["name"] or "Sink" in n["name"])
    assert len(sinks) == 2 and {s.split(":")[0] for s in sinks} == {"totals", "big"}
    assert all(n["parallelism"] == 2 for n in spec["nodes"] if n["name"].startswith("Source"))


def test_execute_plan_is_translated_never_run(sql_script: Path, tmp_path: Path) -> None:
    """The plan reads an unbounded datagen table: run, it would never end; translated, it takes seconds."""
    script = tmp_path / "unbounded.sql"
    script.write_text(UNBOUNDED + "INSERT INTO totals SELECT customer, SUM(amount) FROM orders GROUP BY customer;\n")
    plan = tmp_path / "plan.json"
    run_tool("streamgraph", "2.3", "upgradegate.bridge.PlanCompiler", [str(script), str(plan)])
    runner = tmp_path / "run-plan.sql"
    runner.write_text("-- the SQL client's way to run a compiled plan\nEXECUTE PLAN 'plan.json';\n")
    out = tmp_path / "spec.json"
    proc = run_cli("export", "--sql", str(runner), "-o", str(out), "--timeout", "90")
    assert proc.returncode == 0, proc.stderr
    direct = export_spec("compiled-plan", plan, flink_version="2.3")
    assert json.loads(out.read_text())["nodes"] == direct["nodes"]


@pytest.mark.parametrize(("statement", "number"), [
    ("SELECT * FROM orders", 4),
    ("CREATE TABLE copy WITH ('connector' = 'blackhole') AS SELECT * FROM orders", 4),
])
def test_statements_that_would_run_their_own_job_are_refused(tmp_path: Path, statement: str, number: int) -> None:
    script = tmp_path / "job.sql"
    script.write_text(UNBOUNDED + statement + ";\nINSERT INTO big SELECT id, amount FROM orders;\n")
    proc = run_cli("export", "--sql", str(script), "--timeout", "90")
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"upgrade-gate: error: {script}: statement {number} (") and "run a job" in lines[0]


def test_pyflink_export_takes_the_settings_and_says_ids_may_depend_on_guesses(tmp_path: Path) -> None:
    out = tmp_path / "spec.json"
    proc = run_cli("export", "--pyflink", str(PYFLINK_JOB), "-D", "pipeline.operator-chaining.enabled=false",
                   "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_text())["chaining_enabled"] is False
    assert "pipeline.operator-chaining.enabled=false (-D)" in proc.stderr
    assert "may depend on parallelism.default, which was not given (assumed 1)" in proc.stderr
    conf = tmp_path / "config.yaml"
    conf.write_text("pipeline.operator-chaining.enabled: false\n")
    proc = run_cli("export", "--pyflink", str(PYFLINK_JOB), "--config", str(conf), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_text())["chaining_enabled"] is False
    assert "pipeline.operator-chaining.enabled=false (config)" in proc.stderr
    assert "warning" not in proc.stderr  # the config is the job's: what it leaves out is Flink's default


def test_a_main_that_catches_the_abort_and_calls_system_exit_still_exports(job_jar: Path, tmp_path: Path) -> None:
    """`try { env.execute(); } catch (Throwable t) { System.exit(1); }`: the graph is captured before execute()
    aborts main(), and the exit is refused while it is built (ExportMain.ExitGuard), so the export succeeds."""
    out = tmp_path / "spec.json"
    res = run_cli("export", "--jar", str(job_jar), "--main-class", "com.example.exiting.ExitingJob", "-o", str(out))
    assert res.returncode == 0, res.stderr
    spec = json.loads(out.read_text())
    assert [n.get("uid") for n in spec["nodes"]] == ["numbers", "sum", "out"]
    assert spec["name"] == "exiting-job"


def _restore(release: str, name: str) -> Scenario:
    return next(s for s in scenarios() if s.release == release and s.name == name)


@pytest.mark.parametrize(("release", "name"), [("1.20.5", "sql-window-row-gains-field"),
                                               ("2.3.0", "sql-mini-batch-second-aggregate"),
                                               ("2.3.0", "sql-two-phase-identical")])
def test_an_exported_aggregates_accumulator_row_is_checked_as_flink_restored_it(tmp_path: Path, release: str,
                                                                               name: str) -> None:
    """The user's path: `export --sql` of the new script, then `check` against the savepoint real Flink restored it
    from (tests/fixtures/restores). The export carries the accumulator rows of a window aggregate (WindowAggOperator's
    processor) and of a mini-batch aggregate (KeyedMapBundleOperator's function), so the verdict is what Flink did:
    RESTORE_FAILS naming the state when it refused the grown row, SAFE when it restored the unchanged one."""
    sc = _restore(release, name)
    out = tmp_path / "new.json"
    proc = run_cli("export", "--sql", str(sc.dir / "b.sql"), "--flink-version", sc.flink_version, "-o", str(out),
                   "--timeout", "120")
    assert proc.returncode == 0, proc.stderr
    [entry] = [e for e in json.loads(out.read_text())["sql_state"].values()
               if {"windowProcessor.accSerializer", "function.accTypes"} & set(e["types"])]
    assert entry["operator_class"].rsplit(".", 1)[-1] in ("WindowAggOperator", "KeyedMapBundleOperator")
    res = run_cli("check", "--savepoint", str(sc.savepoint), "--graph", str(out), "--flink-version",
                  sc.flink_version, "--format", "json")
    report = json.loads(res.stdout)
    run = sc.outcome["restore"]
    if run["status"] == "RUNNING":
        assert (res.returncode, report["verdict"]) == (0, "SAFE"), report["losses"]
    else:
        assert run["error_chain"][-1]["class"] == "org.apache.flink.util.StateMigrationException"
        assert (res.returncode, report["verdict"]) == (1, "RESTORE_FAILS")
        [loss] = report["losses"]
        assert loss["state_names"] in (["window-aggs"], ["accState"]) and "makes it ROW<BIGINT, BIGINT>" in \
            loss["reason"]

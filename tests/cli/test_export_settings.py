"""`upgrade-gate export` builds the graph with the settings the job runs with, and says so.

Operators without a uid get IDs that depend on chaining, and chaining on parallelism and on
configuration. These tests run real Flink throughout: the job jar is compiled here against the
release's own jars, the settings go in as `flink run` takes them (`-p`, `-D`, the config file),
and the proof runs the same uid-less job on a real Flink cluster (`LocalClusterMain`, a session
cluster in one JVM) submitted by Flink's own CLI (`CliFrontend`, what `bin/flink` runs) with the
production settings, stops it with a savepoint and compares the savepoint's operator IDs with
the IDs `ids` computes for the exported graph.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from flink_bridge.cluster import free_ports
from flink_bridge.dist import classpath, flink_home, release_of
from flink_bridge.jvm import OWNER_PROPERTY, compile_tool, java_command, run_process
from hashing.versions import PATCH_RELEASES
from tests.conftest import FLINK_RELEASES, run_cli

pytestmark = pytest.mark.flink

# A uid-less stateful job. Its sink runs at parallelism 1 whatever the default: at a default
# parallelism of 1 "format" and the sink chain, at 2 they do not, so their IDs (and those of
# everything hashed after them) depend on the parallelism the job is submitted with.
JOB = """
package ugate.export;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.connector.source.util.ratelimit.RateLimiterStrategy;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.connector.datagen.source.DataGeneratorSource;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.util.Collector;

public class NoUidsJob {
    public static void main(String[] args) throws Exception {
        if (args.length > 0 && args[0].equals("--hang")) {
            Thread.sleep(Long.MAX_VALUE);  // a main() that waits for something before execute()
        }
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.fromSource(new DataGeneratorSource<>(n -> n, Long.MAX_VALUE, RateLimiterStrategy.perSecond(20),
                        Types.LONG), WatermarkStrategy.noWatermarks(), "numbers")
                .map(new Tag()).name("tag")
                .keyBy(new Mod())
                .process(new Count()).name("count")
                .map(new Tag()).name("format")
                .sinkTo(new DiscardingSink<>()).name("out").setParallelism(1);
        env.execute("no-uids");
    }

    public static class Tag implements MapFunction<Long, Long> {
        @Override
        public Long map(Long v) {
            return v;
        }
    }

    public static class Mod implements KeySelector<Long, Long> {
        @Override
        public Long getKey(Long v) {
            return v % 8;
        }
    }

    public static class Count extends KeyedProcessFunction<Long, Long, Long> {
        @Override
        public void processElement(Long v, Context ctx, Collector<Long> out) throws Exception {
            ValueState<Long> count = getRuntimeContext().getState(new ValueStateDescriptor<>("count", Types.LONG));
            long n = count.value() == null ? 1 : count.value() + 1;
            count.update(n);
            out.collect(n);
        }
    }
}
"""
MAIN = "ugate.export.NoUidsJob"
CHAINING = "pipeline.operator-chaining.enabled"


def build_jar(version: str, work: Path) -> Path:
    """The job jar as a user's build makes it: javac + jar against the release's own lib jars."""
    src = work / "src" / "ugate" / "export" / "NoUidsJob.java"
    src.parent.mkdir(parents=True, exist_ok=True)
    src.write_text(JOB)
    classes = work / "classes"
    subprocess.run(["javac", "-nowarn", "--release", "17", "-cp", classpath(version), "-d", str(classes), str(src)],
                   check=True, capture_output=True, text=True)
    jar = work / "no-uids.jar"
    subprocess.run(["jar", "--create", "--file", str(jar), "-C", str(classes), "."], check=True)
    return jar


@pytest.fixture(scope="module")
def jars(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return {v: build_jar(v, tmp_path_factory.mktemp(f"job-{v}")) for v in ("1.20", "2.3")}


def export(jar: Path, version: str, out: Path, *options: str) -> subprocess.CompletedProcess[str]:
    return run_cli("export", "--jar", str(jar), "--main-class", MAIN, "--flink-version", version,
                   "-o", str(out), *options)


def ids_of(spec: Path, version: str) -> dict[str, str]:
    proc = run_cli("ids", str(spec), "--format", "json", "--flink-version", version)
    assert proc.returncode == 0, proc.stderr
    return {n["name"]: n["generated_id"] for n in json.loads(proc.stdout)["nodes"]}


def warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("warning:")]


# ---- settings reach the graph ---------------------------------------------------------------

def test_parallelism_and_dynamic_properties_reach_the_graph(jars: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "spec.json"
    proc = export(jars["2.3"], "2.3", out, "-p", "3", "-D", f"{CHAINING}=false")
    assert proc.returncode == 0, proc.stderr
    spec = json.loads(out.read_text())
    assert spec["chaining_enabled"] is False
    assert {n["name"]: n["parallelism"] for n in spec["nodes"]} == {
        "Source: numbers": 3, "tag": 3, "count": 3, "format": 3, "out: Writer": 1}
    assumed = proc.stderr.splitlines()[0]
    assert assumed.startswith("export: Flink 2.3.0; ")
    assert "parallelism.default=3 (-p)" in assumed and f"{CHAINING}=false (-D)" in assumed
    assert warnings(proc.stderr) == []  # every setting the IDs depend on was given
    # chaining off: every operator is its own job vertex
    vertices = json.loads(run_cli("ids", str(out), "--format", "json").stdout)
    assert len(vertices["job_vertices"]) == 5


def test_config_yaml_is_read_and_flags_override_it_in_flink_run_order(jars: dict[str, Path], tmp_path: Path) -> None:
    conf = tmp_path / "config.yaml"
    conf.write_text("parallelism.default: 4\npipeline:\n  operator-chaining:\n    enabled: false\n")
    out = tmp_path / "spec.json"
    proc = export(jars["2.3"], "2.3", out, "--config", str(conf))
    assert proc.returncode == 0, proc.stderr
    spec = json.loads(out.read_text())
    assert spec["chaining_enabled"] is False and spec["nodes"][0]["parallelism"] == 4
    assert "parallelism.default=4 (config)" in proc.stderr and f"{CHAINING}=false (config)" in proc.stderr
    # -D overrides the file, -p overrides -D (CliFrontend's order)
    proc = export(jars["2.3"], "2.3", out, "--config", str(conf), "-D", "parallelism.default=2",
                  "-D", f"{CHAINING}=true")
    assert proc.returncode == 0, proc.stderr
    spec = json.loads(out.read_text())
    assert spec["chaining_enabled"] is True and spec["nodes"][0]["parallelism"] == 2
    proc = export(jars["2.3"], "2.3", out, "--config", str(conf), "-D", "parallelism.default=2", "-p", "5")
    assert json.loads(out.read_text())["nodes"][0]["parallelism"] == 5


def test_legacy_flink_conf_yaml_is_read_by_1x(jars: dict[str, Path], tmp_path: Path) -> None:
    conf = tmp_path / "flink-conf.yaml"
    conf.write_text("# legacy format\nparallelism.default: 2\npipeline.operator-chaining.enabled: false\n")
    out = tmp_path / "spec.json"
    proc = export(jars["1.20"], "1.20", out, "--config", str(conf))
    assert proc.returncode == 0, proc.stderr
    spec = json.loads(out.read_text())
    assert spec["chaining_enabled"] is False and spec["nodes"][0]["parallelism"] == 2
    assert proc.stderr.splitlines()[0].startswith("export: Flink 1.20.5; parallelism.default=2 (config)")


def test_the_older_chaining_key_and_other_version_spellings_work(jars: dict[str, Path], tmp_path: Path) -> None:
    """`pipeline.operator-chaining` (Flink still reads it as a fallback key); "v1_20" as the Kubernetes
    operator spells it, "1.20.1" for any patch release of the line."""
    for version in ("v1_20", "1.20.1"):
        out = tmp_path / "spec.json"
        proc = export(jars["1.20"], version, out, "-D", "pipeline.operator-chaining=false")
        assert proc.returncode == 0, proc.stderr
        assert json.loads(out.read_text())["chaining_enabled"] is False
        assert proc.stderr.startswith("export: Flink 1.20.5; ")
        assert f"{CHAINING}=false (-D)" in proc.stderr
        assert not any(CHAINING in w for w in warnings(proc.stderr))


def test_warning_names_the_defaulted_settings_uidless_ids_depend_on(jars: dict[str, Path], tmp_path: Path) -> None:
    proc = export(jars["2.3"], "2.3", tmp_path / "spec.json")
    assert proc.returncode == 0, proc.stderr
    assert "parallelism.default=1 (default)" in proc.stderr.splitlines()[0]
    found = warnings(proc.stderr)
    assert len(found) == 2, proc.stderr
    assert found[0].startswith("warning: the IDs of ") and "depend on parallelism.default, which was not given " \
        "(assumed 1); pass the production value (-p N or --config)" in found[0]
    assert "format" in found[0] and "out: Writer" in found[0]
    assert f"depend on {CHAINING}, which was not given (assumed true)" in found[1]
    # a config that leaves chaining out means Flink's default really applies: no guess, no warning
    conf = tmp_path / "config.yaml"
    conf.write_text("parallelism.default: 2\n")
    proc = export(jars["2.3"], "2.3", tmp_path / "spec.json", "--config", str(conf))
    assert proc.returncode == 0, proc.stderr
    assert warnings(proc.stderr) == []
    assert f"{CHAINING}=true (Flink default, not in the config)" in proc.stderr


# ---- bad input: exit 2, one line naming the file or the flag --------------------------------

@pytest.mark.parametrize(("options", "expected"), [
    (["--config", "/nonexistent/config.yaml"], "/nonexistent/config.yaml: no such file"),
    (["-D", "pipeline.operator-chaining.enabled"], "-D 'pipeline.operator-chaining.enabled': expected key=value"),
    (["-D", "=3"], "-D '=3': expected key=value"),
    (["-D", "parallelism.default=two"], "-D 'parallelism.default=two': parallelism 'two' is not a whole number"),
    (["-D", f"{CHAINING}=maybe"], f"-D '{CHAINING}=maybe': {CHAINING} is true or false"),
    (["-p", "0"], "-p: parallelism must be between 1 and 32768, got 0"),
    (["-p", "x"], "-p 'x': not a number"),
    (["--flink-version", "1.7"], "--flink-version '1.7': not a Flink release export can use"),
    (["--timeout", "0"], "--timeout 0: must be more than 0 seconds"),
])
def test_bad_settings_are_one_line_exit_2(jars: dict[str, Path], tmp_path: Path, options: list[str],
                                          expected: str) -> None:
    proc = export(jars["2.3"], "2.3", tmp_path / "spec.json", *options)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"upgrade-gate: error: {expected}"), lines[0]
    assert not (tmp_path / "spec.json").exists()


def test_bad_config_files_are_one_line_exit_2(jars: dict[str, Path], tmp_path: Path) -> None:
    legacy = tmp_path / "flink-conf.yaml"
    legacy.write_text("parallelism.default: 2\n")
    broken = tmp_path / "config.yaml"
    broken.write_text("parallelism.default: [2\n  pipeline: {\n")
    for conf, version, expected in [
        (legacy, "2.3", f"{legacy}: Flink 2.3.0 reads only config.yaml (2.0 dropped flink-conf.yaml)"),
        (broken, "2.3", f"{broken}: "),
        (tmp_path, "2.3", None),  # a conf dir: config.yaml is preferred, and it is broken
    ]:
        proc = export(jars["2.3"], version, tmp_path / "spec.json", "--config", str(conf))
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1, proc.stderr
        assert lines[0].startswith(f"upgrade-gate: error: {expected or broken}"), lines[0]


# ---- the JVM never outlives the export ------------------------------------------------------

def _ours(owner: int) -> list[str]:
    """Command lines of live processes carrying our marker for CLI process `owner`."""
    proc = subprocess.run(["pgrep", "-a", "-f", f"{OWNER_PROPERTY}={owner}"], capture_output=True, text=True)
    return [line for line in proc.stdout.splitlines() if "pgrep" not in line]


def _start_export(jar: Path, tmp_path: Path, *options: str) -> subprocess.Popen[str]:
    exe = Path(sys.executable).with_name("upgrade-gate")
    return subprocess.Popen([str(exe), "export", "--jar", str(jar), "--main-class", MAIN, "-o",
                             str(tmp_path / "spec.json"), *options, "--", "--hang"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_timeout_kills_the_jvm_and_is_one_line(jars: dict[str, Path], tmp_path: Path) -> None:
    compile_tool("streamgraph", "2.3")  # so the timeout covers the JVM only
    started = time.monotonic()
    proc = _start_export(jars["2.3"], tmp_path, "--timeout", "8")
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2, err
    assert time.monotonic() - started < 60
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "took longer than 8 s and was stopped" in lines[0], err
    assert str(jars["2.3"]) in lines[0]
    assert _ours(proc.pid) == []


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL])
def test_interrupting_the_export_takes_its_jvm_down(jars: dict[str, Path], tmp_path: Path, sig: int) -> None:
    """Ctrl-C, a polite stop, and an orchestrator's SIGKILL of the CLI alike leave no JVM behind."""
    compile_tool("streamgraph", "2.3")
    proc = _start_export(jars["2.3"], tmp_path)
    try:
        deadline = time.monotonic() + 60
        while not _ours(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _ours(proc.pid), "the export's JVM never started"
        proc.send_signal(sig)
        proc.communicate(timeout=30)
        assert proc.returncode != 0
        deadline = time.monotonic() + 10
        while _ours(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _ours(proc.pid) == []
    finally:
        for line in _ours(proc.pid):
            os.kill(int(line.split()[0]), signal.SIGKILL)
        proc.kill()


# ---- the proof: exported IDs == a real savepoint's IDs, with the production settings ---------

class LocalCluster:
    """A real session cluster (LocalClusterMain) and Flink's own CLI against it, for one release."""

    def __init__(self, version: str, conf_dir: Path, work: Path) -> None:
        self.version, self.conf_dir, self.work = version, conf_dir, work
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""

    def start(self) -> LocalCluster:
        ready = self.work / "ready"
        cmd = java_command("streamgraph", self.version, "upgradegate.bridge.LocalClusterMain",
                           [str(self.conf_dir), str(ready), "4"], heap="768m")
        with open(self.work / "cluster.log", "w") as log:
            self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log, start_new_session=True,
                                         env=self.env)
        deadline = time.monotonic() + 90
        while not ready.is_file():
            assert self.proc.poll() is None, (self.work / "cluster.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "cluster not ready"
            time.sleep(0.3)
        self.url = ready.read_text().strip()
        return self

    def stop(self) -> None:
        if self.proc is not None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)

    def flink(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """`bin/flink ARGS`: the CLI's main class, with this conf dir as FLINK_CONF_DIR."""
        cmd = java_command("streamgraph", self.version, "org.apache.flink.client.cli.CliFrontend", list(args),
                           heap="384m")
        return run_process(cmd, timeout=timeout, env=self.env)

    @property
    def env(self) -> dict[str, str]:
        """FLINK_CONF_DIR as bin/flink sets it; plugins from the release (else `./plugins` of the cwd)."""
        return dict(os.environ, FLINK_CONF_DIR=str(self.conf_dir),
                    FLINK_PLUGINS_DIR=str(flink_home(self.version) / "plugins"))

    def wait_all_running(self, job_id: str, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with urllib.request.urlopen(f"{self.url}/jobs/{job_id}", timeout=10) as resp:
                job = json.loads(resp.read())
            if job["state"] == "RUNNING" and all(v["status"] == "RUNNING" for v in job["vertices"]):
                return
            assert job["state"] not in ("FAILED", "CANCELED", "FINISHED"), job["state"]
            time.sleep(0.5)
        raise AssertionError(f"job {job_id} not running after {timeout} s")

    def run_and_savepoint(self, jar: Path, *run_options: str) -> Path:
        run = self.flink("run", "-d", *run_options, "-c", MAIN, str(jar))
        assert run.returncode == 0, run.stdout + run.stderr
        job_id = next(line.split()[-1] for line in run.stdout.splitlines() if "JobID" in line)
        self.wait_all_running(job_id)
        target = (self.work / "savepoints").resolve()
        for _ in range(5):
            stop = self.flink("stop", "--savepointPath", target.as_uri(), job_id)
            if stop.returncode == 0:
                break
            time.sleep(2)
        assert stop.returncode == 0, stop.stdout + stop.stderr
        found = sorted(target.glob("savepoint-*/_metadata"))
        assert len(found) == 1
        return found[0].parent


def _conf_lines(rest_port: int, extra: dict[str, str]) -> str:
    conf = {"rest.address": "127.0.0.1", "rest.bind-address": "127.0.0.1", "rest.port": str(rest_port),
            "jobmanager.rpc.address": "127.0.0.1", "taskmanager.host": "127.0.0.1",
            "restart-strategy.type": "none", **extra}
    return "".join(f"{k}: {v}\n" for k, v in conf.items())


@pytest.mark.parametrize(("version", "conf_name", "conf_extra", "run_options", "export_options", "defaulted"), [
    # 1.20, legacy flink-conf.yaml, the job submitted with `flink run -p 2`: the sink's chain breaks
    ("1.20", "flink-conf.yaml", {}, ["-p", "2"], ["-p", "2"], ["parallelism.default"]),
    # 2.3, config.yaml turns chaining off, `flink run -D parallelism.default=2`
    ("2.3", "config.yaml", {CHAINING: "false"}, ["-D", "parallelism.default=2"],
     ["-D", "parallelism.default=2"], ["parallelism.default", CHAINING]),
])
def test_exported_ids_are_the_ids_in_a_real_savepoint_of_the_job_run_with_those_settings(
        jars: dict[str, Path], tmp_path: Path, version: str, conf_name: str, conf_extra: dict[str, str],
        run_options: list[str], export_options: list[str], defaulted: list[str]) -> None:
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    conf = conf_dir / conf_name
    conf.write_text(_conf_lines(free_ports(1)[0], conf_extra))
    cluster = LocalCluster(version, conf_dir, tmp_path).start()
    try:
        savepoint = cluster.run_and_savepoint(jars[version], *run_options)
    finally:
        cluster.stop()
    inspected = run_cli("inspect", str(savepoint), "--format", "json")
    assert inspected.returncode == 0, inspected.stderr
    in_savepoint = {op["operator_id"] for op in json.loads(inspected.stdout)["operators"]}
    assert len(in_savepoint) == 5

    # exported with the production settings: the same IDs, and nothing to warn about
    prod = tmp_path / "prod.json"
    proc = export(jars[version], version, prod, "--config", str(conf), *export_options)
    assert proc.returncode == 0, proc.stderr
    assert warnings(proc.stderr) == []
    assert set(ids_of(prod, version).values()) == in_savepoint

    # exported with the settings left out: other IDs for the uid-less operators, and the warning says why
    guess = tmp_path / "guess.json"
    proc = export(jars[version], version, guess)
    assert proc.returncode == 0, proc.stderr
    guessed = ids_of(guess, version)
    assert set(guessed.values()) != in_savepoint
    assert guessed["format"] not in in_savepoint and guessed["out: Writer"] not in in_savepoint
    found = warnings(proc.stderr)
    assert [key for key in defaulted if any(f"depend on {key}, which was not given" in w for w in found)] == defaulted


# ---- every Flink line export supports -------------------------------------------------------

@pytest.mark.flink
# the lines without committed fixtures (those are exported by the tests above)
@pytest.mark.parametrize("version", [line for line, patch in PATCH_RELEASES.items() if patch not in FLINK_RELEASES])
def test_other_flink_lines_export_with_settings(version: str, tmp_path: Path) -> None:
    """`make flink` installs every line; elsewhere dist.py downloads a release on first use, like a user's
    first export with it."""
    jar = build_jar(version, tmp_path / "job")
    conf = tmp_path / "config.yaml"
    conf.write_text(f"{CHAINING}: false\n")
    out = tmp_path / "spec.json"
    proc = export(jar, version, out, "-p", "2", "--config", str(conf))
    assert proc.returncode == 0, proc.stderr
    spec = json.loads(out.read_text())
    assert spec["chaining_enabled"] is False and spec["nodes"][0]["parallelism"] == 2
    assert proc.stderr.startswith(f"export: Flink {release_of(version)}; ")

"""Write real savepoints and checkpoints with real Flink, plus Flink's own reading of each.

For every Flink release (1.20.x writes `_metadata` v4, 2.0.x v5, 2.3.x v6) the Java tool
`savepoints` (flink_bridge/java/savepoints/) runs small stateful jobs in a MiniCluster and takes
savepoints (canonical and native, hashmap and RocksDB, triggered and stop-with-savepoint) and
checkpoints (finished tasks, unaligned with channel state, file merging). We keep `_metadata`
(and, for one case, the tiny state files its relative handles point at) under
`tests/fixtures/savepoints/<release>/<case>/`, then let Flink's `Checkpoints.loadCheckpointMetadata`
read each kept copy and write `flink-view.json` beside it: the oracle the reader tests compare with.

Savepoints carry random ids and timestamps, so re-running changes bytes, not structure; tests
compare our reading with Flink's reading of the same file, never with hard-coded values.

Usage: python -m flink_bridge.generate_savepoints [--versions 1.20 2.0 2.3] [--cases ...]
       [--out DIR] [--large] [--wide]   (--large writes the parallelism-128 benchmark savepoint to
       .work/bench/, --wide the parallelism-1,000 one: built from Flink's state-handle classes and written
       by Flink's own Checkpoints.storeCheckpointMetadata, see java/savepoints/common/.../Wide.java)
       python -m flink_bridge.generate_savepoints --state-schemas [--versions 1.20 2.3]
       (savepoints of java/savepoints/common/.../StateSchemas.java, one state per serializer family, kept
       under tests/fixtures/savepoints/state-schemas/<release>/<case>/ with `flink-state-meta.json`: what
       Flink's own KeyedBackendSerializationProxy / OperatorBackendSerializationProxy read from every
       handle, see StateMetaDump.java)
       python -m flink_bridge.generate_savepoints --state-schema-restores
       (restores those savepoints on 2.3 and, as controls, on their own release, and records per state whether
       every restored value is right: state-schemas/restores.json, see StateSchemaRestore.java)
       python -m flink_bridge.generate_savepoints --schema-changes [--versions 1.20 2.3]
       (same-version schema changes, SchemaChanges.java: job A's savepoint restored by a job B whose POJO field
       was added, removed or retyped, whose Row or RowData gained or retyped a field, or whose key type changed;
       HashMap and RocksDB; B's own savepoint from scratch too. Kept under
       state-schemas/changes/<release>/<backend>/<change>/, outcomes in state-schemas/changes/outcomes.json)
       python -m flink_bridge.generate_savepoints --ttl-changes [--versions 1.20 2.3]
       (State TTL turned on, turned off or its duration changed, per ValueState / ListState / MapState and backend,
       TtlChanges.java: job A's savepoint restored by job B with every value checked, B's own savepoint too. Kept
       under state-schemas/ttl/<release>/<backend>/<ttl>/, outcomes in state-schemas/ttl/outcomes.json: the
       scenarios upgrade_gate/gate/release_rules.py cites)
       python -m flink_bridge.generate_savepoints --kryo-nested
       (KryoNested.java: a Kryo-serialized non-POJO class holding an ArrayList, written by 1.20 on HashMap and
       RocksDB, restored by 2.3 and by 1.20 with every value checked: state-schemas/kryo-nested/outcomes.json)
       python -m flink_bridge.generate_savepoints --config-checks
       (a job started on each configuration of state-schemas/config/ with 1.20 and 2.3: config/outcomes.json; and
       the ConfigOptions 2.3 removed, renamed or deprecated since 1.20: upgrade_gate/gate/flink_config_options.json)
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

from flink_bridge.dist import REPO_ROOT, WORK_DIR, FlinkDistError, ensure_flink, release_of
from flink_bridge.jvm import compile_tool, flink_conf_dir, java_command

FIXTURES = REPO_ROOT / "tests" / "fixtures" / "savepoints"
BENCH_DIR = WORK_DIR / "bench"
VERSIONS = ("1.20", "2.0", "2.3")
CASES = (
    "hashmap-canonical-p2",
    "hashmap-native-p4-maxpar256-files",
    "rocksdb-canonical-p1",
    "rocksdb-native-p2",
    "stop-with-savepoint-p2",
    "checkpoint-finished-tasks",
    "checkpoint-unaligned",
    "checkpoint-file-merging",
)
# Cases whose state files are committed too (relative-path handles resolve against them).
KEEP_STATE_FILES = {"hashmap-native-p4-maxpar256-files"}
MAX_KEPT_BYTES = 512 * 1024


def run_java(version: str, main_class: str, args: list[str], timeout: float = 1800,
             extra_classpath: list[Path] | None = None) -> str:
    """Run one of our Java mains against Flink `version` (1 GB heap: the machine is shared)."""
    conf = flink_conf_dir("savepoints-conf", "WARN")
    cmd = java_command("savepoints", version, main_class, args, extra_classpath=extra_classpath, heap="1g")
    cmd.insert(1, f"-Dlog4j.configurationFile={conf / 'log4j.properties'}")
    env = dict(os.environ, FLINK_CONF_DIR=str(conf))
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"{main_class} (Flink {release_of(version)}) exited {proc.returncode}:\n"
                           f"{proc.stderr[-4000:]}")
    return proc.stdout


def _local(path: str) -> Path:
    return Path(path.removeprefix("file://").removeprefix("file:"))


def _keep(src: Path, dest: Path, with_state: bool) -> None:
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    shutil.copy2(src / "_metadata", dest / "_metadata")
    if with_state:
        files = [p for p in src.iterdir() if p.is_file() and p.name != "_metadata"]
        if sum(p.stat().st_size for p in files) <= MAX_KEPT_BYTES:
            for p in files:
                shutil.copy2(p, dest / p.name)


def generate(version: str, cases: list[str], out: Path) -> list[Path]:
    """Run the cases for one Flink version; return the fixture dirs written (each with flink-view.json)."""
    release = release_of(version)
    ensure_flink(release)
    stage = WORK_DIR / "savepoints-stage" / release
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir(parents=True)
    written: list[Path] = []
    for line in run_java(version, "ugate.savepoints.Generate", [str(stage), *cases]).splitlines():
        if "\t" not in line:
            continue
        case, path = line.split("\t", 1)
        if path.startswith("ERROR\t"):
            print(f"[savepoints] {release} {case}: FAILED: {path[6:]}", file=sys.stderr)
            continue
        dest = out / release / case
        _keep(_local(path), dest, case in KEEP_STATE_FILES)
        written.append(dest)
        print(f"[savepoints] {release} {case}: {(dest / '_metadata').stat().st_size} bytes", file=sys.stderr)
    if release.startswith("1.20"):
        written += derive_v3(out / release)
    if written:
        run_java(version, "ugate.savepoints.FlinkView", ["view", *map(str, written)])
    shutil.rmtree(stage, ignore_errors=True)
    return written


V3_SOURCES = ("hashmap-canonical-p2", "checkpoint-finished-tasks", "checkpoint-unaligned")
JAVA_STREAM_HEADER = b"\xac\xed\x00\x05"


def derive_v3(release_dir: Path) -> list[Path]:
    """Format v3 (Flink 1.11–1.15) files, which no installable Flink writes any more.

    A v4 file is a v3 file plus the Java-serialized properties trailer, so dropping the trailer
    and writing version 3 gives a genuine v3 file; Flink 1.20 (which still reads v3) is then the
    oracle for it, like for every other fixture."""
    written = []
    for case in V3_SOURCES:
        src = release_dir / case / "_metadata"
        if not src.is_file():
            continue
        data = src.read_bytes()
        if data[4:8] != b"\x00\x00\x00\x04":
            continue
        cut = data.rfind(JAVA_STREAM_HEADER)
        dest = release_dir / f"v3-{case}"
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir()
        (dest / "_metadata").write_bytes(data[:4] + b"\x00\x00\x00\x03" + data[8:cut])
        written.append(dest)
    return written


def generate_large(version: str = "2.3") -> Path:
    """The benchmark input: a parallelism-128 savepoint written by real Flink (kept out of git)."""
    out = BENCH_DIR
    return generate(version, ["large-p128"], out)[0]


WIDE_CASE = "wide-p1000"


def generate_wide(version: str = "2.3") -> Path:
    """The 1,000-subtask benchmark input (kept out of git): 8 operators at parallelism 1,000 whose
    `CheckpointMetadata` is built in Java and serialized by Flink's own `Checkpoints.storeCheckpointMetadata`
    (a MiniCluster cannot run 1,000 subtasks on this machine; the serializer decides the bytes)."""
    return generate(version, [WIDE_CASE], BENCH_DIR)[0]


STATE_SCHEMA_DIR = FIXTURES / "state-schemas"
STATE_SCHEMA_VERSIONS = ("1.20", "2.3")
STATE_SCHEMA_CASES = ("hashmap-canonical-p2", "hashmap-canonical-files-p1", "rocksdb-canonical-p1", "rocksdb-native-p1",
                      "hashmap-snappy-p1")
# Cases whose state files are committed (every handle is a file next to `_metadata`, relative paths).
STATE_SCHEMA_FILES = {"hashmap-canonical-files-p1"}


def generate_state_schemas(version: str, cases: list[str] | None = None, out: Path = STATE_SCHEMA_DIR) -> list[Path]:
    """Savepoints holding one state per serializer family, plus Flink's own reading of their state meta info.

    Inline handles keep the fixtures to `_metadata` alone except for the one case whose handles are files.
    RocksDB native savepoints keep only `_metadata`: their meta stream is inline, the SST files are not needed
    to read state meta information."""
    release = release_of(version)
    ensure_flink(release)
    stage = WORK_DIR / "state-schemas-stage" / release
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir(parents=True)
    written: list[Path] = []
    for line in run_java(version, "ugate.savepoints.StateSchemas",
                         [str(stage), *(cases or STATE_SCHEMA_CASES)]).splitlines():
        if "\t" not in line:
            continue
        case, path = line.split("\t", 1)
        if path.startswith("ERROR\t"):
            print(f"[state-schemas] {release} {case}: FAILED: {path[6:]}", file=sys.stderr)
            continue
        dest = out / release / case
        _keep(_local(path), dest, case in STATE_SCHEMA_FILES)
        written.append(dest)
        print(f"[state-schemas] {release} {case}: {(dest / '_metadata').stat().st_size} bytes", file=sys.stderr)
    if written:
        run_java(version, "ugate.savepoints.StateMetaDump", [str(d) for d in written])
    shutil.rmtree(stage, ignore_errors=True)
    export_state_schema_graph(version, out / f"graph-{release}.json")
    return written


# (savepoint release, case, backend, parallelism, restored on, parts of the job restored without their state)
STATE_SCHEMA_RESTORES = (
    *((r, case, backend, par, "2.3", skip)
      for r in ("1.20",)
      for case, backend, par in (("hashmap-canonical-p2", "hashmap", 2), ("rocksdb-canonical-p1", "rocksdb", 1))
      for skip in ("", "operator,broadcast", "operator,keyed", "keyed,broadcast")),
    ("1.20", "hashmap-canonical-p2", "hashmap", 2, "1.20", ""),
    ("2.3", "hashmap-canonical-p2", "hashmap", 2, "2.3", ""),
)


def record_state_schema_restores(out: Path = STATE_SCHEMA_DIR) -> Path:
    """Restore the state-schema savepoints with real Flink (StateSchemaRestore.java) and record, per state,
    whether every restored value is what it must be: `restores.json`, what the gate's Kryo rule must predict.
    A part of the job whose restore fails hides the others, so each part is also restored alone."""
    import json

    outcomes = []
    for release, case, backend, par, target, skip in STATE_SCHEMA_RESTORES:
        savepoint = out / release_of(release) / case
        line = run_java(target, "ugate.savepoints.StateSchemaRestore", [str(savepoint), backend, str(par), skip],
                        timeout=600).strip().splitlines()[-1]
        result = json.loads(line)
        outcomes.append({"savepoint": f"{release_of(release)}/{case}", "restored_on": release_of(target),
                         "backend": backend, "parallelism": par, "skipped": skip.split(",") if skip else [],
                         **result})
        print(f"[state-schemas] restore {release_of(release)}/{case} on {release_of(target)} "
              f"(skip {skip or '-'}): {result['status']}", file=sys.stderr)
    dest = out / "restores.json"
    dest.write_text(json.dumps(outcomes, indent=1) + "\n")
    return dest


SCHEMA_CHANGE_DIR = STATE_SCHEMA_DIR / "changes"
SCHEMA_CHANGE_BACKENDS = ("hashmap", "rocksdb")
# change -> the ugate.evolving.Account variant on the classpath (java/savepoints/variants/<variant>/)
SCHEMA_CHANGES = {"none": "base", "pojo-field-added": "field-added", "pojo-field-removed": "field-removed",
                  "pojo-field-retyped": "field-retyped", "row-field-added": "base", "row-field-retyped": "base",
                  "rowdata-field-added": "base", "rowdata-field-retyped": "base", "key-retyped": "base"}


def compile_variant(release: str, variant: str) -> Path:
    """The Account variant's classes, compiled alone: one class name, a different schema per run."""
    src = Path(__file__).resolve().parent / "java" / "savepoints" / "variants" / variant
    out = WORK_DIR / "jvm" / release / "schema-variants" / variant
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    subprocess.run(["javac", "-nowarn", "--release", "17", "-d", str(out), *map(str, sorted(src.rglob("*.java")))],
                   check=True)
    return out


def record_schema_changes(version: str, out: Path = SCHEMA_CHANGE_DIR) -> list[dict[str, object]]:
    """Job A (the base schema) writes a savepoint per backend; per change, job B writes its own savepoint from
    scratch and restores A's; what Flink did is recorded. One JVM per Account variant (its class decides the
    POJO's schema), the base one first since it writes A's savepoints."""
    import json

    release = release_of(version)
    ensure_flink(release)
    stage = WORK_DIR / "schema-changes-stage" / release
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir(parents=True)
    outcomes: list[dict[str, object]] = []
    variants = dict.fromkeys(SCHEMA_CHANGES.values())
    for variant in variants:
        changes = [c for c, v in SCHEMA_CHANGES.items() if v == variant]
        tasks = [f"write:{stage / b / c}:{b}:{c}" for b in SCHEMA_CHANGE_BACKENDS for c in changes]
        tasks += [f"restore:{stage / b / 'none'}:{b}:{c}" for b in SCHEMA_CHANGE_BACKENDS for c in changes]
        lines = run_java(version, "ugate.savepoints.SchemaChanges", tasks, timeout=1200,
                         extra_classpath=[compile_variant(release, variant)])
        for line in lines.splitlines():
            task, _, result = line.partition("\t")
            if not task.startswith(("write:", "restore:")):
                continue
            kind, _path, backend, change = task.split(":", 3)
            if result.startswith("ERROR"):
                raise RuntimeError(f"{task}: {result}")
            if kind == "write":
                _keep(_local(result), out / release / backend / change, False)
                continue
            doc = json.loads(result)
            outcomes.append({"release": release, "backend": backend, "change": change,
                             "old_savepoint": f"{release}/{backend}/none",
                             "new_savepoint": f"{release}/{backend}/{change}",
                             **doc})
            print(f"[schema-changes] {release} {backend} {change}: {doc['status']}", file=sys.stderr)
    shutil.rmtree(stage, ignore_errors=True)
    return outcomes


def write_schema_changes(versions: list[str], out: Path = SCHEMA_CHANGE_DIR) -> Path:
    import json

    outcomes = [o for v in versions for o in record_schema_changes(v, out)]
    dest = out / "outcomes.json"
    dest.write_text(json.dumps(outcomes, indent=1) + "\n")
    return dest


TTL_CHANGE_DIR = STATE_SCHEMA_DIR / "ttl"
TTL_KINDS = ("value", "list", "map")  # TtlChanges.STATES: a ValueState, a ListState and a MapState
# change -> (job A's TTL on every state, job B's TTL on the changed state): TtlChanges.java's `<n>d` / `off`
TTL_CHANGES = {"off-on": ("off", "1d"), "on-off": ("1d", "off"), "duration": ("1d", "2d")}


def ttl_scenarios() -> list[tuple[str, str, str, str]]:
    """(scenario, change, kind, B's TTL set-up): B changes one state's TTL, the others stay as in A, so a refusal
    names the state kind that caused it."""
    out = []
    for change, (before, after) in TTL_CHANGES.items():
        for i, kind in enumerate(TTL_KINDS):
            spec = "-".join(after if j == i else before for j in range(len(TTL_KINDS)))
            out.append((f"ttl-{change}-{kind}", change, kind, spec))
    return out


def record_ttl_changes(version: str, out: Path = TTL_CHANGE_DIR) -> list[dict[str, object]]:
    """Job A (TTL off on every state, or 1 day on every state) writes a savepoint per backend; per scenario job B
    (one state's TTL turned on, off, or to 2 days) writes its own from scratch and restores A's, checking every
    restored value (TtlChanges.java). One JVM per release for all 40 jobs."""
    import json

    release = release_of(version)
    ensure_flink(release)
    stage = WORK_DIR / "ttl-changes-stage" / release
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir(parents=True)
    bases = {before: "-".join([before] * len(TTL_KINDS)) for before, _ in TTL_CHANGES.values()}
    specs = list(dict.fromkeys([*bases.values(), *(s for *_, s in ttl_scenarios())]))
    tasks = [f"write:{stage / b / s}:{b}:{s}" for b in SCHEMA_CHANGE_BACKENDS for s in specs]
    scenarios = {}
    for b in SCHEMA_CHANGE_BACKENDS:
        for name, change, kind, spec in ttl_scenarios():
            task = f"restore:{stage / b / bases[TTL_CHANGES[change][0]]}:{b}:{spec}"
            tasks.append(task)
            scenarios[task] = (name, change, kind, bases[TTL_CHANGES[change][0]], spec)
    outcomes: list[dict[str, object]] = []
    for line in run_java(version, "ugate.savepoints.TtlChanges", tasks, timeout=3600).splitlines():
        task, _, result = line.partition("\t")
        if not task.startswith(("write:", "restore:")):
            continue
        if result.startswith("ERROR"):
            raise RuntimeError(f"{task}: {result}")
        kind_, _path, backend, spec = task.split(":", 3)
        if kind_ == "write":
            _keep(_local(result), out / release / backend / spec, False)
            continue
        name, change, kind, old_spec, new_spec = scenarios[task]
        doc = json.loads(result)
        outcomes.append({"scenario": name, "release": release, "backend": backend, "change": change,
                         "state_kind": kind, "old_savepoint": f"{release}/{backend}/{old_spec}",
                         "new_savepoint": f"{release}/{backend}/{new_spec}", **doc})
        print(f"[ttl-changes] {release} {backend} {name}: {doc['status']} {doc['states']}", file=sys.stderr)
    shutil.rmtree(stage, ignore_errors=True)
    return outcomes


def write_ttl_changes(versions: list[str], out: Path = TTL_CHANGE_DIR) -> Path:
    import json
    import time

    started = time.monotonic()
    outcomes = [o for v in versions for o in record_ttl_changes(v, out)]
    dest = out / "outcomes.json"
    dest.write_text(json.dumps(outcomes, indent=1) + "\n")
    print(f"[ttl-changes] {len(outcomes)} restores in {time.monotonic() - started:.0f} s", file=sys.stderr)
    return dest


KRYO_NESTED_DIR = STATE_SCHEMA_DIR / "kryo-nested"


# variant -> (prefix of its savepoint directories, its outcomes file): with ArrayList registered, Kryo writes the
# list's class by registration id (KryoNested#config)
KRYO_NESTED_VARIANTS = {"kryo-nested": ("", "outcomes.json"),
                        "kryo-nested-registered": ("registered-", "registered-outcomes.json")}


def write_kryo_nested(out: Path = KRYO_NESTED_DIR, variant: str = "kryo-nested") -> Path:
    """A Kryo-serialized non-POJO class holding an ArrayList (KryoNested.java): written by 1.20 on both backends,
    restored by 2.3 (Kryo 2 -> 5) and, as the control, by 1.20, every key's value read back: outcomes.json (the
    registered variant: `registered-<backend>/`, registered-outcomes.json)."""
    import json
    import time

    started = time.monotonic()
    stage = WORK_DIR / "kryo-nested-stage"
    shutil.rmtree(stage, ignore_errors=True)
    writer, reader = STATE_SCHEMA_VERSIONS[0], STATE_SCHEMA_VERSIONS[-1]
    for v in (writer, reader):
        ensure_flink(release_of(v))
    written = release_of(writer)
    prefix, outcomes_file = KRYO_NESTED_VARIANTS[variant]
    tasks = [f"write:{stage / b}:{b}:{variant}" for b in SCHEMA_CHANGE_BACKENDS]
    for line in run_java(writer, "ugate.savepoints.KryoNested", tasks, timeout=900).splitlines():
        task, _, result = line.partition("\t")
        if task.startswith("write:"):
            if result.startswith("ERROR"):
                raise RuntimeError(f"{task}: {result}")
            _keep(_local(result), out / written / f"{prefix}{task.split(':')[2]}", False)
    outcomes = []
    for target in (reader, writer):
        tasks = [f"restore:{out / written / f'{prefix}{b}'}:{b}:{variant}" for b in SCHEMA_CHANGE_BACKENDS]
        for line in run_java(target, "ugate.savepoints.KryoNested", tasks, timeout=900).splitlines():
            task, _, result = line.partition("\t")
            if not task.startswith("restore:"):
                continue
            if result.startswith("ERROR"):
                raise RuntimeError(f"{task}: {result}")
            backend = task.split(":")[2]
            doc = json.loads(result)
            outcomes.append({"savepoint": f"{written}/{prefix}{backend}", "restored_on": release_of(target),
                             "backend": backend, **doc})
            print(f"[kryo-nested] {written}/{backend} on {release_of(target)}: {doc}", file=sys.stderr)
    shutil.rmtree(stage, ignore_errors=True)
    dest = out / outcomes_file
    dest.write_text(json.dumps(outcomes, indent=1) + "\n")
    print(f"[kryo-nested] {len(outcomes)} restores in {time.monotonic() - started:.0f} s", file=sys.stderr)
    return dest


CONFIG_DIR = STATE_SCHEMA_DIR / "config"
CONFIG_TABLE = REPO_ROOT / "upgrade_gate" / "gate" / "flink_config_options.json"


def record_config_checks(versions: tuple[str, ...] = ("1.20", "2.3"), out: Path = CONFIG_DIR) -> Path:
    """Start a job on every configuration under state-schemas/config/<case>/ (config.yaml or flink-conf.yaml,
    loaded by Flink's GlobalConfiguration as a cluster does) with each release, and record what happened:
    config/outcomes.json. Then diff the ConfigOptions of the first and last release (ConfigCheck.java reflects
    every `*Options` class of Flink's lib/): upgrade_gate/gate/flink_config_options.json, the table the gate's
    configuration rule reads."""
    import json

    cases = sorted(d for d in out.iterdir() if d.is_dir())
    outcomes = []
    for version in versions:
        release = release_of(version)
        ensure_flink(release)
        for line in run_java(version, "ugate.savepoints.ConfigCheck", ["start", *map(str, cases)],
                             timeout=900).splitlines():
            path, _, result = line.partition("\t")
            if not result:
                continue
            status = json.loads(result)["status"]
            outcomes.append({"case": Path(path).name, "release": release,
                             "file": next(p.name for p in Path(path).iterdir() if p.suffix == ".yaml"),
                             "status": status})
            print(f"[config] {release} {Path(path).name}: {status}", file=sys.stderr)
    (out / "outcomes.json").write_text(json.dumps(outcomes, indent=1) + "\n")
    tables = {}
    for version in (versions[0], versions[-1]):
        release = release_of(version)
        dump = WORK_DIR / "config-options" / f"{release}.json"
        dump.parent.mkdir(parents=True, exist_ok=True)
        jars = sorted((ensure_flink(release) / "lib").glob("*.jar"))
        run_java(version, "ugate.savepoints.ConfigCheck", ["options", str(dump), *map(str, jars)], timeout=600)
        tables[release] = json.loads(dump.read_text())
    CONFIG_TABLE.write_text(json.dumps(config_option_changes(*tables.items()), indent=1, sort_keys=True) + "\n")
    return out / "outcomes.json"


def config_option_changes(old: tuple[str, dict[str, dict[str, object]]],
                          new: tuple[str, dict[str, dict[str, object]]]) -> dict[str, object]:
    """Which keys of release `old` the release `new` no longer knows (`removed`), knows only as another
    option's deprecated or fallback key (`renamed`: old key -> new key), and which options `new` deprecates."""
    (old_release, old_opts), (new_release, new_opts) = old, new

    def spellings(opts: dict[str, dict[str, object]]) -> dict[str, str]:
        known = {}
        for key, doc in opts.items():
            for alias in (*doc["deprecated_keys"], *doc["fallback_keys"]):  # type: ignore[misc]
                known.setdefault(str(alias), key)
        known.update({k: k for k in opts})
        return known

    new_known = spellings(new_opts)
    removed, renamed = {}, {}
    for key, owner in spellings(old_opts).items():
        if key not in new_known:
            removed[key] = str(old_opts[owner]["class"]).rsplit(".", 1)[-1]
        elif new_known[key] != key:
            renamed[key] = new_known[key]
    deprecated = {k: str(d["class"]).rsplit(".", 1)[-1] for k, d in new_opts.items() if d["deprecated"]}
    return {"from": old_release, "to": new_release, "removed": removed, "renamed": renamed, "deprecated": deprecated}


def export_state_schema_graph(version: str, dest: Path) -> None:
    """The fixture job's graph spec (StateSchemas.GraphMain), exported by `upgrade-gate export` from a jar of
    the compiled classes: the new job a gate check of these savepoints runs against (same uids, parallelism 2)."""
    release = release_of(version)
    classes = compile_tool("savepoints", release)
    jar = WORK_DIR / "state-schemas-stage" / f"state-schemas-{release}.jar"
    jar.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["jar", "cf", str(jar), "-C", str(classes), "ugate"], check=True)
    subprocess.run([sys.executable, "-m", "upgrade_gate", "export", "--jar", str(jar), "--main-class",
                    "ugate.savepoints.StateSchemas$GraphMain", "--flink-version", version, "-p", "2", "-o", str(dest)],
                   check=True, cwd=REPO_ROOT)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--versions", nargs="+", default=list(VERSIONS))
    ap.add_argument("--cases", nargs="+", default=list(CASES))
    ap.add_argument("--out", type=Path, default=FIXTURES)
    ap.add_argument("--large", action="store_true", help="write the parallelism-128 benchmark savepoint instead")
    ap.add_argument("--wide", action="store_true", help="write the parallelism-1,000 benchmark savepoint instead")
    ap.add_argument("--derive-v3", action="store_true", help="only re-derive the v3 fixtures from the 1.20 ones")
    ap.add_argument("--state-schemas", action="store_true",
                    help="write the state-schema fixtures (a state per serializer family) and Flink's reading")
    ap.add_argument("--state-schema-restores", action="store_true",
                    help="restore the state-schema savepoints (1.20 -> 2.3 and controls) and record what Flink did")
    ap.add_argument("--schema-changes", action="store_true",
                    help="same-version schema changes (POJO field added/removed/retyped, Row, key) and what Flink did")
    ap.add_argument("--ttl-changes", action="store_true",
                    help="same-version State TTL changes (on, off, duration) per state kind and backend")
    ap.add_argument("--kryo-nested", action="store_true",
                    help="a Kryo non-POJO holding an ArrayList: written by 1.20, restored by 2.3 and 1.20")
    ap.add_argument("--kryo-nested-registered", action="store_true",
                    help="the same with ArrayList registered with Kryo (written by registration id)")
    ap.add_argument("--config-checks", action="store_true",
                    help="start jobs on state-schemas/config/* with 1.20 and 2.3; diff the releases' ConfigOptions")
    args = ap.parse_args(argv)
    if args.config_checks:
        print(record_config_checks())
        return 0
    if args.kryo_nested or args.kryo_nested_registered:
        if args.kryo_nested:
            print(write_kryo_nested())
        if args.kryo_nested_registered:
            print(write_kryo_nested(variant="kryo-nested-registered"))
        return 0
    if args.ttl_changes:
        versions = args.versions if args.versions != list(VERSIONS) else list(STATE_SCHEMA_VERSIONS)
        print(write_ttl_changes(versions))
        return 0
    if args.schema_changes:
        versions = args.versions if args.versions != list(VERSIONS) else list(STATE_SCHEMA_VERSIONS)
        print(write_schema_changes(versions))
        return 0
    if args.state_schema_restores:
        print(record_state_schema_restores())
        return 0
    if args.state_schemas:
        versions = args.versions if args.versions != list(VERSIONS) else list(STATE_SCHEMA_VERSIONS)
        cases = args.cases if args.cases != list(CASES) else None
        for v in versions:
            generate_state_schemas(v, cases)
        return 0
    if args.derive_v3:
        dirs = derive_v3(args.out / release_of("1.20"))
        run_java("1.20", "ugate.savepoints.FlinkView", ["view", *map(str, dirs)])
        return 0
    if args.large:
        print(generate_large(args.versions[-1]))
        return 0
    if args.wide:
        print(generate_wide(args.versions[-1]))
        return 0
    for v in args.versions:
        try:
            generate(v, args.cases, args.out)
        except FlinkDistError as exc:
            print(f"[savepoints] skipping Flink {v}: {exc}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

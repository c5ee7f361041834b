"""What every Spark job shares: the session, where inputs live, logging and atomic outputs.

Kept small on purpose: the jobs are thin shells around the core (`hashing/`, `restore/`), so
this module only knows about Spark and storage, never about a Flink rule.

* `build_session` makes a session that works on a developer box (`local[*]`, loopback only)
  and under `spark-submit --master ...` (the master given on the command line wins), and ships
  our packages to remote executors.
* Inputs are local paths, `file://` or `s3://` URIs. S3 objects are read with boto3 inside the
  executors: no s3a jars are available here (docs/design.md, Real components), and the readers need whole objects
  anyway.
* Outputs are written atomically for local paths: into a temporary directory beside the target,
  renamed into place only when the write succeeded, so a failed run never leaves a half-written
  table behind (and a re-run replaces the previous table in one step).
"""

from __future__ import annotations

import argparse
import atexit
import json
import logging
import os
import py_compile
import shutil
import sys
import tempfile
import uuid
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

if TYPE_CHECKING:  # pyspark is only needed where a session is built
    from pyspark.sql import DataFrame, SparkSession

REPO = Path(__file__).resolve().parent.parent
SHIPPED_PACKAGES = ("spark_jobs", "hashing", "upgrade_gate")
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# For jobs whose work is in the Python workers (fleet_ids, savepoint_scan, fleet_check), a local
# session's JVM only moves rows between Parquet and those workers, on the same few cores. C2
# compilation and G1's concurrent threads then cost more CPU than they win back: on 2 cores a
# 2,000-job fleet pipeline used 60 JVM CPU-seconds with the defaults and 31 with these. Not for
# key_alignment, whose JVM sorts every sampled row: C1-only code made it 2x slower
# (docs/performance.md).
PYTHON_BOUND_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


# ---- logging and arguments --------------------------------------------------------------
def get_logger(job: str) -> logging.Logger:
    """A logger for a job's progress lines (stderr, like Spark's own log), configured once."""
    logger = logging.getLogger(f"spark_jobs.{job}")
    if not logging.getLogger("spark_jobs").handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter(LOG_FORMAT))
        root = logging.getLogger("spark_jobs")
        root.addHandler(handler)
        root.setLevel(logging.INFO)
        root.propagate = False
    return logger


def add_spark_arguments(parser: argparse.ArgumentParser, output_help: str) -> None:
    """What every job's CLI shares: where it writes (atomically, `--overwrite` to replace) and how it runs."""
    parser.add_argument("--output", required=True, help=output_help)
    parser.add_argument("--overwrite", action="store_true", help="replace an existing output")
    parser.add_argument("--master", default=None,
                        help="Spark master; default: the one spark-submit passes, else local[*]")
    parser.add_argument("--partitions", type=int, default=None,
                        help="number of tasks to split the work into (default: 2 per core)")
    parser.add_argument("--progress-interval", type=float, default=5.0, metavar="SECONDS",
                        help="log jobs done / total, rate and ETA this often (default: 5)")


def start(job: str, master: str | None, extra_conf: dict[str, str] | None = None, *, python_bound: bool = False
          ) -> tuple[logging.Logger, SparkSession]:
    """A job's logger and session, the first two things every `_run` needs."""
    return get_logger(job), build_session(job, master, extra_conf=extra_conf, python_bound=python_bound)


class JobError(Exception):
    """A run that cannot proceed (no inputs, output exists...): reported in one line, exit code 2."""


# ---- the session ------------------------------------------------------------------------
def build_session(app_name: str, master: str | None = None, *, shuffle_partitions: int | None = None,
                  extra_conf: dict[str, str] | None = None, python_bound: bool = False) -> SparkSession:
    """A SparkSession for our jobs; `master=None` keeps what spark-submit set, else `local[*]`.

    Local sessions bind to 127.0.0.1 (the machines have no routable name) and run executors'
    Python with this interpreter, so the core installed in this environment is the one used.
    Under spark-submit, or for a cluster master, our packages are zipped and shipped with
    `addPyFile`: executors then need only the third-party libraries (numpy, mmh3, PyYAML, boto3,
    pandas, pyarrow). `python_bound=True` (the fleet jobs) gives a JVM we start ourselves a lighter
    JIT and GC (`PYTHON_BOUND_JVM_OPTIONS`).
    """
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # Local executors' Python workers inherit PYTHONPATH from the JVM, which inherits ours.
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(REPO) not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([str(REPO), *paths])

    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    elif not _under_spark_submit():
        builder = builder.master("local[*]")
    conf = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.host": "127.0.0.1" if _is_local(master) and not _under_spark_submit() else "",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.adaptive.enabled": "true",
        "spark.python.worker.reuse": "true",
    }
    local_jvm = _is_local(master) and not _under_spark_submit()  # we start the JVM ourselves
    if shuffle_partitions:
        conf["spark.sql.shuffle.partitions"] = str(shuffle_partitions)
    elif local_jvm:
        # 200 shuffle tasks (Spark's default) cost more than they help on a few local cores
        conf["spark.sql.shuffle.partitions"] = str(4 * (os.cpu_count() or 2))
    if local_jvm and python_bound:
        conf["spark.driver.extraJavaOptions"] = PYTHON_BOUND_JVM_OPTIONS
    if local_jvm:  # its workers run this interpreter, with REPO on PYTHONPATH (above)
        conf["spark.python.daemon.module"] = "spark_jobs.worker_daemon"
    conf.update(extra_conf or {})
    for key, value in conf.items():
        if value:
            builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    if _under_spark_submit() or not spark.sparkContext.master.startswith("local"):
        # the JVM (and the environment executors' Python inherits) predates us: ship the code
        _ship_packages(spark)
    return spark


def _under_spark_submit() -> bool:
    """spark-submit starts the JVM first and hands this driver its gateway (and its --master)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def _is_local(master: str | None) -> bool:
    return master is None or master.startswith("local")


def _ship_packages(spark: SparkSession) -> None:
    folder = tempfile.mkdtemp(prefix="ugate-pyfiles-")
    atexit.register(shutil.rmtree, folder, True)
    target = Path(folder) / "upgrade_gate_packages.zip"
    package_zip(target)
    spark.sparkContext.addPyFile(str(target))
    # a compiled extension cannot be imported from a zip: ship each built one as a file of its own, which
    # `hashing.shipped_extensions` loads from SparkFiles when the interpreter's ABI matches (else Python/NumPy run)
    for name in COMPILED_EXTENSIONS:
        extension = compiled_extension_file(name)
        if extension is not None:
            spark.sparkContext.addFile(str(extension))


def package_zip(target: Path) -> None:
    """`SHIPPED_PACKAGES` as the zip executors import them from: each module's source and its bytecode."""
    scratch = target.with_name(target.name + ".scratch.pyc")
    try:
        with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
            for pkg in SHIPPED_PACKAGES:
                for path in sorted((REPO / pkg).rglob("*.py")):
                    name = path.relative_to(REPO).as_posix()
                    zf.write(path, name)
                    zf.writestr(name[:-3] + ".pyc", _unchecked_bytecode(path, name, scratch))
    finally:
        scratch.unlink(missing_ok=True)


def _unchecked_bytecode(path: Path, name: str, scratch: Path) -> bytes:
    """`path` compiled (through the file `scratch`), as a `.pyc` the zip importer takes without comparing it to
    its source.

    A zip of sources alone makes every executor's Python worker compile each module it imports (zipimport
    keeps no bytecode): 2 % of a fleet run's worker CPU on local[2] (docs/performance.md, "Frozen objects").
    Beside each `.py` the zip holds its `.pyc`, unchecked-hash based: the zip is made from the sources in
    this one call, so they cannot differ. A worker of another Python version finds a foreign magic number,
    and zipimport then compiles the `.py` as before."""
    py_compile.compile(str(path), cfile=str(scratch), dfile=name, doraise=True,
                       invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
    return scratch.read_bytes()


# the built extensions executors get beside the zip: the hasher, String.hashCode for key_alignment, and the
# `_metadata` reader's subtask loop (savepoint_scan); each is loaded there by `hashing.shipped_extensions`
COMPILED_EXTENSIONS = ("hashing._fastids", "hashing._javastrings", "upgrade_gate.flink.metadata._fastsubtasks")


def compiled_extension_file(module: str) -> Path | None:
    """The built extension `module` (its dotted name) of this interpreter (`pip install -e .`), or None."""
    from importlib.machinery import EXTENSION_SUFFIXES

    package, _, name = module.rpartition(".")
    for suffix in EXTENSION_SUFFIXES:
        path = REPO.joinpath(*package.split("."), f"{name}{suffix}")
        if path.is_file():
            return path
    return None


def compiled_hasher_file() -> Path | None:
    """The built `hashing._fastids` extension of this interpreter (`pip install -e .`), or None."""
    return compiled_extension_file("hashing._fastids")


# ---- which hasher the executors ran -------------------------------------------------------
class _Union:
    """AccumulatorParam of sets: the tasks' implementation names, merged by union."""

    def zero(self, value: frozenset[str]) -> frozenset[str]:
        return frozenset()

    def addInPlace(self, a: frozenset[str], b: frozenset[str]) -> frozenset[str]:
        return frozenset(a) | frozenset(b)


def hasher_use(spark: SparkSession) -> Any:
    """An accumulator the tasks tell which hasher they ran ("compiled" or "python"; `note_hasher`), or
    which `_metadata` subtask loop (`note_subtask_loop`): one accumulator per thing reported.

    On a cluster the Python workers load our code from a shipped zip, where a compiled extension
    cannot be imported (`_ship_packages`): the driver log and the fleet report say what really ran."""
    return spark.sparkContext.accumulator(frozenset(), _Union())


def note_hasher(use: Any | None) -> None:
    """Executor side: add this worker's hasher implementation to the driver's accumulator."""
    if use is not None:
        from hashing.hashers import IMPLEMENTATION

        use.add(frozenset({IMPLEMENTATION}))


def note_subtask_loop(use: Any | None) -> None:
    """Executor side: add which loop reads this worker's `_metadata` subtasks (compiled or Python)."""
    if use is not None:
        from upgrade_gate.flink.metadata.fast_reader import IMPLEMENTATION

        use.add(frozenset({IMPLEMENTATION}))


def hasher_used(use: Any | None) -> str:
    """"compiled", "python", "compiled+python" (some workers each), or "none" (no task hashed)."""
    kinds = sorted(use.value) if use is not None else []
    return "+".join(kinds) if kinds else "none"


_WORKER_GC_TUNED = False


def tune_worker_gc() -> None:
    """Make the Python worker's cyclic GC cheap for the rest of its life; called by each task.

    A worker holds pyspark, pyarrow and pandas (hundreds of thousands of objects) and our tasks
    allocate millions of short-lived ones, so the default gen-0 threshold (700) runs a collection
    every few operators and the older generations keep re-scanning the libraries. Freezing what
    is loaded and collecting less often cut the GC's share of a fleet check from ~10 % to ~6 %
    (measured with gc.callbacks over 1,000 jobs). Reference counting still frees almost all of
    it; cycles are collected, just less often."""
    global _WORKER_GC_TUNED
    if not _WORKER_GC_TUNED:
        import gc

        gc.freeze()
        gc.set_threshold(20_000, 10, 10)
        _WORKER_GC_TUNED = True


def spread(spark: SparkSession, rows: list[tuple[Any, ...]], tasks: int, ddl: str) -> DataFrame:
    """A DataFrame of `rows` in `tasks` partitions of equal size, every `tasks`-th row in the same one.

    `parallelize` slices its pickled batches (1,024 rows each), not rows: 10,000 jobs in 8 tasks
    came out as six tasks of 1,024 jobs, one of 1,808 and one of 2,048, and the run waited on the
    last two with one core idle. Rows next to each other by name (one team's jobs) may cost
    alike, so they are dealt out rather than cut in runs."""
    tasks = max(1, min(tasks, len(rows)))
    chunks = [rows[k::tasks] for k in range(tasks)]
    return spark.sparkContext.parallelize(chunks, tasks).flatMap(lambda chunk: chunk).toDF(ddl)


def default_partitions(spark: SparkSession, requested: int | None, items: int) -> int:
    """Tasks to split `items` into: as asked, else 2 per core, never more tasks than items."""
    n = requested or 2 * spark.sparkContext.defaultParallelism
    return max(1, min(n, items))


# ---- schemas ----------------------------------------------------------------------------
_SIMPLE_TYPES = {"string": "StringType", "long": "LongType", "int": "IntegerType", "boolean": "BooleanType",
                 "double": "DoubleType", "short": "ShortType"}


def spark_schema(ddl: str) -> Any:
    """A StructType from our small DDL subset ("name type, ..."; scalar types and array<scalar>).

    Parsed in Python rather than by Spark's SQL parser, because executors have no JVM session
    to parse with and they need the same schema to build their Arrow batches.
    """
    from pyspark.sql import types as T

    fields = []
    for part in ddl.split(","):
        name, kind = part.strip().split(None, 1)
        kind = kind.strip().lower()
        if kind.startswith("array<") and kind.endswith(">"):
            dtype = T.ArrayType(getattr(T, _SIMPLE_TYPES[kind[6:-1]])())
        else:
            dtype = getattr(T, _SIMPLE_TYPES[kind])()
        fields.append(T.StructField(name, dtype, True))
    return T.StructType(fields)


def ddl_of(schema: Any) -> str:
    """The DDL subset of a StructType of scalar fields (the inverse of `spark_schema`), so a DataFrame's
    rows can go through `parquet_output.write_table` (the workers write them, `s3://` included)."""
    names = {v: k for k, v in _SIMPLE_TYPES.items()}
    out = []
    for f in schema.fields:
        kind = names.get(type(f.dataType).__name__)
        if kind is None:
            raise JobError(f"column {f.name}: type {f.dataType.simpleString()} has no Parquet part writer here")
        out.append(f"{f.name} {kind}")
    return ", ".join(out)


def arrow_schema(ddl: str) -> Any:
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(spark_schema(ddl))


# ---- where inputs live ------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Location:
    """A parsed input/output location: `scheme` is "file" or "s3"."""

    scheme: str
    bucket: str
    path: str  # local: absolute path; s3: key prefix without a leading slash

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.path}" if self.scheme == "s3" else self.path

    def child(self, name: str) -> Location:
        if self.scheme == "s3":
            base = self.path.rstrip("/")
            return Location("s3", self.bucket, f"{base}/{name}" if base else name)
        return Location("file", "", str(Path(self.path) / name))


def parse_location(name: str) -> Location:
    if name.startswith(("s3://", "s3a://")):
        parsed = urlparse("s3://" + name.split("://", 1)[1])
        if not parsed.netloc:
            raise JobError(f"{name}: expected s3://bucket/prefix")
        return Location("s3", parsed.netloc, parsed.path.lstrip("/"))
    if name.startswith("file:"):
        return Location("file", "", str(Path(unquote(urlparse(name).path)).resolve()))
    if "://" in name:
        raise JobError(f"{name}: unsupported scheme (use a path, file:// or s3://)")
    return Location("file", "", str(Path(name).resolve()))


def s3_client() -> Any:
    """The product's boto3 client (standard AWS environment); imported lazily inside executors."""
    from upgrade_gate.storage.s3 import s3_client as make

    return make()


def list_files(location: Location, suffixes: tuple[str, ...], client: Any | None = None) -> list[str]:
    """Every file below `location` whose name ends with one of `suffixes`, sorted (all S3 pages)."""
    if location.scheme == "s3":
        client = client or s3_client()
        prefix = location.path.rstrip("/") + "/" if location.path else ""
        keys: list[str] = []
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=location.bucket, Prefix=prefix):
            keys.extend(o["Key"] for o in page.get("Contents", ()) if o["Key"].endswith(suffixes))
        return sorted(f"s3://{location.bucket}/{k}" for k in keys)
    root = Path(location.path)
    if root.is_file():
        return [str(root)]
    if not root.is_dir():
        raise JobError(f"{location.uri}: no such file or directory")
    return sorted(str(p) for p in root.rglob("*") if p.is_file() and p.name.endswith(suffixes))


def list_children(location: Location, client: Any | None = None) -> list[str]:
    """The immediate sub-directories / sub-prefixes of `location` (one per job), sorted."""
    if location.scheme == "s3":
        client = client or s3_client()
        prefix = location.path.rstrip("/") + "/" if location.path else ""
        names: list[str] = []
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=location.bucket, Prefix=prefix,
                                                                     Delimiter="/"):
            names.extend(p["Prefix"][len(prefix):].rstrip("/") for p in page.get("CommonPrefixes", ()))
        return sorted(names)
    root = Path(location.path)
    if not root.is_dir():
        raise JobError(f"{location.uri}: no such directory")
    return sorted(p.name for p in root.iterdir() if p.is_dir())


def read_bytes(name: str, client: Any | None = None, max_bytes: int = 64 * 1024 * 1024) -> bytes:
    """A whole (small) file or object; bounded so a stray huge object cannot exhaust a worker.

    Raises `upgrade_gate.storage.StorageError` (an `InputError`) naming the object."""
    from upgrade_gate.storage.objects import read_object

    return read_object(name, max_bytes=max_bytes, client=client)


def job_name_of(path: str, root: Location) -> str:
    """A job's name in a catalogue: its file path below the root, without the extension."""
    rel = path[len(root.uri):].lstrip("/") if path.startswith(root.uri) else path.rsplit("/", 1)[-1]
    for ext in (".json", ".yaml", ".yml"):
        if rel.endswith(ext):
            return rel[: -len(ext)]
    return rel


# ---- atomic outputs ---------------------------------------------------------------------
@contextmanager
def atomic_output(target: str, *, overwrite: bool = False) -> Iterator[str]:
    """Yield a temporary path beside `target`; move it into place only if the block succeeds.

    Local paths get the all-or-nothing guarantee from a rename in the same directory. For `s3://`
    the path is yielded unchanged: S3 has no rename, so each table inside commits itself with one
    PUT of its manifest (`parquet_output`), and a JSON document is one PUT (`write_json`).
    """
    loc = parse_location(target)
    if loc.scheme == "s3":
        yield loc.uri
        return
    final = Path(loc.path)
    if final.exists() and not overwrite:
        raise JobError(f"{final}: already exists (pass --overwrite to replace it)")
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.parent / f".{final.name}.tmp-{uuid.uuid4().hex[:12]}"
    try:
        yield str(tmp)
        if not tmp.exists():
            raise JobError(f"{target}: the job wrote nothing")
        old = None
        if final.exists():
            old = final.parent / f".{final.name}.old-{uuid.uuid4().hex[:12]}"
            os.replace(final, old)
        os.replace(tmp, final)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True) if old.is_dir() else old.unlink(missing_ok=True)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True) if tmp.is_dir() else tmp.unlink(missing_ok=True)


def write_parquet(df: DataFrame, target: str, *, overwrite: bool = False) -> None:
    """Write `df` as a Parquet table at `target`, atomically for local paths."""
    with atomic_output(target, overwrite=overwrite) as tmp:
        df.write.mode("overwrite" if parse_location(tmp).scheme == "s3" else "error").parquet(tmp)


def write_json(doc: Any, target: str, *, overwrite: bool = False) -> None:
    """Write a JSON document (a report a DAG gates on) atomically; `s3://` targets are one PUT."""
    data = (json.dumps(doc, indent=2, sort_keys=False) + "\n").encode()
    loc = parse_location(target)
    if loc.scheme == "s3":
        s3_client().put_object(Bucket=loc.bucket, Key=loc.path, Body=data, ContentType="application/json")
        return
    with atomic_output(target, overwrite=overwrite) as tmp:
        Path(tmp).write_bytes(data)


def remove_object(target: str) -> None:
    """Delete a file or `s3://` object if it is there: a document about to stop describing what sits beside
    it (`parquet_output.write_tables`' `before_commit`). S3 answers a DELETE of a missing key with success."""
    loc = parse_location(target)
    if loc.scheme == "s3":
        s3_client().delete_object(Bucket=loc.bucket, Key=loc.path)
        return
    Path(loc.path).unlink(missing_ok=True)


def run_main(job: str, body: Any, argv: list[str] | None) -> int:
    """Run a job's body; bad input and job errors become one log line and exit code 2."""
    from hashing.errors import InputError

    log = get_logger(job)
    try:
        return int(body(argv))
    except (JobError, InputError) as exc:
        log.error("%s", exc)
        return 2

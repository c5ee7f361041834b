"""Benchmark: the state meta information of a 1,000-subtask RocksDB savepoint (goal: read in under 2 s).

"Reading the meta information" is what `upgrade-gate inspect` and the gate's Kryo rule do: parse the
`_metadata`, then open every managed state handle and read the serialization proxy it starts with
(`upgrade_gate.flink.state_meta.read_state_schemas`), for every subtask of every operator.

Input, written by real Flink 2.3: the committed state-schema savepoints (tests/fixtures/savepoints/state-schemas/
2.3.0/, a job with one state per serializer family, RocksDB backend) widened to parallelism 1,000. A MiniCluster
cannot run 1,000 subtasks on this machine, so a small Java program (below, run against Flink's jars) loads the
real savepoint with Flink's `Checkpoints.loadCheckpointMetadata`, gives every operator 1,000 subtasks (key-group
ranges from Flink's `KeyGroupRangeAssignment`, max parallelism 4,096) holding the real handles of subtask 0, and
writes the `_metadata` with Flink's own `Checkpoints.storeCheckpointMetadata`:
* `native`: RocksDB native savepoint (`IncrementalRemoteKeyedStateHandle` per subtask): the real 9.5 KB meta
  stream inline in `_metadata` (below Flink's 20 KB small-file threshold, as Flink writes it), the SST files as
  relative files of the real sizes (never read: the proxy is in the meta stream);
* `canonical`: RocksDB canonical savepoint (`KeyGroupsSavepointStateHandle` per subtask) whose stream, the
  real one Flink's full snapshot wrote (proxy, then key groups), is a file of its own per subtask: 1,000
  files to open;
* `canonical-distinct`: the same with every file's proxy made unique: one state (`pojo-primitives`) is renamed
  in each file to a distinct name of the same length (its last 3 characters become the file's number in base
  36), so the reader's memo (a proxy byte-identical to one already parsed is parsed once; a real job's subtasks
  write identical proxies) never hits on a keyed proxy: the worst case. The operator-state proxies stay inline
  in `_metadata`, identical in every subtask, as Flink writes them.
Before timing, our reading of every handle is compared with what Flink's own `KeyedBackendSerializationProxy`
and `OperatorBackendSerializationProxy` read from the same widened savepoint (StateMetaDump, in a JVM).

The inputs are created on first use under `.work/bench/state-meta/`. Timed, from the `_metadata` on disk to every
operator's states: our reader against Flink's own `Checkpoints.loadCheckpointMetadata` and proxies' `read` over
every handle (StateMetaBench.java, the job's classes on its classpath), by bench/fair.py: thread CPU on both sides,
rounds alternated in one process tree, the JVM warmed up by CPU time until its rate is stable, the median of
per-round rates on both sides, the ratio with its spread and the load average. Our thread CPU includes the system
time of opening and reading the files, as the JVM thread's does.

Usage: python -m bench.bench_state_meta [--subtasks 1000] [--variants native,canonical,canonical-distinct]
       [--input DIR] [fair options: --rounds, --tiny, ...]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import fair  # noqa: E402
from flink_bridge.generate_savepoints import BENCH_DIR, run_java  # noqa: E402
from flink_bridge.jvm import classpath  # noqa: E402
from upgrade_gate.flink.metadata.reader import BoundedReader  # noqa: E402
from upgrade_gate.flink.state_meta import oracle_view, read_state_schemas  # noqa: E402
from upgrade_gate.flink.state_meta.proxy import read_keyed_proxy  # noqa: E402
from upgrade_gate.storage.savepoints import load_savepoint  # noqa: E402
from upgrade_gate.storage.state_files import state_stream_opener  # noqa: E402

GOAL_SECONDS = 2.0
VERSION = "2.3"
FIXTURES = REPO / "tests" / "fixtures" / "savepoints" / "state-schemas" / "2.3.0"
CASES = {"native": "rocksdb-native-p1", "canonical": "rocksdb-canonical-p1"}
OUT = BENCH_DIR / "state-meta"
RENAMED = "pojo-primitives"  # a keyed state of the fixture, renamed per file in `canonical-distinct`

# Run as a Java single-file program against Flink's jars (java -cp <flink> WideStateMeta.java ...).
JAVA = r"""
import org.apache.flink.core.fs.Path;
import org.apache.flink.runtime.checkpoint.Checkpoints;
import org.apache.flink.runtime.checkpoint.OperatorState;
import org.apache.flink.runtime.checkpoint.OperatorSubtaskState;
import org.apache.flink.runtime.checkpoint.StateObjectCollection;
import org.apache.flink.runtime.checkpoint.metadata.CheckpointMetadata;
import org.apache.flink.runtime.state.IncrementalKeyedStateHandle.HandleAndLocalPath;
import org.apache.flink.runtime.state.IncrementalRemoteKeyedStateHandle;
import org.apache.flink.runtime.state.KeyGroupRange;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;
import org.apache.flink.runtime.state.KeyGroupRangeOffsets;
import org.apache.flink.runtime.state.KeyGroupsSavepointStateHandle;
import org.apache.flink.runtime.state.KeyGroupsStateHandle;
import org.apache.flink.runtime.state.KeyedStateHandle;
import org.apache.flink.runtime.state.filesystem.RelativeFileStateHandle;

import java.io.*;
import java.nio.file.Files;
import java.util.*;

/** A real savepoint widened to P subtasks: subtask 0's real handles in every subtask; Flink writes the file. */
public class WideStateMeta {
    public static void main(String[] args) throws Exception {
        File fixture = new File(args[0]).getAbsoluteFile();
        File out = new File(args[1]).getAbsoluteFile();
        int p = Integer.parseInt(args[2]);
        int maxP = Integer.parseInt(args[3]);
        out.mkdirs();
        String base = out.toURI().toString().replaceAll("/$", "");
        CheckpointMetadata m;
        try (DataInputStream in = new DataInputStream(new BufferedInputStream(
                new FileInputStream(new File(fixture, "_metadata"))))) {
            m = Checkpoints.loadCheckpointMetadata(in, WideStateMeta.class.getClassLoader(), fixture.getPath());
        }
        Random rnd = new Random(1000L + p);
        List<OperatorState> ops = new ArrayList<>();
        for (OperatorState o : m.getOperatorStates()) {
            OperatorState w = new OperatorState(o.getOperatorName().orElse(null), o.getOperatorUid().orElse(null),
                    o.getOperatorID(), p, maxP);
            if (o.getCoordinatorState() != null) w.setCoordinatorState(o.getCoordinatorState());
            OperatorSubtaskState first = o.getState(0);
            for (int i = 0; i < p; i++) {
                KeyGroupRange range = KeyGroupRangeAssignment.computeKeyGroupRangeForOperatorIndex(maxP, p, i);
                OperatorSubtaskState.Builder b = OperatorSubtaskState.builder();
                if (first != null) {
                    b.setManagedOperatorState(first.getManagedOperatorState());
                    List<KeyedStateHandle> keyed = new ArrayList<>();
                    for (KeyedStateHandle h : first.getManagedKeyedState()) keyed.add(widen(h, range, out, base, rnd));
                    b.setManagedKeyedState(new StateObjectCollection<>(keyed));
                }
                w.putState(i, b.build());
            }
            ops.add(w);
        }
        CheckpointMetadata wide = new CheckpointMetadata(m.getCheckpointId(), ops, m.getMasterStates(),
                m.getCheckpointProperties());
        try (OutputStream o = new BufferedOutputStream(new FileOutputStream(new File(out, "_metadata")))) {
            Checkpoints.storeCheckpointMetadata(wide, o);
        }
    }

    private static String name(Random rnd) {
        return new UUID(rnd.nextLong(), rnd.nextLong()).toString();
    }

    private static List<HandleAndLocalPath> asFiles(List<HandleAndLocalPath> files, String base, Random rnd) {
        List<HandleAndLocalPath> out = new ArrayList<>();
        for (HandleAndLocalPath f : files) {
            String n = name(rnd);
            out.add(HandleAndLocalPath.of(new RelativeFileStateHandle(new Path(base, n), n, f.getStateSize()),
                    f.getLocalPath()));
        }
        return out;
    }

    private static KeyedStateHandle widen(KeyedStateHandle h, KeyGroupRange range, File out, String base, Random rnd)
            throws IOException {
        if (h instanceof IncrementalRemoteKeyedStateHandle) {
            IncrementalRemoteKeyedStateHandle r = (IncrementalRemoteKeyedStateHandle) h;
            return new IncrementalRemoteKeyedStateHandle(new UUID(rnd.nextLong(), rnd.nextLong()), range,
                    r.getCheckpointId(), asFiles(r.getSharedState(), base, rnd),
                    asFiles(r.getPrivateState(), base, rnd), r.getMetaDataStateHandle(), r.getCheckpointedSize());
        }
        if (h instanceof KeyGroupsStateHandle) {
            KeyGroupsStateHandle k = (KeyGroupsStateHandle) h;
            byte[] bytes;
            try (InputStream in = k.getDelegateStateHandle().openInputStream()) {
                bytes = in.readAllBytes();
            }
            String n = name(rnd);
            Files.write(new File(out, n).toPath(), bytes);
            long first = Long.MAX_VALUE;
            for (int g : k.getKeyGroupRange()) {
                long off = k.getOffsetForKeyGroup(g);
                if (off > 0) first = Math.min(first, off);
            }
            long[] offsets = new long[range.getNumberOfKeyGroups()];
            offsets[0] = first == Long.MAX_VALUE ? 0 : first;  // the key groups start after the proxy
            return new KeyGroupsSavepointStateHandle(new KeyGroupRangeOffsets(range, offsets),
                    new RelativeFileStateHandle(new Path(base, n), n, bytes.length));
        }
        throw new IllegalArgumentException("unexpected keyed handle " + h.getClass());
    }
}
"""


def _java_source() -> Path:
    src = OUT / "WideStateMeta.java"
    src.parent.mkdir(parents=True, exist_ok=True)
    if not src.is_file() or src.read_text() != JAVA:
        src.write_text(JAVA)
    return src


def generate(variant: str, subtasks: int) -> Path:
    """Write the widened savepoint with Flink (once), and Flink's own reading of its proxies beside it."""
    out = OUT / f"{variant}-p{subtasks}"
    if (out / "_metadata").is_file() and (out / "flink-state-meta.json").is_file():
        return out
    shutil.rmtree(out, ignore_errors=True)
    cmd = ["java", "-Xmx1g", "-cp", classpath(VERSION, []), str(_java_source()), str(FIXTURES / CASES[variant]),
           str(out), str(subtasks), "4096"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise SystemExit(f"WideStateMeta failed: {proc.stderr[-2000:]}")
    run_java(VERSION, "ugate.savepoints.StateMetaDump", [str(out)], timeout=600)  # writes flink-state-meta.json
    return out


def distinct(subtasks: int) -> Path:
    """The canonical input with every file's proxy made unique: the reader's memo of proxies it already parsed
    never hits on a keyed proxy, so this is the uncached worst case (a memo keyed by the proxy's bytes hits on
    files that differ only after it). In each file, the state `RENAMED` gets a distinct name of the same length:
    its last 3 characters become the file's number in base 36. A name is Java modified UTF-8 behind a 2-byte
    length (`StateMetaInfoSnapshotReadersWriters`); the same length and ASCII keep the stream valid, and the key
    groups after the proxy name states by index, not by name (`FullSnapshotAsyncWriter`). Flink's reading is
    taken again from the copy: the benchmark's comparison with it proves the files still valid."""
    if subtasks > 36 ** 3:
        raise SystemExit(f"canonical-distinct: at most {36 ** 3:,} subtasks (3 base-36 digits)")
    out = OUT / f"canonical-distinct-proxies-p{subtasks}"
    if (out / "flink-state-meta.json").is_file():
        return out
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(generate("canonical", subtasks), out)
    (out / "flink-state-meta.json").unlink()
    name = RENAMED.encode("ascii")
    field = len(name).to_bytes(2, "big") + name
    for i, f in enumerate(sorted(p for p in out.iterdir() if p.name != "_metadata")):
        data = bytearray(f.read_bytes())
        proxy = BoundedReader(bytes(data), f.name)
        read_keyed_proxy(proxy, "KeyGroupsSavepointStateHandle")
        at = data.find(field, 0, proxy.pos)
        if at < 0 or data.find(field, at + 1, proxy.pos) >= 0:
            raise SystemExit(f"canonical-distinct: {RENAMED!r} is not once in the proxy of {f}")
        data[at + len(field) - 3:at + len(field)] = _base36(i, 3).encode("ascii")
        f.write_bytes(bytes(data))
    run_java(VERSION, "ugate.savepoints.StateMetaDump", [str(out)], timeout=600)
    return out


def _base36(n: int, width: int) -> str:
    digits = ""
    while n or len(digits) < width:
        n, d = divmod(n, 36)
        digits = "0123456789abcdefghijklmnopqrstuvwxyz"[d] + digits
    return digits


def read_all(path: Path) -> tuple[int, int, int]:
    """What inspect does: the `_metadata`, then every managed handle's proxy. (operators, subtasks, states)."""
    schemas = read_state_schemas(load_savepoint(str(path)), state_stream_opener(), strict=True)
    return (len(schemas), sum(len(op.subtasks) for op in schemas), sum(len(op.states) for op in schemas))


def same_as_flink(path: Path) -> bool:
    ours = oracle_view(read_state_schemas(load_savepoint(str(path)), state_stream_opener(), strict=True))
    return ours == json.loads((path / "flink-state-meta.json").read_text())


def _read(path: Path) -> Callable[[], int]:
    """One unit of our side: the savepoint's state meta information read once; 1 savepoint."""
    def unit() -> int:
        read_all(path)
        return 1
    return unit


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    settings = fair.settings_from(args)
    results: list[dict[str, Any]] = []
    if args.input:
        inputs = [(Path(args.input).name, Path(args.input).resolve())]
    else:
        inputs = [(v, distinct(args.subtasks) if v == "canonical-distinct" else generate(v, args.subtasks))
                  for v in args.variants.split(",")]
    for variant, path in inputs:
        ops, subtasks, states = read_all(path)
        files = sum(1 for p in path.iterdir() if p.name not in ("_metadata", "flink-state-meta.json"))
        if not same_as_flink(path):
            raise SystemExit(f"{path}: our reading of the state meta information differs from Flink's")
        size = (path / "_metadata").stat().st_size
        print(f"\ninput {variant}: {path} ({ops} operators, {subtasks:,} subtask states, {size / 1e6:.1f} MB "
              f"_metadata, {files:,} state files, {states:,} states); our reading == Flink's proxies': yes")
        with fair.FlinkServer("savepoints", VERSION, "ugate.savepoints.StateMetaBench", [str(path)]) as flink:
            what = fair.Comparison(
                "state meta", f"{variant} ({subtasks:,} subtask states)", "savepoints",
                "read_state_schemas(load_savepoint(...)): _metadata + every managed handle's proxy",
                "Checkpoints.loadCheckpointMetadata + Keyed/OperatorBackendSerializationProxy.read per handle",
                {"input": str(path), "variant": variant, "operators": ops, "subtask_states": subtasks,
                 "states": states, "files": files, "same_as_flink": True})
            r = fair.run_and_report(what, fair.Ours(_read(path)), flink, settings, args.json, results)
        seconds = 1 / r["ours"]["rate"]
        print(f"   ours {seconds * 1e3:.1f} CPU-ms a savepoint, Flink {1e3 / r['flink']['rate']:.1f} CPU-ms; "
              f"goal < 2 s: {'met' if seconds < GOAL_SECONDS else 'NOT met'}")
    return results


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--subtasks", type=int, default=1000)
    ap.add_argument("--variants", default="native,canonical,canonical-distinct",
                    help="inputs to widen and measure (default native,canonical,canonical-distinct)")
    ap.add_argument("--input", help="measure this savepoint folder instead (it must hold flink-state-meta.json)")
    fair.add_arguments(ap)
    args = ap.parse_args(argv)
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    fair.print_summary(run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())

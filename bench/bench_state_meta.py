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

The inputs are created on first use under `.work/bench/state-meta/`. Timed: our reader in this process, best
and mean of as many rounds as fit in the budget, from the `_metadata` bytes on disk to every operator's states;
the baseline, in the same run, Flink's own `Checkpoints.loadCheckpointMetadata` and proxies' `read` over every
handle, in a JVM (warmed up for half the budget, -Xmx1g).

Usage: python -m bench.bench_state_meta [--seconds 10] [--subtasks 1000]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from flink_bridge.generate_savepoints import BENCH_DIR, run_java  # noqa: E402
from flink_bridge.jvm import classpath, compile_tool  # noqa: E402
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
import org.apache.flink.runtime.state.KeyedBackendSerializationProxy;
import org.apache.flink.runtime.state.OperatorBackendSerializationProxy;
import org.apache.flink.runtime.state.OperatorStateHandle;
import org.apache.flink.runtime.state.StreamStateHandle;
import org.apache.flink.runtime.state.filesystem.RelativeFileStateHandle;
import org.apache.flink.core.memory.DataInputViewStreamWrapper;

import java.io.*;
import java.nio.file.Files;
import java.util.*;

/** A real savepoint widened to P subtasks: subtask 0's real handles in every subtask; Flink writes the file. */
public class WideStateMeta {
    public static void main(String[] args) throws Exception {
        if (args[0].equals("bench")) {
            bench(new File(args[1]).getAbsoluteFile(), Double.parseDouble(args[2]));
            return;
        }
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

    /** Flink's own code doing what our reader does: load the _metadata, read every managed handle's proxy. */
    private static int readAll(File dir) throws Exception {
        CheckpointMetadata m;
        byte[] bytes = Files.readAllBytes(new File(dir, "_metadata").toPath());
        try (DataInputStream in = new DataInputStream(new ByteArrayInputStream(bytes))) {
            m = Checkpoints.loadCheckpointMetadata(in, WideStateMeta.class.getClassLoader(), dir.getPath());
        }
        ClassLoader cl = WideStateMeta.class.getClassLoader();
        int states = 0;
        for (OperatorState o : m.getOperatorStates()) {
            for (OperatorSubtaskState st : o.getStates()) {
                for (KeyedStateHandle h : st.getManagedKeyedState()) {
                    StreamStateHandle s = h instanceof KeyGroupsStateHandle
                            ? ((KeyGroupsStateHandle) h).getDelegateStateHandle()
                            : ((IncrementalRemoteKeyedStateHandle) h).getMetaDataStateHandle();
                    KeyedBackendSerializationProxy<?> proxy = new KeyedBackendSerializationProxy<>(cl);
                    try (InputStream in = s.openInputStream()) {
                        proxy.read(new DataInputViewStreamWrapper(in));
                    }
                    states += proxy.getStateMetaInfoSnapshots().size();
                }
                for (OperatorStateHandle h : st.getManagedOperatorState()) {
                    OperatorBackendSerializationProxy proxy = new OperatorBackendSerializationProxy(cl);
                    try (InputStream in = h.getDelegateStateHandle().openInputStream()) {
                        proxy.read(new DataInputViewStreamWrapper(in));
                    }
                    states += proxy.getOperatorStateMetaInfoSnapshots().size()
                            + proxy.getBroadcastStateMetaInfoSnapshots().size();
                }
            }
        }
        return states;
    }

    /** Warm up for half the budget, then best and mean of the runs in the other half (one JSON line). */
    private static void bench(File dir, double seconds) throws Exception {
        long deadline = System.nanoTime() + (long) (seconds * 0.5e9);
        while (System.nanoTime() < deadline) readAll(dir);
        long n = 0;
        long best = Long.MAX_VALUE;
        long start = System.nanoTime();
        deadline = start + (long) (seconds * 0.5e9);
        while (System.nanoTime() < deadline || n < 3) {
            long t = System.nanoTime();
            readAll(dir);
            best = Math.min(best, System.nanoTime() - t);
            n++;
        }
        System.out.println("{\"best\": " + best / 1e9 + ", \"mean\": " + (System.nanoTime() - start) / 1e9 / n
                + ", \"runs\": " + n + "}");
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


def flink(path: Path, seconds: float) -> dict[str, float]:
    """Flink's `Checkpoints.loadCheckpointMetadata` plus its proxies' `read` for every handle, in one JVM (the
    job's classes on the classpath: Flink restores each POJO snapshot's class)."""
    cp = classpath(VERSION, [compile_tool("savepoints", VERSION)])
    proc = subprocess.run(["java", "-Xmx1g", "-cp", cp, str(_java_source()), "bench", str(path),
                           str(seconds)], capture_output=True, text=True, timeout=600 + seconds)
    if proc.returncode != 0:
        raise SystemExit(f"WideStateMeta bench failed: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measure(path: Path, seconds: float) -> dict[str, float]:
    read_all(path)  # warm-up (imports, page cache)
    best, n, start = float("inf"), 0, time.perf_counter()
    while time.perf_counter() < start + seconds or n < 3:
        t = time.perf_counter()
        read_all(path)
        best = min(best, time.perf_counter() - t)
        n += 1
    return {"best": best, "mean": (time.perf_counter() - start) / n, "runs": n}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=10.0, help="measuring time per input (default 10)")
    ap.add_argument("--subtasks", type=int, default=1000)
    args = ap.parse_args(argv)
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"parallelism {args.subtasks:,}: every stateful operator has {args.subtasks:,} subtasks")
    print(f"{'input':<20} {'ops':>4} {'subtasks':>8} {'MB':>6} {'files':>6} {'states':>7} {'== Flink':>9} "
          f"{'ours best s':>12} {'mean s':>7} {'runs':>5} {'Flink best s':>13} {'< 2 s':>6}")
    for variant in (*CASES, "canonical-distinct"):
        path = distinct(args.subtasks) if variant == "canonical-distinct" else generate(variant, args.subtasks)
        ops, subtasks, states = read_all(path)
        files = sum(1 for p in path.iterdir() if p.name not in ("_metadata", "flink-state-meta.json"))
        agree = same_as_flink(path)
        r = measure(path, args.seconds)
        jv = flink(path, args.seconds)
        print(f"{variant:<20} {ops:>4} {subtasks:>8,} {(path / '_metadata').stat().st_size / 1e6:>6.1f} {files:>6} "
              f"{states:>7} {'yes' if agree else 'NO':>9} {r['best']:>12.3f} {r['mean']:>7.3f} {r['runs']:>5} "
              f"{jv['best']:>13.3f} {'yes' if r['best'] < GOAL_SECONDS else 'NO':>6}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

package ugate.savepoints;

import org.apache.flink.core.execution.SavepointFormatType;
import org.apache.flink.core.fs.Path;
import org.apache.flink.runtime.checkpoint.CheckpointProperties;
import org.apache.flink.runtime.checkpoint.Checkpoints;
import org.apache.flink.runtime.checkpoint.MasterState;
import org.apache.flink.runtime.checkpoint.OperatorState;
import org.apache.flink.runtime.checkpoint.OperatorSubtaskState;
import org.apache.flink.runtime.checkpoint.metadata.CheckpointMetadata;
import org.apache.flink.runtime.jobgraph.OperatorID;
import org.apache.flink.runtime.state.KeyGroupRange;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;
import org.apache.flink.runtime.state.KeyGroupRangeOffsets;
import org.apache.flink.runtime.state.KeyGroupsSavepointStateHandle;
import org.apache.flink.runtime.state.OperatorStateHandle;
import org.apache.flink.runtime.state.OperatorStreamStateHandle;
import org.apache.flink.runtime.state.StreamStateHandle;
import org.apache.flink.runtime.state.filesystem.RelativeFileStateHandle;
import org.apache.flink.runtime.state.memory.ByteStreamStateHandle;

import java.io.BufferedOutputStream;
import java.io.File;
import java.io.FileOutputStream;
import java.io.OutputStream;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.UUID;

/**
 * A canonical savepoint of a wide job (every operator at parallelism N), written by Flink's own
 * {@code Checkpoints.storeCheckpointMetadata} (the release's current MetadataV4/V5/V6 serializer) from
 * a {@link CheckpointMetadata} built here out of Flink's state-handle classes. Running such a job in a
 * MiniCluster would need N task slots, which a 2-core machine cannot host; the serializer, not the
 * job, decides the bytes, so the file is exactly what Flink writes for this state.
 *
 * <p>The shape follows the real {@code large-p128} savepoint (same chain and state names), except that
 * keyed state above the small-file threshold lives in files (relative handles), as it does in any
 * savepoint of a job that size: source (reader splits + coordinator state) -> own-keys -> throttle ->
 * keyed-1 (key-group handles, state in files) -> operator-state-1 (split + union lists) -> keyed-2
 * (key-group handles, inline) -> operator-state-2 -> sink. Contents are pseudo-random, fixed seed.
 */
final class Wide {
    private Wide() {}

    private static final int MAX_PARALLELISM = 4096;

    static String write(File caseDir, int parallelism) throws Exception {
        Random rnd = new Random(1000L + parallelism);
        File dir = new File(caseDir, "savepoints/savepoint-wide-p" + parallelism).getAbsoluteFile();
        dir.mkdirs();
        String base = dir.toURI().toString().replaceAll("/$", "");
        List<OperatorState> ops = new ArrayList<>();

        OperatorState source = op(rnd, "Source: numbers", "numbers", parallelism);
        source.setCoordinatorState(new ByteStreamStateHandle(new UUID(rnd.nextLong(), rnd.nextLong()).toString(), bytes(rnd, 16)));
        for (int i = 0; i < parallelism; i++) {
            source.putState(i, OperatorSubtaskState.builder()
                    .setManagedOperatorState(operatorHandle(rnd, base, 266, "SourceReaderState", 234L)).build());
        }
        ops.add(source);
        ops.add(stateless(rnd, "Filter", "own-keys", parallelism));
        ops.add(stateless(rnd, "Map", "throttle", parallelism));
        ops.add(keyed(rnd, base, "keyed-1", parallelism, true));
        ops.add(listState(rnd, base, "operator-state-1", parallelism));
        ops.add(keyed(rnd, base, "keyed-2", parallelism, false));
        ops.add(listState(rnd, base, "operator-state-2", parallelism));
        ops.add(stateless(rnd, "Sink: Writer", null, parallelism));

        CheckpointMetadata metadata = new CheckpointMetadata(1L, ops, Collections.<MasterState>emptyList(),
                CheckpointProperties.forSavepoint(true, SavepointFormatType.CANONICAL));
        try (OutputStream out = new BufferedOutputStream(new FileOutputStream(new File(dir, "_metadata")))) {
            Checkpoints.storeCheckpointMetadata(metadata, out);
        }
        return dir.getAbsolutePath();
    }

    private static OperatorState op(Random rnd, String name, String uid, int parallelism) {
        OperatorID id = new OperatorID(rnd.nextLong(), rnd.nextLong());
        return Compat.operatorState(name, uid, id, parallelism, MAX_PARALLELISM);
    }

    private static OperatorState stateless(Random rnd, String name, String uid, int parallelism) {
        OperatorState s = op(rnd, name, uid, parallelism);
        for (int i = 0; i < parallelism; i++) s.putState(i, OperatorSubtaskState.builder().build());
        return s;
    }

    /** Split-distributed + union list state, as Functions.OperatorStateFn snapshots it (390 bytes inline). */
    private static OperatorState listState(Random rnd, String base, String uid, int parallelism) {
        OperatorState s = op(rnd, "Map", uid, parallelism);
        for (int i = 0; i < parallelism; i++) {
            Map<String, OperatorStateHandle.StateMetaInfo> states = new LinkedHashMap<>();
            states.put("split-list", new OperatorStateHandle.StateMetaInfo(new long[] {374L, 382L},
                    OperatorStateHandle.Mode.SPLIT_DISTRIBUTE));
            states.put("union-list", new OperatorStateHandle.StateMetaInfo(new long[] {366L},
                    OperatorStateHandle.Mode.UNION));
            s.putState(i, OperatorSubtaskState.builder()
                    .setManagedOperatorState(new OperatorStreamStateHandle(states, inline(rnd, base, 390))).build());
        }
        return s;
    }

    private static OperatorStateHandle operatorHandle(Random rnd, String base, int size, String name, long offset) {
        Map<String, OperatorStateHandle.StateMetaInfo> states = new LinkedHashMap<>();
        states.put(name, new OperatorStateHandle.StateMetaInfo(new long[] {offset}, OperatorStateHandle.Mode.SPLIT_DISTRIBUTE));
        return new OperatorStreamStateHandle(states, inline(rnd, base, size));
    }

    /** Key-group handles over Flink's own ranges; `inFiles`: a ~1.5 MB relative file per subtask, else 4 KB inline. */
    private static OperatorState keyed(Random rnd, String base, String uid, int parallelism, boolean inFiles) {
        OperatorState s = op(rnd, "KeyedProcess", uid, parallelism);
        for (int i = 0; i < parallelism; i++) {
            KeyGroupRange range = KeyGroupRangeAssignment.computeKeyGroupRangeForOperatorIndex(
                    MAX_PARALLELISM, parallelism, i);
            int size = inFiles ? 1_400_000 + rnd.nextInt(200_000) : 4000 + rnd.nextInt(96);
            long[] offsets = new long[range.getNumberOfKeyGroups()];
            long header = 1845;
            long per = (size - header) / Math.max(1, offsets.length);
            for (int k = 0; k < offsets.length; k++) offsets[k] = header + k * per;
            StreamStateHandle delegate;
            if (inFiles) {
                String name = new UUID(rnd.nextLong(), rnd.nextLong()).toString();
                delegate = new RelativeFileStateHandle(new Path(base, name), name, size);
            } else {
                delegate = inline(rnd, base, size);
            }
            s.putState(i, OperatorSubtaskState.builder()
                    .setManagedKeyedState(new KeyGroupsSavepointStateHandle(new KeyGroupRangeOffsets(range, offsets), delegate))
                    .build());
        }
        return s;
    }

    /** State below the small-file threshold stays in the metadata, named like Flink names it (dir/uuid). */
    private static ByteStreamStateHandle inline(Random rnd, String base, int size) {
        return new ByteStreamStateHandle(base + "/" + new UUID(rnd.nextLong(), rnd.nextLong()), bytes(rnd, size));
    }

    private static byte[] bytes(Random rnd, int n) {
        byte[] b = new byte[n];
        rnd.nextBytes(b);
        return b;
    }
}

package ugate.savepoints;

import org.apache.flink.core.memory.DataInputViewStreamWrapper;
import org.apache.flink.runtime.checkpoint.Checkpoints;
import org.apache.flink.runtime.checkpoint.OperatorState;
import org.apache.flink.runtime.checkpoint.OperatorSubtaskState;
import org.apache.flink.runtime.checkpoint.metadata.CheckpointMetadata;
import org.apache.flink.runtime.state.IncrementalRemoteKeyedStateHandle;
import org.apache.flink.runtime.state.KeyGroupsStateHandle;
import org.apache.flink.runtime.state.KeyedBackendSerializationProxy;
import org.apache.flink.runtime.state.KeyedStateHandle;
import org.apache.flink.runtime.state.OperatorBackendSerializationProxy;
import org.apache.flink.runtime.state.OperatorStateHandle;
import org.apache.flink.runtime.state.StreamStateHandle;

import java.io.ByteArrayInputStream;
import java.io.DataInputStream;
import java.io.File;
import java.io.InputStream;
import java.nio.file.Files;
import java.util.function.LongSupplier;

/**
 * Flink's side of bench/bench_state_meta.py, served to bench/fair.py by {@code ugate.fair.FairServer} (timed by
 * this thread's CPU, round by round, alternating with ours): Flink's own code doing what our reader does, i.e.
 * {@code Checkpoints.loadCheckpointMetadata} of the {@code _metadata} on disk, then every managed state handle
 * opened and its serialization proxy read ({@link KeyedBackendSerializationProxy},
 * {@link OperatorBackendSerializationProxy}). The job's classes are on the classpath (this tool's), because Flink
 * restores each POJO snapshot's class. {@code fairWorkload(<savepoint dir>)}: one unit = one savepoint read; its
 * count = 1 savepoint.
 */
public final class StateMetaBench {
    private StateMetaBench() {}

    private static volatile long sink;

    public static LongSupplier fairWorkload(String[] args) {
        File dir = new File(args[0]).getAbsoluteFile();
        return () -> {
            try {
                sink += readAll(dir);
                return 1;
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        };
    }

    /** Every operator's states, as the proxies name them; the count. */
    static int readAll(File dir) throws Exception {
        CheckpointMetadata m;
        byte[] bytes = Files.readAllBytes(new File(dir, "_metadata").toPath());
        ClassLoader cl = StateMetaBench.class.getClassLoader();
        try (DataInputStream in = new DataInputStream(new ByteArrayInputStream(bytes))) {
            m = Checkpoints.loadCheckpointMetadata(in, cl, dir.getPath());
        }
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
}

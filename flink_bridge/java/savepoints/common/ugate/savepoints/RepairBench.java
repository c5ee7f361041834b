package ugate.savepoints;

import org.apache.flink.api.common.ExecutionConfig;
import org.apache.flink.api.common.JobStatus;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.PrimitiveArrayTypeInfo;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.MemorySize;
import org.apache.flink.configuration.StateBackendOptions;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.core.execution.SavepointFormatType;
import org.apache.flink.core.fs.CloseableRegistry;
import org.apache.flink.core.memory.DataInputDeserializer;
import org.apache.flink.core.memory.DataInputViewStreamWrapper;
import org.apache.flink.runtime.checkpoint.Checkpoints;
import org.apache.flink.runtime.checkpoint.OperatorState;
import org.apache.flink.runtime.checkpoint.OperatorSubtaskState;
import org.apache.flink.runtime.checkpoint.metadata.CheckpointMetadata;
import org.apache.flink.runtime.state.KeyGroupRange;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;
import org.apache.flink.runtime.state.KeyGroupsSavepointStateHandle;
import org.apache.flink.runtime.state.KeyGroupsStateHandle;
import org.apache.flink.runtime.state.KeyedBackendSerializationProxy;
import org.apache.flink.runtime.state.KeyedStateHandle;
import org.apache.flink.runtime.state.LocalRecoveryConfig;
import org.apache.flink.runtime.state.StateSerializerProvider;
import org.apache.flink.runtime.state.StreamStateHandle;
import org.apache.flink.runtime.state.UncompressedStreamCompressionDecorator;
import org.apache.flink.runtime.state.memory.ByteStreamStateHandle;
import org.apache.flink.runtime.state.heap.HeapKeyedStateBackend;
import org.apache.flink.runtime.state.heap.HeapPriorityQueueSetFactory;
import org.apache.flink.runtime.state.metainfo.StateMetaInfoSnapshot;
import org.apache.flink.runtime.state.restore.FullSnapshotRestoreOperation;
import org.apache.flink.runtime.state.restore.KeyGroup;
import org.apache.flink.runtime.state.restore.KeyGroupEntry;
import org.apache.flink.runtime.state.restore.SavepointRestoreResult;
import org.apache.flink.runtime.state.restore.ThrowingIterator;
import org.apache.flink.runtime.state.ttl.TtlTimeProvider;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.util.Collector;

import java.io.ByteArrayInputStream;
import java.io.DataInputStream;
import java.io.File;
import java.io.InputStream;
import java.lang.reflect.Constructor;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.LongSupplier;

/**
 * The Flink side of bench/bench_repair.py (compiles against Flink 1.20 and 2.x alike; what differs is reached by
 * reflection). Three entry points:
 *
 * <ul>
 *   <li>{@code main generate <out-dir> <hashmap|rocksdb> <parallelism> <max parallelism> <keys> <value bytes>
 *       <map entries> <timers 0|1>}: a real canonical savepoint written by a MiniCluster job whose operators have
 *       the uids of the repair scenarios' job ({@code numbers} (FLIP-27 source, coordinator state), {@code throttle},
 *       {@code counts} (keyed), {@code sink}), so the committed scenario graphs (tests/fixtures/repairs/) apply to
 *       it. {@code counts} holds, per key {@code 0..keys-1} (Long): a count (ValueState&lt;Long&gt;), {@code value
 *       bytes} pseudo-random bytes (ValueState&lt;byte[]&gt;), {@code map entries} entries of a
 *       MapState&lt;Integer, String&gt; and, with timers, one event-time timer (no watermark ever fires it).
 *       The savepoint is taken once every key holds its state. Prints {@code savepoint\t<path>}.</li>
 *   <li>{@code main count <savepoint dir>}: Flink's own reading of every keyed state stream of the savepoint
 *       ({@link FullSnapshotRestoreOperation}, one per keyed handle, as each restoring subtask runs it): per
 *       operator the entries, the timers (entries of PRIORITY_QUEUE states), the key groups and the bytes of the
 *       state files; and whether every entry sits in the key group its key-group prefix names AND the key group
 *       Flink assigns its key to ({@link KeyGroupRangeAssignment#assignToKeyGroup}, the key deserialized by the
 *       savepoint's own key serializer). Prints one JSON line.</li>
 *   <li>{@code fairWorkload(<entries|entries-in-memory|heap> <savepoint dir>)} for {@code ugate.fair.FairServer}: one unit reads every
 *       keyed state stream of the savepoint once and returns the bytes of the state files read. {@code entries}:
 *       {@link FullSnapshotRestoreOperation} iterated to every entry's key and value bytes (the reading both
 *       backends' restores of a canonical savepoint run: RocksDBFullRestoreOperation and
 *       HeapSavepointRestoreOperation wrap it), reading the state file as Flink opens it (on a local file system an
 *       unbuffered FileInputStream: a read call per field); {@code entries-in-memory}: the same over the file's bytes
 *       read into memory with one call first (a {@code ByteStreamStateHandle}), as our side reads it; {@code heap}: the HashMap backend's whole restore,
 *       {@code HeapKeyedStateBackendBuilder#build} (HeapSavepointRestoreOperation: every key, value and timer
 *       deserialized into its state table), the backend disposed after.</li>
 * </ul>
 */
public final class RepairBench {
    private RepairBench() {}

    /** Keys that hold their state (the MiniCluster runs in this JVM, so the job's functions share it). */
    static final AtomicLong FILLED = new AtomicLong();
    private static volatile long sink;

    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "generate":
                System.out.println("savepoint\t" + generate(new File(args[1]).getAbsoluteFile(), args[2],
                        Integer.parseInt(args[3]), Integer.parseInt(args[4]), Long.parseLong(args[5]),
                        Integer.parseInt(args[6]), Integer.parseInt(args[7]), !args[8].equals("0")));
                break;
            case "count":
                System.out.println(count(new File(args[1]).getAbsoluteFile()));
                break;
            default:
                throw new IllegalArgumentException("usage: RepairBench generate|count ...");
        }
        System.out.flush();
        System.exit(0);
    }

    // ---- the job -------------------------------------------------------------------------------------------

    /** Per key, once: the count, the value bytes, the map entries, the timer. */
    static final class Fill extends KeyedProcessFunction<Long, Long, Long> {
        private final int valueBytes;
        private final int mapEntries;
        private final boolean timers;
        private transient ValueState<Long> count;
        private transient ValueState<byte[]> value;
        private transient MapState<Integer, String> map;

        Fill(int valueBytes, int mapEntries, boolean timers) {
            this.valueBytes = valueBytes;
            this.mapEntries = mapEntries;
            this.timers = timers;
        }

        @Override public void processElement(Long v, Context ctx, Collector<Long> out) throws Exception {
            if (count == null) {  // lazily: open(...) is spelled differently in 1.20 and 2.x
                count = getRuntimeContext().getState(new ValueStateDescriptor<>("count", Types.LONG));
                value = getRuntimeContext().getState(new ValueStateDescriptor<>("bytes",
                        PrimitiveArrayTypeInfo.BYTE_PRIMITIVE_ARRAY_TYPE_INFO));
                map = getRuntimeContext().getMapState(new MapStateDescriptor<>("entries", Types.INT, Types.STRING));
            }
            Long c = count.value();
            if (c != null) {
                count.update(c + 1);
                return;
            }
            long key = ctx.getCurrentKey();
            count.update(1L);
            if (valueBytes > 0) {
                byte[] b = new byte[valueBytes];
                SplittableRandom r = new SplittableRandom(key);
                for (int i = 0; i < b.length; i++) b[i] = (byte) r.nextInt(256);
                value.update(b);
            }
            for (int i = 0; i < mapEntries; i++) map.put(i, "entry-" + key + "-" + i);
            if (timers) ctx.timerService().registerEventTimeTimer(1_000_000_000L + key);
            FILLED.incrementAndGet();
        }
    }

    static String generate(File out, String backend, int parallelism, int maxParallelism, long keys, int valueBytes,
                           int mapEntries, boolean timers) throws Exception {
        Configuration c = new Configuration();
        c.set(StateBackendOptions.STATE_BACKEND, backend);
        c.set(CheckpointingOptions.INCREMENTAL_CHECKPOINTS, false);
        c.set(CheckpointingOptions.FS_SMALL_FILE_THRESHOLD, MemorySize.parse("20kb"));  // Flink's default
        c.set(CheckpointingOptions.CHECKPOINTS_DIRECTORY, new File(out, "checkpoints").toURI().toString());
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(c);
        env.setParallelism(parallelism);
        env.setMaxParallelism(maxParallelism);
        final long n = keys;
        env.fromSequence(0, Long.MAX_VALUE).uid("numbers").name("numbers")
                .map(v -> v).returns(Types.LONG).uid("throttle").name("throttle")
                .keyBy(v -> v % n).process(new Fill(valueBytes, mapEntries, timers)).returns(Types.LONG)
                .uid("counts").name("counts")
                .sinkTo(new DiscardingSink<>()).uid("sink").name("sink");
        FILLED.set(0);
        JobClient client = env.executeAsync("repair-bench-" + out.getName());
        try {
            long last = -1;
            long since = System.nanoTime();
            while (FILLED.get() < keys) {
                JobStatus st = client.getJobStatus().get();
                if (st.isGloballyTerminalState()) throw new IllegalStateException("the job ended: " + st);
                long now = FILLED.get();
                if (now != last) {
                    last = now;
                    since = System.nanoTime();
                } else if (System.nanoTime() - since > 600_000_000_000L) {
                    throw new IllegalStateException("no progress for 10 minutes at " + now + " keys");
                }
                Thread.sleep(200);
            }
            String target = new File(out, "savepoints").toURI().toString();
            Exception failure = null;
            for (int attempt = 0; attempt < 120; attempt++) {
                try {
                    return client.triggerSavepoint(target, SavepointFormatType.CANONICAL).get();
                } catch (Exception e) {
                    failure = e;
                    Thread.sleep(500);
                }
            }
            throw new IllegalStateException("no savepoint", failure);
        } finally {
            try {
                client.cancel().get();
            } catch (Exception ignored) {
                // already ended
            }
        }
    }

    // ---- Flink's reading of the keyed state streams ---------------------------------------------------------

    /** One keyed handle of a savepoint, with what reading it needs. */
    static final class Stream {
        final KeyGroupsStateHandle handle;
        final int maxParallelism;
        final TypeSerializer<Object> keySerializer;

        Stream(KeyGroupsStateHandle handle, int maxParallelism, TypeSerializer<Object> keySerializer) {
            this.handle = handle;
            this.maxParallelism = maxParallelism;
            this.keySerializer = keySerializer;
        }
    }

    static CheckpointMetadata load(File dir) throws Exception {
        byte[] bytes = Files.readAllBytes(new File(dir, "_metadata").toPath());
        try (DataInputStream in = new DataInputStream(new ByteArrayInputStream(bytes))) {
            return Checkpoints.loadCheckpointMetadata(in, RepairBench.class.getClassLoader(), dir.getPath());
        }
    }

    /** Every canonical keyed handle, operator by operator, subtask by subtask; the key serializer from its proxy. */
    @SuppressWarnings("unchecked")
    static List<Stream> streams(File dir) throws Exception {
        List<Stream> out = new ArrayList<>();
        ClassLoader cl = RepairBench.class.getClassLoader();
        for (OperatorState o : load(dir).getOperatorStates()) {
            for (int i = 0; i < o.getParallelism(); i++) {
                OperatorSubtaskState st = o.getState(i);
                if (st == null) continue;
                for (KeyedStateHandle h : st.getManagedKeyedState()) {
                    if (!(h instanceof KeyGroupsSavepointStateHandle)) {
                        throw new IllegalArgumentException("not a canonical savepoint's keyed state: " + h.getClass());
                    }
                    KeyGroupsStateHandle k = (KeyGroupsStateHandle) h;
                    KeyedBackendSerializationProxy<Object> proxy = new KeyedBackendSerializationProxy<>(cl);
                    try (InputStream in = k.getDelegateStateHandle().openInputStream()) {
                        proxy.read(new DataInputViewStreamWrapper(in));
                    }
                    out.add(new Stream(k, o.getMaxParallelism(),
                            (TypeSerializer<Object>) proxy.getKeySerializerSnapshot().restoreSerializer()));
                }
            }
        }
        return out;
    }

    /** The counts of one read: entries, timers, key groups, bytes of the state files, misplaced entries. */
    static final class Counts {
        long entries;
        long timers;
        long keyGroups;
        long bytes;
        long misplaced;
        long handles;
    }

    /** Flink's FullSnapshotRestoreOperation over one handle, every entry read; with `check`, key groups verified. */
    static void read(Stream s, Counts c, boolean check) throws Exception {
        KeyGroupRange range = s.handle.getKeyGroupRange();
        FullSnapshotRestoreOperation<Object> op = new FullSnapshotRestoreOperation<>(range,
                RepairBench.class.getClassLoader(), Collections.singletonList(s.handle),
                StateSerializerProvider.fromNewRegisteredSerializer(s.keySerializer));
        int prefix = s.maxParallelism > 128 ? 2 : 1;
        DataInputDeserializer in = new DataInputDeserializer();
        try (ThrowingIterator<SavepointRestoreResult> results = op.restore()) {
            while (results.hasNext()) {
                SavepointRestoreResult r = results.next();
                List<StateMetaInfoSnapshot> states = r.getStateMetaInfoSnapshots();
                boolean[] timer = new boolean[states.size()];
                for (int i = 0; i < timer.length; i++) {
                    timer[i] = states.get(i).getBackendStateType() == StateMetaInfoSnapshot.BackendStateType.PRIORITY_QUEUE;
                }
                try (ThrowingIterator<KeyGroup> groups = r.getRestoredKeyGroups()) {
                    while (groups.hasNext()) {
                        KeyGroup g = groups.next();
                        c.keyGroups++;
                        try (ThrowingIterator<KeyGroupEntry> entries = g.getKeyGroupEntries()) {
                            while (entries.hasNext()) {
                                KeyGroupEntry e = entries.next();
                                byte[] key = e.getKey();
                                sink += key.length + e.getValue().length;
                                c.entries++;
                                boolean isTimer = timer[e.getKvStateId()];
                                if (isTimer) c.timers++;
                                if (check) {
                                    int written = prefix == 1 ? key[0] & 0xFF : ((key[0] & 0xFF) << 8) | (key[1] & 0xFF);
                                    in.setBuffer(key, prefix + (isTimer ? 8 : 0), key.length - prefix - (isTimer ? 8 : 0));
                                    Object k = s.keySerializer.deserialize(in);
                                    int assigned = KeyGroupRangeAssignment.assignToKeyGroup(k, s.maxParallelism);
                                    if (written != g.getKeyGroupId() || assigned != g.getKeyGroupId()) c.misplaced++;
                                }
                            }
                        }
                    }
                }
            }
        }
        c.bytes += s.handle.getDelegateStateHandle().getStateSize();
        c.handles++;
    }

    static String count(File dir) throws Exception {
        Counts c = new Counts();
        int maxParallelism = -1;
        for (Stream s : streams(dir)) {
            read(s, c, true);
            maxParallelism = s.maxParallelism;
        }
        return String.format(Locale.ROOT, "{\"handles\": %d, \"entries\": %d, \"timers\": %d, \"key_groups\": %d, "
                + "\"bytes\": %d, \"misplaced\": %d, \"max_parallelism\": %d}", c.handles, c.entries, c.timers,
                c.keyGroups, c.bytes, c.misplaced, maxParallelism);
    }

    /** The HashMap backend's restore of one handle (HeapKeyedStateBackendBuilder#build), then disposed. */
    static void heapRestore(Stream s) throws Exception {
        KeyGroupRange range = s.handle.getKeyGroupRange();
        // the constructor differs between releases (2.x added SizeTrackingStateConfig): filled by parameter type
        Class<?> builder = Class.forName("org.apache.flink.runtime.state.heap.HeapKeyedStateBackendBuilder");
        Constructor<?> ctor = builder.getConstructors()[0];
        Class<?>[] types = ctor.getParameterTypes();
        Object[] values = new Object[types.length];
        boolean flag = false;
        for (int i = 0; i < types.length; i++) {
            Class<?> t = types[i];
            String name = t.getName();
            if (name.endsWith("TaskKvStateRegistry")) values[i] = null;
            else if (TypeSerializer.class.isAssignableFrom(t)) values[i] = s.keySerializer;
            else if (t == ClassLoader.class) values[i] = RepairBench.class.getClassLoader();
            else if (t == int.class) values[i] = s.maxParallelism;
            else if (t == KeyGroupRange.class) values[i] = range;
            else if (t == ExecutionConfig.class) values[i] = new ExecutionConfig();
            else if (t == TtlTimeProvider.class) values[i] = TtlTimeProvider.DEFAULT;
            else if (name.endsWith("TrackingStateConfig")) values[i] = t.getMethod("disabled").invoke(null);
            else if (t == java.util.Collection.class) values[i] = Collections.singletonList(s.handle);
            else if (name.endsWith("StreamCompressionDecorator")) values[i] = UncompressedStreamCompressionDecorator.INSTANCE;
            else if (t == LocalRecoveryConfig.class) values[i] = LocalRecoveryConfig.BACKUP_AND_RECOVERY_DISABLED;
            else if (t == HeapPriorityQueueSetFactory.class) values[i] = new HeapPriorityQueueSetFactory(range, s.maxParallelism, 128);
            else if (t == boolean.class && !flag) { values[i] = true; flag = true; }
            else if (t == CloseableRegistry.class) values[i] = new CloseableRegistry();
            else throw new IllegalStateException("HeapKeyedStateBackendBuilder: unexpected parameter " + name);
        }
        HeapKeyedStateBackend<?> backend =
                (HeapKeyedStateBackend<?>) builder.getMethod("build").invoke(ctor.newInstance(values));
        sink += backend.numKeyValueStateEntries();
        backend.dispose();
    }

    /** The same handle over the file's bytes read into memory with one call, as our side's opener reads it. */
    static Stream inMemory(Stream s) throws Exception {
        StreamStateHandle file = s.handle.getDelegateStateHandle();
        byte[] bytes;
        try (InputStream in = file.openInputStream()) {
            bytes = in.readAllBytes();
        }
        KeyGroupsStateHandle h = new KeyGroupsSavepointStateHandle(s.handle.getGroupRangeOffsets(),
                new ByteStreamStateHandle(file.toString(), bytes));
        return new Stream(h, s.maxParallelism, s.keySerializer);
    }

    public static LongSupplier fairWorkload(String[] args) throws Exception {
        String mode = args[0];
        List<Stream> streams = streams(new File(args[1]).getAbsoluteFile());
        long bytes = 0;
        for (Stream s : streams) bytes += s.handle.getDelegateStateHandle().getStateSize();
        final long total = bytes;
        switch (mode) {
            case "entries":
                return () -> {
                    try {
                        Counts c = new Counts();
                        for (Stream s : streams) read(s, c, false);
                        sink += c.entries;
                        return c.bytes;
                    } catch (Exception e) {
                        throw new IllegalStateException(e);
                    }
                };
            case "entries-in-memory":
                return () -> {
                    try {
                        Counts c = new Counts();
                        for (Stream s : streams) read(inMemory(s), c, false);
                        sink += c.entries;
                        return c.bytes;
                    } catch (Exception e) {
                        throw new IllegalStateException(e);
                    }
                };
            case "heap":
                return () -> {
                    try {
                        for (Stream s : streams) heapRestore(s);
                        return total;
                    } catch (Exception e) {
                        throw new IllegalStateException(e);
                    }
                };
            default:
                throw new IllegalArgumentException("mode entries|heap, not " + mode);
        }
    }
}

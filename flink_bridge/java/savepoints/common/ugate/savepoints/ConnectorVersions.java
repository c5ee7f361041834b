package ugate.savepoints;

import org.apache.flink.api.common.JobExecutionResult;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.serialization.SimpleStringEncoder;
import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.connector.source.lib.NumberSequenceSource;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.api.connector.sink2.Committer;
import org.apache.flink.api.connector.sink2.CommitterInitContext;
import org.apache.flink.api.connector.sink2.SinkWriter;
import org.apache.flink.api.connector.sink2.StatefulSinkWriter;
import org.apache.flink.api.connector.sink2.SupportsCommitter;
import org.apache.flink.api.connector.sink2.SupportsWriterState;
import org.apache.flink.api.connector.sink2.WriterInitContext;
import org.apache.flink.connector.file.sink.FileSink;
import org.apache.flink.connector.file.sink.FileSinkCommittable;
import org.apache.flink.connector.file.sink.writer.FileWriterBucketState;
import org.apache.flink.streaming.api.functions.sink.filesystem.rollingpolicies.OnCheckpointRollingPolicy;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.StateRecoveryOptions;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.core.io.SimpleVersionedSerializer;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;

import java.io.File;
import java.io.IOException;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A connector-only upgrade: the same job, its FLIP-27 source's split and enumerator serializers at another version.
 *
 * <p>{@link VersionedSequenceSource} is Flink's {@link NumberSequenceSource} whose {@code getSplitSerializer()} and
 * {@code getEnumeratorCheckpointSerializer()} report the versions given on the command line. Like Flink's own
 * connector serializers (e.g. {@code FileSourceSplitSerializer}, {@code KafkaPartitionSplitSerializer}) it reads
 * every version up to its own and throws {@code IOException("Unknown version: N")} on a newer one. SourceOperator
 * stores each split through {@code SimpleVersionedSerialization.writeVersionAndSerialize} (version, length, bytes) in
 * the "SourceReaderState" list state; SourceCoordinator#toBytes writes the enumerator serializer's version after the
 * coordinator serde version. The gate reads those headers; this tool records what a real restore does with them.
 *
 * <p>Tasks: {@code write:<dir>:<split-version>:<enumerator-version>} (a canonical HashMap savepoint, the job
 * cancelled: prints its path) and {@code restore:<savepoint-dir>:<split-version>:<enumerator-version>} (prints JSON:
 * {@code status} RUNNING with the first number read after the restore, which is past 0 when the split position was
 * restored, or FAILED with Flink's root cause); {@code commit-write:<dir>:<committable-version>} and
 * {@code commit-restore:<savepoint-dir>:<committable-version>} the same for a sink's committables
 * ({@link VersionedCommitSink}).
 */
public final class ConnectorVersions {
    private ConnectorVersions() {}

    static final AtomicLong FIRST = new AtomicLong(-1);
    static final AtomicLong SEEN = new AtomicLong();
    /** What our serializers threw during a restore, whether or not Flink failed the job for it. */
    static final java.util.Set<String> THREW = java.util.concurrent.ConcurrentHashMap.newKeySet();

    public static void main(String[] args) throws Exception {
        for (String task : args) {
            String[] p = task.split(":", 4);
            String out;
            try {
                if (p[0].equals("sink")) {
                    out = sink(new File(p[1]));
                } else if (p[0].equals("commit-write")) {
                    out = writeCommittables(new File(p[1]), Integer.parseInt(p[2]));
                } else if (p[0].equals("commit-restore")) {
                    int committable = Integer.parseInt(p[2]);
                    File files = java.nio.file.Files.createTempDirectory("ugate-commit-restore").toFile();
                    out = restoreWith(new File(p[1]), env -> committingJob(env, files, committable));
                } else {
                    int split = Integer.parseInt(p[2]), enumerator = Integer.parseInt(p[3]);
                    out = p[0].equals("write") ? write(new File(p[1]), split, enumerator)
                            : restore(new File(p[1]), split, enumerator);
                }
            } catch (Exception e) {
                e.printStackTrace();
                out = "ERROR\t" + String.valueOf(e).replace('\n', ' ');
            }
            System.out.println(task + "\t" + out);
            System.out.flush();
        }
        System.exit(0);
    }

    static String write(File dir, int split, int enumerator) throws Exception {
        dir.mkdirs();
        Configuration c = SchemaChanges.config("hashmap");
        c.set(CheckpointingOptions.CHECKPOINTS_DIRECTORY, new File(dir, "checkpoints").toURI().toString());
        StreamExecutionEnvironment env = SchemaChanges.env(c);
        job(env, split, enumerator);
        return SchemaChanges.savepointOf(env.executeAsync("connector-versions"), dir);
    }

    /**
     * A FileSink's writer and committer state: a savepoint of the job writing its numbers to part files (uid
     * "files"), and the versions FileSink's own serializers report. Prints the path, a tab, then that JSON.
     */
    static String sink(File dir) throws Exception {
        dir.mkdirs();
        Configuration c = SchemaChanges.config("hashmap");
        c.set(CheckpointingOptions.CHECKPOINTS_DIRECTORY, new File(dir, "checkpoints").toURI().toString());
        StreamExecutionEnvironment env = SchemaChanges.env(c);
        FileSink<Long> files = FileSink.forRowFormat(
                new org.apache.flink.core.fs.Path(new File(dir, "out").toURI()), new SimpleStringEncoder<Long>())
                .build();
        env.fromSource(new VersionedSequenceSource(1, 1), WatermarkStrategy.noWatermarks(), "numbers")
                .uid("numbers")
                .map(new Functions.Throttle(5)).uid("throttle").name("throttle")
                .sinkTo(files).uid("files").name("files");
        String path = SchemaChanges.savepointOf(env.executeAsync("connector-versions-sink"), dir);
        Map<String, Object> versions = new LinkedHashMap<>();
        versions.put("writer_state_serializer", files.getWriterStateSerializer().getVersion());
        versions.put("committable_serializer", files.getCommittableSerializer().getVersion());
        return path + "\t" + FlinkView.Json.write(versions);
    }

    /**
     * A Sink V2 committer's state holding committables: the job writes its numbers through {@link VersionedCommitSink}
     * (a FileSink rolling its part file on every checkpoint, so the savepoint's barrier turns the in-progress file
     * into a pending one whose committable the committer holds until the savepoint completes) and its committable
     * serializer reports {@code committable}. Prints the savepoint's path.
     */
    static String writeCommittables(File dir, int committable) throws Exception {
        dir.mkdirs();
        Configuration c = SchemaChanges.config("hashmap");
        c.set(CheckpointingOptions.CHECKPOINTS_DIRECTORY, new File(dir, "checkpoints").toURI().toString());
        StreamExecutionEnvironment env = SchemaChanges.env(c);
        committingJob(env, new File(dir, "out"), committable);
        return SchemaChanges.savepointOf(env.executeAsync("connector-versions-committables"), dir);
    }

    static void committingJob(StreamExecutionEnvironment env, File out, int committable) {
        FileSink<Long> files = FileSink.forRowFormat(
                        new org.apache.flink.core.fs.Path(out.toURI()), new SimpleStringEncoder<Long>())
                .withRollingPolicy(OnCheckpointRollingPolicy.build())
                .build();
        env.fromSource(new VersionedSequenceSource(1, 1), WatermarkStrategy.noWatermarks(), "numbers")
                .uid("numbers")
                .map(new Functions.Throttle(5)).uid("throttle").name("throttle")
                .map(new Observe()).uid("observe").name("observe")
                .sinkTo(new VersionedCommitSink<>(files, committable)).uid("files").name("files");
    }

    static String restore(File savepoint, int split, int enumerator) throws Exception {
        return restoreWith(savepoint, env -> job(env, split, enumerator));
    }

    /** Restores `savepoint` into the job `build` makes; the JSON of what happened (see the class comment). */
    static String restoreWith(File savepoint, java.util.function.Consumer<StreamExecutionEnvironment> build)
            throws Exception {
        FIRST.set(-1);
        SEEN.set(0);
        THREW.clear();
        Configuration c = SchemaChanges.config("hashmap");
        c.set(StateRecoveryOptions.SAVEPOINT_PATH, SchemaChanges.savepointIn(savepoint).toURI().toString());
        StreamExecutionEnvironment env = SchemaChanges.env(c);
        build.accept(env);
        JobClient client = env.executeAsync("connector-versions-restore");
        // asked at once: a local job's MiniCluster shuts down when the job fails, its status with it
        CompletableFuture<JobExecutionResult> result = client.getJobExecutionResult();
        String status = "RUNNING";
        long deadline = System.currentTimeMillis() + 90_000;
        long settled = 0;
        // running is not restored: the coordinator restores the enumerator on its own thread, so a failure there
        // can come after the first records; wait 3 s past the first 20
        while (settled == 0 || System.currentTimeMillis() < settled) {
            if (settled == 0 && SEEN.get() >= 20) settled = System.currentTimeMillis() + 3000;
            if (System.currentTimeMillis() > deadline) {
                status = "TIMEOUT";
                break;
            }
            if (result.isDone()) {
                status = "FAILED: " + rootCause(result);
                break;
            }
            Thread.sleep(100);
        }
        if (!status.startsWith("FAILED")) {
            client.cancel().get();
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("status", status.startsWith("FAILED") ? "FAILED" : status);
        out.put("error", status.startsWith("FAILED: ") ? status.substring(8) : null);
        out.put("first_number_after_restore", status.equals("RUNNING") ? FIRST.get() : null);
        out.put("serializer_threw", THREW.isEmpty() ? null : String.join("; ", THREW));
        return FlinkView.Json.write(out);
    }

    /** Flink's root cause of the job's failure (no checkpointing, so no restart strategy: a task that throws while
     * restoring fails the job), with the Flink frames it was thrown through. */
    private static String rootCause(CompletableFuture<JobExecutionResult> result) {
        Throwable t = null;
        try {
            result.get();
        } catch (Exception e) {
            t = e;
        }
        if (t == null) return "job ended";
        while (t.getCause() != null) t = t.getCause();
        StackTraceElement[] where = t.getStackTrace();
        StringBuilder trace = new StringBuilder(t.toString());
        for (int i = 0; i < where.length && i < 12; i++) {
            String cls = where[i].getClassName();
            if (cls.startsWith("org.apache.flink.")) trace.append(" | at ").append(cls).append('#').append(where[i].getMethodName());
        }
        return trace.toString();
    }

    static void job(StreamExecutionEnvironment env, int split, int enumerator) {
        env.fromSource(new VersionedSequenceSource(split, enumerator), WatermarkStrategy.noWatermarks(), "numbers")
                .uid("numbers")
                .map(new Functions.Throttle(5)).uid("throttle").name("throttle")
                .map(new Observe()).uid("observe").name("observe")
                .sinkTo(new DiscardingSink<>()).name("sink");
    }

    static final class Observe implements MapFunction<Long, Long> {
        @Override public Long map(Long v) {
            FIRST.compareAndSet(-1, v);
            SEEN.incrementAndGet();
            return v;
        }
    }

    /** {@link NumberSequenceSource} whose serializers report the given versions. */
    public static final class VersionedSequenceSource extends NumberSequenceSource {
        private static final long serialVersionUID = 1L;
        private final int splitVersion;
        private final int enumeratorVersion;

        VersionedSequenceSource(int splitVersion, int enumeratorVersion) {
            super(0, Long.MAX_VALUE);
            this.splitVersion = splitVersion;
            this.enumeratorVersion = enumeratorVersion;
        }

        @Override public SimpleVersionedSerializer<NumberSequenceSplit> getSplitSerializer() {
            return new Versioned<>(super.getSplitSerializer(), splitVersion);
        }

        @Override public SimpleVersionedSerializer<Collection<NumberSequenceSplit>> getEnumeratorCheckpointSerializer() {
            return new Versioned<>(super.getEnumeratorCheckpointSerializer(), enumeratorVersion);
        }
    }

    /**
     * Flink's {@link FileSink} whose committable serializer reports the given version (its writer and committer are
     * FileSink's own): a connector release whose committables are written with another version. The committer stores
     * each committable through {@code SimpleVersionedSerialization.writeVersionAndSerialize} inside
     * CommittableCollectorSerializer's layout, so this version is the one nested in "streaming_committer_raw_states".
     */
    public static final class VersionedCommitSink<IN> extends SinkBase<IN>
            implements SupportsWriterState<IN, FileWriterBucketState>, SupportsCommitter<FileSinkCommittable> {
        private static final long serialVersionUID = 1L;
        private final FileSink<IN> files;
        private final int committableVersion;

        VersionedCommitSink(FileSink<IN> files, int committableVersion) {
            this.files = files;
            this.committableVersion = committableVersion;
        }

        @Override public SinkWriter<IN> createWriter(WriterInitContext context) throws IOException {
            return files.createWriter(context);
        }

        @Override public StatefulSinkWriter<IN, FileWriterBucketState> restoreWriter(
                WriterInitContext context, Collection<FileWriterBucketState> states) throws IOException {
            return files.restoreWriter(context, states);
        }

        @Override public SimpleVersionedSerializer<FileWriterBucketState> getWriterStateSerializer() {
            return files.getWriterStateSerializer();
        }

        @Override public Committer<FileSinkCommittable> createCommitter(CommitterInitContext context) throws IOException {
            return files.createCommitter(context);
        }

        @Override public SimpleVersionedSerializer<FileSinkCommittable> getCommittableSerializer() {
            return new Versioned<>(files.getCommittableSerializer(), committableVersion);
        }
    }

    /** Reads versions 1..`version` (the bytes are the same), refuses newer ones as connectors do. */
    static final class Versioned<T> implements SimpleVersionedSerializer<T> {
        private final SimpleVersionedSerializer<T> inner;
        private final int version;

        Versioned(SimpleVersionedSerializer<T> inner, int version) {
            this.inner = inner;
            this.version = version;
        }

        @Override public int getVersion() {
            return version;
        }

        @Override public byte[] serialize(T obj) throws IOException {
            return inner.serialize(obj);
        }

        @Override public T deserialize(int written, byte[] bytes) throws IOException {
            if (written > version) {
                IOException e = new IOException("Unknown version: " + written);
                THREW.add(inner.getClass().getSimpleName() + ": " + e.getMessage());
                throw e;
            }
            return inner.deserialize(inner.getVersion(), bytes);
        }
    }
}

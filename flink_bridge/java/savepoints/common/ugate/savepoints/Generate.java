package ugate.savepoints;

import org.apache.flink.api.common.JobStatus;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.ExternalizedCheckpointRetention;
import org.apache.flink.configuration.MemorySize;
import org.apache.flink.configuration.StateBackendOptions;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.core.execution.SavepointFormatType;
import org.apache.flink.runtime.checkpoint.Checkpoints;
import org.apache.flink.runtime.checkpoint.OperatorState;
import org.apache.flink.runtime.checkpoint.OperatorSubtaskState;
import org.apache.flink.runtime.checkpoint.metadata.CheckpointMetadata;
import org.apache.flink.runtime.state.StateObject;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.DataStreamUtils;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;

import java.io.DataInputStream;
import java.io.File;
import java.time.Duration;
import java.util.Arrays;
import java.util.Comparator;
import java.util.function.Predicate;

/**
 * Writes real savepoints and checkpoints with a MiniCluster, one case per argument:
 * {@code Generate <staging-dir> <case>...}. Prints one line per case: {@code <case>\t<snapshot-dir>}.
 * The Python driver (flink_bridge/generate_savepoints.py) copies what is worth committing.
 */
public final class Generate {
    private Generate() {}

    public static void main(String[] args) throws Exception {
        File stage = new File(args[0]);
        for (String name : Arrays.copyOfRange(args, 1, args.length)) {
            File caseDir = new File(stage, name);
            caseDir.mkdirs();
            String dir;
            try {
                dir = runCase(name, caseDir);
            } catch (Exception e) {
                e.printStackTrace();
                System.out.println(name + "\tERROR\t" + String.valueOf(e).replace('\n', ' '));
                System.out.flush();
                continue;
            }
            System.out.println(name + "\t" + dir);
            System.out.flush();
        }
        System.exit(0);
    }

    private static Configuration conf(File caseDir, String backend, boolean incremental, long thresholdBytes) {
        Configuration c = new Configuration();
        c.set(StateBackendOptions.STATE_BACKEND, backend);
        c.set(CheckpointingOptions.INCREMENTAL_CHECKPOINTS, incremental);
        c.set(CheckpointingOptions.FS_SMALL_FILE_THRESHOLD, new MemorySize(thresholdBytes));
        c.set(CheckpointingOptions.CHECKPOINTS_DIRECTORY, new File(caseDir, "checkpoints").toURI().toString());
        c.set(CheckpointingOptions.SAVEPOINT_DIRECTORY, new File(caseDir, "savepoints").toURI().toString());
        c.set(CheckpointingOptions.EXTERNALIZED_CHECKPOINT_RETENTION, ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION);
                return c;
    }

    /** The main fixture job: FLIP-27 source, legacy source, keyed Value/List/Map, broadcast, operator list + union. */
    private static void pipeline(StreamExecutionEnvironment env, long throttleMs) {
        DataStream<Long> numbers = env.fromSequence(0, Long.MAX_VALUE).uid("numbers").name("numbers")
                .map(new Functions.Throttle(throttleMs)).uid("throttle").name("throttle");
        DataStream<Long> legacy = Compat.legacySource(env, -1, 20).uid("legacy-source").name("legacy-source");
        DataStream<Long> keyed = numbers.keyBy(v -> v % 97).process(new Functions.KeyedStateFn(0))
                .uid("keyed").name("keyed-state");
        DataStream<Long> bc = keyed.connect(legacy.broadcast(Functions.RULES)).process(new Functions.BroadcastFn())
                .uid("broadcast").name("broadcast-state");
        bc.map(new Functions.OperatorStateFn()).uid("operator-state").name("operator-state")
                .sinkTo(new DiscardingSink<>()).name("sink");
    }

    private static String runCase(String name, File caseDir) throws Exception {
        switch (name) {
            case "hashmap-canonical-p2":
                return savepoint(caseDir, conf(caseDir, "hashmap", false, 20 * 1024), 2, -1, SavepointFormatType.CANONICAL, false);
            case "hashmap-native-p4-maxpar256-files":
                return savepoint(caseDir, conf(caseDir, "hashmap", false, 0), 4, 256, SavepointFormatType.NATIVE, false);
            case "rocksdb-canonical-p1":
                return savepoint(caseDir, conf(caseDir, "rocksdb", false, 20 * 1024), 1, -1, SavepointFormatType.CANONICAL, false);
            case "rocksdb-native-p2":
                return savepoint(caseDir, conf(caseDir, "rocksdb", true, 20 * 1024), 2, -1, SavepointFormatType.NATIVE, false);
            case "stop-with-savepoint-p2":
                return savepoint(caseDir, conf(caseDir, "hashmap", false, 20 * 1024), 2, 128, SavepointFormatType.CANONICAL, true);
            case "checkpoint-finished-tasks":
                return finishedTasksCheckpoint(caseDir);
            case "checkpoint-unaligned":
                return unalignedCheckpoint(caseDir);
            case "checkpoint-file-merging":
                return fileMergingCheckpoint(caseDir);
            case "large-p128":
                return large(caseDir, 128);
            case "wide-p1000":
                return Wide.write(caseDir, 1000);
            default:
                throw new IllegalArgumentException("unknown case " + name);
        }
    }

    private static String savepoint(File caseDir, Configuration c, int parallelism, int maxParallelism,
                                    SavepointFormatType format, boolean stop) throws Exception {
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(c);
        env.setParallelism(parallelism);
        if (maxParallelism > 0) env.setMaxParallelism(maxParallelism);
        pipeline(env, 2);
        JobClient client = env.executeAsync("fixture-" + caseDir.getName());
        waitRunning(client);
        Thread.sleep(1500);
        String target = new File(caseDir, "savepoints").toURI().toString();
        String path = null;
        Exception last = null;
        for (int attempt = 0; attempt < 60 && path == null; attempt++) {
            try {
                path = stop ? client.stopWithSavepoint(false, target, format).get()
                            : client.triggerSavepoint(target, format).get();
            } catch (Exception e) {
                last = e;
                Thread.sleep(500);
            }
        }
        if (path == null) throw new IllegalStateException("no savepoint for " + caseDir, last);
        if (!stop) client.cancel().get();
        return path;
    }

    private static void waitRunning(JobClient client) throws Exception {
        for (int i = 0; i < 600; i++) {
            if (client.getJobStatus().get() == JobStatus.RUNNING) return;
            Thread.sleep(100);
        }
        throw new IllegalStateException("job did not start");
    }

    /** Polls the checkpoint directory until a completed checkpoint satisfies `want`; copies it; cancels the job. */
    private static String awaitCheckpoint(File caseDir, JobClient client, Predicate<CheckpointMetadata> want)
            throws Exception {
        File root = new File(new File(caseDir, "checkpoints"), client.getJobID().toString());
        File out = new File(caseDir, "snapshot");
        for (int i = 0; i < 600; i++) {
            Thread.sleep(100);
            File[] chks = root.listFiles((d, n) -> n.startsWith("chk-"));
            if (chks == null) continue;
            Arrays.sort(chks, Comparator.comparingLong(f -> -Long.parseLong(f.getName().substring(4))));
            for (File chk : chks) {
                File meta = new File(chk, "_metadata");
                if (!meta.isFile()) continue;
                byte[] bytes;
                try {
                    bytes = java.nio.file.Files.readAllBytes(meta.toPath());
                    CheckpointMetadata m;
                    try (DataInputStream in = new DataInputStream(new java.io.ByteArrayInputStream(bytes))) {
                        m = Checkpoints.loadCheckpointMetadata(in, Generate.class.getClassLoader(), chk.getAbsolutePath());
                    }
                    if (!want.test(m)) break;
                } catch (Exception e) {
                    continue; // still being written or already subsumed
                }
                out.mkdirs();
                java.nio.file.Files.write(new File(out, "_metadata").toPath(), bytes);
                client.cancel().get();
                return out.getAbsolutePath();
            }
        }
        client.cancel().get();
        throw new IllegalStateException("no matching checkpoint for " + caseDir);
    }

    private static String finishedTasksCheckpoint(File caseDir) throws Exception {
        Configuration c = conf(caseDir, "hashmap", false, 20 * 1024);
        c.set(CheckpointingOptions.CHECKPOINTING_INTERVAL, Duration.ofMillis(400));
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(c);
        env.setParallelism(2);
        DataStream<Long> bounded = env.fromSequence(0, 199).uid("bounded-numbers").name("bounded-numbers");
        DataStream<Long> legacy = Compat.legacySource(env, 5, 20).uid("legacy-source").name("legacy-source");
        bounded.union(legacy).keyBy(v -> v % 13).process(new Functions.KeyedStateFn(0)).uid("keyed").name("keyed-state")
                .sinkTo(new DiscardingSink<>()).name("sink");
        JobClient client = env.executeAsync("fixture-finished");
        return awaitCheckpoint(caseDir, client, m -> {
            boolean fully = false, partial = false;
            for (OperatorState s : m.getOperatorStates()) {
                if (s.isFullyFinished()) fully = true;
                for (OperatorSubtaskState st : s.getSubtaskStates().values()) if (st.isFinished()) partial = true;
            }
            return fully && partial;
        });
    }

    private static String unalignedCheckpoint(File caseDir) throws Exception {
        Configuration c = conf(caseDir, "hashmap", false, 20 * 1024);
        c.set(CheckpointingOptions.CHECKPOINTING_INTERVAL, Duration.ofMillis(500));
        c.set(CheckpointingOptions.ENABLE_UNALIGNED, true);
        c.set(CheckpointingOptions.ALIGNED_CHECKPOINT_TIMEOUT, Duration.ZERO);
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(c);
        env.setParallelism(2);
        env.fromSequence(0, Long.MAX_VALUE).uid("numbers").name("numbers")
                .keyBy(v -> v % 31).process(new Functions.KeyedStateFn(2)).uid("slow-keyed").name("slow-keyed")
                .rebalance().map(new Functions.Throttle(1)).uid("slow-map").name("slow-map")
                .sinkTo(new DiscardingSink<>()).name("sink");
        JobClient client = env.executeAsync("fixture-unaligned");
        return awaitCheckpoint(caseDir, client, m -> {
            long channel = 0;
            for (OperatorState s : m.getOperatorStates()) {
                for (OperatorSubtaskState st : s.getSubtaskStates().values()) {
                    for (StateObject h : st.getInputChannelState()) channel += h.getStateSize();
                    for (StateObject h : st.getResultSubpartitionState()) channel += h.getStateSize();
                }
            }
            return channel > 0;
        });
    }

    private static String fileMergingCheckpoint(File caseDir) throws Exception {
        Configuration c = conf(caseDir, "rocksdb", true, 0);
        c.set(CheckpointingOptions.CHECKPOINTING_INTERVAL, Duration.ofMillis(500));
        c.set(CheckpointingOptions.FILE_MERGING_ENABLED, true);
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(c);
        env.setParallelism(2);
        pipeline(env, 1);
        JobClient client = env.executeAsync("fixture-file-merging");
        return awaitCheckpoint(caseDir, client, m -> m.getCheckpointId() >= 3);
    }

    /** A wide job for the benchmark: forward-only chains (no shuffle memory), keyed state via reinterpretAsKeyedStream. */
    private static String large(File caseDir, int parallelism) throws Exception {
        Configuration c = conf(caseDir, "hashmap", false, 64 * 1024);
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(c);
        env.setParallelism(parallelism);
        env.setMaxParallelism(4096);
        final int maxPar = 4096;
        final int par = parallelism;
        DataStream<Long> src = env.fromSequence(0, Long.MAX_VALUE).uid("numbers").name("numbers")
                .filter(new Functions.OwnKeys(100000, maxPar, par)).uid("own-keys")
                .map(new Functions.Throttle(1)).uid("throttle");
        DataStream<Long> k1 = DataStreamUtils.reinterpretAsKeyedStream(src, v -> v % 100000)
                .process(new Functions.KeyedStateFn(0)).uid("keyed-1");
        DataStream<Long> o1 = k1.map(new Functions.OperatorStateFn()).uid("operator-state-1");
        DataStream<Long> k2 = DataStreamUtils.reinterpretAsKeyedStream(o1, v -> v % 100000)
                .process(new Functions.KeyedStateFn(0)).uid("keyed-2");
        k2.map(new Functions.OperatorStateFn()).uid("operator-state-2").sinkTo(new DiscardingSink<>());
        return savepointOf(env, caseDir);
    }

    private static String savepointOf(StreamExecutionEnvironment env, File caseDir) throws Exception {
        JobClient client = env.executeAsync("fixture-" + caseDir.getName());
        waitRunning(client);
        Thread.sleep(4000);
        String target = new File(caseDir, "savepoints").toURI().toString();
        for (int attempt = 0; attempt < 120; attempt++) {
            try {
                String p = client.triggerSavepoint(target, SavepointFormatType.CANONICAL).get();
                client.cancel().get();
                return p;
            } catch (Exception e) {
                Thread.sleep(500);
            }
        }
        throw new IllegalStateException("no savepoint for " + caseDir);
    }
}

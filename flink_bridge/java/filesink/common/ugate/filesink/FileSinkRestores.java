package ugate.filesink;

import org.apache.flink.api.common.JobID;
import org.apache.flink.api.common.JobStatus;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.RichMapFunction;
import org.apache.flink.api.common.serialization.SimpleStringEncoder;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.ConfigOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.MemorySize;
import org.apache.flink.configuration.StateBackendOptions;
import org.apache.flink.connector.file.sink.FileSink;
import org.apache.flink.connector.file.src.FileSource;
import org.apache.flink.connector.file.src.reader.TextLineInputFormat;
import org.apache.flink.core.execution.SavepointFormatType;
import org.apache.flink.core.fs.Path;
import org.apache.flink.runtime.jobgraph.JobGraph;
import org.apache.flink.runtime.jobgraph.SavepointRestoreSettings;
import org.apache.flink.runtime.jobmaster.JobResult;
import org.apache.flink.runtime.minicluster.MiniCluster;
import org.apache.flink.runtime.minicluster.MiniClusterConfiguration;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.filesystem.bucketassigners.BasePathBucketAssigner;
import org.apache.flink.streaming.api.functions.sink.filesystem.rollingpolicies.DefaultRollingPolicy;
import org.apache.flink.streaming.api.functions.sink.filesystem.rollingpolicies.OnCheckpointRollingPolicy;
import org.apache.flink.streaming.api.graph.StreamGraph;
import org.apache.flink.streaming.api.graph.StreamingJobGraphGenerator;
import upgradegate.bridge.Json;
import upgradegate.bridge.ConnectorDumper;
import upgradegate.bridge.SpecDumper;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The file connector (FileSource / FileSink, shipped in Flink's lib/) through an upgrade that re-keys one of them, on
 * a real MiniCluster, so what the gate says losing their state does to the data can be compared with what happens.
 *
 * <p>Per scenario {@code <rolling>-<savepoint>-<changed>}: numbered text lines ({@code r000123}) in FILES input
 * files; job v1 (FileSource uid "files" -> map uid "tag" -> FileSink uid "parts", parallelism 1) reads them slowly
 * until about a third is read, then a canonical savepoint is taken, by {@code stop} (stop-with-savepoint) or by
 * {@code trigger} (a savepoint, then cancel: the Kubernetes operator's savepoint-then-cancel of old releases); v2,
 * the same job with the source's or the sink's uid changed, starts from it with allowNonRestoredState and runs to
 * the end of its bounded input (v2 checkpoints every second; its final checkpoint commits the last part files).
 * The sink rolls its part files on every checkpoint ({@code OnCheckpointRollingPolicy})
 * or on size/time only ({@code DefaultRollingPolicy}, limits no run reaches). Files are left for the caller to count:
 * {@code <out>/<scenario>/input}, {@code output}, {@code savepoint}, and {@code graph-v2.json} (the exporter's
 * SpecDumper of v2's StreamGraph). One JSON line per scenario on stdout: the savepoint, v1's records read, v2's status.
 *
 * <p>Usage: {@code FileSinkRestores <out-dir> scenario...}
 */
public final class FileSinkRestores {
    private FileSinkRestores() {}

    static final int FILES = 4;
    static final int LINES = 500;
    static final long READ_BEFORE_SAVEPOINT = FILES * LINES / 3;
    static final AtomicLong TAGGED = new AtomicLong();
    private static MiniCluster cluster;

    public static void main(String[] args) throws Exception {
        File out = new File(args[0]);
        Configuration conf = new Configuration();
        conf.set(StateBackendOptions.STATE_BACKEND, "hashmap");
        conf.set(CheckpointingOptions.FS_SMALL_FILE_THRESHOLD, MemorySize.parse("1mb")); // _metadata only
        conf.set(ConfigOptions.key("restart-strategy.type").stringType().noDefaultValue(), "none");
        conf.set(ConfigOptions.key("taskmanager.memory.network.min").stringType().noDefaultValue(), "64mb");
        conf.set(ConfigOptions.key("taskmanager.memory.network.max").stringType().noDefaultValue(), "64mb");
        cluster = new MiniCluster(new MiniClusterConfiguration.Builder().setConfiguration(conf)
                .setNumTaskManagers(1).setNumSlotsPerTaskManager(4).build());
        cluster.start();
        try {
            for (int i = 1; i < args.length; i++) {
                Map<String, Object> line = new LinkedHashMap<>();
                line.put("scenario", args[i]);
                try {
                    line.putAll(run(new File(out, args[i]), args[i], conf));
                } catch (Exception e) {
                    e.printStackTrace();
                    line.put("error", String.valueOf(e).replace('\n', ' '));
                }
                System.out.println(Json.write(line));
                System.out.flush();
            }
        } finally {
            cluster.close();
        }
        System.exit(0);
    }

    /** One job of a scenario: which uids, how the sink rolls, how fast the map lets records through. */
    static StreamGraph job(Configuration clusterConf, File dir, String rolling, String sourceUid, String sinkUid,
                           long checkpointMs, int throttleMs) {
        Configuration conf = new Configuration(clusterConf);
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        env.setParallelism(1);
        env.enableCheckpointing(checkpointMs);
        FileSource<String> source = FileSource.forRecordStreamFormat(new TextLineInputFormat(),
                new Path(new File(dir, "input").toURI())).build();
        DataStream<String> lines = env.fromSource(source, WatermarkStrategy.noWatermarks(), "files").uid(sourceUid);
        DataStream<String> tagged = lines.map(new Tag(throttleMs)).uid("tag").name("tag");
        FileSink.DefaultRowFormatBuilder<String> sink = FileSink.forRowFormat(new Path(new File(dir, "output").toURI()),
                new SimpleStringEncoder<String>()).withBucketAssigner(new BasePathBucketAssigner<>());
        FileSink<String> built = rolling.equals("checkpoint")
                ? sink.withRollingPolicy(OnCheckpointRollingPolicy.build()).build()
                : sink.withRollingPolicy(DefaultRollingPolicy.builder().withMaxPartSize(MemorySize.parse("1gb"))
                        .withRolloverInterval(Duration.ofHours(1)).withInactivityInterval(Duration.ofHours(1)).build())
                        .build();
        tagged.sinkTo(built).uid(sinkUid).name("parts");
        return env.getStreamGraph();
    }

    static Map<String, Object> run(File dir, String scenario, Configuration conf) throws Exception {
        String[] p = scenario.split("-"); // <rolling>-<savepoint>-<changed>
        String rolling = p[0], savepointKind = p[1], changed = p[2];
        writeInput(new File(dir, "input"));
        Map<String, Object> m = new LinkedHashMap<>();
        // Before a stop-with-savepoint v1 checkpoints every 300 ms (a size-rolled part file outlives several
        // checkpoints); before a savepoint-then-cancel it takes none (1 h), so no checkpoint can commit the
        // savepoint's pending files between the savepoint and the cancel
        long v1Checkpoints = savepointKind.equals("stop") ? 300 : 3_600_000;
        TAGGED.set(0);
        JobGraph v1 = StreamingJobGraphGenerator.createJobGraph(
                job(conf, dir, rolling, "files", "parts", v1Checkpoints, 3));
        JobID id = cluster.submitJob(v1).get().getJobID();
        for (int i = 0; i < 2400 && TAGGED.get() < READ_BEFORE_SAVEPOINT; i++) {
            if (cluster.getJobStatus(id).get().isGloballyTerminalState()) throw new IllegalStateException("v1 ended");
            Thread.sleep(25);
        }
        String target = new File(dir, "savepoint").toURI().toString();
        String pointer = null;
        Exception last = null;
        for (int attempt = 0; attempt < 40 && pointer == null; attempt++) {
            try {
                pointer = savepointKind.equals("stop")
                        ? cluster.stopWithSavepoint(id, target, false, SavepointFormatType.CANONICAL).get()
                        : cluster.triggerSavepoint(id, target, false, SavepointFormatType.CANONICAL).get();
            } catch (Exception e) {
                last = e;
                Thread.sleep(100);
            }
        }
        if (pointer == null) throw new IllegalStateException("no savepoint for " + scenario, last);
        if (savepointKind.equals("trigger")) cluster.cancelJob(id).get();
        JobStatus v1End = await(id);
        m.put("savepoint", pointer);
        m.put("v1_tagged", TAGGED.get());
        m.put("v1_status", v1End.name());
        String sourceUid = changed.equals("source") ? "files-v2" : "files";
        String sinkUid = changed.equals("sink") ? "parts-v2" : "parts";
        StreamGraph v2Graph = job(conf, dir, rolling, sourceUid, sinkUid, 1_000, 0);
        Map<String, Object> v2Spec = SpecDumper.spec(v2Graph);
        ConnectorDumper.addTo(v2Spec, v2Graph);  // as `upgrade-gate export` writes it: the FileSource's class
        Files.write(new File(dir, "graph-v2.json").toPath(),
                (Json.write(v2Spec) + "\n").getBytes(StandardCharsets.UTF_8));
        JobGraph v2 = StreamingJobGraphGenerator.createJobGraph(job(conf, dir, rolling, sourceUid, sinkUid, 1_000, 0));
        v2.setSavepointRestoreSettings(SavepointRestoreSettings.forPath(pointer, true));
        TAGGED.set(0);
        JobID id2 = cluster.submitJob(v2).get().getJobID();
        JobStatus v2End = await(id2);
        m.put("v2_tagged", TAGGED.get());
        m.put("v2_status", v2End.name());
        JobResult r = cluster.requestJobResult(id2).get();
        if (r.getSerializedThrowable().isPresent()) {
            m.put("v2_error", String.valueOf(r.getSerializedThrowable().get()
                    .deserializeError(FileSinkRestores.class.getClassLoader())));
        }
        return m;
    }

    private static JobStatus await(JobID id) throws Exception {
        JobStatus st = cluster.getJobStatus(id).get();
        for (int i = 0; i < 2400 && !st.isGloballyTerminalState(); i++) { // 60 s; the input takes a few
            Thread.sleep(25);
            st = cluster.getJobStatus(id).get();
        }
        if (!st.isGloballyTerminalState()) {
            cluster.cancelJob(id).get();
            throw new IllegalStateException("job " + id + " still " + st + " after 60 s");
        }
        return st;
    }

    static void writeInput(File dir) throws Exception {
        dir.mkdirs();
        for (int f = 0; f < FILES; f++) {
            List<String> lines = new ArrayList<>();
            for (int i = 0; i < LINES; i++) lines.add(String.format("r%06d", f * LINES + i));
            Files.write(new File(dir, "in-" + f + ".txt").toPath(), lines, StandardCharsets.UTF_8);
        }
    }

    /** Passes each line on, counting it; in v1 slowly, so the savepoint finds the input partly read. */
    static final class Tag extends RichMapFunction<String, String> {
        private final int throttleMs;

        Tag(int throttleMs) {
            this.throttleMs = throttleMs;
        }

        @Override public String map(String line) throws Exception {
            if (throttleMs > 0) Thread.sleep(throttleMs);
            TAGGED.incrementAndGet();
            return line;
        }
    }
}

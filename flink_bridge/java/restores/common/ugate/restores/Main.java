package ugate.restores;

import org.apache.flink.api.common.JobID;
import org.apache.flink.api.common.JobStatus;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.ConfigOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.MemorySize;
import org.apache.flink.configuration.StateBackendOptions;
import org.apache.flink.core.execution.SavepointFormatType;
import org.apache.flink.runtime.jobgraph.JobGraph;
import org.apache.flink.runtime.jobgraph.SavepointRestoreSettings;
import org.apache.flink.runtime.jobmaster.JobResult;
import org.apache.flink.runtime.minicluster.MiniCluster;
import org.apache.flink.runtime.minicluster.MiniClusterConfiguration;
import org.apache.flink.streaming.api.graph.StreamGraph;
import org.apache.flink.streaming.api.graph.StreamGraphHasherV2;
import org.apache.flink.streaming.api.graph.StreamNode;
import org.apache.flink.streaming.api.graph.StreamingJobGraphGenerator;
import upgradegate.bridge.Json;
import upgradegate.bridge.SpecDumper;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Real restores: for each scenario, job A runs in one MiniCluster (shared by all runs, one job at a
 * time), a canonical savepoint is taken with non-empty state, and job B is submitted from it without
 * and (if that fails) with allowNonRestoredState. Writes {@code <out>/<scenario>/outcome.json},
 * {@code graph-a.json}, {@code graph-b.json}; prints {@code <scenario>\tOK|ERROR ...} per scenario.
 *
 * <p>Usage: {@code Main <out-dir> [--cross-savepoint <pointer>] scenario...}
 */
public final class Main {
    private Main() {}

    private static MiniCluster cluster;
    private static Configuration conf;
    private static final Map<String, Map<String, Object>> SAVEPOINTS = new HashMap<>();

    public static void main(String[] args) throws Exception {
        File out = new File(args[0]);
        String cross = null;
        List<String> names = new ArrayList<>();
        for (int i = 1; i < args.length; i++) {
            if (args[i].equals("--cross-savepoint")) cross = args[++i];
            else names.add(args[i]);
        }
        conf = configuration(out);
        MiniClusterConfiguration mcc = new MiniClusterConfiguration.Builder().setConfiguration(conf)
                .setNumTaskManagers(1).setNumSlotsPerTaskManager(100).build();
        cluster = new MiniCluster(mcc);
        cluster.start();
        try {
            for (String name : names) {
                try {
                    runScenario(out, name, cross);
                    System.out.println(name + "\tOK");
                } catch (Exception e) {
                    e.printStackTrace();
                    System.out.println(name + "\tERROR\t" + String.valueOf(e).replace('\n', ' '));
                }
                System.out.flush();
            }
        } finally {
            cluster.close();
        }
        System.exit(0);
    }

    private static void put(Configuration c, String key, String value) {
        c.set(ConfigOptions.key(key).stringType().noDefaultValue(), value);
    }

    private static Configuration configuration(File out) {
        Configuration c = new Configuration();
        c.set(StateBackendOptions.STATE_BACKEND, "hashmap");
        c.set(CheckpointingOptions.CHECKPOINTS_DIRECTORY, new File(out, "checkpoints").toURI().toString());
        // Everything inline in _metadata: the committed fixture is one small file per savepoint.
        c.set(CheckpointingOptions.FS_SMALL_FILE_THRESHOLD, MemorySize.parse("1mb"));
        put(c, "restart-strategy.type", "none");
        put(c, "taskmanager.memory.segment-size", "8kb");
        put(c, "taskmanager.memory.network.min", "128mb");
        put(c, "taskmanager.memory.network.max", "128mb");
        return c;
    }

    static void write(File f, Object json) throws Exception {
        Files.write(f.toPath(), (Json.write(json) + "\n").getBytes(StandardCharsets.UTF_8));
    }

    private static String keyedIdOf(StreamGraph graph) {
        Map<Integer, byte[]> hashes = new StreamGraphHasherV2().traverseStreamGraphAndGenerateHashes(graph);
        for (StreamNode n : graph.getStreamNodes()) {
            if (n.getOperatorName().equals("keyed")) {
                StringBuilder sb = new StringBuilder();
                for (byte b : hashes.get(n.getId())) sb.append(String.format("%02x", b & 0xff));
                return sb.toString();
            }
        }
        throw new IllegalStateException("no keyed node");
    }

    private static void runScenario(File out, String name, String cross) throws Exception {
        Shape[] ab = Scenarios.ALL.get(name);
        if (ab == null) throw new IllegalArgumentException("unknown scenario " + name);
        File dir = new File(out, name);
        dir.mkdirs();
        Map<String, Object> outcome = new LinkedHashMap<>();
        outcome.put("scenario", name);
        Map<String, Object> savepoint;
        if (ab[0] == null) {
            if (cross == null) throw new IllegalArgumentException(name + " needs --cross-savepoint");
            savepoint = new LinkedHashMap<>();
            savepoint.put("pointer", cross);
            savepoint.put("job_a", "the identical scenario of the other Flink release");
        } else {
            Shape a = ab[0];
            write(new File(dir, "graph-a.json"), SpecDumper.spec(a.build(conf, "job-a", null)));
            savepoint = SAVEPOINTS.get(a.key);
            if (savepoint == null) {
                savepoint = takeSavepoint(out, a);
                SAVEPOINTS.put(a.key, savepoint);
            }
        }
        outcome.put("savepoint", savepoint);
        String hash = ab[1].keyedUidHash;
        if ("@A".equals(hash)) hash = keyedIdOf(ab[0].build(conf, "job-a", null));
        outcome.put("keyed_uid_hash", hash);
        write(new File(dir, "graph-b.json"), SpecDumper.spec(ab[1].build(conf, "job-b", hash)));
        String pointer = (String) savepoint.get("pointer");
        Map<String, Object> plain = restore(ab[1], hash, pointer, false);
        outcome.put("restore", plain);
        if (!"RUNNING".equals(plain.get("status"))) {
            outcome.put("restore_allow_non_restored_state", restore(ab[1], hash, pointer, true));
        }
        write(new File(dir, "outcome.json"), outcome);
    }

    private static JobStatus status(JobID id) throws Exception {
        return cluster.getJobStatus(id).get();
    }

    private static void stop(JobID id) throws Exception {
        if (!status(id).isGloballyTerminalState()) {
            try {
                cluster.cancelJob(id).get();
            } catch (Exception ignored) {
                // already terminal
            }
        }
        for (int i = 0; i < 600 && !status(id).isGloballyTerminalState(); i++) Thread.sleep(50);
    }

    private static Map<String, Object> takeSavepoint(File out, Shape a) throws Exception {
        Report.clear();
        JobGraph jg = StreamingJobGraphGenerator.createJobGraph(a.build(conf, "job-a-" + a.key, null));
        JobID id = cluster.submitJob(jg).get().getJobID();
        for (int i = 0; i < 1200; i++) {
            JobStatus s = status(id);
            if (s.isGloballyTerminalState()) throw new IllegalStateException("job A " + a.key + " ended: " + s);
            if (s == JobStatus.RUNNING && Report.reporters("restore") >= a.expectedReporters()) break;
            Thread.sleep(50);
        }
        Thread.sleep(1500);
        String target = new File(new File(out, "savepoints"), a.key).toURI().toString();
        String pointer = null;
        Exception last = null;
        for (int attempt = 0; attempt < 40 && pointer == null; attempt++) {
            try {
                pointer = cluster.triggerSavepoint(id, target, false, SavepointFormatType.CANONICAL).get();
            } catch (Exception e) {
                last = e;
                Thread.sleep(250);
            }
        }
        if (pointer == null) throw new IllegalStateException("no savepoint for " + a.key, last);
        Map<String, Object> snapshot = Report.collect("snapshot");
        stop(id);
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("pointer", pointer);
        m.put("job_a", a.key);
        m.put("snapshot", snapshot);
        return m;
    }

    private static Map<String, Object> restore(Shape b, String hash, String pointer, boolean allowNonRestored)
            throws Exception {
        Report.clear();
        JobGraph jg = StreamingJobGraphGenerator.createJobGraph(b.build(conf, "job-b", hash));
        jg.setSavepointRestoreSettings(SavepointRestoreSettings.forPath(pointer, allowNonRestored));
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("allow_non_restored_state", allowNonRestored);
        JobID id;
        try {
            id = cluster.submitJob(jg).get().getJobID();
        } catch (Exception e) {
            m.put("status", "SUBMISSION_FAILED");
            m.put("error_chain", chain(e));
            return m;
        }
        JobStatus s = status(id);
        boolean complete = false;
        for (int i = 0; i < 1200; i++) {
            s = status(id);
            if (s.isGloballyTerminalState()) break;
            if (s == JobStatus.RUNNING && Report.reporters("restore") >= b.expectedReporters()) {
                complete = true;
                break;
            }
            Thread.sleep(50);
        }
        if (s == JobStatus.RUNNING) Thread.sleep(300); // late reports of a rescaled operator, if any
        m.put("status", s.name());
        m.put("reports_complete", complete);
        m.put("restored", Report.collect("restore"));
        if (s.isGloballyTerminalState()) {
            JobResult r = cluster.requestJobResult(id).get();
            if (r.getSerializedThrowable().isPresent()) {
                m.put("error_chain", chain(r.getSerializedThrowable().get().deserializeError(Main.class.getClassLoader())));
            }
        }
        stop(id);
        return m;
    }

    static List<Object> chain(Throwable t) {
        List<Object> out = new ArrayList<>();
        for (Throwable c = t; c != null && out.size() < 20; c = c.getCause() == c ? null : c.getCause()) {
            Map<String, Object> e = new LinkedHashMap<>();
            e.put("class", c.getClass().getName());
            e.put("message", c.getMessage());
            out.add(e);
        }
        return out;
    }
}

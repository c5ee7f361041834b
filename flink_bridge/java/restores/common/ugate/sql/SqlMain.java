package ugate.sql;

import org.apache.flink.api.common.JobID;
import org.apache.flink.api.common.JobStatus;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.ConfigOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.MemorySize;
import org.apache.flink.core.execution.SavepointFormatType;
import org.apache.flink.runtime.execution.ExecutionState;
import org.apache.flink.runtime.executiongraph.AccessExecutionGraph;
import org.apache.flink.runtime.executiongraph.AccessExecutionVertex;
import org.apache.flink.runtime.jobgraph.JobGraph;
import org.apache.flink.runtime.jobgraph.SavepointRestoreSettings;
import org.apache.flink.runtime.jobmaster.JobResult;
import org.apache.flink.runtime.minicluster.MiniCluster;
import org.apache.flink.runtime.minicluster.MiniClusterConfiguration;
import org.apache.flink.streaming.api.graph.StreamGraph;
import org.apache.flink.streaming.api.graph.StreamingJobGraphGenerator;
import upgradegate.bridge.ExportMain;
import upgradegate.bridge.Json;
import upgradegate.bridge.SpecDumper;
import upgradegate.bridge.SqlStateDumper;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Real restores of SQL jobs. Per scenario directory ({@code a.sql}, {@code b.sql}, optional
 * {@code a.conf}/{@code b.conf} with {@code key=value} lines): job A's StreamGraph is built by the
 * exporter's own path (ExportMain#fromSql, then SpecDumper), run in a MiniCluster until its state
 * is non-empty, savepointed (canonical, shared by scenarios of the same shape), and job B is
 * submitted from it without and (if that fails) with allowNonRestoredState. Which operators got
 * state back is what RecordingBackend saw at restore.
 *
 * <p>Usage: {@code SqlMain <out-dir> [--savepoint <name>=<pointer>] <name>:<shape>...}
 */
public final class SqlMain {
    private SqlMain() {}

    private static MiniCluster cluster;
    private static Configuration conf;
    private static final Map<String, Map<String, Object>> SAVEPOINTS = new HashMap<>();

    public static void main(String[] args) throws Exception {
        File out = new File(args[0]);
        Map<String, String> given = new HashMap<>();
        boolean graphsOnly = false;
        List<String[]> scenarios = new ArrayList<>();
        for (int i = 1; i < args.length; i++) {
            if (args[i].equals("--graphs-only")) {
                graphsOnly = true;
            } else if (args[i].equals("--savepoint")) {
                String[] kv = args[++i].split("=", 2);
                given.put(kv[0], kv[1]);
            } else {
                scenarios.add(args[i].split(":", 2));
            }
        }
        conf = configuration(out);
        if (graphsOnly) {  // re-dump the graphs of scenarios already run (SpecDumper / SqlStateDumper changed)
            for (String[] s : scenarios) {
                File dir = new File(out, s[0]);
                if (given.get(s[0]) == null) write(new File(dir, "graph-a.json"), withSqlState(graph(dir, "a")));
                write(new File(dir, "graph-b.json"), withSqlState(graph(dir, "b")));
                System.out.println(s[0] + "\tOK");
            }
            System.exit(0);
        }
        cluster = new MiniCluster(new MiniClusterConfiguration.Builder().setConfiguration(conf)
                .setNumTaskManagers(1).setNumSlotsPerTaskManager(8).build());
        cluster.start();
        try {
            for (String[] s : scenarios) {
                try {
                    run(out, s[0], s[1], given.get(s[0]));
                    System.out.println(s[0] + "\tOK");
                } catch (Exception e) {
                    e.printStackTrace();
                    System.out.println(s[0] + "\tERROR\t" + String.valueOf(e).replace('\n', ' '));
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
        put(c, "state.backend.type", RecordingBackendFactory.class.getName());
        c.set(CheckpointingOptions.CHECKPOINTS_DIRECTORY, new File(out, "checkpoints").toURI().toString());
        c.set(CheckpointingOptions.FS_SMALL_FILE_THRESHOLD, MemorySize.parse("1mb"));
        put(c, "restart-strategy.type", "none");
        put(c, "parallelism.default", "1");
        put(c, "taskmanager.memory.segment-size", "8kb");
        put(c, "taskmanager.memory.network.min", "128mb");
        put(c, "taskmanager.memory.network.max", "128mb");
        // window aggregates buffer in managed memory (WindowBytesMultiMap): split across 8 slots, 32 MB each
        put(c, "taskmanager.memory.managed.size", "256mb");
        return c;
    }

    private static Configuration jobConf(File dir, String side) throws Exception {
        Configuration c = new Configuration(conf);
        File f = new File(dir, side + ".conf");
        if (f.isFile()) {
            for (String line : Files.readAllLines(f.toPath(), StandardCharsets.UTF_8)) {
                int eq = line.indexOf('=');
                if (eq > 0) put(c, line.substring(0, eq).strip(), line.substring(eq + 1).strip());
            }
        }
        return c;
    }

    private static StreamGraph graph(File dir, String side) throws Exception {
        return ExportMain.fromSql(new File(dir, side + ".sql").getPath(), jobConf(dir, side));
    }

    /** The exporter's spec plus, top level, what each SQL operator's state is serialized with. */
    private static Map<String, Object> withSqlState(StreamGraph g) {
        Map<String, Object> spec = SpecDumper.spec(g);
        spec.put("sql_state", SqlStateDumper.sqlState(g));
        return spec;
    }

    private static void write(File f, Object json) throws Exception {
        Files.write(f.toPath(), (Json.write(json) + "\n").getBytes(StandardCharsets.UTF_8));
    }

    private static void run(File out, String name, String shape, String givenPointer) throws Exception {
        File dir = new File(out, name);
        Map<String, Object> outcome = new LinkedHashMap<>();
        outcome.put("scenario", name);
        Map<String, Object> savepoint;
        if (givenPointer != null) {
            savepoint = new LinkedHashMap<>();
            savepoint.put("pointer", givenPointer);
            savepoint.put("job_a", shape);
        } else {
            StreamGraph a = graph(dir, "a");
            write(new File(dir, "graph-a.json"), withSqlState(a));
            savepoint = SAVEPOINTS.get(shape);
            if (savepoint == null) {
                savepoint = takeSavepoint(out, shape, a);
                SAVEPOINTS.put(shape, savepoint);
            }
        }
        outcome.put("savepoint", savepoint);
        write(new File(dir, "graph-b.json"), withSqlState(graph(dir, "b")));
        String pointer = (String) savepoint.get("pointer");
        Map<String, Object> plain = restore(graph(dir, "b"), pointer, false);
        outcome.put("restore", plain);
        if (!"RUNNING".equals(plain.get("status"))) {
            outcome.put("restore_allow_non_restored_state", restore(graph(dir, "b"), pointer, true));
        }
        write(new File(dir, "outcome.json"), outcome);
    }

    private static JobStatus status(JobID id) throws Exception {
        return cluster.getJobStatus(id).get();
    }

    /** Every subtask deployed and RUNNING: by then each one has restored its state (or failed). */
    private static boolean allRunning(JobID id) throws Exception {
        AccessExecutionGraph g = cluster.getExecutionGraph(id).get();
        for (AccessExecutionVertex v : g.getAllExecutionVertices()) {
            if (v.getExecutionState() != ExecutionState.RUNNING) return false;
        }
        return true;
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

    private static Map<String, Object> takeSavepoint(File out, String shape, StreamGraph a) throws Exception {
        JobGraph jg = StreamingJobGraphGenerator.createJobGraph(a);
        JobID id = cluster.submitJob(jg).get().getJobID();
        for (int i = 0; i < 1200; i++) {
            if (status(id).isGloballyTerminalState()) {
                JobResult r = cluster.requestJobResult(id).get();
                throw new IllegalStateException("job A " + shape + " ended: " + chain(
                        r.getSerializedThrowable().isPresent()
                                ? r.getSerializedThrowable().get().deserializeError(SqlMain.class.getClassLoader())
                                : null));
            }
            if (status(id) == JobStatus.RUNNING && allRunning(id)) break;
            Thread.sleep(50);
        }
        Thread.sleep(2500);  // the datagen sources (bounded rate) fill the SQL operators' state
        String target = new File(new File(out, "savepoints"), shape).toURI().toString();
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
        if (pointer == null) throw new IllegalStateException("no savepoint for " + shape, last);
        stop(id);
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("pointer", pointer);
        m.put("job_a", shape);
        return m;
    }

    private static Map<String, Object> restore(StreamGraph b, String pointer, boolean allowNonRestored)
            throws Exception {
        RecordingBackend.clear();
        JobGraph jg = StreamingJobGraphGenerator.createJobGraph(b);
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
        boolean running = false;
        for (int i = 0; i < 1200; i++) {
            s = status(id);
            if (s.isGloballyTerminalState()) break;
            if (s == JobStatus.RUNNING && allRunning(id)) {
                running = true;
                break;
            }
            Thread.sleep(50);
        }
        if (running) {
            Thread.sleep(1500);  // a state migration failure surfaces in the first records' processing at the latest
            s = status(id);
        }
        for (int i = 0; i < 200 && s == JobStatus.FAILING; i++) {
            Thread.sleep(50);
            s = status(id);
        }
        m.put("status", s == JobStatus.RUNNING && running ? "RUNNING" : s.name());
        m.put("restored_operators", RecordingBackend.snapshot());
        if (s.isGloballyTerminalState()) {
            JobResult r = cluster.requestJobResult(id).get();
            if (r.getSerializedThrowable().isPresent()) {
                m.put("error_chain", chain(r.getSerializedThrowable().get().deserializeError(SqlMain.class.getClassLoader())));
            }
        }
        stop(id);
        return m;
    }

    private static List<Object> chain(Throwable t) {
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

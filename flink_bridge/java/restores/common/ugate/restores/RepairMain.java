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
import org.apache.flink.streaming.api.graph.StreamingJobGraphGenerator;
import upgradegate.bridge.SpecDumper;

import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Real restores of repaired savepoints. Per scenario: job A runs until it has processed part of its input and a
 * canonical savepoint is taken; job B is started from that savepoint as it is (recording what Flink does, and
 * with allowNonRestoredState, what the data then looks like at the end); then `upgrade-gate repair` (the command a
 * user runs, as a process) writes a repaired savepoint, and job B is started from it WITHOUT
 * allowNonRestoredState and run to the end of its input. Writes {@code <out>/<scenario>/outcome.json},
 * {@code graph-a.json}, {@code graph-b.json}; the savepoints stay under {@code <out>/savepoints} and
 * {@code <out>/repaired}.
 *
 * <p>Usage: {@code RepairMain <out-dir> <flink X.Y> <python> [--cross <pointer> <numbers>] scenario...}; the
 * {@code cross-version-*} scenarios repair and restore the savepoint given with {@code --cross} (written by the
 * other release's job A, holding {@code numbers} numbers) instead of taking one.
 */
public final class RepairMain {
    private RepairMain() {}

    private static MiniCluster cluster;
    private static Configuration conf;

    /** name -> {job A, job B, repair arguments after --graph/--old-graph}. */
    static final Map<String, Object[]> SCENARIOS = new LinkedHashMap<>();

    private static void add(String name, RepairJob a, RepairJob b, String... repairArgs) {
        SCENARIOS.put(name, new Object[] {a, b, repairArgs});
    }

    static {
        RepairJob uids = new RepairJob();
        RepairJob none = uids.copy(j -> j.uids = false);
        add("identical", uids, uids);  // the control: nothing to repair, what Flink does with the savepoint as it is
        add("uid-renamed", uids, uids.copy(j -> j.countsUid = "counts-v2"));
        add("uid-removed", uids, uids.copy(j -> j.countsUid = null));
        add("uids-added", none, uids, "--old-graph");
        add("map-inserted-before-uidless-keyed", none, none.copy(j -> j.insertMap = true), "--old-graph");
        add("chaining-disabled-no-uids", none, none.copy(j -> j.disableChaining = true), "--old-graph");
        add("source-uid-renamed", uids, uids.copy(j -> j.sourceUid = "numbers-v2"));
        add("operator-removed-dropped", uids, uids.copy(j -> j.lists = false), "--old-graph", "--drop", "lists");
        add("cross-version-uid-renamed", uids, uids.copy(j -> j.countsUid = "counts-v2"));
        RepairJob tuples = uids.copy(j -> { j.tupleKeys = true; j.maxParallelism = 128; });
        add("max-parallelism-128-to-256-tuple-keys-hashmap", tuples, tuples.copy(j -> j.maxParallelism = 256),
                "--max-parallelism", "256");
        // the new job no longer declares a list state and a keyed state: Flink would keep restoring them
        add("states-dropped-by-name", uids, uids.copy(j -> { j.withPairs = false; j.withSum = false; }),
                "--old-graph", "--drop", "lists/pairs", "--drop", "counts/sum");
        // max parallelism changed: every keyed entry and timer into the key groups of the new max parallelism
        for (String backend : new String[] {"hashmap", "rocksdb"}) {
            for (boolean strings : new boolean[] {false, true}) {
                int from = strings == backend.equals("hashmap") ? 256 : 128;
                int to = from == 128 ? 256 : 128;
                RepairJob a = uids.copy(j -> { j.backend = backend; j.stringKeys = strings; j.maxParallelism = from; });
                add("max-parallelism-" + from + "-to-" + to + "-" + (strings ? "string" : "long") + "-keys-" + backend,
                        a, a.copy(j -> j.maxParallelism = to), "--max-parallelism", String.valueOf(to));
            }
        }
    }

    private static String crossPointer;
    private static long crossNumbers;

    public static void main(String[] args) throws Exception {
        File out = new File(args[0]);
        String flinkVersion = args[1];
        String python = args[2];
        List<String> names = new ArrayList<>();
        for (int i = 3; i < args.length; i++) {
            if (args[i].equals("--cross")) {
                crossPointer = args[++i];
                crossNumbers = Long.parseLong(args[++i]);
            } else {
                names.add(args[i]);
            }
        }
        conf = configuration(out);
        cluster = new MiniCluster(new MiniClusterConfiguration.Builder().setConfiguration(conf)
                .setNumTaskManagers(1).setNumSlotsPerTaskManager(16).build());
        cluster.start();
        try {
            for (String name : names) {
                try {
                    run(out, name, flinkVersion, python);
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

    private static Configuration configuration(File out) {
        Configuration c = new Configuration();
        c.set(StateBackendOptions.STATE_BACKEND, "hashmap");
        c.set(CheckpointingOptions.CHECKPOINTS_DIRECTORY, new File(out, "checkpoints").toURI().toString());
        // keyed state in files next to _metadata, small operator state inline: the repair copies both kinds
        c.set(CheckpointingOptions.FS_SMALL_FILE_THRESHOLD, MemorySize.parse("1kb"));
        c.set(ConfigOptions.key("restart-strategy.type").stringType().noDefaultValue(), "none");
        c.set(ConfigOptions.key("taskmanager.memory.network.min").stringType().noDefaultValue(), "64mb");
        c.set(ConfigOptions.key("taskmanager.memory.network.max").stringType().noDefaultValue(), "64mb");
        return c;
    }

    private static JobStatus status(JobID id) throws Exception { return cluster.getJobStatus(id).get(); }

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

    private static long reported(String phase, String metric) {
        long total = 0;
        Map<String, Object> byOp = Report.collect(phase);
        for (Object subtasks : byOp.values()) {
            for (Object s : (List<?>) subtasks) {
                Object v = ((Map<?, ?>) s).get(metric);
                if (v instanceof Number) total += ((Number) v).longValue();
            }
        }
        return total;
    }

    private static void run(File out, String name, String flinkVersion, String python) throws Exception {
        Object[] s = SCENARIOS.get(name);
        if (s == null) throw new IllegalArgumentException("unknown scenario " + name);
        RepairJob a = (RepairJob) s[0];
        RepairJob b = (RepairJob) s[1];
        String[] repairArgs = (String[]) s[2];
        File dir = new File(out, name);
        dir.mkdirs();
        File graphA = new File(dir, "graph-a.json");
        File graphB = new File(dir, "graph-b.json");
        Main.write(graphA, SpecDumper.spec(a.build(conf, "job-a")));
        Main.write(graphB, SpecDumper.spec(b.build(conf, "job-b")));
        Map<String, Object> outcome = new LinkedHashMap<>();
        outcome.put("scenario", name);
        Map<String, Object> savepoint;
        if (name.startsWith("cross-version-")) {
            if (crossPointer == null) throw new IllegalArgumentException(name + " needs --cross");
            savepoint = new LinkedHashMap<>();
            savepoint.put("pointer", crossPointer);
            savepoint.put("numbers", crossNumbers);
            savepoint.put("job_a", "the other release's job A (uid-renamed)");
        } else {
            savepoint = takeSavepoint(out, name, a);
        }
        outcome.put("savepoint", savepoint);
        String pointer = (String) savepoint.get("pointer");
        Map<String, Object> plain = restore(b, pointer, false);
        outcome.put("restore", plain);
        if (!"FINISHED".equals(plain.get("status"))) outcome.put("restore_allow_non_restored_state", restore(b, pointer, true));
        File repaired = new File(new File(out, "repaired"), name);
        List<String> cmd = new ArrayList<>(Arrays.asList(python, "-m", "upgrade_gate", "repair", "--savepoint",
                pointer, "--graph", graphB.getPath(), "--flink-version", flinkVersion, "--format", "json",
                "--output", repaired.getPath()));
        for (String arg : repairArgs) {
            if (arg.equals("--old-graph")) {
                cmd.add(arg);
                cmd.add(graphA.getPath());
            } else {
                cmd.add(arg);
            }
        }
        Map<String, Object> repair = new LinkedHashMap<>();
        repair.put("arguments", Arrays.asList(repairArgs));
        Process p = new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.INHERIT).start();
        String stdout;
        try (InputStream in = p.getInputStream()) {
            ByteArrayOutputStream buf = new ByteArrayOutputStream();
            in.transferTo(buf);
            stdout = buf.toString(StandardCharsets.UTF_8);
        }
        int exit = p.waitFor();
        repair.put("exit_code", exit);
        repair.put("output", stdout); // JSON text: flink_bridge/generate_repairs.py keeps it parsed
        outcome.put("repair", repair);
        if (exit == 0 && new File(repaired, "_metadata").isFile()) { // exit 0 without output: nothing to repair
            outcome.put("restore_repaired", restore(b, repaired.toURI().toString(), false));
        }
        Main.write(new File(dir, "outcome.json"), outcome);
    }

    private static Map<String, Object> takeSavepoint(File out, String name, RepairJob a) throws Exception {
        Report.clear();
        JobGraph jg = StreamingJobGraphGenerator.createJobGraph(a.build(conf, "job-a-" + name));
        JobID id = cluster.submitJob(jg).get().getJobID();
        for (int i = 0; i < 1200; i++) {
            JobStatus st = status(id);
            if (st.isGloballyTerminalState()) throw new IllegalStateException("job A of " + name + " ended: " + st);
            if (st == JobStatus.RUNNING && Report.reporters("restore") >= a.reporters()) break;
            Thread.sleep(50);
        }
        Thread.sleep(900); // about 900 of the 3,200 numbers: some splits read, the enumerator still holds the rest
        String target = new File(new File(out, "savepoints"), name).toURI().toString();
        String pointer = null;
        Exception last = null;
        for (int attempt = 0; attempt < 40 && pointer == null; attempt++) {
            try {
                pointer = cluster.triggerSavepoint(id, target, false, SavepointFormatType.CANONICAL).get();
            } catch (Exception e) {
                last = e;
                Thread.sleep(100);
            }
        }
        if (pointer == null) throw new IllegalStateException("no savepoint for " + name, last);
        Map<String, Object> snapshot = Report.collect("snapshot");
        stop(id);
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("pointer", pointer);
        m.put("snapshot", snapshot);
        m.put("numbers", reported("snapshot", "numbers"));
        return m;
    }

    /** Job B from `pointer`, run to the end of its input (or its failure); what it restored and what it ended with. */
    private static Map<String, Object> restore(RepairJob b, String pointer, boolean allowNonRestored) throws Exception {
        Report.clear();
        JobGraph jg = StreamingJobGraphGenerator.createJobGraph(b.build(conf, "job-b"));
        jg.setSavepointRestoreSettings(SavepointRestoreSettings.forPath(pointer, allowNonRestored));
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("allow_non_restored_state", allowNonRestored);
        JobID id = cluster.submitJob(jg).get().getJobID();
        JobStatus st = status(id);
        for (int i = 0; i < 1200 && !st.isGloballyTerminalState(); i++) { // 60 s: the input takes about 2 s
            Thread.sleep(50);
            st = status(id);
        }
        m.put("status", st.name());
        m.put("restored", Report.collect("restore"));
        m.put("end", Report.collect("end"));
        Map<String, Object> totals = new LinkedHashMap<>();
        totals.put("numbers_restored", reported("restore", "numbers"));
        totals.put("bad_keys_restored", reported("restore", "bad_keys"));
        totals.put("bad_elements_restored", reported("restore", "bad_elements"));
        totals.put("numbers_at_end", reported("end", "numbers"));
        totals.put("duplicates", reported("end", "duplicates"));
        totals.put("records_received", reported("end", "received"));
        totals.put("bad_keys_at_end", reported("end", "bad_keys"));
        totals.put("timers_restored", reported("restore", "timers"));
        totals.put("sum_keys_restored", reported("restore", "sum_keys"));
        totals.put("bad_timers_restored", reported("restore", "bad_timers"));
        totals.put("timers_at_end", reported("end", "timers"));
        totals.put("bad_timers_at_end", reported("end", "bad_timers"));
        totals.put("numbers_in_input", RepairFunctions.NUMBERS);
        m.put("totals", totals);
        if (st.isGloballyTerminalState()) {
            JobResult r = cluster.requestJobResult(id).get();
            if (r.getSerializedThrowable().isPresent()) {
                m.put("error_chain", Main.chain(r.getSerializedThrowable().get().deserializeError(
                        RepairMain.class.getClassLoader())));
            }
        }
        stop(id);
        return m;
    }
}

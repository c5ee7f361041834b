package ugate.checkpoints;

import org.apache.flink.api.common.JobID;
import org.apache.flink.api.common.JobStatus;
import org.apache.flink.configuration.ConfigOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.core.execution.SavepointFormatType;
import org.apache.flink.runtime.executiongraph.AccessExecutionGraph;
import org.apache.flink.runtime.executiongraph.AccessExecutionJobVertex;
import org.apache.flink.runtime.jobgraph.JobGraph;
import org.apache.flink.runtime.jobgraph.SavepointRestoreSettings;
import org.apache.flink.runtime.jobmaster.JobResult;
import org.apache.flink.runtime.minicluster.MiniCluster;
import org.apache.flink.runtime.minicluster.MiniClusterConfiguration;
import org.apache.flink.streaming.api.graph.StreamingJobGraphGenerator;
import upgradegate.bridge.Json;
import upgradegate.bridge.SpecDumper;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.Consumer;
import java.util.stream.Stream;

/**
 * Real restores from snapshots of jobs whose state is not what a plain savepoint holds: FLIP-147
 * (a bounded source finished before the snapshot), unaligned checkpoints with in-flight data, and
 * retained incremental RocksDB checkpoints (native format) restored in NO_CLAIM and CLAIM mode.
 *
 * <p>Per family one MiniCluster: job A runs, its snapshot is taken (a savepoint and/or checkpoints
 * retained on cancellation), A is cancelled, its checkpoint folder is copied to
 * {@code <out>/<family>/pristine/} before any restore (CLAIM may delete from it), and each scenario's
 * job B is submitted from the snapshot without and (if that fails) with allowNonRestoredState.
 * Writes {@code <out>/<scenario>/outcome.json}, {@code graph-a.json}, {@code graph-b.json}.
 *
 * <p>Usage: {@code CheckpointRestores <out-dir> family...}
 */
public final class CheckpointRestores {
    private CheckpointRestores() {}

    private static MiniCluster cluster;

    public static void main(String[] args) throws Exception {
        File out = new File(args[0]);
        for (int i = 1; i < args.length; i++) {
            try {
                runFamily(out, args[i]);
            } catch (Exception e) {
                e.printStackTrace();
                System.out.println(args[i] + "\tERROR\t" + String.valueOf(e).replace('\n', ' '));
            }
            System.out.flush();
        }
        System.exit(0);
    }

    private static void put(Configuration c, String key, String value) {
        c.set(ConfigOptions.key(key).stringType().noDefaultValue(), value);
    }

    private static Configuration configuration(File base, String family) {
        Configuration c = new Configuration();
        put(c, "state.backend.type", family.equals("rocksdb") ? "rocksdb" : "hashmap");
        put(c, "execution.checkpointing.dir", new File(base, "checkpoints").toURI().toString());
        put(c, "execution.checkpointing.savepoint-dir", new File(base, "savepoints").toURI().toString());
        // checkpoints only when triggered below; but a finishing task waits for a checkpoint after it
        // ended (FLIP-147's final checkpoint), so the finished family checkpoints every second
        put(c, "execution.checkpointing.interval", family.equals("finished") ? "1s" : "1h");
        put(c, "execution.checkpointing.externalized-checkpoint-retention", "RETAIN_ON_CANCELLATION");
        put(c, "execution.checkpointing.num-retained", "2");
        // RocksDB's SSTs must be files under shared/, not bytes inline in _metadata; the others inline
        put(c, "state.storage.fs.memory-threshold", family.equals("rocksdb") ? "0b" : "20kb");
        if (family.equals("rocksdb")) {
            put(c, "execution.checkpointing.incremental", "true");
            put(c, "state.backend.rocksdb.memory.managed", "true");
        }
        if (family.equals("unaligned")) {
            put(c, "execution.checkpointing.unaligned.enabled", "true");
            put(c, "execution.checkpointing.aligned-checkpoint-timeout", "0s");
        }
        put(c, "restart-strategy.type", "none");
        // few, small network buffers: the in-flight data an unaligned checkpoint persists stays small
        put(c, "taskmanager.memory.segment-size", "4kb");
        put(c, "taskmanager.network.memory.buffers-per-channel", "1");
        put(c, "taskmanager.network.memory.floating-buffers-per-gate", "2");
        put(c, "taskmanager.network.memory.max-buffers-per-channel", "2");
        put(c, "taskmanager.memory.network.min", "64mb");
        put(c, "taskmanager.memory.network.max", "64mb");
        put(c, "taskmanager.memory.managed.size", "256mb");
        return c;
    }

    private static Jobs.Spec spec(String family, Consumer<Jobs.Spec> change) {
        Jobs.Spec s = new Jobs.Spec(family);
        change.accept(s);
        return s;
    }

    /** scenario -> [job B, snapshot ("savepoint" | "checkpoint"), claim mode]. */
    private static Map<String, Object[]> scenarios(String family) {
        Map<String, Object[]> m = new LinkedHashMap<>();
        switch (family) {
            case "finished":
                m.put("finished-identical", new Object[] {spec(family, s -> {}), "savepoint", "NO_CLAIM"});
                m.put("finished-identical-from-checkpoint", new Object[] {spec(family, s -> {}), "checkpoint", "NO_CLAIM"});
                m.put("finished-chain-split", new Object[] {spec(family, s -> s.tagNewChain = true), "savepoint", "NO_CLAIM"});
                m.put("finished-operator-added-chained", new Object[] {spec(family, s -> s.addedChained = true), "savepoint", "NO_CLAIM"});
                m.put("finished-operator-added-unchained", new Object[] {spec(family, s -> s.addedUnchained = true), "savepoint", "NO_CLAIM"});
                m.put("finished-rescaled", new Object[] {spec(family, s -> s.parallelism = 3), "savepoint", "NO_CLAIM"});
                break;
            case "unaligned":
                m.put("unaligned-identical", new Object[] {spec(family, s -> {}), "checkpoint", "NO_CLAIM"});
                m.put("unaligned-rescale-up", new Object[] {spec(family, s -> s.parallelism = 3), "checkpoint", "NO_CLAIM"});
                m.put("unaligned-rescale-down", new Object[] {spec(family, s -> s.parallelism = 1), "checkpoint", "NO_CLAIM"});
                m.put("unaligned-partitioner-keyby", new Object[] {spec(family, s -> s.exchange = "keyby"), "checkpoint", "NO_CLAIM"});
                m.put("unaligned-partitioner-rescale", new Object[] {spec(family, s -> s.exchange = "rescale"), "checkpoint", "NO_CLAIM"});
                m.put("unaligned-partitioner-rescale-rescaled", new Object[] {spec(family, s -> { s.exchange = "rescale"; s.downstreamParallelism = 4; }), "checkpoint", "NO_CLAIM"});
                m.put("unaligned-exchange-now-chained", new Object[] {spec(family, s -> s.exchange = "forward"), "checkpoint", "NO_CLAIM"});
                m.put("unaligned-operator-added-upstream", new Object[] {spec(family, s -> s.addedUpstream = true), "checkpoint", "NO_CLAIM"});
                m.put("unaligned-operator-added-downstream", new Object[] {spec(family, s -> s.addedDownstream = true), "checkpoint", "NO_CLAIM"});
                break;
            case "rocksdb":
                m.put("ckpt-no-claim", new Object[] {spec(family, s -> {}), "checkpoint", "NO_CLAIM"});
                m.put("ckpt-rescale", new Object[] {spec(family, s -> s.parallelism = 3), "checkpoint", "NO_CLAIM"});
                m.put("ckpt-uid-changed", new Object[] {spec(family, s -> s.keyedUid = "keyed-v2"), "checkpoint", "NO_CLAIM"});
                m.put("ckpt-claim", new Object[] {spec(family, s -> {}), "checkpoint", "CLAIM"}); // last: may delete
                break;
            default:
                throw new IllegalArgumentException("unknown family " + family);
        }
        return m;
    }

    private static void write(File f, Object json) throws Exception {
        f.getParentFile().mkdirs();
        Files.write(f.toPath(), (Json.write(json) + "\n").getBytes(StandardCharsets.UTF_8));
    }

    private static JobStatus status(JobID id) throws Exception {
        return cluster.getJobStatus(id).get();
    }

    private static void cancel(JobID id) throws Exception {
        if (!status(id).isGloballyTerminalState()) {
            try {
                cluster.cancelJob(id).get();
            } catch (Exception ignored) {
                // already terminal
            }
        }
        for (int i = 0; i < 600 && !status(id).isGloballyTerminalState(); i++) Thread.sleep(50);
    }

    private static Map<String, Object> vertexStates(JobID id) throws Exception {
        Map<String, Object> m = new TreeMap<>();
        AccessExecutionGraph g = cluster.getExecutionGraph(id).get();
        for (AccessExecutionJobVertex v : g.getVerticesTopologically()) m.put(v.getName(), v.getAggregateState().name());
        return m;
    }

    /** Wait until the probes stop reporting new lines for a while (every restored operator opened). */
    private static void settle(JobID id) throws Exception {
        int last = -1;
        long stableSince = System.currentTimeMillis();
        for (int i = 0; i < 300; i++) {
            if (status(id).isGloballyTerminalState()) return;
            int n = Rep.size();
            if (n != last) {
                last = n;
                stableSince = System.currentTimeMillis();
            } else if (status(id) == JobStatus.RUNNING && System.currentTimeMillis() - stableSince > 1500) {
                return;
            }
            Thread.sleep(100);
        }
    }

    private static String retry(java.util.concurrent.Callable<String> call, String what) throws Exception {
        Exception last = null;
        for (int attempt = 0; attempt < 40; attempt++) {
            try {
                return call.call();
            } catch (Exception e) {
                last = e;
                Thread.sleep(250);
            }
        }
        throw new IllegalStateException("no " + what, last);
    }

    private static boolean boundedFinished(JobID id) throws Exception {
        AccessExecutionGraph g = cluster.getExecutionGraph(id).get();
        for (AccessExecutionJobVertex v : g.getVerticesTopologically()) {
            if (v.getName().contains("bounded")) return v.getAggregateState().name().equals("FINISHED");
        }
        return false;
    }

    private static void runFamily(File out, String family) throws Exception {
        File base = new File(out, "_" + family);
        Configuration conf = configuration(base, family);
        cluster = new MiniCluster(new MiniClusterConfiguration.Builder().setConfiguration(conf)
                .setNumTaskManagers(1).setNumSlotsPerTaskManager(100).build());
        cluster.start();
        try {
            Map<String, Object> snapshot = new LinkedHashMap<>();
            Jobs.Spec a = new Jobs.Spec(family);
            Rep.clear();
            JobID id = cluster.submitJob(StreamingJobGraphGenerator.createJobGraph(Jobs.build(conf, a, "job-a-" + family)))
                    .get().getJobID();
            for (int i = 0; i < 600 && status(id) != JobStatus.RUNNING; i++) Thread.sleep(50);
            Thread.sleep(3000);
            if (family.equals("finished")) {
                for (int i = 0; i < 600 && !boundedFinished(id); i++) Thread.sleep(50);
                snapshot.put("bounded_finished_before_snapshot", boundedFinished(id));
                Rep.clear();
                String target = new File(base, "savepoints").toURI().toString();
                snapshot.put("savepoint", retry(() -> cluster.triggerSavepoint(id, target, false,
                        SavepointFormatType.CANONICAL).get(), "savepoint"));
                snapshot.put("savepoint_reports", Rep.collect("snapshot"));
                Rep.clear();
                snapshot.put("checkpoint", retry(() -> cluster.triggerCheckpoint(id).get(), "checkpoint"));
            } else {
                int n = family.equals("rocksdb") ? 3 : 1;
                String last = null;
                for (int k = 0; k < n; k++) {
                    Rep.clear();
                    last = retry(() -> cluster.triggerCheckpoint(id).get(), "checkpoint");
                    Thread.sleep(700);
                }
                snapshot.put("checkpoint", last);
            }
            snapshot.put("checkpoint_reports", Rep.collect("snapshot"));
            snapshot.put("job_a_vertices", vertexStates(id));
            cancel(id);
            snapshot.put("job_id", id.toHexString());
            Path jobDir = new File(new File(base, "checkpoints"), id.toHexString()).toPath();
            Path pristine = new File(base, "pristine").toPath();
            copyTree(jobDir, pristine);
            snapshot.put("job_dir", jobDir.toUri().toString());
            write(new File(base, "snapshot.json"), snapshot);
            for (Map.Entry<String, Object[]> e : scenarios(family).entrySet()) {
                try {
                    runScenario(out, conf, family, a, e.getKey(), e.getValue(), snapshot, jobDir);
                    System.out.println(e.getKey() + "\tOK");
                } catch (Exception ex) {
                    ex.printStackTrace();
                    System.out.println(e.getKey() + "\tERROR\t" + String.valueOf(ex).replace('\n', ' '));
                }
                System.out.flush();
            }
        } finally {
            cluster.close();
        }
    }

    private static void copyTree(Path from, Path to) throws IOException {
        try (Stream<Path> walk = Files.walk(from)) {
            for (Path p : (Iterable<Path>) walk::iterator) {
                Path dest = to.resolve(from.relativize(p).toString());
                if (Files.isDirectory(p)) Files.createDirectories(dest);
                else Files.copy(p, dest);
            }
        }
    }

    private static List<String> files(Path root) throws IOException {
        List<String> out = new ArrayList<>();
        if (!Files.isDirectory(root)) return out;
        try (Stream<Path> walk = Files.walk(root)) {
            walk.filter(Files::isRegularFile).forEach(p -> out.add(root.relativize(p).toString()));
        }
        java.util.Collections.sort(out);
        return out;
    }

    private static void runScenario(File out, Configuration conf, String family, Jobs.Spec a, String name,
                                    Object[] how, Map<String, Object> snapshot, Path jobDir) throws Exception {
        Jobs.Spec b = (Jobs.Spec) how[0];
        String kind = (String) how[1];
        String claim = (String) how[2];
        File dir = new File(out, name);
        dir.mkdirs();
        write(new File(dir, "graph-a.json"), SpecDumper.spec(Jobs.build(conf, a, "job-a-" + family)));
        write(new File(dir, "graph-b.json"), SpecDumper.spec(Jobs.build(conf, b, "job-b")));
        String pointer = (String) snapshot.get(kind);
        Map<String, Object> outcome = new LinkedHashMap<>();
        outcome.put("scenario", name);
        outcome.put("family", family);
        outcome.put("snapshot_kind", kind);
        outcome.put("pointer", pointer);
        outcome.put("claim_mode", claim);
        outcome.put("snapshot_reports", snapshot.get(kind.equals("savepoint") ? "savepoint_reports" : "checkpoint_reports"));
        List<String> before = files(jobDir);
        Map<String, Object> plain = restore(conf, b, pointer, false, claim);
        outcome.put("restore", plain);
        if (!"RUNNING".equals(plain.get("status"))) {
            outcome.put("restore_allow_non_restored_state", restore(conf, b, pointer, true, claim));
        }
        List<String> after = files(jobDir);
        List<String> deleted = new ArrayList<>(before);
        deleted.removeAll(after);
        outcome.put("snapshot_files_before", before.size());
        outcome.put("snapshot_files_deleted_by_job_b", deleted);
        write(new File(dir, "outcome.json"), outcome);
    }

    private static Map<String, Object> restore(Configuration conf, Jobs.Spec b, String pointer, boolean allow,
                                               String claim) throws Exception {
        Rep.clear();
        JobGraph jg = StreamingJobGraphGenerator.createJobGraph(Jobs.build(conf, b, "job-b"));
        Configuration rc = new Configuration();
        put(rc, "execution.state-recovery.path", pointer);
        put(rc, "execution.state-recovery.ignore-unclaimed-state", String.valueOf(allow));
        put(rc, "execution.state-recovery.claim-mode", claim);
        jg.setSavepointRestoreSettings(SavepointRestoreSettings.fromConfiguration(rc));
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("allow_non_restored_state", allow);
        m.put("claim_mode", jg.getSavepointRestoreSettings().toString());
        JobID id;
        try {
            id = cluster.submitJob(jg).get().getJobID();
        } catch (Exception e) {
            m.put("status", "SUBMISSION_FAILED");
            m.put("error_chain", chain(e));
            return m;
        }
        for (int i = 0; i < 600 && !status(id).isGloballyTerminalState() && status(id) != JobStatus.RUNNING; i++) {
            Thread.sleep(50);
        }
        settle(id);
        JobStatus s = status(id);
        m.put("status", s.name());
        m.put("restored", Rep.collect("restore"));
        if (s == JobStatus.RUNNING) {
            m.put("vertices", vertexStates(id));
            // a few checkpoints of job B: in CLAIM mode Flink may now delete the restored checkpoint
            List<String> taken = new ArrayList<>();
            for (int k = 0; k < 3; k++) {
                try {
                    taken.add(cluster.triggerCheckpoint(id).get(60, java.util.concurrent.TimeUnit.SECONDS));
                } catch (Exception e) {
                    taken.add("failed: " + e.getClass().getSimpleName());
                }
            }
            m.put("checkpoints_after_restore", taken.size());
        }
        if (s.isGloballyTerminalState()) {
            JobResult r = cluster.requestJobResult(id).get();
            if (r.getSerializedThrowable().isPresent()) {
                m.put("error_chain", chain(r.getSerializedThrowable().get()
                        .deserializeError(CheckpointRestores.class.getClassLoader())));
            }
        }
        cancel(id);
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

package ugate.savepoints;

import org.apache.flink.api.common.JobStatus;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.StateBackendOptions;
import org.apache.flink.configuration.StateRecoveryOptions;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

import java.io.File;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Restores a {@link StateSchemas} savepoint into the same job on this Flink and records, per state, whether the
 * restored values are what they must be: every value names its key (a keyed value is written from a record
 * {@code v} of key {@code v % 8}, and carries {@code v} twice, e.g. {@code Tagged(v, "g" + v)}), so a misread shows
 * as a value of the wrong key, a broken redundant copy, a missing collection element or an exception.
 * {@code StateSchemaRestore <savepoint-dir> <backend> <parallelism> [skip,...]} prints one JSON object (`skip`:
 * parts of the job restored without their state, see {@link StateSchemas#job(StreamExecutionEnvironment, Set)}):
 * {@code {"status": "RUNNING" | "FAILED: ...", "states": {name: "OK" | "BAD: ..." | "MISSING"}, "counts": {...}}}.
 */
public final class StateSchemaRestore {
    private StateSchemaRestore() {}

    static volatile boolean VERIFY;
    private static final Map<String, String> RESULTS = new ConcurrentHashMap<>();
    private static final Map<String, AtomicInteger> COUNTS = new ConcurrentHashMap<>();
    /** The states each part of the job checks (timers are not values one can check). */
    private static final Map<String, Integer> CHECKED = Map.of("keyed", 13, "broadcast", 1, "operator", 2);

    /** The first non-OK outcome of a state wins. */
    static void record(String state, String outcome) {
        RESULTS.merge(state, outcome, (old, now) -> old.equals("OK") ? now : old);
    }

    static void count(String state, int n) {
        COUNTS.computeIfAbsent(state, k -> new AtomicInteger()).addAndGet(n);
    }

    /** The root cause of the job's failure (Flink's own exception), else of `fallback`. */
    private static String failure(JobClient client, Exception fallback) {
        Throwable t = fallback;
        try {
            client.getJobExecutionResult().get();
        } catch (Exception e) {
            t = e;
        }
        if (t == null) return "job ended";
        while (t.getCause() != null) t = t.getCause();
        return t.toString();
    }

    public static void main(String[] args) throws Exception {
        File savepoint = new File(args[0]).getAbsoluteFile();
        String backend = args[1];
        int parallelism = Integer.parseInt(args[2]);
        Set<String> skip = new HashSet<>(args.length > 3 && !args[3].isEmpty() ? Arrays.asList(args[3].split(","))
                                                                              : Collections.<String>emptyList());
        int expected = 0;
        for (Map.Entry<String, Integer> e : CHECKED.entrySet()) if (!skip.contains(e.getKey())) expected += e.getValue();
        VERIFY = true;
        Configuration c = new Configuration();
        c.set(StateBackendOptions.STATE_BACKEND, backend);
        c.set(StateRecoveryOptions.SAVEPOINT_PATH, savepoint.toURI().toString());
        c.set(StateRecoveryOptions.SAVEPOINT_IGNORE_UNCLAIMED_STATE, !skip.isEmpty());
        TaggedKryoSerializer.register(c);
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(c);
        TaggedKryoSerializer.register(env);
        env.setParallelism(parallelism);
        env.setMaxParallelism(128);
        StateSchemas.job(env, skip);
        JobClient client = env.executeAsync("state-schemas-restore");
        String status = "RUNNING";
        long deadline = System.currentTimeMillis() + 90_000;
        while (System.currentTimeMillis() < deadline && RESULTS.size() < expected) {
            JobStatus s;
            try {
                s = client.getJobStatus().get();
            } catch (Exception e) { // the MiniCluster shuts down with a failed job: ask the result why
                status = "FAILED: " + failure(client, e);
                break;
            }
            if (s.isGloballyTerminalState()) {
                status = "FAILED: " + failure(client, null);
                break;
            }
            Thread.sleep(200);
        }
        if (status.equals("RUNNING")) {
            Thread.sleep(1000); // let the other subtasks check their keys too
            try {
                client.cancel().get();
            } catch (Exception e) {
                // already gone
            }
        }
        Map<String, Object> out = new java.util.LinkedHashMap<>();
        out.put("status", status);
        out.put("states", new TreeMap<>(RESULTS));
        Map<String, Object> counts = new TreeMap<>();
        COUNTS.forEach((k, v) -> counts.put(k, v.get()));
        out.put("counts", counts);
        System.out.println(FlinkView.Json.write(out));
        System.out.flush();
        System.exit(0);
    }
}

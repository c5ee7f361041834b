package ugate.savepoints;

import org.apache.flink.api.common.JobStatus;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.state.StateDescriptor;
import org.apache.flink.api.common.state.StateTtlConfig;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.StateRecoveryOptions;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.util.Collector;

import java.io.File;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * State TTL turned on, turned off or its duration changed between two versions of one job, restored by real Flink
 * of the same release: what the gate's TTL rules by release (upgrade_gate/gate/release_rules.py) are made of.
 *
 * <p>The keyed operator (uid {@code ttl}, keys {@code v % 8}) holds a {@code value} (ValueState&lt;Long&gt;), a
 * {@code list} (ListState&lt;Long&gt;) and a {@code map} (MapState&lt;Long, Long&gt;), each with a value fixed by its key,
 * so a restored job can check every one. A job's TTL set-up is written {@code <value>-<list>-<map>}, each
 * {@code off}, {@code 1d} or {@code 2d} (a {@link StateTtlConfig} of that many days: nothing expires during a run).
 *
 * <p>Tasks as in {@link SchemaChanges}: {@code write:<dir>:<backend>:<ttl>} prints the savepoint path,
 * {@code restore:<savepoint-dir>:<backend>:<ttl>} prints
 * {@code {"status": "RUNNING" | "FAILED: <root cause>", "states": {name: "OK" | "BAD: ..." | "MISSING"}}}: a
 * restore that runs but reads a value back empty or different is not a successful one.
 */
public final class TtlChanges {
    private TtlChanges() {}

    private static final int KEYS = 8;
    static final String[] STATES = {"value", "list", "map"};

    public static void main(String[] args) throws Exception {
        for (String task : args) {
            String[] p = task.split(":", 4);
            String out;
            try {
                out = p[0].equals("write") ? write(new File(p[1]), p[2], p[3]) : restore(new File(p[1]), p[2], p[3]);
            } catch (Exception e) {
                e.printStackTrace();
                out = "ERROR\t" + String.valueOf(e).replace('\n', ' ');
            }
            System.out.println(task + "\t" + out);
            System.out.flush();
        }
        System.exit(0);
    }

    static String write(File dir, String backend, String ttl) throws Exception {
        SchemaChanges.verify = false;
        dir.mkdirs();
        Configuration c = SchemaChanges.config(backend);
        c.set(CheckpointingOptions.CHECKPOINTS_DIRECTORY, new File(dir, "checkpoints").toURI().toString());
        StreamExecutionEnvironment env = SchemaChanges.env(c);
        job(env, ttl);
        JobClient client = env.executeAsync("ttl-" + ttl);
        return SchemaChanges.savepointOf(client, dir);
    }

    /** The job restored from `savepoint`: RUNNING with every key's values checked, or Flink's root cause. */
    static String restore(File savepoint, String backend, String ttl) throws Exception {
        SchemaChanges.verify = true;
        SchemaChanges.RESULTS.clear();
        SchemaChanges.CHECKED_KEYS.clear();
        Configuration c = SchemaChanges.config(backend);
        c.set(StateRecoveryOptions.SAVEPOINT_PATH, SchemaChanges.savepointIn(savepoint).toURI().toString());
        StreamExecutionEnvironment env = SchemaChanges.env(c);
        job(env, ttl);
        return SchemaChanges.awaitChecked(env.executeAsync("ttl-restore-" + ttl));
    }

    static void job(StreamExecutionEnvironment env, String ttl) {
        DataStream<Long> numbers = env.fromSequence(0, Long.MAX_VALUE).uid("numbers").name("numbers")
                .map(new Functions.Throttle(5)).uid("throttle").name("throttle");
        KeySelector<Long, Long> byNumber = v -> v % KEYS;
        numbers.keyBy(byNumber, Types.LONG).process(new Holder(ttl)).uid("ttl").name("ttl")
                .sinkTo(new DiscardingSink<>()).name("sink");
    }

    /** `off` -> null, `<n>d` -> a TTL of n days, refreshed on write, expired values never returned. */
    static StateTtlConfig ttlOf(String spec) {
        if (spec.equals("off")) return null;
        long days = Long.parseLong(spec.substring(0, spec.length() - 1));
        return StateTtlConfig.newBuilder(Duration.ofDays(days))
                .setUpdateType(StateTtlConfig.UpdateType.OnCreateAndWrite)
                .setStateVisibility(StateTtlConfig.StateVisibility.NeverReturnExpired)
                .build();
    }

    static <D extends StateDescriptor<?, ?>> D withTtl(D d, String spec) {
        StateTtlConfig t = ttlOf(spec);
        if (t != null) d.enableTimeToLive(t);
        return d;
    }

    static List<Long> listOf(long k) {
        return List.of(k, k + 100, k + 200);
    }

    static Map<Long, Long> mapOf(long k) {
        Map<Long, Long> m = new HashMap<>();
        m.put(k, k * 10);
        m.put(k + 1, k * 10 + 1);
        return m;
    }

    static final class Holder extends KeyedProcessFunction<Long, Long, Long> {
        private final String[] ttl;
        private transient ValueState<Long> value;
        private transient ListState<Long> list;
        private transient MapState<Long, Long> map;

        Holder(String ttl) {
            this.ttl = ttl.split("-");
            if (this.ttl.length != 3) throw new IllegalArgumentException("TTL set-up <value>-<list>-<map>: " + ttl);
        }

        @Override public void open(OpenContext ctx) {
            value = getRuntimeContext().getState(withTtl(new ValueStateDescriptor<>("value", Types.LONG), ttl[0]));
            list = getRuntimeContext().getListState(withTtl(new ListStateDescriptor<>("list", Types.LONG), ttl[1]));
            map = getRuntimeContext().getMapState(
                    withTtl(new MapStateDescriptor<>("map", Types.LONG, Types.LONG), ttl[2]));
        }

        private static void record(String state, String outcome) {
            SchemaChanges.RESULTS.merge(state, outcome, (old, now) -> old.equals("OK") ? now : old);
        }

        @Override public void processElement(Long v, Context ctx, Collector<Long> out) throws Exception {
            long k = ctx.getCurrentKey();
            if (SchemaChanges.verify) {
                if (!SchemaChanges.CHECKED_KEYS.contains(k)) {
                    try {
                        Long got = value.value();
                        record("value", got == null ? "MISSING" : got == k * 1000 + 7 ? "OK" : "BAD: " + got);
                    } catch (Exception e) {
                        record("value", "BAD: reading it threw " + e);
                    }
                    try {
                        List<Long> got = new ArrayList<>();
                        Iterable<Long> it = list.get();
                        if (it != null) it.forEach(got::add);
                        record("list", got.isEmpty() ? "MISSING" : got.equals(listOf(k)) ? "OK" : "BAD: " + got);
                    } catch (Exception e) {
                        record("list", "BAD: reading it threw " + e);
                    }
                    try {
                        Map<Long, Long> got = new TreeMap<>();
                        for (Map.Entry<Long, Long> e : map.entries()) got.put(e.getKey(), e.getValue());
                        record("map", got.isEmpty() ? "MISSING" : got.equals(new TreeMap<>(mapOf(k))) ? "OK"
                                : "BAD: " + got);
                    } catch (Exception e) {
                        record("map", "BAD: reading it threw " + e);
                    }
                    SchemaChanges.CHECKED_KEYS.add(k);
                }
            } else {
                value.update(k * 1000 + 7);
                list.update(listOf(k));
                if (map.isEmpty()) map.putAll(mapOf(k));
            }
            out.collect(v);
        }
    }
}

package ugate.savepoints;

import org.apache.flink.api.common.JobStatus;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.MemorySize;
import org.apache.flink.configuration.StateBackendOptions;
import org.apache.flink.configuration.StateRecoveryOptions;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.core.execution.SavepointFormatType;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.table.data.GenericRowData;
import org.apache.flink.table.data.RowData;
import org.apache.flink.table.data.StringData;
import org.apache.flink.table.runtime.typeutils.InternalTypeInfo;
import org.apache.flink.table.types.logical.BigIntType;
import org.apache.flink.table.types.logical.IntType;
import org.apache.flink.table.types.logical.VarCharType;
import org.apache.flink.types.Row;
import org.apache.flink.util.Collector;

import java.io.File;
import java.lang.reflect.Field;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Same-version state schema changes, with real Flink: job A writes a savepoint; job B, whose state types changed,
 * restores it, and every restored value is checked. Job B also writes a savepoint of its own from scratch (what a
 * user gets from a staging run of the new job version): the pair a schema diff compares.
 *
 * <p>The keyed operator (uid {@code evolving}, keys {@code v % 8}) holds {@code account}, a POJO
 * ({@code ugate.evolving.Account}, whose variant the classpath of this run decides: base, field-added,
 * field-removed, field-retyped; see java/savepoints/variants/), {@code row}, a named {@link Row}, and
 * {@code rowdata}, SQL's internal {@link RowData} (flink-table-runtime's RowDataSerializer). A change is:
 * {@code none}, {@code pojo-field-added|removed|retyped} (the Account variant on the classpath),
 * {@code row-field-added}, {@code row-field-retyped} (the Row type), {@code rowdata-field-added},
 * {@code rowdata-field-retyped} (the RowData's logical types) or {@code key-retyped} (String keys).
 *
 * <p>{@code SchemaChanges <task>...}, a task being {@code write:<dir>:<backend>:<change>} (prints the savepoint
 * path) or {@code restore:<savepoint-dir>:<backend>:<change>} (prints
 * {@code {"status": "RUNNING" | "FAILED: <root cause>", "states": {name: "OK" | "BAD: ..." | "MISSING"}}}), one
 * tab-separated line per task.
 */
public final class SchemaChanges {
    private SchemaChanges() {}

    static volatile boolean verify;
    static final Map<String, String> RESULTS = new ConcurrentHashMap<>();
    static final Set<Object> CHECKED_KEYS = ConcurrentHashMap.newKeySet();
    private static final int KEYS = 8;

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

    static Configuration config(String backend) {
        Configuration c = new Configuration();
        c.set(StateBackendOptions.STATE_BACKEND, backend);
        c.set(CheckpointingOptions.INCREMENTAL_CHECKPOINTS, false);
        c.set(CheckpointingOptions.FS_SMALL_FILE_THRESHOLD, new MemorySize(1 << 20)); // inline handles: _metadata only
        return c;
    }

    static StreamExecutionEnvironment env(Configuration c) {
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(c);
        env.setParallelism(1);
        env.setMaxParallelism(128);
        return env;
    }

    /** Job `change` from scratch, one savepoint (canonical), cancelled: the savepoint's directory. */
    static String write(File dir, String backend, String change) throws Exception {
        verify = false;
        dir.mkdirs();
        Configuration c = config(backend);
        c.set(CheckpointingOptions.CHECKPOINTS_DIRECTORY, new File(dir, "checkpoints").toURI().toString());
        StreamExecutionEnvironment env = env(c);
        job(env, change);
        return savepointOf(env.executeAsync("schema-" + change), dir);
    }

    /** A canonical savepoint of the running job under `dir`/savepoints once it runs, then the job cancelled. */
    static String savepointOf(JobClient client, File dir) throws Exception {
        for (int i = 0; i < 600 && client.getJobStatus().get() != JobStatus.RUNNING; i++) Thread.sleep(100);
        Thread.sleep(2500);
        String target = new File(dir, "savepoints").toURI().toString();
        Exception last = null;
        for (int attempt = 0; attempt < 60; attempt++) {
            try {
                String path = client.triggerSavepoint(target, SavepointFormatType.CANONICAL).get();
                client.cancel().get();
                return path;
            } catch (Exception e) {
                last = e;
                Thread.sleep(500);
            }
        }
        client.cancel().get();
        throw new IllegalStateException("no savepoint for " + dir, last);
    }

    /** Job `change` restored from `savepoint`: RUNNING with every value checked, or Flink's root cause. */
    static String restore(File savepoint, String backend, String change) throws Exception {
        verify = true;
        RESULTS.clear();
        CHECKED_KEYS.clear();
        Configuration c = config(backend);
        c.set(StateRecoveryOptions.SAVEPOINT_PATH, savepointIn(savepoint).toURI().toString());
        StreamExecutionEnvironment env = env(c);
        job(env, change);
        return awaitChecked(env.executeAsync("schema-restore-" + change));
    }

    /** Waits until every key's restored values were checked (RUNNING, with RESULTS) or the job failed. */
    static String awaitChecked(JobClient client) throws Exception {
        String status = "RUNNING";
        long deadline = System.currentTimeMillis() + 90_000;
        while (System.currentTimeMillis() < deadline && CHECKED_KEYS.size() < KEYS) {
            JobStatus s;
            try {
                s = client.getJobStatus().get();
            } catch (Exception e) {
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
            if (CHECKED_KEYS.size() < KEYS) status = "TIMEOUT: " + CHECKED_KEYS.size() + " keys checked";
            try {
                client.cancel().get();
            } catch (Exception e) {
                // already gone
            }
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("status", status);
        out.put("states", status.equals("RUNNING") ? new TreeMap<>(RESULTS) : new TreeMap<>());
        return FlinkView.Json.write(out);
    }

    /** `dir` itself when it holds `_metadata`, else the one savepoint a `write` task left under it. */
    static File savepointIn(File dir) {
        dir = dir.getAbsoluteFile();
        if (new File(dir, "_metadata").isFile()) return dir;
        File[] found = new File(dir, "savepoints").listFiles((d, n) -> n.startsWith("savepoint-"));
        if (found == null || found.length != 1) throw new IllegalArgumentException("no single savepoint in " + dir);
        return found[0];
    }

    /** Flink's root cause of the job's failure (the exception its restore threw), else of `fallback`. */
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

    static void job(StreamExecutionEnvironment env, String change) throws Exception {
        DataStream<Long> numbers = env.fromSequence(0, Long.MAX_VALUE).uid("numbers").name("numbers")
                .map(new Functions.Throttle(5)).uid("throttle").name("throttle");
        DataStream<Long> out;
        if (change.equals("key-retyped")) {
            KeySelector<Long, String> byName = v -> "k" + (v % KEYS);
            out = numbers.keyBy(byName, Types.STRING).process(new Evolving<String>(change)).uid("evolving")
                    .name("evolving");
        } else {
            KeySelector<Long, Long> byNumber = v -> v % KEYS;
            out = numbers.keyBy(byNumber, Types.LONG).process(new Evolving<Long>(change)).uid("evolving")
                    .name("evolving");
        }
        out.sinkTo(new DiscardingSink<>()).name("sink");
    }

    static TypeInformation<Row> rowType(String change) {
        switch (change) {
            case "row-field-added":
                return Types.ROW_NAMED(new String[] {"id", "label", "extra"}, Types.LONG, Types.STRING, Types.INT);
            case "row-field-retyped":
                return Types.ROW_NAMED(new String[] {"id", "label"}, Types.LONG, Types.LONG);
            default:
                return Types.ROW_NAMED(new String[] {"id", "label"}, Types.LONG, Types.STRING);
        }
    }

    static Row row(String change, long v) {
        switch (change) {
            case "row-field-added":
                return Row.of(v, "r" + v, 7);
            case "row-field-retyped":
                return Row.of(v, v);
            default:
                return Row.of(v, "r" + v);
        }
    }

    static InternalTypeInfo<RowData> rowDataType(String change) {
        switch (change) {
            case "rowdata-field-added":
                return InternalTypeInfo.ofFields(new BigIntType(), new VarCharType(VarCharType.MAX_LENGTH), new IntType());
            case "rowdata-field-retyped":
                return InternalTypeInfo.ofFields(new BigIntType(), new BigIntType());
            default:
                return InternalTypeInfo.ofFields(new BigIntType(), new VarCharType(VarCharType.MAX_LENGTH));
        }
    }

    static RowData rowData(String change, long v) {
        switch (change) {
            case "rowdata-field-added":
                return GenericRowData.of(v, StringData.fromString("d" + v), 7);
            case "rowdata-field-retyped":
                return GenericRowData.of(v, v);
            default:
                return GenericRowData.of(v, StringData.fromString("d" + v));
        }
    }

    static boolean rowDataOk(RowData r, long k) {
        long id = r.getLong(0);
        return id % KEYS == k && ("d" + id).equals(r.getString(1).toString());
    }

    /** A value written from record `v` of job A must read back as its key's, with every kept field intact. */
    static boolean rowOk(Row r, long k) {
        long id = (Long) r.getField(0);
        return id % KEYS == k && ("r" + id).equals(String.valueOf(r.getField(1)));
    }

    static Class<?> accountClass() throws ClassNotFoundException {
        return Class.forName("ugate.evolving.Account");
    }

    /** An Account of whichever variant is on the classpath, its fields derived from `v`. */
    static Object account(long v) throws Exception {
        Object a = accountClass().getDeclaredConstructor().newInstance();
        for (Field f : accountClass().getFields()) {
            switch (f.getName()) {
                case "id": f.setLong(a, v); break;
                case "amount":
                    if (f.getType() == long.class) f.setLong(a, v * 3); else f.set(a, "a" + (v * 3));
                    break;
                case "owner": f.set(a, "o" + v); break;
                case "extra": f.setInt(a, 7); break;
                default: break;
            }
        }
        return a;
    }

    /** Restored from job A (base Account): kept fields as written, an added field at its default. */
    static boolean accountOk(Object a, long k) throws Exception {
        long id = accountClass().getField("id").getLong(a);
        boolean ok = id % KEYS == k && ("o" + id).equals(accountClass().getField("owner").get(a));
        for (Field f : accountClass().getFields()) {
            if (f.getName().equals("amount")) {
                ok &= f.getType() == long.class ? f.getLong(a) == id * 3 : ("a" + (id * 3)).equals(f.get(a));
            } else if (f.getName().equals("extra")) {
                ok &= f.getInt(a) == 0;
            }
        }
        return ok;
    }

    static String describe(Object a) {
        if (a == null) return "null";
        StringBuilder b = new StringBuilder(a.getClass().getSimpleName()).append('{');
        for (Field f : a.getClass().getFields()) {
            try {
                b.append(f.getName()).append('=').append(f.get(a)).append(' ');
            } catch (IllegalAccessException e) {
                b.append(f.getName()).append("=? ");
            }
        }
        return b.append('}').toString();
    }

    static final class Evolving<K> extends KeyedProcessFunction<K, Long, Long> {
        private final String change;
        private transient ValueState<Object> account;
        private transient ValueState<Row> row;
        private transient ValueState<RowData> rowData;

        Evolving(String change) { this.change = change; }

        @Override public void open(OpenContext ctx) throws Exception {
            @SuppressWarnings("unchecked")
            TypeInformation<Object> type = (TypeInformation<Object>) TypeInformation.of(accountClass());
            account = getRuntimeContext().getState(new ValueStateDescriptor<>("account", type));
            row = getRuntimeContext().getState(new ValueStateDescriptor<>("row", rowType(change)));
            rowData = getRuntimeContext().getState(new ValueStateDescriptor<>("rowdata", rowDataType(change)));
        }

        private static void record(String state, String outcome) {
            RESULTS.merge(state, outcome, (old, now) -> old.equals("OK") ? now : old);
        }

        @Override public void processElement(Long v, Context ctx, Collector<Long> out) throws Exception {
            long k = v % KEYS;
            if (verify) {
                if (!CHECKED_KEYS.contains(ctx.getCurrentKey())) {
                    try {
                        Object a = account.value();
                        record("account", a == null ? "MISSING" : accountOk(a, k) ? "OK" : "BAD: " + describe(a));
                    } catch (Exception e) {
                        record("account", "BAD: reading it threw " + e);
                    }
                    try {
                        Row r = row.value();
                        record("row", r == null ? "MISSING" : rowOk(r, k) ? "OK" : "BAD: " + r);
                    } catch (Exception e) {
                        record("row", "BAD: reading it threw " + e);
                    }
                    try {
                        RowData r = rowData.value();
                        record("rowdata", r == null ? "MISSING" : rowDataOk(r, k) ? "OK" : "BAD: " + r);
                    } catch (Exception e) {
                        record("rowdata", "BAD: reading it threw " + e);
                    }
                    CHECKED_KEYS.add(ctx.getCurrentKey());
                }
            } else {
                account.update(account(v));
                row.update(row(change, v));
                rowData.update(rowData(change, v));
            }
            out.collect(v);
        }
    }

    static List<String> changes() {
        return List.of("none", "pojo-field-added", "pojo-field-removed", "pojo-field-retyped", "row-field-added",
                       "row-field-retyped", "rowdata-field-added", "rowdata-field-retyped", "key-retyped");
    }
}

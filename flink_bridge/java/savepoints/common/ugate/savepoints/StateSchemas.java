package ugate.savepoints;

import org.apache.flink.api.common.JobStatus;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.functions.RichMapFunction;
import org.apache.flink.api.common.state.BroadcastState;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.state.ReducingState;
import org.apache.flink.api.common.state.ReducingStateDescriptor;
import org.apache.flink.api.common.state.StateTtlConfig;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.api.java.typeutils.GenericTypeInfo;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.ConfigOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.MemorySize;
import org.apache.flink.configuration.StateBackendOptions;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.core.execution.SavepointFormatType;
import org.apache.flink.runtime.state.FunctionInitializationContext;
import org.apache.flink.runtime.state.FunctionSnapshotContext;
import org.apache.flink.streaming.api.checkpoint.CheckpointedFunction;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.streaming.api.functions.co.BroadcastProcessFunction;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.types.Row;
import org.apache.flink.util.Collector;

import java.io.File;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Savepoints whose state covers the serializer families a state-schema reader must know: a Long value,
 * a POJO of primitives, a POJO with HashMap/ArrayList fields (Kryo inside a POJO), a generic HashMap and
 * an opaque class (Kryo), a class with a registered custom Kryo serializer, a tuple, a Row, an enum, TTL, reducing, list and map state, timers, operator
 * list and union state and broadcast state. {@code StateSchemas <staging-dir> <case>...} prints
 * {@code <case>\t<savepoint-dir>} per case, like {@link Generate}.
 */
public final class StateSchemas {
    private StateSchemas() {}

    public static void main(String[] args) throws Exception {
        File stage = new File(args[0]);
        for (String name : Arrays.copyOfRange(args, 1, args.length)) {
            File caseDir = new File(stage, name);
            caseDir.mkdirs();
            try {
                System.out.println(name + "\t" + runCase(name, caseDir));
            } catch (Exception e) {
                e.printStackTrace();
                System.out.println(name + "\tERROR\t" + String.valueOf(e).replace('\n', ' '));
            }
            System.out.flush();
        }
        System.exit(0);
    }

    private static String runCase(String name, File caseDir) throws Exception {
        switch (name) {
            case "hashmap-canonical-p2":
                return savepoint(caseDir, "hashmap", 1 << 20, 2, SavepointFormatType.CANONICAL);
            case "hashmap-canonical-files-p1":
                return savepoint(caseDir, "hashmap", 0, 1, SavepointFormatType.CANONICAL);
            case "rocksdb-canonical-p1":
                return savepoint(caseDir, "rocksdb", 1 << 20, 1, SavepointFormatType.CANONICAL);
            case "rocksdb-native-p1":
                return savepoint(caseDir, "rocksdb", 1 << 20, 1, SavepointFormatType.NATIVE);
            case "hashmap-snappy-p1":
                return savepoint(caseDir, "hashmap-snappy", 1 << 20, 1, SavepointFormatType.CANONICAL);
            default:
                throw new IllegalArgumentException("unknown case " + name);
        }
    }

    private static String savepoint(File caseDir, String backend, long threshold, int parallelism,
                                    SavepointFormatType format) throws Exception {
        Configuration c = new Configuration();
        if (backend.endsWith("-snappy")) { // key groups compressed with Snappy (SnappyStreamCompressionDecorator)
            backend = backend.substring(0, backend.length() - "-snappy".length());
            c.set(ConfigOptions.key("execution.checkpointing.snapshot-compression").booleanType().noDefaultValue(), true);
        }
        c.set(StateBackendOptions.STATE_BACKEND, backend);
        c.set(CheckpointingOptions.INCREMENTAL_CHECKPOINTS, false);
        c.set(CheckpointingOptions.FS_SMALL_FILE_THRESHOLD, new MemorySize(threshold));
        c.set(CheckpointingOptions.CHECKPOINTS_DIRECTORY, new File(caseDir, "checkpoints").toURI().toString());
        c.set(CheckpointingOptions.SAVEPOINT_DIRECTORY, new File(caseDir, "savepoints").toURI().toString());
        TaggedKryoSerializer.register(c);
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(c);
        TaggedKryoSerializer.register(env);
        env.setParallelism(parallelism);
        env.setMaxParallelism(128);
        job(env);
        JobClient client = env.executeAsync("state-schemas-" + caseDir.getName());
        for (int i = 0; i < 600 && client.getJobStatus().get() != JobStatus.RUNNING; i++) Thread.sleep(100);
        Thread.sleep(2500);
        String target = new File(caseDir, "savepoints").toURI().toString();
        Exception last = null;
        for (int attempt = 0; attempt < 60; attempt++) {
            try {
                String p = client.triggerSavepoint(target, format).get();
                client.cancel().get();
                return p;
            } catch (Exception e) {
                last = e;
                Thread.sleep(500);
            }
        }
        client.cancel().get();
        throw new IllegalStateException("no savepoint for " + caseDir, last);
    }

    /** The fixture job without running it, for `upgrade-gate export --jar ... --main-class` (its job graph). */
    public static final class GraphMain {
        private GraphMain() {}

        public static void main(String[] args) throws Exception {
            Configuration c = new Configuration();
            TaggedKryoSerializer.register(c);
            StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(c);
            TaggedKryoSerializer.register(env);
            env.setMaxParallelism(128);
            job(env);
            env.execute("state-schemas");
        }
    }

    static final MapStateDescriptor<String, CollectionPojo> RULES =
            new MapStateDescriptor<>("rules-pojo", Types.STRING, TypeInformation.of(CollectionPojo.class));

    static void job(StreamExecutionEnvironment env) {
        job(env, java.util.Collections.emptySet());
    }

    /** The fixture job; `skip` ("keyed", "broadcast", "operator") replaces those stateful operators by stateless
     * ones with other uids, so a restore can check the remaining states when one of them fails the restore. */
    static void job(StreamExecutionEnvironment env, java.util.Set<String> skip) {
        DataStream<Long> numbers = env.fromSequence(0, Long.MAX_VALUE).uid("numbers").name("numbers")
                .map(new Functions.Throttle(5)).uid("throttle").name("throttle");
        DataStream<Long> keyed = skip.contains("keyed")
                ? numbers.map(new Functions.Throttle(0)).uid("no-keyed")
                : numbers.keyBy(v -> v % 8).process(new SchemaStates()).uid("schema-keyed").name("schema-keyed");
        DataStream<Long> rules = env.fromSequence(0, Long.MAX_VALUE).uid("rule-numbers").name("rule-numbers")
                .map(new Functions.Throttle(50)).uid("rule-throttle").name("rule-throttle");
        DataStream<Long> joined = skip.contains("broadcast")
                ? keyed.map(new Functions.Throttle(0)).uid("no-broadcast")
                : keyed.connect(rules.broadcast(RULES)).process(new PojoBroadcast()).uid("schema-broadcast")
                        .name("schema-broadcast");
        DataStream<Long> last = skip.contains("operator")
                ? joined.map(new Functions.Throttle(0)).uid("no-operator")
                : joined.map(new PojoOperatorState()).uid("schema-operator").name("schema-operator");
        last.sinkTo(new DiscardingSink<>()).name("sink");
    }

    /** A POJO of primitives and a String (Flink's PojoSerializer, no Kryo). */
    public static class PlainPojo {
        public long id;
        public int count;
        public String name;

        public PlainPojo() {}

        PlainPojo(long id, int count, String name) {
            this.id = id;
            this.count = count;
            this.name = name;
        }
    }

    /** A POJO whose HashMap and ArrayList fields fall back to Kryo. */
    public static class CollectionPojo {
        public long id;
        public HashMap<String, Long> counts = new HashMap<>();
        public ArrayList<Long> history = new ArrayList<>();

        public CollectionPojo() {}
    }

    /** Not a POJO (final fields, no default constructor): serialized by Kryo as a whole. */
    public static final class Opaque {
        private final long a;
        private final String b;

        Opaque(long a, String b) {
            this.a = a;
            this.b = b;
        }

        long a() { return a; }
    }

    /** Not a POJO; serialized by Kryo with the registered {@link TaggedKryoSerializer}. */
    public static final class Tagged {
        final long value;
        final String tag;

        Tagged(long value, String tag) {
            this.value = value;
            this.tag = tag;
        }
    }

    public enum Color { RED, GREEN, BLUE }

    /** One keyed state per serializer family, plus a processing-time timer (the timer priority queue). */
    static final class SchemaStates extends KeyedProcessFunction<Long, Long, Long> {
        private transient ValueState<Long> longValue;
        private transient ValueState<PlainPojo> plain;
        private transient ValueState<CollectionPojo> collections;
        private transient ValueState<HashMap<String, Long>> genericMap;
        private transient ValueState<Opaque> opaque;
        private transient ValueState<Tagged> tagged;
        private transient ValueState<Tuple2<Long, String>> tuple;
        private transient ValueState<Row> row;
        private transient ValueState<Color> color;
        private transient ValueState<Long> ttl;
        private transient ReducingState<Long> sum;
        private transient ListState<Long> longs;
        private transient MapState<String, PlainPojo> pojoMap;

        @Override public void open(OpenContext ctx) {
            longValue = getRuntimeContext().getState(new ValueStateDescriptor<>("long-value", Types.LONG));
            plain = getRuntimeContext().getState(
                    new ValueStateDescriptor<>("pojo-primitives", TypeInformation.of(PlainPojo.class)));
            collections = getRuntimeContext().getState(
                    new ValueStateDescriptor<>("pojo-collections", TypeInformation.of(CollectionPojo.class)));
            @SuppressWarnings({"unchecked", "rawtypes"})
            TypeInformation<HashMap<String, Long>> mapType = (TypeInformation) new GenericTypeInfo<>(HashMap.class);
            genericMap = getRuntimeContext().getState(new ValueStateDescriptor<>("generic-hashmap", mapType));
            opaque = getRuntimeContext().getState(
                    new ValueStateDescriptor<>("kryo-opaque", new GenericTypeInfo<>(Opaque.class)));
            tagged = getRuntimeContext().getState(
                    new ValueStateDescriptor<>("kryo-custom-serializer", new GenericTypeInfo<>(Tagged.class)));
            tuple = getRuntimeContext().getState(
                    new ValueStateDescriptor<>("tuple", Types.TUPLE(Types.LONG, Types.STRING)));
            row = getRuntimeContext().getState(
                    new ValueStateDescriptor<>("row", Types.ROW_NAMED(new String[] {"id", "label"}, Types.LONG, Types.STRING)));
            color = getRuntimeContext().getState(new ValueStateDescriptor<>("enum", Types.ENUM(Color.class)));
            ValueStateDescriptor<Long> ttlDesc = new ValueStateDescriptor<>("ttl-value", Types.LONG);
            ttlDesc.enableTimeToLive(StateTtlConfig.newBuilder(Duration.ofHours(1)).build());
            ttl = getRuntimeContext().getState(ttlDesc);
            sum = getRuntimeContext().getReducingState(new ReducingStateDescriptor<>("reducing-sum", Long::sum, Types.LONG));
            longs = getRuntimeContext().getListState(new ListStateDescriptor<>("long-list", Types.LONG));
            pojoMap = getRuntimeContext().getMapState(
                    new MapStateDescriptor<>("pojo-map", Types.STRING, TypeInformation.of(PlainPojo.class)));
        }

        private transient java.util.Set<Long> checked;

        /** Restored values, checked against what they must be (see StateSchemaRestore): each value names its key. */
        private void verify(long k) {
            Long last = check("long-value", () -> longValue.value(), x -> x % 8 == k);
            check("pojo-primitives", () -> plain.value(),
                    p -> p.id % 8 == k && p.count == (int) (p.id % 100) && ("n" + p.id).equals(p.name));
            check("pojo-collections", () -> collections.value(), p -> p.id % 8 == k && !p.history.isEmpty()
                    && p.history.size() <= 4 && p.history.stream().allMatch(x -> x % 8 == k)
                    && !p.counts.isEmpty() && p.counts.keySet().stream().allMatch(x -> x.matches("k[012]"))
                    && p.counts.values().stream().mapToLong(Long::longValue).sum() >= p.history.size());
            check("generic-hashmap", () -> genericMap.value(), m -> m.size() == 1 && m.get("last") != null
                    && m.get("last") % 8 == k);
            check("kryo-opaque", () -> opaque.value(), o -> o.a % 8 == k && ("o" + o.a).equals(o.b));
            check("kryo-custom-serializer", () -> tagged.value(), t -> t.value % 8 == k && ("g" + t.value).equals(t.tag));
            check("tuple", () -> tuple.value(), t -> t.f0 % 8 == k && ("t" + t.f0).equals(t.f1));
            check("row", () -> row.value(), r -> ((Long) r.getField(0)) % 8 == k && ("r" + r.getField(0)).equals(r.getField(1)));
            check("enum", () -> color.value(), c -> last != null && c == Color.values()[(int) (last % 3)]);
            check("ttl-value", () -> ttl.value(), x -> x.equals(last));
            check("reducing-sum", () -> sum.get(), x -> last != null); // sums of huge v overflow: presence only
            check("long-list", () -> {
                List<Long> l = new ArrayList<>();
                for (Long x : longs.get()) l.add(x);
                return l.isEmpty() ? null : l;
            }, l -> l.stream().allMatch(x -> x % 8 == k));
            check("pojo-map", () -> {
                Map<String, PlainPojo> m = new HashMap<>();
                for (Map.Entry<String, PlainPojo> e : pojoMap.entries()) m.put(e.getKey(), e.getValue());
                return m.isEmpty() ? null : m;
            }, m -> m.entrySet().stream().allMatch(e -> e.getValue().id % 8 == k && e.getValue().count == 1
                    && "m".equals(e.getValue().name) && e.getKey().equals("p" + (e.getValue().id % 2))));
        }

        @Override public void processElement(Long v, Context ctx, Collector<Long> out) throws Exception {
            if (StateSchemaRestore.VERIFY) { // check the restored values once per key, change nothing
                if (checked == null) checked = new java.util.HashSet<>();
                if (checked.add(ctx.getCurrentKey())) verify(ctx.getCurrentKey());
                out.collect(v);
                return;
            }
            longValue.update(v);
            plain.update(new PlainPojo(v, (int) (v % 100), "n" + v));
            CollectionPojo cp = collections.value();
            if (cp == null) cp = new CollectionPojo();
            cp.id = v;
            cp.counts.merge("k" + (v % 3), 1L, Long::sum);
            if (cp.history.size() < 4) cp.history.add(v);
            collections.update(cp);
            HashMap<String, Long> m = genericMap.value();
            if (m == null) m = new HashMap<>();
            m.put("last", v);
            genericMap.update(m);
            opaque.update(new Opaque(v, "o" + v));
            tagged.update(new Tagged(v, "g" + v));
            tuple.update(Tuple2.of(v, "t" + v));
            row.update(Row.of(v, "r" + v));
            color.update(Color.values()[(int) (v % 3)]);
            ttl.update(v);
            sum.add(v);
            if (v < 64) longs.add(v);
            pojoMap.put("p" + (v % 2), new PlainPojo(v, 1, "m"));
            ctx.timerService().registerProcessingTimeTimer(Long.MAX_VALUE - 1 - (v % 8));
            out.collect(v);
        }
    }

    /** Records a restored state's value as OK, BAD (with the value) or MISSING; a failed read is BAD too. */
    static <T> T check(String state, java.util.concurrent.Callable<T> read, java.util.function.Predicate<T> ok) {
        T value;
        try {
            value = read.call();
        } catch (Exception e) {
            StateSchemaRestore.record(state, "BAD: reading it threw " + e);
            return null;
        }
        if (value == null) {
            StateSchemaRestore.record(state, "MISSING");
        } else {
            boolean good;
            try {
                good = ok.test(value);
            } catch (RuntimeException e) {
                good = false;
            }
            StateSchemaRestore.record(state, good ? "OK" : "BAD: " + describe(value));
        }
        return value;
    }

    private static String describe(Object v) {
        if (v instanceof CollectionPojo) {
            CollectionPojo p = (CollectionPojo) v;
            return "CollectionPojo{id=" + p.id + ", counts=" + p.counts + ", history=" + p.history + "}";
        }
        if (v instanceof Tagged) return "Tagged{" + ((Tagged) v).value + ", " + ((Tagged) v).tag + "}";
        if (v instanceof Opaque) return "Opaque{" + ((Opaque) v).a + ", " + ((Opaque) v).b + "}";
        if (v instanceof PlainPojo) return "PlainPojo{" + ((PlainPojo) v).id + ", " + ((PlainPojo) v).count + "}";
        String s = String.valueOf(v);
        return s.length() > 200 ? s.substring(0, 200) + "..." : s;
    }

    /** Broadcast state whose values are POJOs with collection fields. */
    static final class PojoBroadcast extends BroadcastProcessFunction<Long, Long, Long> {
        private transient boolean checked;

        @Override public void processElement(Long v, ReadOnlyContext ctx, Collector<Long> out) throws Exception {
            if (StateSchemaRestore.VERIFY && !checked) {
                checked = true;
                check("rules-pojo", () -> {
                    Map<String, CollectionPojo> m = new HashMap<>();
                    for (Map.Entry<String, CollectionPojo> e : ctx.getBroadcastState(RULES).immutableEntries()) {
                        m.put(e.getKey(), e.getValue());
                    }
                    return m.isEmpty() ? null : m;
                }, m -> m.entrySet().stream().allMatch(e -> e.getKey().equals("rule-" + (e.getValue().id % 3))
                        && e.getValue().history.size() == 1 && e.getValue().history.get(0) == e.getValue().id
                        && e.getValue().counts.isEmpty()));
            }
            out.collect(v);
        }

        @Override public void processBroadcastElement(Long v, Context ctx, Collector<Long> out) throws Exception {
            BroadcastState<String, CollectionPojo> s = ctx.getBroadcastState(RULES);
            CollectionPojo p = new CollectionPojo();
            p.id = v;
            p.history.add(v);
            s.put("rule-" + (v % 3), p);
        }
    }

    /** Operator list state of POJOs with collection fields, and union list state of Longs. */
    static final class PojoOperatorState extends RichMapFunction<Long, Long> implements CheckpointedFunction {
        private transient ListState<CollectionPojo> pojos;
        private transient ListState<Long> union;
        private long seen;

        @Override public Long map(Long v) {
            seen++;
            return v;
        }

        @Override public void snapshotState(FunctionSnapshotContext ctx) throws Exception {
            pojos.clear();
            for (int i = 0; i < 2; i++) {
                CollectionPojo p = new CollectionPojo();
                p.id = seen + i;
                p.counts.put("seen", seen);
                pojos.add(p);
            }
            union.clear();
            union.add(seen);
        }

        @Override public void initializeState(FunctionInitializationContext ctx) throws Exception {
            pojos = ctx.getOperatorStateStore().getListState(
                    new ListStateDescriptor<>("pojo-list", TypeInformation.of(CollectionPojo.class)));
            union = ctx.getOperatorStateStore().getUnionListState(new ListStateDescriptor<>("union-longs", Types.LONG));
            if (StateSchemaRestore.VERIFY && ctx.isRestored()) {
                check("pojo-list", () -> {
                    List<CollectionPojo> l = new ArrayList<>();
                    for (CollectionPojo p : pojos.get()) l.add(p);
                    StateSchemaRestore.count("pojo-list", l.size());
                    return l.isEmpty() ? null : l;
                }, l -> l.stream().allMatch(p -> p.history.isEmpty() && p.counts.size() == 1
                        && p.counts.get("seen") != null && (p.counts.get("seen") == p.id || p.counts.get("seen") == p.id - 1)));
                check("union-longs", () -> {
                    List<Long> l = new ArrayList<>();
                    for (Long x : union.get()) l.add(x);
                    return l.isEmpty() ? null : l;
                }, l -> l.stream().allMatch(x -> x >= 0));
            }
        }
    }
}

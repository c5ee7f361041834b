package ugate.restores;

import org.apache.flink.api.common.functions.RichMapFunction;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.runtime.state.FunctionInitializationContext;
import org.apache.flink.runtime.state.FunctionSnapshotContext;
import org.apache.flink.runtime.state.KeyGroupRange;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;
import org.apache.flink.runtime.state.StateSnapshotContext;
import org.apache.flink.runtime.state.VoidNamespace;
import org.apache.flink.runtime.state.VoidNamespaceSerializer;
import org.apache.flink.streaming.api.checkpoint.CheckpointedFunction;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.streaming.api.operators.KeyedProcessOperator;
import org.apache.flink.util.Collector;

import java.util.ArrayList;
import java.util.List;
import java.util.TreeSet;
import java.util.function.Consumer;
import java.util.function.Supplier;
import java.util.stream.Collectors;
import java.util.stream.Stream;

/**
 * Jobs where uid-less state can restore into the wrong operator. Every stateful function
 * writes its own name into its state, and on restore reports which writers' values it received
 * (metric {@code values:<state>}, the sorted distinct writer tags) next to the usual counts.
 *
 * <ul>
 *   <li>{@code sources}: legacy sources "orders" and "payments" (ListState "offsets" = "tag@offset") -> union -> sink;
 *       {@code swapSources} creates payments first.</li>
 *   <li>{@code branches}: numbers -> throttle -> keyBy -> "branch-a" / "branch-b" (keyed ValueState "writer")
 *       -> union -> sink; {@code swapSources} creates branch-b first.</li>
 *   <li>{@code chain}: numbers -> throttle -> [inserted] -> "stage-a" -> "stage-b" (ListState "buffer") -> sink,
 *       all chained; {@code insertMap} adds the stateless map.</li>
 *   <li>{@code union}: orders, payments -> union (reordered with {@code swapSources}) -> keyBy -> "merged" -> sink.</li>
 * </ul>
 */
final class Misroute {
    private Misroute() {}

    static int expectedReporters(Shape s) {
        return s.misroute.equals("union") ? 3 * s.parallelism : 2 * s.parallelism;
    }

    private static SingleOutputStreamOperator<Long> uid(Shape s, SingleOutputStreamOperator<Long> op, String uid) {
        if (s.uids) op.uid(uid);
        return op;
    }

    private static DataStream<Long> source(Shape s, StreamExecutionEnvironment env, String tag) {
        return uid(s, Compat.taggedSource(env, tag).name(tag), tag);
    }

    private static DataStream<Long> throttled(Shape s, StreamExecutionEnvironment env) {
        SingleOutputStreamOperator<Long> numbers = uid(s, env.fromSequence(0, Long.MAX_VALUE).name("numbers"), "numbers");
        return uid(s, numbers.map(new Functions.Throttle(2)).name("throttle"), "throttle");
    }

    private static DataStream<Long> keyed(Shape s, DataStream<Long> in, String tag) {
        return uid(s, in.keyBy(v -> v % Functions.KEYS).<Long>transform(tag, Types.LONG, new TaggedKeyedOperator(tag)), tag);
    }

    static void build(Shape s, StreamExecutionEnvironment env) {
        DataStream<Long> tail;
        switch (s.misroute) {
            case "sources": {
                DataStream<Long> first = source(s, env, s.swapSources ? "payments" : "orders");
                DataStream<Long> second = source(s, env, s.swapSources ? "orders" : "payments");
                DataStream<Long> orders = s.swapSources ? second : first;
                DataStream<Long> payments = s.swapSources ? first : second;
                tail = orders.union(payments);
                break;
            }
            case "branches": {
                DataStream<Long> in = throttled(s, env);
                DataStream<Long> x = keyed(s, in, s.swapSources ? "branch-b" : "branch-a");
                DataStream<Long> y = keyed(s, in, s.swapSources ? "branch-a" : "branch-b");
                DataStream<Long> a = s.swapSources ? y : x;
                DataStream<Long> b = s.swapSources ? x : y;
                tail = a.union(b);
                break;
            }
            case "chain": {
                DataStream<Long> in = throttled(s, env);
                if (s.insertMap) in = in.map(new Functions.Identity()).name("inserted");
                in = uid(s, in.map(new TaggedListFn("stage-a")).name("stage-a"), "stage-a");
                tail = uid(s, in.map(new TaggedListFn("stage-b")).name("stage-b"), "stage-b");
                break;
            }
            case "union": {
                DataStream<Long> orders = source(s, env, "orders");
                DataStream<Long> payments = source(s, env, "payments");
                tail = keyed(s, s.swapSources ? payments.union(orders) : orders.union(payments), "merged");
                break;
            }
            default:
                throw new IllegalArgumentException("unknown misroute job " + s.misroute);
        }
        uid(s, tail.map(new Functions.Identity()).name("out"), "out")
                .sinkTo(new DiscardingSink<Long>()).name("sink");
    }

    private static List<String> tags(Iterable<String> values) {
        TreeSet<String> out = new TreeSet<>();
        for (String v : values) out.add(v.split("[@#]", 2)[0]);
        return new ArrayList<>(out);
    }

    /** Legacy parallel source whose ListState "offsets" holds "tag@offset" (a topic's offset, in effect). */
    static class TaggedSourceBody extends org.apache.flink.api.common.functions.AbstractRichFunction
            implements CheckpointedFunction {
        private final String tag;
        protected volatile boolean running = true;
        private long next;
        private transient ListState<String> offsets;

        TaggedSourceBody(String tag) { this.tag = tag; }

        protected void runLoop(Supplier<Object> lock, Consumer<Long> out) throws Exception {
            while (running) {
                synchronized (lock.get()) {
                    out.accept(next++);
                }
                Thread.sleep(20);
            }
        }

        @Override public void snapshotState(FunctionSnapshotContext ctx) throws Exception {
            offsets.clear();
            offsets.add(tag + "@" + next);
        }

        @Override public void initializeState(FunctionInitializationContext ctx) throws Exception {
            offsets = ctx.getOperatorStateStore().getListState(new ListStateDescriptor<>("offsets", Types.STRING));
            List<String> got = new ArrayList<>();
            for (String v : offsets.get()) got.add(v);
            int idx = getRuntimeContext().getTaskInfo().getIndexOfThisSubtask();
            Report.put("restore", tag, idx, "offsets", (long) got.size());
            Report.put("restore", tag, idx, "values:offsets", tags(got));
        }
    }

    /** Map with ListState "buffer" = ["tag#subtask"]. */
    static final class TaggedListFn extends RichMapFunction<Long, Long> implements CheckpointedFunction {
        private final String tag;
        private transient ListState<String> buffer;

        TaggedListFn(String tag) { this.tag = tag; }

        @Override public Long map(Long v) { return v; }

        @Override public void snapshotState(FunctionSnapshotContext ctx) throws Exception {
            buffer.clear();
            buffer.add(tag + "#" + getRuntimeContext().getTaskInfo().getIndexOfThisSubtask());
        }

        @Override public void initializeState(FunctionInitializationContext ctx) throws Exception {
            buffer = ctx.getOperatorStateStore().getListState(new ListStateDescriptor<>("buffer", Types.STRING));
            List<String> got = new ArrayList<>();
            for (String v : buffer.get()) got.add(v);
            int idx = getRuntimeContext().getTaskInfo().getIndexOfThisSubtask();
            Report.put("restore", tag, idx, "buffer", (long) got.size());
            Report.put("restore", tag, idx, "values:buffer", tags(got));
        }
    }

    static final ValueStateDescriptor<String> WRITER = new ValueStateDescriptor<>("writer", Types.STRING);

    /** Keyed ValueState "writer" = the operator's tag, per key (keys are v % 97). */
    static final class TagFn extends KeyedProcessFunction<Long, Long, Long> {
        private final String tag;
        private transient ValueState<String> writer;

        TagFn(String tag) { this.tag = tag; }

        @Override public void open(org.apache.flink.api.common.functions.OpenContext ctx) {
            writer = getRuntimeContext().getState(WRITER);
        }

        @Override public void processElement(Long v, Context ctx, Collector<Long> out) throws Exception {
            if (writer.value() == null) writer.update(tag);
            out.collect(v);
        }
    }

    /** Reports keyed entries, key groups, max parallelism and which writers' values the keyed state holds. */
    static final class TaggedKeyedOperator extends KeyedProcessOperator<Long, Long, Long> {
        private final String tag;

        TaggedKeyedOperator(String tag) {
            super(new TagFn(tag));
            this.tag = tag;
        }

        private List<Long> keys() {
            try (Stream<Long> s = this.<Long>getKeyedStateBackend().<VoidNamespace>getKeys("writer", VoidNamespace.INSTANCE)) {
                return s.collect(Collectors.toList());
            }
        }

        @Override public void open() throws Exception {
            super.open();
            int idx = getRuntimeContext().getTaskInfo().getIndexOfThisSubtask();
            int p = getRuntimeContext().getTaskInfo().getNumberOfParallelSubtasks();
            int maxP = getRuntimeContext().getTaskInfo().getMaxNumberOfParallelSubtasks();
            KeyGroupRange r = KeyGroupRangeAssignment.computeKeyGroupRangeForOperatorIndex(maxP, p, idx);
            List<Long> keys = keys();
            ValueState<String> st = getPartitionedState(VoidNamespace.INSTANCE, VoidNamespaceSerializer.INSTANCE, WRITER);
            List<String> values = new ArrayList<>();
            for (Long k : keys) {
                setCurrentKey(k);
                values.add(st.value());
            }
            Report.put("restore", tag, idx, "keyed_entries", (long) keys.size());
            Report.put("restore", tag, idx, "key_groups", java.util.Arrays.asList(r.getStartKeyGroup(), r.getEndKeyGroup()));
            Report.put("restore", tag, idx, "max_parallelism", maxP);
            Report.put("restore", tag, idx, "values:writer", tags(values));
        }

        @Override public void snapshotState(StateSnapshotContext context) throws Exception {
            super.snapshotState(context);
            Report.put("snapshot", tag, getRuntimeContext().getTaskInfo().getIndexOfThisSubtask(), "keyed_entries",
                    (long) keys().size());
        }
    }
}

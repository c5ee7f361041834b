package ugate.restores;

import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.functions.RichMapFunction;
import org.apache.flink.api.common.state.BroadcastState;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.runtime.state.FunctionInitializationContext;
import org.apache.flink.runtime.state.FunctionSnapshotContext;
import org.apache.flink.runtime.state.KeyGroupRange;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;
import org.apache.flink.runtime.state.StateSnapshotContext;
import org.apache.flink.runtime.state.VoidNamespace;
import org.apache.flink.streaming.api.checkpoint.CheckpointedFunction;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.streaming.api.functions.co.BroadcastProcessFunction;
import org.apache.flink.streaming.api.operators.KeyedProcessOperator;
import org.apache.flink.util.Collector;

import java.util.Map;
import java.util.function.Consumer;
import java.util.function.Supplier;
import java.util.stream.Stream;

/** Stateful user functions that report, per subtask, how much state they got back on restore. */
final class Functions {
    private Functions() {}

    static final MapStateDescriptor<String, Long> RULES = new MapStateDescriptor<>("rules", Types.STRING, Types.LONG);
    static final int KEYS = 97;

    static final class Throttle implements MapFunction<Long, Long> {
        private final long sleepMs;

        Throttle(long sleepMs) { this.sleepMs = sleepMs; }

        @Override public Long map(Long v) throws Exception {
            if (sleepMs > 0) Thread.sleep(sleepMs);
            return v;
        }
    }

    static final class Identity implements MapFunction<Long, Long> {
        @Override public Long map(Long v) { return v; }
    }

    /** Keyed ValueState "count" per key (keys are v % 97). */
    static final class CountFn extends KeyedProcessFunction<Long, Long, Long> {
        private transient ValueState<Long> count;

        @Override public void open(OpenContext ctx) {
            count = getRuntimeContext().getState(new ValueStateDescriptor<>("count", Types.LONG));
        }

        @Override public void processElement(Long v, Context ctx, Collector<Long> out) throws Exception {
            Long c = count.value();
            count.update(c == null ? 1L : c + 1);
            out.collect(v);
        }
    }

    /** The keyed process operator, plus a report of the keys it holds after restore and at snapshot. */
    static final class ReportingKeyedOperator extends KeyedProcessOperator<Long, Long, Long> {
        private final String reportAs;

        ReportingKeyedOperator(String reportAs) {
            super(new CountFn());
            this.reportAs = reportAs;
        }

        private long keys() throws Exception {
            try (Stream<?> s = this.<Long>getKeyedStateBackend().<VoidNamespace>getKeys("count", VoidNamespace.INSTANCE)) {
                return s.count();
            }
        }

        @Override public void open() throws Exception {
            super.open();
            int idx = getRuntimeContext().getTaskInfo().getIndexOfThisSubtask();
            int p = getRuntimeContext().getTaskInfo().getNumberOfParallelSubtasks();
            int maxP = getRuntimeContext().getTaskInfo().getMaxNumberOfParallelSubtasks();
            KeyGroupRange r = KeyGroupRangeAssignment.computeKeyGroupRangeForOperatorIndex(maxP, p, idx);
            Report.put("restore", reportAs, idx, "keyed_entries", keys());
            Report.put("restore", reportAs, idx, "key_groups", java.util.Arrays.asList(r.getStartKeyGroup(), r.getEndKeyGroup()));
            Report.put("restore", reportAs, idx, "max_parallelism", maxP);
        }

        @Override public void snapshotState(StateSnapshotContext context) throws Exception {
            super.snapshotState(context);
            int idx = getRuntimeContext().getTaskInfo().getIndexOfThisSubtask();
            Report.put("snapshot", reportAs, idx, "keyed_entries", keys());
        }
    }

    /** Broadcast state "rules" (up to 5 entries), reported on restore. */
    static final class BroadcastFn extends BroadcastProcessFunction<Long, Long, Long> implements CheckpointedFunction {
        private final String reportAs;

        BroadcastFn(String reportAs) { this.reportAs = reportAs; }

        @Override public void processElement(Long v, ReadOnlyContext ctx, Collector<Long> out) throws Exception {
            Long r = ctx.getBroadcastState(RULES).get("rule-" + (v % 3));
            out.collect(r == null ? v : v + r);
        }

        @Override public void processBroadcastElement(Long v, Context ctx, Collector<Long> out) throws Exception {
            ctx.getBroadcastState(RULES).put("rule-" + (v % 5), v);
        }

        @Override public void snapshotState(FunctionSnapshotContext ctx) {}

        @Override public void initializeState(FunctionInitializationContext ctx) throws Exception {
            BroadcastState<String, Long> s = ctx.getOperatorStateStore().getBroadcastState(RULES);
            long n = 0;
            for (Map.Entry<String, Long> ignored : s.entries()) n++;
            Report.put("restore", reportAs, getRuntimeContext().getTaskInfo().getIndexOfThisSubtask(), "rules", n);
        }
    }

    /**
     * Operator list state: "split-a" (subtask i writes i+2 elements), "split-b" (i+1 elements), both
     * split-distribute, and "union-list" (one element per subtask); with `empty` it registers "empty-list" only.
     */
    static final class ListsFn extends RichMapFunction<Long, Long> implements CheckpointedFunction {
        private final String reportAs;
        private final boolean empty;
        private transient ListState<Long> a;
        private transient ListState<Long> b;
        private transient ListState<Long> union;
        private transient ListState<Long> none;
        private long seen;

        ListsFn(String reportAs, boolean empty) {
            this.reportAs = reportAs;
            this.empty = empty;
        }

        @Override public Long map(Long v) {
            seen++;
            return v;
        }

        @Override public void snapshotState(FunctionSnapshotContext ctx) throws Exception {
            if (empty) return;
            int idx = getRuntimeContext().getTaskInfo().getIndexOfThisSubtask();
            a.clear();
            b.clear();
            union.clear();
            for (int i = 0; i < idx + 2; i++) a.add(seen + i);
            for (int i = 0; i < idx + 1; i++) b.add(seen * 2 + i);
            union.add((long) idx);
        }

        private static long size(ListState<Long> s) throws Exception {
            long n = 0;
            for (Long ignored : s.get()) n++;
            return n;
        }

        @Override public void initializeState(FunctionInitializationContext ctx) throws Exception {
            int idx = getRuntimeContext().getTaskInfo().getIndexOfThisSubtask();
            if (empty) {
                none = ctx.getOperatorStateStore().getListState(new ListStateDescriptor<>("empty-list", Types.LONG));
                Report.put("restore", reportAs, idx, "empty-list", size(none));
                return;
            }
            a = ctx.getOperatorStateStore().getListState(new ListStateDescriptor<>("split-a", Types.LONG));
            b = ctx.getOperatorStateStore().getListState(new ListStateDescriptor<>("split-b", Types.LONG));
            union = ctx.getOperatorStateStore().getUnionListState(new ListStateDescriptor<>("union-list", Types.LONG));
            Report.put("restore", reportAs, idx, "split-a", size(a));
            Report.put("restore", reportAs, idx, "split-b", size(b));
            Report.put("restore", reportAs, idx, "union-list", size(union));
        }
    }

    /** The body of the legacy "rules" source (SourceFunction moved packages in 2.x, see Compat). */
    static class RulesSourceBody extends org.apache.flink.api.common.functions.AbstractRichFunction
            implements CheckpointedFunction {
        private final String reportAs;
        protected volatile boolean running = true;
        private long next;
        private transient ListState<Long> offset;

        RulesSourceBody(String reportAs) { this.reportAs = reportAs; }

        protected void runLoop(Supplier<Object> lock, Consumer<Long> out) throws Exception {
            while (running) {
                synchronized (lock.get()) {
                    out.accept(next++);
                }
                Thread.sleep(20);
            }
        }

        @Override public void snapshotState(FunctionSnapshotContext ctx) throws Exception {
            offset.clear();
            offset.add(next);
        }

        @Override public void initializeState(FunctionInitializationContext ctx) throws Exception {
            offset = ctx.getOperatorStateStore().getListState(new ListStateDescriptor<>("rules-offset", Types.LONG));
            long n = 0;
            for (Long l : offset.get()) {
                next = l;
                n++;
            }
            Report.put("restore", reportAs, getRuntimeContext().getTaskInfo().getIndexOfThisSubtask(), "rules-offset", n);
        }
    }
}

package ugate.savepoints;

import org.apache.flink.api.common.functions.AbstractRichFunction;
import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.functions.RichMapFunction;
import org.apache.flink.api.common.state.BroadcastState;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.runtime.state.FunctionInitializationContext;
import org.apache.flink.runtime.state.FunctionSnapshotContext;
import org.apache.flink.streaming.api.checkpoint.CheckpointedFunction;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.streaming.api.functions.co.BroadcastProcessFunction;
import org.apache.flink.util.Collector;

import java.util.function.Consumer;
import java.util.function.Supplier;

/** Stateful user functions that put every kind of state a savepoint can hold into the fixture jobs. */
final class Functions {
    private Functions() {}

    static final MapStateDescriptor<String, Long> RULES =
            new MapStateDescriptor<>("rules", Types.STRING, Types.LONG);

    /** Slows a source down so the job is still running when we snapshot it. */
    static final class Throttle implements MapFunction<Long, Long> {
        private final long sleepMs;

        Throttle(long sleepMs) { this.sleepMs = sleepMs; }

        @Override public Long map(Long v) throws Exception {
            if (sleepMs > 0) Thread.sleep(sleepMs);
            return v;
        }
    }

    /** Keeps the records whose key (v % keys) belongs to this subtask, so a forward edge can carry keyed state. */
    static final class OwnKeys extends org.apache.flink.api.common.functions.RichFilterFunction<Long> {
        private final long keys;
        private final int maxParallelism;
        private final int parallelism;

        OwnKeys(long keys, int maxParallelism, int parallelism) {
            this.keys = keys;
            this.maxParallelism = maxParallelism;
            this.parallelism = parallelism;
        }

        @Override public boolean filter(Long v) {
            return org.apache.flink.runtime.state.KeyGroupRangeAssignment.assignKeyToParallelOperator(
                    v % keys, maxParallelism, parallelism) == getRuntimeContext().getTaskInfo().getIndexOfThisSubtask();
        }
    }

    /** Keyed Value, List and Map state. */
    static final class KeyedStateFn extends KeyedProcessFunction<Long, Long, Long> {
        private final long sleepMs;
        private transient ValueState<Long> count;
        private transient ListState<Long> recent;
        private transient MapState<Integer, Long> buckets;

        KeyedStateFn(long sleepMs) { this.sleepMs = sleepMs; }

        @Override public void open(OpenContext ctx) {
            count = getRuntimeContext().getState(new ValueStateDescriptor<>("count", Types.LONG));
            recent = getRuntimeContext().getListState(new ListStateDescriptor<>("recent", Types.LONG));
            buckets = getRuntimeContext().getMapState(new MapStateDescriptor<>("buckets", Types.INT, Types.LONG));
        }

        @Override public void processElement(Long v, Context ctx, Collector<Long> out) throws Exception {
            if (sleepMs > 0) Thread.sleep(sleepMs);
            Long c = count.value();
            count.update(c == null ? 1L : c + 1);
            recent.add(v);
            int b = (int) (v % 7);
            Long old = buckets.get(b);
            buckets.put(b, old == null ? v : old + v);
            out.collect(v);
        }
    }

    /** Broadcast state fed by the legacy source. */
    static final class BroadcastFn extends BroadcastProcessFunction<Long, Long, Long> {
        @Override public void processElement(Long v, ReadOnlyContext ctx, Collector<Long> out) throws Exception {
            Long r = ctx.getBroadcastState(RULES).get("rule-" + (v % 3));
            out.collect(r == null ? v : v + r);
        }

        @Override public void processBroadcastElement(Long v, Context ctx, Collector<Long> out) throws Exception {
            BroadcastState<String, Long> s = ctx.getBroadcastState(RULES);
            s.put("rule-" + (v % 5), v);
        }
    }

    /** Operator list state (split-distribute) and union list state. */
    static final class OperatorStateFn extends RichMapFunction<Long, Long> implements CheckpointedFunction {
        private transient ListState<Long> split;
        private transient ListState<Long> union;
        private long seen;

        @Override public Long map(Long v) {
            seen++;
            return v;
        }

        @Override public void snapshotState(FunctionSnapshotContext ctx) throws Exception {
            split.clear();
            split.add(seen);
            split.add(seen * 2);
            union.clear();
            union.add((long) getRuntimeContext().getTaskInfo().getIndexOfThisSubtask());
        }

        @Override public void initializeState(FunctionInitializationContext ctx) throws Exception {
            split = ctx.getOperatorStateStore().getListState(new ListStateDescriptor<>("split-list", Types.LONG));
            union = ctx.getOperatorStateStore().getUnionListState(new ListStateDescriptor<>("union-list", Types.LONG));
        }
    }

    /**
     * The body of the legacy source (its SourceFunction interface lives in a different package in 1.20
     * and 2.x, see Compat). Subtask 1 stops after `stopAfterOnSubtask1` records when that is >= 0, which
     * leaves a partially finished operator (FLIP-147).
     */
    static class LegacyCounterState extends AbstractRichFunction implements CheckpointedFunction {
        private final long stopAfterOnSubtask1;
        private final long sleepMs;
        protected volatile boolean running = true;
        private long next;
        private transient ListState<Long> offset;

        LegacyCounterState(long stopAfterOnSubtask1, long sleepMs) {
            this.stopAfterOnSubtask1 = stopAfterOnSubtask1;
            this.sleepMs = sleepMs;
        }

        protected void runLoop(Supplier<Object> lock, Consumer<Long> out) throws Exception {
            int idx = getRuntimeContext().getTaskInfo().getIndexOfThisSubtask();
            long emitted = 0;
            while (running) {
                if (idx == 1 && stopAfterOnSubtask1 >= 0 && emitted >= stopAfterOnSubtask1) return;
                synchronized (lock.get()) {
                    out.accept(next++);
                }
                emitted++;
                Thread.sleep(sleepMs);
            }
        }

        @Override public void snapshotState(FunctionSnapshotContext ctx) throws Exception {
            offset.clear();
            offset.add(next);
        }

        @Override public void initializeState(FunctionInitializationContext ctx) throws Exception {
            offset = ctx.getOperatorStateStore().getListState(new ListStateDescriptor<>("legacy-offset", Types.LONG));
            for (Long l : offset.get()) next = l;
        }
    }
}

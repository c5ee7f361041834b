package ugate.restores;

import org.apache.flink.api.common.functions.RichMapFunction;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.connector.source.SplitEnumerator;
import org.apache.flink.api.connector.source.SplitEnumeratorContext;
import org.apache.flink.api.connector.source.lib.NumberSequenceSource;
import org.apache.flink.api.connector.source.lib.util.IteratorSourceEnumerator;
import org.apache.flink.runtime.state.FunctionInitializationContext;
import org.apache.flink.runtime.state.FunctionSnapshotContext;
import org.apache.flink.runtime.state.StateSnapshotContext;
import org.apache.flink.runtime.state.VoidNamespace;
import org.apache.flink.streaming.api.checkpoint.CheckpointedFunction;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.runtime.state.VoidNamespaceSerializer;
import org.apache.flink.streaming.api.operators.InternalTimerService;
import org.apache.flink.streaming.api.operators.KeyedProcessOperator;
import org.apache.flink.util.Collector;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import java.util.stream.Stream;

/**
 * The functions of the repair scenarios' job (RepairJob). Every restored value can be checked on its own:
 * keyed state keeps, per key, the set of numbers seen with a redundant copy of each, their count and sum; list
 * elements carry a check digit. At the end of input the keyed operator reports how many numbers it holds, how many
 * records reached it in this run and how many of those it had already seen: a source that re-reads after a restore
 * shows as records beyond the input, and as duplicates where the keyed state survived.
 */
final class RepairFunctions {
    private RepairFunctions() {}

    static final int KEYS = 97;
    static final int SPLITS = 8;
    static final long NUMBERS = 3200;

    /** NumberSequenceSource with more splits than readers: its enumerator (coordinator) state holds the splits not
     * handed out yet, so losing it on restore makes the source read them again. */
    static final class SplitSequence extends NumberSequenceSource {
        SplitSequence() { super(0, NUMBERS - 1); }

        @Override
        public SplitEnumerator<NumberSequenceSplit, Collection<NumberSequenceSplit>> createEnumerator(
                SplitEnumeratorContext<NumberSequenceSplit> ctx) {
            return new IteratorSourceEnumerator<>(ctx, splitNumberRange(getFrom(), getTo(), SPLITS));
        }
    }

    static long checked(long x) { return x * 1000003L + (x % KEYS); }

    static boolean valid(long e) { return e >= 0 && (e % 1000003L) == (e / 1000003L) % KEYS; }

    /** Timers never fire (the job has no watermarks): they stay in state, one per key at TIMER_BASE + key. */
    static final long TIMER_BASE = 1_000_000_000_000L;

    /** The key's number: keys are v % 97, as a Long, as "k" + that, or as the tuple (that, "k"). */
    static long keyNumber(Object key) {
        if (key instanceof org.apache.flink.api.java.tuple.Tuple2) {
            return (Long) ((org.apache.flink.api.java.tuple.Tuple2<?, ?>) key).f0;
        }
        return key instanceof Long ? (Long) key : Long.parseLong(((String) key).substring(1));
    }

    /** Per key: `seen` (number -> 3 * number + 1), `count`, `sum` (unless the job no longer declares it), and one
     * event-time timer. */
    static final class CountFn<K> extends KeyedProcessFunction<K, Long, Long> {
        private final boolean withSum;
        transient MapState<Long, Long> seen;
        transient ValueState<Long> count;
        transient ValueState<Long> sum;
        long duplicates;
        long received;

        CountFn(boolean withSum) { this.withSum = withSum; }

        @Override public void open(org.apache.flink.api.common.functions.OpenContext ctx) {
            seen = getRuntimeContext().getMapState(new MapStateDescriptor<>("seen", Types.LONG, Types.LONG));
            count = getRuntimeContext().getState(new ValueStateDescriptor<>("count", Types.LONG));
            if (withSum) sum = getRuntimeContext().getState(new ValueStateDescriptor<>("sum", Types.LONG));
        }

        @Override public void processElement(Long v, Context ctx, Collector<Long> out) throws Exception {
            received++;
            ctx.timerService().registerEventTimeTimer(TIMER_BASE + keyNumber(ctx.getCurrentKey()));
            if (seen.contains(v)) {
                duplicates++;
            } else {
                seen.put(v, 3 * v + 1);
                Long c = count.value();
                count.update(c == null ? 1L : c + 1);
                if (sum != null) {
                    Long s = sum.value();
                    sum.update(s == null ? v : s + v);
                }
            }
            out.collect(v);
        }
    }

    /** The keyed operator: checks every restored key and timer against its redundant copies, reports totals at the
     * end. */
    static final class CheckedCounts<K> extends KeyedProcessOperator<K, Long, Long> {
        private final String reportAs;
        private final CountFn<K> fn;

        CheckedCounts(String reportAs) { this(reportAs, true); }

        CheckedCounts(String reportAs, boolean withSum) { this(reportAs, new CountFn<>(withSum)); }

        private CheckedCounts(String reportAs, CountFn<K> fn) {
            super(fn);
            this.reportAs = reportAs;
            this.fn = fn;
        }

        private int idx() { return getRuntimeContext().getTaskInfo().getIndexOfThisSubtask(); }

        private List<K> keys() throws Exception {
            try (Stream<K> s = this.<K>getKeyedStateBackend().getKeys("count", VoidNamespace.INSTANCE)) {
                return s.collect(Collectors.toList());
            }
        }

        /** [keys, numbers held, keys whose values do not agree with their copies, timers, misplaced timers]. */
        private long[] audit() throws Exception {
            long held = 0;
            long bad = 0;
            List<K> keys = keys();
            for (K k : keys) {
                setCurrentKey(k);
                long n = 0;
                long total = 0;
                boolean ok = true;
                for (Map.Entry<Long, Long> e : fn.seen.entries()) {
                    n++;
                    total += e.getKey();
                    ok &= e.getKey() % KEYS == keyNumber(k) && e.getValue() == 3 * e.getKey() + 1;
                }
                Long c = fn.count.value();
                ok &= c != null && c == n;
                if (fn.sum != null) {
                    Long s = fn.sum.value();
                    ok &= s != null && s == total;
                }
                held += n;
                if (!ok) bad++;
            }
            long[] timers = new long[2];
            InternalTimerService<VoidNamespace> service =
                    getInternalTimerService("user-timers", VoidNamespaceSerializer.INSTANCE, this);
            service.forEachEventTimeTimer((ns, t) -> {
                timers[0]++;
                if (t != TIMER_BASE + keyNumber(getCurrentKey())) timers[1]++;
            });
            return new long[] {keys.size(), held, bad, timers[0], timers[1]};
        }

        @Override public void open() throws Exception {
            super.open();
            long[] a = audit();
            Report.put("restore", reportAs, idx(), "keys", a[0]);
            Report.put("restore", reportAs, idx(), "numbers", a[1]);
            Report.put("restore", reportAs, idx(), "bad_keys", a[2]);
            Report.put("restore", reportAs, idx(), "timers", a[3]);
            Report.put("restore", reportAs, idx(), "bad_timers", a[4]);
            Report.put("restore", reportAs, idx(), "max_parallelism",
                    getRuntimeContext().getTaskInfo().getMaxNumberOfParallelSubtasks());
            long sumKeys; // keys the backend restored into "sum", declared by this job or not (-1: it cannot say)
            try (Stream<K> s = this.<K>getKeyedStateBackend().getKeys("sum", VoidNamespace.INSTANCE)) {
                sumKeys = s.count();
            } catch (Exception e) {
                sumKeys = -1;
            }
            Report.put("restore", reportAs, idx(), "sum_keys", sumKeys);
        }

        @Override public void snapshotState(StateSnapshotContext context) throws Exception {
            super.snapshotState(context);
            Report.put("snapshot", reportAs, idx(), "numbers", audit()[1]);
        }

        @Override public void finish() throws Exception {
            super.finish();
            long[] a = audit();
            Report.put("end", reportAs, idx(), "numbers", a[1]);
            Report.put("end", reportAs, idx(), "bad_keys", a[2]);
            Report.put("end", reportAs, idx(), "timers", a[3]);
            Report.put("end", reportAs, idx(), "bad_timers", a[4]);
            Report.put("end", reportAs, idx(), "duplicates", fn.duplicates);
            Report.put("end", reportAs, idx(), "received", fn.received);
        }
    }

    /** Operator list state "pairs" (split) and "union" with self-checking elements, checked on restore. */
    static final class Lists extends RichMapFunction<Long, Long> implements CheckpointedFunction {
        private final String reportAs;
        private final boolean withPairs;
        private transient ListState<Long> pairs;
        private transient ListState<Long> union;
        private long seen;

        Lists(String reportAs) { this(reportAs, true); }

        Lists(String reportAs, boolean withPairs) {
            this.reportAs = reportAs;
            this.withPairs = withPairs;
        }

        @Override public Long map(Long v) {
            seen++;
            return v;
        }

        @Override public void snapshotState(FunctionSnapshotContext ctx) throws Exception {
            int idx = getRuntimeContext().getTaskInfo().getIndexOfThisSubtask();
            if (pairs != null) {
                List<Long> p = new ArrayList<>();
                for (int i = 0; i < idx + 2; i++) p.add(checked(seen + i));
                pairs.update(p);
            }
            List<Long> u = new ArrayList<>();
            u.add(checked(idx));
            union.update(u);
        }

        @Override public void initializeState(FunctionInitializationContext ctx) throws Exception {
            int idx = getRuntimeContext().getTaskInfo().getIndexOfThisSubtask();
            if (withPairs) {
                pairs = ctx.getOperatorStateStore().getListState(new ListStateDescriptor<>("pairs", Types.LONG));
            }
            union = ctx.getOperatorStateStore().getUnionListState(new ListStateDescriptor<>("union", Types.LONG));
            long n = 0;
            long bad = 0;
            if (pairs != null) {
                for (Long e : pairs.get()) {
                    n++;
                    if (!valid(e)) bad++;
                }
            }
            long m = 0;
            for (Long e : union.get()) {
                m++;
                if (!valid(e)) bad++;
            }
            Report.put("restore", reportAs, idx, "pairs", n);
            Report.put("restore", reportAs, idx, "union", m);
            Report.put("restore", reportAs, idx, "bad_elements", bad);
            // the states the backend holds after the restore, declared by this job or restored only
            Report.put("restore", reportAs, idx, "registered",
                    new java.util.TreeSet<>(ctx.getOperatorStateStore().getRegisteredStateNames()).toString());
        }
    }
}

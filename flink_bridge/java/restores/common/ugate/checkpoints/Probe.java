package ugate.checkpoints;

import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.runtime.state.StateInitializationContext;
import org.apache.flink.runtime.state.StateSnapshotContext;
import org.apache.flink.runtime.state.VoidNamespace;
import org.apache.flink.streaming.api.operators.AbstractStreamOperator;
import org.apache.flink.streaming.api.operators.OneInputStreamOperator;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;

import java.util.ArrayList;
import java.util.List;
import java.util.stream.Collectors;
import java.util.stream.Stream;

/**
 * A stateful pass-through operator that reports what it got back on restore and what it held at
 * snapshot time. Keyed: ValueState "count" per key (the records seen per key). Not keyed: list
 * state "seen" holding one element per subtask (the records that subtask saw). `sleepMs` slows it
 * down, so the exchange in front of it backs up and an unaligned checkpoint holds in-flight data.
 */
final class Probe extends AbstractStreamOperator<Long> implements OneInputStreamOperator<Long, Long> {
    private final String reportAs;
    private final boolean keyed;
    private final long sleepMs;
    private transient ValueState<Long> count;
    private transient ListState<Long> seenState;
    private long seen;

    Probe(String reportAs, boolean keyed, long sleepMs) {
        this.reportAs = reportAs;
        this.keyed = keyed;
        this.sleepMs = sleepMs;
        chainAlways(this);
    }

    /**
     * Flink 1.x operators default to ChainingStrategy.HEAD (never chained to their input), 2.x ones
     * to ALWAYS: set ALWAYS where the field still exists, so both releases build the same chains.
     */
    private static void chainAlways(AbstractStreamOperator<?> op) {
        try {
            java.lang.reflect.Field f = AbstractStreamOperator.class.getDeclaredField("chainingStrategy");
            f.setAccessible(true);
            f.set(op, org.apache.flink.streaming.api.operators.ChainingStrategy.ALWAYS);
        } catch (NoSuchFieldException e) {
            // Flink 2.x: the operator factory chains it ALWAYS already
        } catch (IllegalAccessException e) {
            throw new IllegalStateException(e);
        }
    }

    private int idx() { return getRuntimeContext().getTaskInfo().getIndexOfThisSubtask(); }

    @Override public void initializeState(StateInitializationContext context) throws Exception {
        super.initializeState(context);
        if (keyed) return;
        seenState = context.getOperatorStateStore().getListState(new ListStateDescriptor<>("seen", Types.LONG));
        long n = 0;
        seen = 0;
        for (Long l : seenState.get()) {
            n++;
            seen += l;
        }
        Rep.put("restore", reportAs, idx(), "list_elements", n);
        Rep.put("restore", reportAs, idx(), "value_sum", seen);
    }

    @Override public void open() throws Exception {
        super.open();
        if (!keyed) return;
        count = getPartitionedState(new ValueStateDescriptor<>("count", Types.LONG));
        long[] kv = keysAndSum();
        Rep.put("restore", reportAs, idx(), "keyed_entries", kv[0]);
        Rep.put("restore", reportAs, idx(), "value_sum", kv[1]);
    }

    private long[] keysAndSum() throws Exception {
        List<Object> keys;
        try (Stream<Object> s = this.<Object>getKeyedStateBackend().<VoidNamespace>getKeys("count", VoidNamespace.INSTANCE)) {
            keys = s.collect(Collectors.toCollection(ArrayList::new));
        }
        Object current = getCurrentKey();
        long sum = 0;
        for (Object k : keys) {
            setCurrentKey(k);
            Long v = count.value();
            sum += v == null ? 0 : v;
        }
        if (current != null) setCurrentKey(current);
        return new long[] {keys.size(), sum};
    }

    @Override public void processElement(StreamRecord<Long> element) throws Exception {
        if (sleepMs > 0) Thread.sleep(sleepMs);
        if (keyed) {
            Long c = count.value();
            count.update(c == null ? 1L : c + 1);
        } else {
            seen++;
        }
        output.collect(element);
    }

    @Override public void snapshotState(StateSnapshotContext context) throws Exception {
        super.snapshotState(context);
        if (keyed) {
            long[] kv = keysAndSum();
            Rep.put("snapshot", reportAs, idx(), "keyed_entries", kv[0]);
            Rep.put("snapshot", reportAs, idx(), "value_sum", kv[1]);
        } else {
            seenState.update(java.util.Collections.singletonList(seen));
            Rep.put("snapshot", reportAs, idx(), "list_elements", 1L);
            Rep.put("snapshot", reportAs, idx(), "value_sum", seen);
        }
    }
}

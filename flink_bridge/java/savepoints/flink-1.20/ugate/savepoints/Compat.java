package ugate.savepoints;

import org.apache.flink.runtime.checkpoint.OperatorState;
import org.apache.flink.runtime.jobgraph.OperatorID;
import org.apache.flink.streaming.api.datastream.DataStreamSource;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.source.ParallelSourceFunction;

/** The few API points that differ between Flink 1.20 and 2.x (legacy sources, operator names in metadata). */
final class Compat {
    private Compat() {}

    static String operatorName(OperatorState s) { return null; }

    static String operatorUid(OperatorState s) { return null; }

    /** An operator's state in a checkpoint, as the checkpoint coordinator creates it. */
    static OperatorState operatorState(String name, String uid, OperatorID id, int parallelism, int maxParallelism) {
        return new OperatorState(id, parallelism, maxParallelism); // 1.x metadata has no name/uid
    }

    /** A legacy ParallelSourceFunction emitting an increasing counter; state via Functions.LegacyCounterState. */
    static DataStreamSource<Long> legacySource(StreamExecutionEnvironment env, long stopAfterOnSubtask1, long sleepMs) {
        return env.addSource(new LegacySource(stopAfterOnSubtask1, sleepMs));
    }

    static final class LegacySource extends Functions.LegacyCounterState implements ParallelSourceFunction<Long> {
        LegacySource(long stopAfterOnSubtask1, long sleepMs) { super(stopAfterOnSubtask1, sleepMs); }

        @Override public void run(SourceContext<Long> ctx) throws Exception {
            runLoop(ctx::getCheckpointLock, ctx::collect);
        }

        @Override public void cancel() { running = false; }
    }
}

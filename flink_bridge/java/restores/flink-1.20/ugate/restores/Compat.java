package ugate.restores;

import org.apache.flink.streaming.api.datastream.DataStreamSource;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.source.ParallelSourceFunction;

/** Flink 1.20 spelling of the legacy parallel source (the interface moved to a `legacy` package in 2.x). */
final class Compat {
    private Compat() {}

    static DataStreamSource<Long> rulesSource(StreamExecutionEnvironment env, String reportAs) {
        return env.addSource(new RulesSource(reportAs));
    }

    static final class RulesSource extends Functions.RulesSourceBody implements ParallelSourceFunction<Long> {
        RulesSource(String reportAs) { super(reportAs); }

        @Override public void run(SourceContext<Long> ctx) throws Exception {
            runLoop(ctx::getCheckpointLock, ctx::collect);
        }

        @Override public void cancel() { running = false; }
    }

    static DataStreamSource<Long> taggedSource(StreamExecutionEnvironment env, String tag) {
        return env.addSource(new TaggedSource(tag));
    }

    static final class TaggedSource extends Misroute.TaggedSourceBody implements ParallelSourceFunction<Long> {
        TaggedSource(String tag) { super(tag); }

        @Override public void run(SourceContext<Long> ctx) throws Exception {
            runLoop(ctx::getCheckpointLock, ctx::collect);
        }

        @Override public void cancel() { running = false; }
    }
}

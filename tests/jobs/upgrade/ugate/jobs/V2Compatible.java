package ugate.jobs;

import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

/**
 * v2-compatible: the same uids, a new stateless map after the counter (which changes the chains),
 * and the counter rescaled from 1 to 2 subtasks (its keyed state is redistributed by key group).
 * With {@code -D ugate.restore-hold-file=<path>} its restore waits for that file ({@link Pipeline#restoreHold}).
 */
public final class V2Compatible {
    public static void main(String[] args) throws Exception {
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        DataStream<String> events = Pipeline.source(env, args, "events");
        events.map(new Pipeline.Tagger("v2-compatible", Pipeline.restoreHold(env))).uid("tagger").name("tagger")
                .keyBy(k -> k)
                .process(new Pipeline.Counter("v2-compatible")).uid("counter").name("counter").setParallelism(2)
                .map(line -> line + " enriched=yes").returns(Types.STRING).name("enrich").setParallelism(2)
                .sinkTo(Pipeline.printSink()).uid("printer").name("printer");
        env.execute(Pipeline.jobName(env));
    }
}

package ugate.jobs;

import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

/**
 * v2-restore-crash: the graph of v2-compatible (same uids, so the gate passes it), but the
 * counter's state type changed from Long to String. Flink maps every operator's state, then the
 * counter fails while restoring (incompatible state serializer) and the job ends FAILED: the
 * upgrade must roll back to v1 from the upgrade savepoint.
 */
public final class V2RestoreCrash {
    public static void main(String[] args) throws Exception {
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        DataStream<String> events = Pipeline.source(env, args, "events");
        events.map(new Pipeline.Tagger("v2-restore-crash")).uid("tagger").name("tagger")
                .keyBy(k -> k)
                .process(new Pipeline.StringCounter("v2-restore-crash")).uid("counter").name("counter")
                .setParallelism(2)
                .map(line -> line + " enriched=yes").returns(Types.STRING).name("enrich").setParallelism(2)
                .sinkTo(Pipeline.printSink()).uid("printer").name("printer");
        env.execute(Pipeline.jobName(env));
    }
}

package ugate.jobs;

import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

/**
 * v2-fails: the counter now sets an explicit max parallelism (256) while the savepoint's keyed
 * state was written with the derived one (128): a configured max parallelism cannot be overridden,
 * so Flink refuses the savepoint.
 */
public final class V2Fails {
    public static void main(String[] args) throws Exception {
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        DataStream<String> events = Pipeline.source(env, args, "events");
        events.map(new Pipeline.Tagger("v2-fails")).uid("tagger").name("tagger")
                .keyBy(k -> k)
                .process(new Pipeline.Counter("v2-fails")).uid("counter").name("counter").setMaxParallelism(256)
                .sinkTo(Pipeline.printSink()).uid("printer").name("printer");
        env.execute(Pipeline.jobName(env));
    }
}

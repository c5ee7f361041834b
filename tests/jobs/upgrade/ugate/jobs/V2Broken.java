package ugate.jobs;

import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

/**
 * v2-broken: someone "cleaned up" the uids and broke the source-tagger chain. Every operator now
 * has a generated id that depends on the graph, so no state of the savepoint maps to it.
 */
public final class V2Broken {
    public static void main(String[] args) throws Exception {
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        DataStream<String> events = Pipeline.source(env, args, null);
        events.map(new Pipeline.Tagger("v2-broken")).name("tagger").disableChaining()
                .keyBy(k -> k)
                .process(new Pipeline.Counter("v2-broken")).name("counter")
                .sinkTo(Pipeline.printSink()).name("printer");
        env.execute(Pipeline.jobName(env));
    }
}

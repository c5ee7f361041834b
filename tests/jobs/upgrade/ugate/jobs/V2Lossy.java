package ugate.jobs;

import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

/** v2-lossy: the stateful "tagger" was removed; its operator state ("seen") has no operator any more. */
public final class V2Lossy {
    public static void main(String[] args) throws Exception {
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        DataStream<String> events = Pipeline.source(env, args, "events");
        events.keyBy(k -> k)
                .process(new Pipeline.Counter("v2-lossy")).uid("counter").name("counter")
                .sinkTo(Pipeline.printSink()).uid("printer").name("printer");
        env.execute(Pipeline.jobName(env));
    }
}

package ugate.jobs;

import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

/**
 * v2-rekeyed: v1 with the stateful "tagger" under another uid ("tagger-v2"), so its operator state ("seen") matches
 * no operator any more. The new tagger still initialises with isRestored() == true and nothing in "seen" (issue #33).
 */
public final class V2Rekeyed {
    public static void main(String[] args) throws Exception {
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        DataStream<String> events = Pipeline.source(env, args, "events");
        events.map(new Pipeline.Tagger("v2-rekeyed")).uid("tagger-v2").name("tagger")
                .keyBy(k -> k)
                .process(new Pipeline.Counter("v2-rekeyed")).uid("counter").name("counter")
                .sinkTo(Pipeline.printSink()).uid("printer").name("printer");
        env.execute(Pipeline.jobName(env));
    }
}

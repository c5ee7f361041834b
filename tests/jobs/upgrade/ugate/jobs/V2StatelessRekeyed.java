package ugate.jobs;

import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

/**
 * v2-stateless-rekeyed: v1 with only the stateless print sink under another uid ("printer-v2"); every stateful uid
 * ("events", "tagger", "counter") is kept. From a savepoint with allowNonRestoredState Flink skips the old printer (it
 * has no state); from a checkpoint recovered through HA metadata (the Kubernetes operator's last-state upgrade) it
 * must not (tests/flink/test_last_state_ha_restore.py).
 */
public final class V2StatelessRekeyed {
    public static void main(String[] args) throws Exception {
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        DataStream<String> events = Pipeline.source(env, args, "events");
        events.map(new Pipeline.Tagger("v2-stateless-rekeyed")).uid("tagger").name("tagger")
                .keyBy(k -> k)
                .process(new Pipeline.Counter("v2-stateless-rekeyed")).uid("counter").name("counter")
                .sinkTo(Pipeline.printSink()).uid("printer-v2").name("printer");
        env.execute(Pipeline.jobName(env));
    }
}

package ugate.checkpoints;

import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.streaming.api.graph.StreamGraph;

/**
 * The jobs of the three checkpoint families (stream-node names in quotes, all with uids):
 *
 * <ul>
 *   <li>finished: "bounded" (fromSequence 0..49, finishes) -> "tag" (list state) -> [added] ; "numbers"
 *       (unbounded) -> "throttle"; both -> keyBy -> "keyed" (ValueState) -> "sink"</li>
 *   <li>unaligned: "numbers" -> [added upstream] -> exchange (rebalance | keyBy | rescale | forward) ->
 *       "slow" (list state, 1 ms per record: the exchange backs up) -> [added downstream] -> "sink"</li>
 *   <li>rocksdb: "numbers" -> "throttle" -> keyBy -> "keyed" (ValueState, uid "keyed" or another) -> "sink"</li>
 * </ul>
 */
final class Jobs {
    private Jobs() {}

    static final int KEYS = 10;

    /** One job variant. */
    static final class Spec {
        final String family;
        int parallelism = 2;
        int downstreamParallelism;
        String exchange = "rebalance";
        boolean tagNewChain;
        boolean addedChained;
        boolean addedUnchained;
        boolean addedUpstream;
        boolean addedDownstream;
        String keyedUid = "keyed";

        Spec(String family) { this.family = family; }

        int down() { return downstreamParallelism > 0 ? downstreamParallelism : parallelism; }
    }

    static StreamGraph build(Configuration conf, Spec s, String jobName) {
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        env.setParallelism(s.parallelism);
        switch (s.family) {
            case "finished": finished(env, s); break;
            case "unaligned": unaligned(env, s); break;
            case "rocksdb": rocksdb(env, s); break;
            default: throw new IllegalArgumentException(s.family);
        }
        StreamGraph g = env.getStreamGraph(false);
        g.setJobName(jobName);
        return g;
    }

    private static SingleOutputStreamOperator<Long> probe(DataStream<Long> in, String name, boolean keyed, long sleepMs) {
        return in.transform(name, Types.LONG, new Probe(name, keyed, sleepMs)).uid(name);
    }

    private static SingleOutputStreamOperator<Long> numbers(StreamExecutionEnvironment env) {
        return env.fromSequence(0, Long.MAX_VALUE).name("numbers").uid("numbers");
    }

    private static void sink(DataStream<Long> in) {
        in.sinkTo(new DiscardingSink<Long>()).name("sink").uid("sink");
    }

    private static void finished(StreamExecutionEnvironment env, Spec s) {
        SingleOutputStreamOperator<Long> tag = probe(env.fromSequence(0, 49).name("bounded").uid("bounded"), "tag", false, 0);
        if (s.tagNewChain) tag.startNewChain();
        DataStream<Long> bounded = tag;
        if (s.addedChained || s.addedUnchained) {
            SingleOutputStreamOperator<Long> added = probe(tag, "added", false, 0);
            if (s.addedUnchained) added.startNewChain();
            bounded = added;
        }
        DataStream<Long> throttle = probe(numbers(env), "throttle", false, 5);
        sink(probe(bounded.union(throttle).keyBy(v -> v % KEYS), "keyed", true, 0));
    }

    private static void unaligned(StreamExecutionEnvironment env, Spec s) {
        DataStream<Long> up = numbers(env);
        if (s.addedUpstream) up = probe(up, "added", false, 0);
        DataStream<Long> exchanged;
        switch (s.exchange) {
            case "rebalance": exchanged = up.rebalance(); break;
            case "keyby": exchanged = up.keyBy(v -> v % KEYS); break;
            case "rescale": exchanged = up.rescale(); break;
            case "forward": exchanged = up.forward(); break;
            default: throw new IllegalArgumentException(s.exchange);
        }
        SingleOutputStreamOperator<Long> slow = probe(exchanged, "slow", false, 1);
        slow.setParallelism(s.down());
        DataStream<Long> tail = slow;
        if (s.addedDownstream) tail = probe(slow, "added", false, 0).setParallelism(s.down());
        sink(tail);
    }

    private static void rocksdb(StreamExecutionEnvironment env, Spec s) {
        DataStream<Long> throttle = probe(numbers(env), "throttle", false, 2);
        SingleOutputStreamOperator<Long> keyed = throttle.keyBy(v -> v % KEYS)
                .transform("keyed", Types.LONG, new Probe("keyed", true, 0)).uid(s.keyedUid);
        keyed.setParallelism(s.down());
        sink(keyed);
    }
}

package ugate.restores;

import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.DataStreamSink;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.streaming.api.graph.StreamGraph;

import java.util.function.Consumer;

/**
 * One variant of the fixture job. Topology (names are the stream-node names):
 * numbers (FLIP-27 source) -> throttle -> [inserted] -> keyBy -> keyed (ValueState per key)
 *   -> broadcast (connect with rules, the legacy source, broadcast state) -> lists (split-a, split-b, union-list)
 *   -> [added] -> [empty-list] -> sink.
 */
final class Shape {
    final String key;
    int parallelism = 2;
    int maxParallelism = -1;
    boolean uids = true;
    boolean keyedUid = true;
    boolean sourceUid = true;
    int keyedParallelism;
    int listsParallelism;
    int listsMaxParallelism;
    /** A literal 32-hex uid hash for the keyed operator, or "@A": the keyed operator's id in job A. */
    String keyedUidHash;
    boolean disableChaining;
    boolean insertMap;
    boolean removeLists;
    boolean removeThrottle;
    boolean addOperator;
    boolean emptyListOp;
    boolean swapSources;
    /** A job of the misrouting family (see Misroute), or null for the fixture job above. */
    String misroute;

    Shape(String key) { this.key = key; }

    Shape copy(String newKey, Consumer<Shape> change) {
        Shape s = new Shape(newKey);
        s.parallelism = parallelism;
        s.maxParallelism = maxParallelism;
        s.uids = uids;
        s.keyedUid = keyedUid;
        s.sourceUid = sourceUid;
        s.keyedParallelism = keyedParallelism;
        s.listsParallelism = listsParallelism;
        s.listsMaxParallelism = listsMaxParallelism;
        s.keyedUidHash = keyedUidHash;
        s.disableChaining = disableChaining;
        s.insertMap = insertMap;
        s.removeLists = removeLists;
        s.removeThrottle = removeThrottle;
        s.addOperator = addOperator;
        s.emptyListOp = emptyListOp;
        s.swapSources = swapSources;
        s.misroute = misroute;
        change.accept(s);
        return s;
    }

    Shape copy(Consumer<Shape> change) { return copy(key + "*", change); }

    private int keyedP() { return keyedParallelism > 0 ? keyedParallelism : parallelism; }

    private int listsP() { return listsParallelism > 0 ? listsParallelism : parallelism; }

    /** (operator, subtask) pairs whose user functions report on initialization. */
    int expectedReporters() {
        if (misroute != null) return Misroute.expectedReporters(this);
        int n = keyedP() + parallelism /* broadcast */ + parallelism /* rules */;
        if (!removeLists) n += listsP();
        if (addOperator) n += parallelism;
        if (emptyListOp) n += parallelism;
        return n;
    }

    private DataStream<Long> rules(StreamExecutionEnvironment env) {
        SingleOutputStreamOperator<Long> rules = Compat.rulesSource(env, "rules").name("rules");
        if (uids) rules.uid("rules");
        return rules;
    }

    StreamGraph build(Configuration conf, String jobName, String resolvedUidHash) {
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        env.setParallelism(parallelism);
        if (maxParallelism > 0) env.setMaxParallelism(maxParallelism);
        if (disableChaining) env.disableOperatorChaining();
        if (misroute != null) {
            Misroute.build(this, env);
            StreamGraph g = env.getStreamGraph(false);
            g.setJobName(jobName);
            return g;
        }
        DataStream<Long> rules = swapSources ? rules(env) : null;
        SingleOutputStreamOperator<Long> numbers = env.fromSequence(0, Long.MAX_VALUE).name("numbers");
        if (uids && sourceUid) numbers.uid("numbers");
        DataStream<Long> in = numbers;
        if (!removeThrottle) {
            SingleOutputStreamOperator<Long> t = numbers.map(new Functions.Throttle(2)).name("throttle");
            if (uids) t.uid("throttle");
            in = t;
        }
        if (insertMap) in = in.map(new Functions.Identity()).name("inserted");
        SingleOutputStreamOperator<Long> keyed = in.keyBy(v -> v % Functions.KEYS)
                .transform("keyed", Types.LONG, new Functions.ReportingKeyedOperator("keyed"));
        if (uids && keyedUid) keyed.uid("keyed");
        if (resolvedUidHash != null) keyed.setUidHash(resolvedUidHash);
        if (keyedParallelism > 0) keyed.setParallelism(keyedParallelism);
        if (rules == null) rules = rules(env);
        SingleOutputStreamOperator<Long> bc = keyed.connect(rules.broadcast(Functions.RULES))
                .process(new Functions.BroadcastFn("broadcast")).name("broadcast");
        if (uids) bc.uid("broadcast");
        DataStream<Long> tail = bc;
        if (!removeLists) {
            SingleOutputStreamOperator<Long> lists = bc.map(new Functions.ListsFn("lists", false)).name("lists");
            if (uids) lists.uid("lists");
            if (listsParallelism > 0) lists.setParallelism(listsParallelism);
            if (listsMaxParallelism > 0) lists.setMaxParallelism(listsMaxParallelism);
            tail = lists;
        }
        if (addOperator) tail = tail.map(new Functions.ListsFn("added", false)).name("added").uid("added");
        if (emptyListOp) tail = tail.map(new Functions.ListsFn("empty-list", true)).name("empty-list").uid("empty-list");
        DataStreamSink<Long> sink = tail.sinkTo(new DiscardingSink<Long>()).name("sink");
        if (uids) sink.uid("sink");
        StreamGraph graph = env.getStreamGraph(false);
        graph.setJobName(jobName);
        return graph;
    }
}

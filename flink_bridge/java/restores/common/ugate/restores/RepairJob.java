package ugate.restores;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.StateBackendOptions;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.DataStreamSink;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.streaming.api.graph.StreamGraph;

import java.util.function.Consumer;

/**
 * One variant of the repair scenarios' job (stream-node names in quotes):
 * "numbers" (FLIP-27, 8 splits, coordinator state) -> "throttle" -> ["inserted"] -> keyBy(v % 97, a Long, or
 *   "k" + v % 97, a String) -> "counts" (keyed: seen/count/sum and one event-time timer per key)
 *   -> ["lists" (list + union state)] -> "sink". HashMap or RocksDB, max parallelism as set.
 * Bounded: it ends after 3,200 numbers, so a restored run can be checked to the end.
 */
final class RepairJob {
    int parallelism = 2;
    boolean uids = true;
    String sourceUid = "numbers";
    String countsUid = "counts";
    boolean insertMap;
    boolean disableChaining;
    boolean lists = true;
    int maxParallelism = -1;
    boolean stringKeys;
    boolean tupleKeys; // Tuple2<Long, String> keys: (v % 97, "k")
    String backend = "hashmap";
    boolean withPairs = true; // the "lists" operator declares its "pairs" list state
    boolean withSum = true; // the "counts" operator declares its "sum" value state

    RepairJob copy(Consumer<RepairJob> change) {
        RepairJob j = new RepairJob();
        j.parallelism = parallelism;
        j.uids = uids;
        j.sourceUid = sourceUid;
        j.countsUid = countsUid;
        j.insertMap = insertMap;
        j.disableChaining = disableChaining;
        j.lists = lists;
        j.maxParallelism = maxParallelism;
        j.stringKeys = stringKeys;
        j.tupleKeys = tupleKeys;
        j.backend = backend;
        j.withPairs = withPairs;
        j.withSum = withSum;
        change.accept(j);
        return j;
    }

    /** (operator, subtask) pairs that report when their state is initialized. */
    int reporters() { return parallelism * (lists ? 2 : 1); }

    StreamGraph build(Configuration clusterConf, String jobName) {
        Configuration conf = new Configuration(clusterConf);
        conf.set(StateBackendOptions.STATE_BACKEND, backend);
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        env.setParallelism(parallelism);
        if (maxParallelism > 0) env.setMaxParallelism(maxParallelism);
        if (disableChaining) env.disableOperatorChaining();
        SingleOutputStreamOperator<Long> numbers = env.fromSource(new RepairFunctions.SplitSequence(),
                WatermarkStrategy.noWatermarks(), "numbers");
        if (uids && sourceUid != null) numbers.uid(sourceUid);
        SingleOutputStreamOperator<Long> throttle = numbers.map(new Functions.Throttle(2)).name("throttle");
        if (uids) throttle.uid("throttle");
        DataStream<Long> in = throttle;
        if (insertMap) in = in.map(new Functions.Identity()).name("inserted");
        SingleOutputStreamOperator<Long> counts;
        if (tupleKeys) {
            KeySelector<Long, Tuple2<Long, String>> byTuple = v -> Tuple2.of(v % RepairFunctions.KEYS, "k");
            counts = in.keyBy(byTuple, Types.TUPLE(Types.LONG, Types.STRING))
                    .transform("counts", Types.LONG, new RepairFunctions.CheckedCounts<Tuple2<Long, String>>("counts",
                            withSum));
        } else if (stringKeys) {
            counts = in.keyBy(v -> "k" + (v % RepairFunctions.KEYS))
                    .transform("counts", Types.LONG, new RepairFunctions.CheckedCounts<String>("counts", withSum));
        } else {
            counts = in.keyBy(v -> v % RepairFunctions.KEYS)
                    .transform("counts", Types.LONG, new RepairFunctions.CheckedCounts<Long>("counts", withSum));
        }
        if (uids && countsUid != null) counts.uid(countsUid);
        DataStream<Long> tail = counts;
        if (lists) {
            SingleOutputStreamOperator<Long> l = counts.map(new RepairFunctions.Lists("lists", withPairs)).name("lists");
            if (uids) l.uid("lists");
            tail = l;
        }
        DataStreamSink<Long> sink = tail.sinkTo(new DiscardingSink<Long>()).name("sink");
        if (uids) sink.uid("sink");
        StreamGraph graph = env.getStreamGraph(false);
        graph.setJobName(jobName);
        return graph;
    }
}

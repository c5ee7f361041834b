package upgradegate.bridge;

import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.graph.StreamGraph;
import org.apache.flink.streaming.api.graph.StreamGraphHasherV2;

import java.io.BufferedWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.LongSupplier;

/**
 * Flink's side of bench/bench_hashing.py: its own {@link StreamGraphHasherV2} on generated job graphs, served
 * to bench/fair.py by {@code ugate.fair.FairServer} (which times it by this thread's CPU, round by round,
 * alternating with ours).
 *
 * <p>{@code fairWorkload(<specs.jsonl> <hashes.jsonl> <graphs> <operators per graph>)} builds the graphs with the
 * DataStream API, writes their specs (so our hashers are timed on exactly the same graphs) and Flink's V2 hash of
 * every node (so the benchmark proves both sides compute the same thing before it times them), and returns one
 * unit of work: every graph hashed once, the nodes hashed as its count. The graph objects exist before timing
 * starts, as ours do.
 */
public final class HashBench {
    private HashBench() {}

    public static LongSupplier fairWorkload(String[] args) throws Exception {
        int graphs = Integer.parseInt(args[2]);
        int operators = Integer.parseInt(args[3]);
        List<StreamGraph> built = new ArrayList<>();
        StreamGraphHasherV2 hasher = new StreamGraphHasherV2();
        try (BufferedWriter specs = Files.newBufferedWriter(Paths.get(args[0]), StandardCharsets.UTF_8);
             BufferedWriter hashes = Files.newBufferedWriter(Paths.get(args[1]), StandardCharsets.UTF_8)) {
            for (int g = 0; g < graphs; g++) {
                StreamGraph sg = build(g, operators);
                built.add(sg);
                specs.write(Json.write(SpecDumper.spec(sg)));
                specs.write('\n');
                Map<String, Object> ids = new LinkedHashMap<>();
                for (Map.Entry<Integer, byte[]> e : hasher.traverseStreamGraphAndGenerateHashes(sg).entrySet()) {
                    ids.put(String.valueOf(e.getKey()), hex(e.getValue()));
                }
                hashes.write(Json.write(ids));
                hashes.write('\n');
            }
        }
        return () -> {
            long nodes = 0;
            for (StreamGraph g : built) {
                nodes += hasher.traverseStreamGraphAndGenerateHashes(g).size();
            }
            return nodes;
        };
    }

    private static String hex(byte[] bytes) {
        StringBuilder b = new StringBuilder();
        for (byte x : bytes) b.append(String.format("%02x", x & 0xff));
        return b.toString();
    }

    /** A job shape with the features that matter to the hasher: chains, shuffles, fan-out, unions, uids. */
    private static StreamGraph build(int seed, int operators) {
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(new Configuration());
        env.setParallelism(2);
        DataStream<Long> s = env.fromSequence(0, 10).name("src-" + seed);
        int made = 1;
        int i = 0;
        while (made < operators - 1) {
            i++;
            if (i % 13 == 0 && made < operators - 4) {
                DataStream<Long> a = s.map(x -> x + 1).returns(Types.LONG).name("left-" + i);
                DataStream<Long> b = s.map(x -> x - 1).returns(Types.LONG).name("right-" + i);
                s = a.union(b).map(x -> x).returns(Types.LONG).name("merge-" + i);
                made += 3;
            } else if (i % 7 == 0) {
                s = s.keyBy(x -> x % 7).map(x -> x * 2).returns(Types.LONG).name("keyed-" + i);
                made++;
            } else if (i % 11 == 0) {
                s = s.rebalance().map(x -> x).returns(Types.LONG).name("rebalanced-" + i).setParallelism(3);
                made++;
            } else {
                s = s.map(x -> x).returns(Types.LONG).name("map-" + i);
                made++;
            }
            if ((i + seed) % 4 == 0) {
                s = ((org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator<Long>) s)
                        .uid("op-" + seed + "-" + i);
            }
        }
        s.print().name("sink-" + seed);
        return env.getStreamGraph(false);
    }
}

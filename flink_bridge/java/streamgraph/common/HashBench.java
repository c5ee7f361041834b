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

/**
 * Baseline for `make bench`: Flink's own {@link StreamGraphHasherV2} timed on generated job
 * graphs, whose specs are written out so the Python hasher is timed on exactly the same graphs.
 *
 * <p>Usage: {@code HashBench <specs.jsonl> <graphs> <operators per graph> <seconds>}. Prints one
 * JSON line: nodes hashed, seconds, nodes per second (after a warm-up of the same length).
 */
public final class HashBench {
    private HashBench() {}

    public static void main(String[] args) throws Exception {
        int graphs = Integer.parseInt(args[1]);
        int operators = Integer.parseInt(args[2]);
        double seconds = Double.parseDouble(args[3]);
        List<StreamGraph> built = new ArrayList<>();
        long nodes = 0;
        try (BufferedWriter out = Files.newBufferedWriter(Paths.get(args[0]), StandardCharsets.UTF_8)) {
            for (int g = 0; g < graphs; g++) {
                StreamGraph sg = build(g, operators);
                built.add(sg);
                nodes += sg.getStreamNodes().size();
                out.write(Json.write(SpecDumper.spec(sg)));
                out.write('\n');
            }
        }
        time(built, seconds); // warm-up: let the JIT compile the hasher
        long[] hashed = new long[1];
        double elapsed = time(built, seconds, hashed);
        Map<String, Object> result = new LinkedHashMap<>();
        result.put("graphs", graphs);
        result.put("nodes_per_pass", nodes);
        result.put("nodes_hashed", hashed[0]);
        result.put("nanos", (long) (elapsed * 1e9));
        result.put("nodes_per_second", (long) (hashed[0] / elapsed));
        System.out.println(Json.write(result));
    }

    private static double time(List<StreamGraph> graphs, double seconds) {
        return time(graphs, seconds, new long[1]);
    }

    private static double time(List<StreamGraph> graphs, double seconds, long[] hashed) {
        StreamGraphHasherV2 hasher = new StreamGraphHasherV2();
        long start = System.nanoTime();
        long deadline = start + (long) (seconds * 1e9);
        long sink = 0;
        while (System.nanoTime() < deadline) {
            for (StreamGraph g : graphs) {
                sink += hasher.traverseStreamGraphAndGenerateHashes(g).size();
            }
        }
        hashed[0] = sink;
        return (System.nanoTime() - start) / 1e9;
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

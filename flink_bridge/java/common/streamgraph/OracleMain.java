package upgradegate.bridge;

import org.apache.flink.configuration.ConfigOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.runtime.util.EnvironmentInformation;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.graph.StreamGraph;

import java.io.BufferedWriter;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Oracle fixture generator: for every case of {@link Cases}, the graph spec plus Flink's own
 * hashes and job vertices, one JSON object per line; then the key-group vectors.
 *
 * <p>Usage: {@code OracleMain <graphs.jsonl> <keygroups.json>}. The Python driver pretty-prints
 * and splits the output into fixture files.
 */
public final class OracleMain {
    private OracleMain() {}

    public static void main(String[] args) throws IOException {
        String version = EnvironmentInformation.getVersion();
        try (BufferedWriter out = Files.newBufferedWriter(Paths.get(args[0]), StandardCharsets.UTF_8)) {
            for (Cases.Case c : Cases.all()) {
                out.write(Json.write(runCase(version, c)));
                out.write('\n');
            }
        }
        Map<String, Object> keyGroups = KeyGroupVectors.all();
        keyGroups.put("flink_version", version);
        Files.write(Paths.get(args[1]), Json.write(keyGroups).getBytes(StandardCharsets.UTF_8));
    }

    static StreamExecutionEnvironment environment(String jobName, Map<String, String> options) {
        Configuration conf = new Configuration();
        conf.set(ConfigOptions.key("pipeline.name").stringType().noDefaultValue(), jobName);
        for (Map.Entry<String, String> e : options.entrySet()) {
            conf.set(ConfigOptions.key(e.getKey()).stringType().noDefaultValue(), e.getValue());
        }
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        // Never depend on the machine's core count.
        env.setParallelism(2);
        return env;
    }

    static Map<String, Object> runCase(String version, Cases.Case c) {
        Map<String, Object> record = new LinkedHashMap<>();
        record.put("flink_version", version);
        record.put("case", c.name);
        record.put("description", c.description);
        StreamGraph graph;
        try {
            StreamExecutionEnvironment env = environment(c.name, c.conf);
            c.build.build(env);
            graph = env.getStreamGraph(false);
        } catch (Exception e) {
            Map<String, Object> flink = new LinkedHashMap<>();
            flink.put("hashes", null);
            flink.put("user_hashes", null);
            flink.put("job_vertices", null);
            flink.put("error", FlinkIds.error(e));
            record.put("spec", null);
            record.put("flink", flink);
            return record;
        }
        record.put("spec", SpecDumper.spec(graph));
        Map<String, Object> flink = FlinkIds.results(graph);
        flink.put("stream_graph", SpecDumper.streamGraphFacts(graph));
        record.put("flink", flink);
        return record;
    }
}

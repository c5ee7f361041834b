package upgradegate.bridge;

import org.apache.flink.runtime.OperatorIDPair;
import org.apache.flink.runtime.jobgraph.JobGraph;
import org.apache.flink.runtime.jobgraph.JobVertex;
import org.apache.flink.streaming.api.graph.StreamGraph;
import org.apache.flink.streaming.api.graph.StreamGraphHasherV2;
import org.apache.flink.streaming.api.graph.StreamGraphUserHashHasher;
import org.apache.flink.streaming.api.graph.StreamingJobGraphGenerator;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * What Flink itself computes for a stream graph: V2 hashes, user hashes and the job graph's
 * vertices with their {@link OperatorIDPair}s. These are the expected values of the fixtures.
 */
public final class FlinkIds {
    private FlinkIds() {}

    public static Map<String, Object> results(StreamGraph graph) {
        Map<String, Object> out = new LinkedHashMap<>();
        Throwable error = null;
        Map<Integer, byte[]> hashes = null;
        try {
            hashes = new StreamGraphHasherV2().traverseStreamGraphAndGenerateHashes(graph);
        } catch (RuntimeException e) {
            error = e;
        }
        Map<Integer, byte[]> userHashes = null;
        try {
            userHashes = new StreamGraphUserHashHasher().traverseStreamGraphAndGenerateHashes(graph);
        } catch (RuntimeException e) {
            error = error == null ? e : error;
        }
        out.put("hashes", hashes == null ? null : hexMap(hashes));
        out.put("user_hashes", userHashes == null ? null : hexMap(userHashes));
        List<Object> vertices = null;
        if (error == null) {
            try {
                JobGraph jobGraph = StreamingJobGraphGenerator.createJobGraph(graph);
                vertices = vertices(jobGraph, hashes);
            } catch (RuntimeException e) {
                error = e;
            }
        }
        out.put("job_vertices", vertices);
        out.put("error", error == null ? null : error(error));
        return out;
    }

    static Map<String, Object> error(Throwable e) {
        Throwable root = e;
        while (root.getCause() != null && root.getCause() != root) {
            root = root.getCause();
        }
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("class", root.getClass().getName());
        m.put("message", root.getMessage());
        if (root != e) {
            m.put("wrapped_in", e.getClass().getName());
        }
        return m;
    }

    private static List<Object> vertices(JobGraph jobGraph, Map<Integer, byte[]> hashes) {
        Map<String, Integer> nodeOfHash = new HashMap<>();
        for (Map.Entry<Integer, byte[]> e : hashes.entrySet()) {
            nodeOfHash.put(hex(e.getValue()), e.getKey());
        }
        List<Object> result = new ArrayList<>();
        for (JobVertex v : jobGraph.getVertices()) {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("id", v.getID().toHexString());
            m.put("name", v.getName());
            m.put("parallelism", v.getParallelism());
            m.put("max_parallelism", v.getMaxParallelism() > 0 ? v.getMaxParallelism() : null);
            List<Object> ops = new ArrayList<>();
            for (OperatorIDPair pair : v.getOperatorIDs()) {
                Map<String, Object> op = new LinkedHashMap<>();
                String generated = pair.getGeneratedOperatorID().toHexString();
                op.put("generated", generated);
                op.put("user_defined", pair.getUserDefinedOperatorID().map(id -> id.toHexString()).orElse(null));
                op.put("node_id", nodeOfHash.get(generated));
                ops.add(op);
            }
            m.put("operators", ops);
            result.add(m);
        }
        return result;
    }

    static Map<String, Object> hexMap(Map<Integer, byte[]> hashes) {
        Map<String, Object> m = new LinkedHashMap<>();
        for (Map.Entry<Integer, byte[]> e : new TreeMap<>(hashes).entrySet()) {
            m.put(String.valueOf(e.getKey()), hex(e.getValue()));
        }
        return m;
    }

    static String hex(byte[] bytes) {
        StringBuilder sb = new StringBuilder();
        for (byte b : bytes) {
            sb.append(String.format("%02x", b & 0xff));
        }
        return sb.toString();
    }
}

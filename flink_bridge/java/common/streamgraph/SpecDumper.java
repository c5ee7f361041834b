package upgradegate.bridge;

import org.apache.flink.streaming.api.graph.StreamEdge;
import org.apache.flink.streaming.api.graph.StreamGraph;
import org.apache.flink.streaming.api.graph.StreamNode;
import org.apache.flink.streaming.api.operators.SimpleOperatorFactory;
import org.apache.flink.streaming.api.operators.SourceOperatorFactory;
import org.apache.flink.streaming.api.operators.StreamOperatorFactory;
import org.apache.flink.streaming.api.operators.StreamSource;
import org.apache.flink.streaming.runtime.partitioner.BroadcastPartitioner;
import org.apache.flink.streaming.runtime.partitioner.CustomPartitionerWrapper;
import org.apache.flink.streaming.runtime.partitioner.ForwardForConsecutiveHashPartitioner;
import org.apache.flink.streaming.runtime.partitioner.ForwardPartitioner;
import org.apache.flink.streaming.runtime.partitioner.GlobalPartitioner;
import org.apache.flink.streaming.runtime.partitioner.KeyGroupStreamPartitioner;
import org.apache.flink.streaming.runtime.partitioner.RebalancePartitioner;
import org.apache.flink.streaming.runtime.partitioner.RescalePartitioner;
import org.apache.flink.streaming.runtime.partitioner.ShufflePartitioner;
import org.apache.flink.streaming.runtime.partitioner.StreamPartitioner;

import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.PriorityQueue;

/**
 * Turns a real Flink {@link StreamGraph} into the job-graph spec of docs/graph-spec.md.
 *
 * <p>Shared by the oracle (fixtures) and the exporter (user jobs), so both describe a graph
 * with exactly the same fields. Edge order matters to the hasher (out-edges are enqueued and
 * in-edges mixed in list order), so the global edge list is a topological order of the
 * per-node out/in-edge orders.
 */
public final class SpecDumper {
    private SpecDumper() {}

    public static Map<String, Object> spec(StreamGraph graph) {
        Map<String, Object> spec = new LinkedHashMap<>();
        spec.put("name", graph.getJobName());
        spec.put("chaining_enabled", graph.isChainingEnabled());
        int jobMaxP = graph.getExecutionConfig().getMaxParallelism();
        spec.put("max_parallelism", jobMaxP > 0 ? jobMaxP : null);
        spec.put("chain_operators_with_different_max_parallelism",
                graph.isChainingOfOperatorsWithDifferentMaxParallelismEnabled());
        List<StreamNode> nodes = sortedNodes(graph);
        List<Object> nodeSpecs = new ArrayList<>();
        for (StreamNode n : nodes) {
            nodeSpecs.add(node(n));
        }
        spec.put("nodes", nodeSpecs);
        List<Object> edgeSpecs = new ArrayList<>();
        for (StreamEdge e : orderedEdges(nodes)) {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("source", e.getSourceId());
            m.put("target", e.getTargetId());
            m.put("partitioner", partitioner(e.getPartitioner()));
            m.put("exchange_mode", e.getExchangeMode().name());
            m.put("type_number", e.getTypeNumber());
            edgeSpecs.add(m);
        }
        spec.put("edges", edgeSpecs);
        return spec;
    }

    /**
     * StreamGraph facts outside the spec format that explain job-graph results: a dynamic graph
     * (batch mode, adaptive batch scheduler) leaves job vertices whose parallelism was not set
     * explicitly (only the env default applies) at parallelism -1.
     */
    public static Map<String, Object> streamGraphFacts(StreamGraph graph) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("dynamic", graph.isDynamic());
        Map<String, Object> configured = new LinkedHashMap<>();
        for (StreamNode n : sortedNodes(graph)) {
            configured.put(String.valueOf(n.getId()), hidden(n, "isParallelismConfigured"));
        }
        m.put("parallelism_configured", configured);
        return m;
    }

    static List<StreamNode> sortedNodes(StreamGraph graph) {
        List<StreamNode> nodes = new ArrayList<>(graph.getStreamNodes());
        nodes.sort(Comparator.comparingInt(StreamNode::getId));
        return nodes;
    }

    private static Map<String, Object> node(StreamNode n) {
        Map<String, Object> m = new LinkedHashMap<>();
        StreamOperatorFactory<?> factory = n.getOperatorFactory();
        m.put("id", n.getId());
        m.put("name", n.getOperatorName());
        m.put("parallelism", n.getParallelism());
        int maxP = (Integer) hidden(n, "getMaxParallelism");
        m.put("max_parallelism", maxP > 0 ? maxP : null);
        m.put("uid", n.getTransformationUID());
        m.put("uid_hash", n.getUserHash());
        m.put("chaining_strategy", factory == null ? null : factory.getChainingStrategy().name());
        m.put("slot_sharing_group", n.getSlotSharingGroup());
        m.put("factory", factoryKind(factory));
        m.put("factory_class", factory == null ? null : factory.getClass().getSimpleName());
        return m;
    }

    /** StreamNode#getMaxParallelism (1.20) and #isParallelismConfigured are package-private getters. */
    static Object hidden(StreamNode n, String getter) {
        try {
            Method m = StreamNode.class.getDeclaredMethod(getter);
            m.setAccessible(true);
            return m.invoke(n);
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException("cannot call StreamNode#" + getter, e);
        }
    }

    static String factoryKind(StreamOperatorFactory<?> factory) {
        if (factory == null) {
            return "operator";
        }
        if (factory instanceof SourceOperatorFactory) {
            return "source";
        }
        if (factory.isLegacySource()
                || (factory instanceof SimpleOperatorFactory
                        && ((SimpleOperatorFactory<?>) factory).getOperator() instanceof StreamSource)) {
            return "legacy_source";
        }
        if (Compat.isYielding(factory)) {
            return "yielding";
        }
        return "operator";
    }

    static String partitioner(StreamPartitioner<?> p) {
        // Subclasses first: both forward variants below extend ForwardPartitioner.
        if (p instanceof ForwardForConsecutiveHashPartitioner) {
            return "FORWARD_FOR_CONSECUTIVE_HASH";
        }
        if (p instanceof ForwardPartitioner) {
            return "FORWARD";
        }
        if (p instanceof KeyGroupStreamPartitioner) {
            return "HASH";
        }
        if (p instanceof RebalancePartitioner) {
            return "REBALANCE";
        }
        if (p instanceof RescalePartitioner) {
            return "RESCALE";
        }
        if (p instanceof ShufflePartitioner) {
            return "SHUFFLE";
        }
        if (p instanceof BroadcastPartitioner) {
            return "BROADCAST";
        }
        if (p instanceof GlobalPartitioner) {
            return "GLOBAL";
        }
        if (p instanceof CustomPartitionerWrapper) {
            return "CUSTOM";
        }
        throw new IllegalStateException("unknown partitioner " + p.getClass().getName());
    }

    /**
     * Every edge once, in an order consistent with each node's out-edge list and in-edge list.
     * Kahn's algorithm over "e1 before e2" constraints; ties by (source, target, type number,
     * position in the source's out-edges) so the result is deterministic.
     */
    static List<StreamEdge> orderedEdges(List<StreamNode> nodes) {
        IdentityHashMap<StreamEdge, Integer> position = new IdentityHashMap<>();
        List<StreamEdge> all = new ArrayList<>();
        for (StreamNode n : nodes) {
            for (StreamEdge e : n.getOutEdges()) {
                if (!position.containsKey(e)) {
                    position.put(e, all.size());
                    all.add(e);
                }
            }
        }
        for (StreamNode n : nodes) {
            for (StreamEdge e : n.getInEdges()) {
                if (!position.containsKey(e)) {
                    throw new IllegalStateException("in-edge " + e + " is missing from its source's out-edges");
                }
            }
        }
        Map<StreamEdge, List<StreamEdge>> after = new IdentityHashMap<>();
        Map<StreamEdge, Integer> blockers = new IdentityHashMap<>();
        for (StreamEdge e : all) {
            after.put(e, new ArrayList<>());
            blockers.put(e, 0);
        }
        for (StreamNode n : nodes) {
            chain(n.getOutEdges(), after, blockers);
            chain(n.getInEdges(), after, blockers);
        }
        Comparator<StreamEdge> order = Comparator.comparingInt(StreamEdge::getSourceId)
                .thenComparingInt(StreamEdge::getTargetId)
                .thenComparingInt(StreamEdge::getTypeNumber)
                .thenComparingInt(position::get);
        PriorityQueue<StreamEdge> ready = new PriorityQueue<>(order);
        for (StreamEdge e : all) {
            if (blockers.get(e) == 0) {
                ready.add(e);
            }
        }
        List<StreamEdge> result = new ArrayList<>();
        while (!ready.isEmpty()) {
            StreamEdge e = ready.poll();
            result.add(e);
            for (StreamEdge next : after.get(e)) {
                int left = blockers.get(next) - 1;
                blockers.put(next, left);
                if (left == 0) {
                    ready.add(next);
                }
            }
        }
        if (result.size() != all.size()) {
            throw new IllegalStateException("edge order constraints are cyclic");
        }
        for (StreamNode n : nodes) {
            checkSubsequence(result, n.getOutEdges(), n);
            checkSubsequence(result, n.getInEdges(), n);
        }
        return result;
    }

    /** The global order must list each node's edges exactly as Flink's own list does. */
    private static void checkSubsequence(List<StreamEdge> global, List<StreamEdge> local, StreamNode n) {
        IdentityHashMap<StreamEdge, Boolean> mine = new IdentityHashMap<>();
        for (StreamEdge e : local) {
            mine.put(e, true);
        }
        List<StreamEdge> seen = new ArrayList<>();
        for (StreamEdge e : global) {
            if (mine.containsKey(e)) {
                seen.add(e);
            }
        }
        for (int i = 0; i < local.size(); i++) {
            if (seen.size() != local.size() || seen.get(i) != local.get(i)) {
                throw new IllegalStateException("edge order of node " + n.getId() + " not preserved");
            }
        }
    }

    private static void chain(List<StreamEdge> edges, Map<StreamEdge, List<StreamEdge>> after,
                              Map<StreamEdge, Integer> blockers) {
        for (int i = 0; i + 1 < edges.size(); i++) {
            after.get(edges.get(i)).add(edges.get(i + 1));
            blockers.put(edges.get(i + 1), blockers.get(edges.get(i + 1)) + 1);
        }
    }

    static Map<Integer, StreamNode> byId(StreamGraph graph) {
        Map<Integer, StreamNode> m = new HashMap<>();
        for (StreamNode n : graph.getStreamNodes()) {
            m.put(n.getId(), n);
        }
        return m;
    }
}

package upgradegate.bridge;

import org.apache.flink.api.connector.sink2.SupportsCommitter;
import org.apache.flink.api.connector.sink2.SupportsWriterState;
import org.apache.flink.api.connector.source.Source;
import org.apache.flink.core.io.SimpleVersionedSerializer;
import org.apache.flink.streaming.api.graph.StreamGraph;
import org.apache.flink.streaming.api.graph.StreamNode;
import org.apache.flink.streaming.api.operators.SourceOperatorFactory;
import org.apache.flink.streaming.api.operators.StreamOperatorFactory;
import org.apache.flink.streaming.runtime.operators.sink.CommitterOperatorFactory;
import org.apache.flink.streaming.runtime.operators.sink.SinkWriterOperatorFactory;

import java.lang.reflect.Field;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;

/**
 * The serializer versions a job's connectors read and write: the graph spec's {@code connector} node field
 * (docs/graph-spec.md), which the gate compares with the versions a savepoint's connector state was written with
 * (upgrade_gate/gate/rules/connector_versions.py).
 *
 * <p>A FLIP-27 source's {@code getSplitSerializer().getVersion()} (the "SourceReaderState" of SourceOperator) and
 * {@code getEnumeratorCheckpointSerializer().getVersion()} (SourceCoordinator's state); a Sink V2 writer's
 * {@code SupportsWriterState#getWriterStateSerializer().getVersion()} ("writer_raw_states") and a committer's
 * {@code SupportsCommitter#getCommittableSerializer().getVersion()}. The source and sink are private fields of
 * SourceOperatorFactory, SinkWriterOperatorFactory and CommitterOperatorFactory in 1.20 and 2.x alike (no getter),
 * so they are read by reflection. Only the export writes this field: the oracle's fixtures keep SpecDumper's fields.
 */
public final class ConnectorDumper {
    private ConnectorDumper() {}

    /** Adds {@code connector} to every node of {@code spec} whose factory holds a FLIP-27 source or a Sink V2. */
    @SuppressWarnings("unchecked")
    public static void addTo(Map<String, Object> spec, StreamGraph graph) {
        for (Object raw : (List<Object>) spec.get("nodes")) {
            Map<String, Object> node = (Map<String, Object>) raw;
            StreamNode n = graph.getStreamNode((Integer) node.get("id"));
            Map<String, Object> connector = n == null ? null : connector(n.getOperatorFactory());
            if (connector != null) {
                node.put("connector", connector);
            }
        }
    }

    static Map<String, Object> connector(StreamOperatorFactory<?> factory) {
        Map<String, Object> m = new LinkedHashMap<>();
        if (factory instanceof SourceOperatorFactory) {
            Source<?, ?, ?> source = (Source<?, ?, ?>) field(factory, SourceOperatorFactory.class, "source");
            if (source == null) return null;
            m.put("class", source.getClass().getName());
            m.put("split_serializer", version(source::getSplitSerializer));
            m.put("enumerator_serializer", version(source::getEnumeratorCheckpointSerializer));
            return m;
        }
        Object sink = factory instanceof SinkWriterOperatorFactory
                ? field(factory, SinkWriterOperatorFactory.class, "sink")
                : factory instanceof CommitterOperatorFactory
                        ? field(factory, CommitterOperatorFactory.class, "sink") : null;
        if (sink == null) return null;
        m.put("class", sink.getClass().getName());
        if (factory instanceof SinkWriterOperatorFactory && sink instanceof SupportsWriterState) {
            m.put("writer_state_serializer", version(((SupportsWriterState<?, ?>) sink)::getWriterStateSerializer));
        }
        if (sink instanceof SupportsCommitter) {
            m.put("committable_serializer", version(((SupportsCommitter<?>) sink)::getCommittableSerializer));
        }
        return m;
    }

    /** A serializer's version; null when the connector cannot build it outside a running job. */
    static Integer version(Callable<SimpleVersionedSerializer<?>> serializer) {
        try {
            SimpleVersionedSerializer<?> s = serializer.call();
            return s == null ? null : s.getVersion();
        } catch (Exception | LinkageError e) {
            return null;
        }
    }

    private static Object field(Object owner, Class<?> cls, String name) {
        try {
            Field f = cls.getDeclaredField(name);
            f.setAccessible(true);
            return f.get(owner);
        } catch (ReflectiveOperationException | RuntimeException e) {
            return null;
        }
    }
}

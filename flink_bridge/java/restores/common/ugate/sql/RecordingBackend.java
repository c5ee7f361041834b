package ugate.sql;

import org.apache.flink.core.execution.SavepointFormatType;
import org.apache.flink.runtime.state.CheckpointableKeyedStateBackend;
import org.apache.flink.runtime.state.KeyedStateHandle;
import org.apache.flink.runtime.state.OperatorStateBackend;
import org.apache.flink.runtime.state.OperatorStateHandle;
import org.apache.flink.runtime.state.StateBackend;
import org.apache.flink.runtime.state.hashmap.HashMapStateBackend;

import java.util.Collection;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * HashMapStateBackend that records, per operator ID, how many keyed and operator state handles
 * Flink handed to it at restore: the task-side end of StateAssignmentOperation, the one real
 * signal of "this operator got state back" for SQL operators, which run no user function we could
 * instrument. The operator identifier is StreamTaskStateInitializerImpl's
 * OperatorSubtaskDescriptionText, {@code <class>_<operator id>_(<subtask>/<parallelism>)}.
 */
public final class RecordingBackend implements StateBackend {
    private static final long serialVersionUID = 1L;
    private static final Pattern ID = Pattern.compile("_([0-9a-f]{32})_\\(");
    /** operator id -> {"keyed": handles, "operator": handles}; read by SqlMain in the same JVM. */
    public static final Map<String, Map<String, Integer>> RESTORED = new TreeMap<>();

    private final HashMapStateBackend delegate = new HashMapStateBackend();

    public static synchronized void clear() {
        RESTORED.clear();
    }

    public static synchronized Map<String, Map<String, Integer>> snapshot() {
        Map<String, Map<String, Integer>> out = new TreeMap<>();
        RESTORED.forEach((k, v) -> out.put(k, new TreeMap<>(v)));
        return out;
    }

    private static synchronized void record(String identifier, String kind, Collection<?> handles) {
        int n = 0;
        if (handles != null) {
            for (Object h : handles) {
                if (h != null) n++;
            }
        }
        if (n == 0) return;
        Matcher m = ID.matcher(identifier);
        String id = m.find() ? m.group(1) : identifier;
        RESTORED.computeIfAbsent(id, k -> new TreeMap<>()).merge(kind, n, Integer::sum);
    }

    @Override
    public <K> CheckpointableKeyedStateBackend<K> createKeyedStateBackend(KeyedStateBackendParameters<K> p)
            throws Exception {
        Collection<KeyedStateHandle> handles = p.getStateHandles();
        record(p.getOperatorIdentifier(), "keyed", handles);
        return delegate.createKeyedStateBackend(p);
    }

    @Override
    public OperatorStateBackend createOperatorStateBackend(OperatorStateBackendParameters p) throws Exception {
        Collection<OperatorStateHandle> handles = p.getStateHandles();
        record(p.getOperatorIdentifier(), "operator", handles);
        return delegate.createOperatorStateBackend(p);
    }

    @Override
    public boolean supportsNoClaimRestoreMode() {
        return delegate.supportsNoClaimRestoreMode();
    }

    @Override
    public boolean supportsSavepointFormat(SavepointFormatType formatType) {
        return delegate.supportsSavepointFormat(formatType);
    }

    @Override
    public boolean useManagedMemory() {
        return delegate.useManagedMemory();
    }
}

package ugate.sql;

import org.apache.flink.configuration.ReadableConfig;
import org.apache.flink.runtime.state.StateBackendFactory;

/** {@code state.backend.type: ugate.sql.RecordingBackendFactory} (StateBackendLoader loads it by class name). */
public final class RecordingBackendFactory implements StateBackendFactory<RecordingBackend> {
    @Override
    public RecordingBackend createFromConfig(ReadableConfig config, ClassLoader classLoader) {
        return new RecordingBackend();
    }
}

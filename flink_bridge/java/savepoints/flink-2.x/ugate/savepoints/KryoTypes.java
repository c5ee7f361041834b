package ugate.savepoints;

import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.PipelineOptions;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

import java.util.List;

/** Registering a class with Kryo, the 2.x side: 2.0 removed {@code ExecutionConfig#registerKryoType}; the
 * {@code pipeline.serialization-config} option replaces it. */
final class KryoTypes {
    private KryoTypes() {}

    static void register(StreamExecutionEnvironment env, Class<?> type) {
        Configuration c = new Configuration();
        c.set(PipelineOptions.SERIALIZATION_CONFIG, List.of(type.getName() + ": {type: kryo}"));
        env.configure(c);
    }
}

package ugate.savepoints;

import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

/** Registering a class with Kryo, the 1.20 side: {@code ExecutionConfig#registerKryoType} (1.20's
 * {@code pipeline.serialization-config} needs the standard YAML config parser, which a job's own Configuration is not). */
final class KryoTypes {
    private KryoTypes() {}

    @SuppressWarnings("deprecation")
    static void register(StreamExecutionEnvironment env, Class<?> type) {
        env.getConfig().registerKryoType(type);
    }
}

package ugate.savepoints;

import com.esotericsoftware.kryo.Kryo;
import com.esotericsoftware.kryo.Serializer;
import com.esotericsoftware.kryo.io.Input;
import com.esotericsoftware.kryo.io.Output;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.PipelineOptions;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

import java.util.List;

/**
 * A custom Kryo serializer registered for {@link StateSchemas.Tagged} (the registration a state-schema reader
 * must report), and how this Flink line registers it. Written against Kryo 5 (Flink 2.x): the read signature differs.
 */
public final class TaggedKryoSerializer extends Serializer<StateSchemas.Tagged> {
    /** Registration through the job's configuration, before the environment is created. */
    static void register(Configuration c) {
        c.set(PipelineOptions.SERIALIZATION_CONFIG, List.of(StateSchemas.Tagged.class.getName()
                + ": {type: kryo, kryo-type: registered, class: " + TaggedKryoSerializer.class.getName() + "}"));
    }

    /** Registration on the environment. */
    static void register(StreamExecutionEnvironment env) {
        // 2.x: registered through the configuration only (ExecutionConfig has no register method)
    }

    @Override
    public void write(Kryo kryo, Output output, StateSchemas.Tagged t) {
        output.writeLong(t.value);
        output.writeString(t.tag);
    }

    @Override
    public StateSchemas.Tagged read(Kryo kryo, Input input, Class<? extends StateSchemas.Tagged> type) {
        long value = input.readLong();
        return new StateSchemas.Tagged(value, input.readString());
    }
}

package upgradegate.bridge;

import org.apache.flink.api.connector.sink2.Committer;
import org.apache.flink.api.connector.sink2.CommitterInitContext;
import org.apache.flink.api.connector.sink2.CommittingSinkWriter;
import org.apache.flink.api.connector.sink2.Sink;
import org.apache.flink.api.connector.sink2.SinkWriter;
import org.apache.flink.api.connector.sink2.SupportsCommitter;
import org.apache.flink.core.io.SimpleVersionedSerializer;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.DataStreamSink;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.legacy.SinkFunction;
import org.apache.flink.streaming.api.functions.source.legacy.ParallelSourceFunction;
import org.apache.flink.streaming.api.functions.source.legacy.SourceFunction;
import org.apache.flink.streaming.api.operators.StreamOperatorFactory;
import org.apache.flink.streaming.api.operators.legacy.YieldingOperatorFactory;

import java.nio.charset.StandardCharsets;
import java.util.Collection;

/** Flink 2.x spellings: legacy sources/sinks and YieldingOperatorFactory moved to `legacy` packages. */
public final class Compat {
    private Compat() {}

    public static final String RELEASE = "2.x";

    public static boolean isYielding(StreamOperatorFactory<?> factory) {
        return factory instanceof YieldingOperatorFactory;
    }

    /** A legacy SourceFunction source; parallel or not. Never run, so it emits nothing. */
    public static SingleOutputStreamOperator<Long> legacySource(
            StreamExecutionEnvironment env, String name, boolean parallel) {
        SourceFunction<Long> fn = parallel ? new ParallelNothing() : new Nothing();
        return env.addSource(fn, name);
    }

    public static DataStreamSink<Long> legacySink(DataStream<Long> in) {
        return in.addSink(new Drop());
    }

    public static Sink<Long> committingSink() {
        return new CommittingSink();
    }

    static class Nothing implements SourceFunction<Long> {
        @Override
        public void run(SourceContext<Long> ctx) {}

        @Override
        public void cancel() {}
    }

    static class ParallelNothing extends Nothing implements ParallelSourceFunction<Long> {}

    static class Drop implements SinkFunction<Long> {
        @Override
        public void invoke(Long value, Context context) {}
    }

    /** A Sink V2 with a committer, so the translator adds a committer operator. */
    static class CommittingSink implements Sink<Long>, SupportsCommitter<String> {
        @Override
        public SinkWriter<Long> createWriter(org.apache.flink.api.connector.sink2.WriterInitContext context) {
            return new Writer();
        }

        @Override
        public Committer<String> createCommitter(CommitterInitContext context) {
            throw new UnsupportedOperationException("graph only");
        }

        @Override
        public SimpleVersionedSerializer<String> getCommittableSerializer() {
            return new StringSerializer();
        }
    }

    static class Writer implements CommittingSinkWriter<Long, String> {
        @Override
        public void write(Long element, Context context) {}

        @Override
        public void flush(boolean endOfInput) {}

        @Override
        public Collection<String> prepareCommit() {
            return java.util.Collections.emptyList();
        }

        @Override
        public void close() {}
    }

    static class StringSerializer implements SimpleVersionedSerializer<String> {
        @Override
        public int getVersion() {
            return 1;
        }

        @Override
        public byte[] serialize(String obj) {
            return obj.getBytes(StandardCharsets.UTF_8);
        }

        @Override
        public String deserialize(int version, byte[] serialized) {
            return new String(serialized, StandardCharsets.UTF_8);
        }
    }
}

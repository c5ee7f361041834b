package ugate.savepoints;

import org.apache.flink.api.connector.sink2.Sink;
import org.apache.flink.api.connector.sink2.SinkWriter;

/**
 * A Sink V2 base for the 1.20 side: 1.20's {@link Sink} still declares the deprecated
 * {@code createWriter(InitContext)} abstract; SinkWriterOperator calls {@code createWriter(WriterInitContext)}, which
 * our sinks override, so this one is never reached.
 */
abstract class SinkBase<IN> implements Sink<IN> {
    private static final long serialVersionUID = 1L;

    @Override
    @SuppressWarnings("deprecation")
    public SinkWriter<IN> createWriter(Sink.InitContext context) {
        throw new UnsupportedOperationException("Flink 1.20 creates the writer through createWriter(WriterInitContext)");
    }
}

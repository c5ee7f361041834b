package ugate.savepoints;

import org.apache.flink.api.connector.sink2.Sink;

/** A Sink V2 base for the 2.x side: {@link Sink} declares only {@code createWriter(WriterInitContext)}. */
abstract class SinkBase<IN> implements Sink<IN> {
    private static final long serialVersionUID = 1L;
}

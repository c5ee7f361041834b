package com.example.exiting;

import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;

/**
 * A job whose main() is wrapped the way many are: log whatever execute() throws and end the JVM with exit code 1.
 * While the exporter captures the graph, execute() throws to stop main(); the graph must still be exported.
 */
public class ExitingJob {
    public static void main(String[] args) {
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.fromSequence(0, 1_000).name("numbers").uid("numbers")
                .keyBy(new Mod())
                .reduce((a, b) -> a + b).name("sum").uid("sum")
                .sinkTo(new DiscardingSink<>()).name("out").uid("out");
        try {
            env.execute("exiting-job");
        } catch (Throwable t) {
            System.err.println("job failed: " + t);
            System.exit(1);
        }
    }

    public static class Mod implements KeySelector<Long, Long> {
        @Override
        public Long getKey(Long v) {
            return v % 10;
        }
    }
}

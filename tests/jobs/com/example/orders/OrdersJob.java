package com.example.orders;

import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.util.Collector;

/**
 * A tiny job the exporter test packages into a jar: the kind of program a user submits.
 * Argument: the parallelism of the enrichment map (a change users make that breaks a chain).
 */
public class OrdersJob {
    public static void main(String[] args) throws Exception {
        int enrichParallelism = args.length > 0 ? Integer.parseInt(args[0]) : 1;
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.fromSequence(0, 1_000_000).name("orders").uid("orders-source")
                .map(new Enrich()).name("enrich").uid("enrich").setParallelism(enrichParallelism)
                .keyBy(new ByCustomer())
                .process(new CountPerCustomer()).name("count-per-customer")
                .sinkTo(new DiscardingSink<>()).name("results").uid("results");
        env.execute("orders-enrichment");
    }

    public static class Enrich implements MapFunction<Long, Long> {
        @Override
        public Long map(Long order) {
            return order * 10;
        }
    }

    public static class ByCustomer implements KeySelector<Long, Long> {
        @Override
        public Long getKey(Long order) {
            return order % 100;
        }
    }

    public static class CountPerCustomer extends KeyedProcessFunction<Long, Long, Long> {
        @Override
        public void processElement(Long order, Context ctx, Collector<Long> out) {
            out.collect(order);
        }
    }
}

package upgradegate.bridge;

import org.apache.flink.api.common.functions.FilterFunction;
import org.apache.flink.api.common.functions.FlatMapFunction;
import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.common.functions.Partitioner;
import org.apache.flink.api.common.functions.ReduceFunction;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.connector.datagen.source.GeneratorFunction;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.streaming.api.functions.ProcessFunction;
import org.apache.flink.streaming.api.functions.async.AsyncFunction;
import org.apache.flink.streaming.api.functions.async.ResultFuture;
import org.apache.flink.streaming.api.functions.co.BroadcastProcessFunction;
import org.apache.flink.streaming.api.functions.co.CoMapFunction;
import org.apache.flink.streaming.api.functions.co.KeyedBroadcastProcessFunction;
import org.apache.flink.streaming.api.functions.co.KeyedCoProcessFunction;
import org.apache.flink.util.Collector;
import org.apache.flink.util.OutputTag;

import java.util.Collections;

/** Small named user functions (named classes so Flink's type extraction never needs lambdas). */
final class Functions {
    private Functions() {}

    static final MapStateDescriptor<Long, Long> RULES =
            new MapStateDescriptor<>("rules", Types.LONG, Types.LONG);
    static final OutputTag<Long> LATE = new OutputTag<Long>("late") {};

    static class Inc implements MapFunction<Long, Long> {
        @Override
        public Long map(Long v) {
            return v + 1;
        }
    }

    static class Positive implements FilterFunction<Long> {
        @Override
        public boolean filter(Long v) {
            return v > 0;
        }
    }

    static class Twice implements FlatMapFunction<Long, Long> {
        @Override
        public void flatMap(Long v, Collector<Long> out) {
            out.collect(v);
            out.collect(v);
        }
    }

    static class Mod implements KeySelector<Long, Long> {
        @Override
        public Long getKey(Long v) {
            return v % 16;
        }
    }

    static class Sum implements ReduceFunction<Long> {
        @Override
        public Long reduce(Long a, Long b) {
            return a + b;
        }
    }

    static class ModPartitioner implements Partitioner<Long> {
        @Override
        public int partition(Long key, int n) {
            return (int) Math.abs(key % n);
        }
    }

    static class Identity implements GeneratorFunction<Long, Long> {
        @Override
        public Long map(Long v) {
            return v;
        }
    }

    static class CountPerKey extends KeyedProcessFunction<Long, Long, Long> {
        @Override
        public void processElement(Long v, Context ctx, Collector<Long> out) {
            out.collect(v);
        }
    }

    static class SplitLate extends ProcessFunction<Long, Long> {
        @Override
        public void processElement(Long v, Context ctx, Collector<Long> out) {
            if (v < 0) {
                ctx.output(LATE, v);
            } else {
                out.collect(v);
            }
        }
    }

    static class Merge implements CoMapFunction<Long, Long, Long> {
        @Override
        public Long map1(Long v) {
            return v;
        }

        @Override
        public Long map2(Long v) {
            return -v;
        }
    }

    static class Join extends KeyedCoProcessFunction<Long, Long, Long, Long> {
        @Override
        public void processElement1(Long v, Context ctx, Collector<Long> out) {
            out.collect(v);
        }

        @Override
        public void processElement2(Long v, Context ctx, Collector<Long> out) {
            out.collect(v);
        }
    }

    static class ApplyRules extends KeyedBroadcastProcessFunction<Long, Long, Long, Long> {
        @Override
        public void processElement(Long v, ReadOnlyContext ctx, Collector<Long> out) {
            out.collect(v);
        }

        @Override
        public void processBroadcastElement(Long v, Context ctx, Collector<Long> out) throws Exception {
            ctx.getBroadcastState(RULES).put(v, v);
        }
    }

    static class ApplyRulesUnkeyed extends BroadcastProcessFunction<Long, Long, Long> {
        @Override
        public void processElement(Long v, ReadOnlyContext ctx, Collector<Long> out) {
            out.collect(v);
        }

        @Override
        public void processBroadcastElement(Long v, Context ctx, Collector<Long> out) throws Exception {
            ctx.getBroadcastState(RULES).put(v, v);
        }
    }

    static class Lookup implements AsyncFunction<Long, Long> {
        @Override
        public void asyncInvoke(Long v, ResultFuture<Long> future) {
            future.complete(Collections.singletonList(v));
        }
    }
}

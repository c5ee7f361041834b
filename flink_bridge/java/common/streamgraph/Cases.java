package upgradegate.bridge;

import org.apache.flink.api.common.RuntimeExecutionMode;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.connector.datagen.source.DataGeneratorSource;
import org.apache.flink.streaming.api.datastream.AsyncDataStream;
import org.apache.flink.streaming.api.datastream.CustomSinkOperatorUidHashes;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.DataStreamSink;
import org.apache.flink.streaming.api.datastream.KeyedStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.streaming.api.operators.ChainingStrategy;
import org.apache.flink.streaming.api.operators.StreamMap;
import org.apache.flink.streaming.api.transformations.OneInputTransformation;
import org.apache.flink.streaming.api.transformations.PartitionTransformation;
import org.apache.flink.streaming.api.transformations.StreamExchangeMode;
import org.apache.flink.streaming.runtime.partitioner.ForwardPartitioner;
import org.apache.flink.table.api.bridge.java.StreamStatementSet;
import org.apache.flink.table.api.bridge.java.StreamTableEnvironment;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * The oracle's stream graphs. Each case builds a job with the DataStream (or SQL) API on a
 * fresh environment; nothing is executed. Cases run in this fixed order in one JVM, so the
 * StreamNode ids (a JVM-wide counter) are the same on every run.
 */
final class Cases {
    private Cases() {}

    interface Build {
        void build(StreamExecutionEnvironment env) throws Exception;
    }

    static final class Case {
        final String name;
        final String description;
        final Map<String, String> conf;
        final Build build;

        Case(String name, String description, Map<String, String> conf, Build build) {
            this.name = name;
            this.description = description;
            this.conf = conf;
            this.build = build;
        }
    }

    private static final List<Case> CASES = new ArrayList<>();

    private static void add(String name, String description, Build build) {
        CASES.add(new Case(name, description, new LinkedHashMap<>(), build));
    }

    private static void add(String name, String description, Map<String, String> conf, Build build) {
        CASES.add(new Case(name, description, conf, build));
    }

    private static Map<String, String> conf(String... kv) {
        Map<String, String> m = new LinkedHashMap<>();
        for (int i = 0; i < kv.length; i += 2) {
            m.put(kv[i], kv[i + 1]);
        }
        return m;
    }

    // ---- building blocks -------------------------------------------------------------------

    static SingleOutputStreamOperator<Long> seq(StreamExecutionEnvironment env, String name) {
        return env.fromSequence(0, 1000).name(name);
    }

    static SingleOutputStreamOperator<Long> map(DataStream<Long> in, String name) {
        return in.map(new Functions.Inc()).name(name);
    }

    static SingleOutputStreamOperator<Long> filter(DataStream<Long> in, String name) {
        return in.filter(new Functions.Positive()).name(name);
    }

    static KeyedStream<Long, Long> keyed(DataStream<Long> in) {
        return in.keyBy(new Functions.Mod());
    }

    static SingleOutputStreamOperator<Long> process(KeyedStream<Long, Long> in, String name) {
        return in.process(new Functions.CountPerKey()).name(name);
    }

    static DataStreamSink<Long> sink(DataStream<Long> in, String name) {
        return in.sinkTo(new DiscardingSink<>()).name(name);
    }

    static SingleOutputStreamOperator<Long> withStrategy(DataStream<Long> in, String name, ChainingStrategy s) {
        SingleOutputStreamOperator<Long> out = in.transform(name, Types.LONG, new StreamMap<>(new Functions.Inc()));
        ((OneInputTransformation<Long, Long>) out.getTransformation()).setChainingStrategy(s);
        return out;
    }

    static DataStream<Long> exchange(StreamExecutionEnvironment env, DataStream<Long> in, StreamExchangeMode mode) {
        return new DataStream<>(env, new PartitionTransformation<>(in.getTransformation(), new ForwardPartitioner<>(), mode));
    }

    static void linear(StreamExecutionEnvironment env) {
        sink(filter(map(seq(env, "source"), "map"), "filter"), "sink");
    }

    static void sql(StreamExecutionEnvironment env, boolean uids, String... inserts) {
        sqlWithFormat(env, uids, null, inserts);
    }

    static void sqlWithFormat(StreamExecutionEnvironment env, boolean uids, String uidFormat, String... inserts) {
        StreamTableEnvironment tEnv = StreamTableEnvironment.create(env);
        if (uids) {
            tEnv.getConfig().set("table.exec.uid.generation", "ALWAYS");
        }
        if (uidFormat != null) {
            tEnv.getConfig().set("table.exec.uid.format", uidFormat);
        }
        tEnv.executeSql("CREATE TABLE orders (id BIGINT, customer INT, amount DOUBLE) "
                + "WITH ('connector' = 'datagen', 'number-of-rows' = '100')");
        tEnv.executeSql("CREATE TABLE customers (cid INT, region STRING) "
                + "WITH ('connector' = 'datagen', 'number-of-rows' = '10')");
        tEnv.executeSql("CREATE TABLE totals (customer INT, total DOUBLE, cnt BIGINT) WITH ('connector' = 'blackhole')");
        tEnv.executeSql("CREATE TABLE enriched (id BIGINT, region STRING, amount DOUBLE) "
                + "WITH ('connector' = 'blackhole')");
        StreamStatementSet set = tEnv.createStatementSet();
        for (String insert : inserts) {
            set.addInsertSql(insert);
        }
        set.attachAsDataStream();
    }

    static final String GROUP_BY = "INSERT INTO totals SELECT customer, SUM(amount), COUNT(*) FROM orders "
            + "WHERE amount > 0 GROUP BY customer";
    static final String JOIN = "INSERT INTO enriched SELECT o.id, c.region, o.amount FROM orders o "
            + "JOIN customers c ON o.customer = c.cid";

    // ---- the cases -------------------------------------------------------------------------

    static List<Case> all() {
        if (!CASES.isEmpty()) {
            return CASES;
        }
        add("linear_default", "source -> map -> filter -> sink, no uids, all chained", Cases::linear);
        add("linear_chaining_off", "same pipeline with env.disableOperatorChaining()", env -> {
            env.disableOperatorChaining();
            linear(env);
        });
        add("linear_chaining_off_by_option", "same pipeline with pipeline.operator-chaining.enabled=false",
                conf("pipeline.operator-chaining.enabled", "false"), Cases::linear);
        add("linear_all_uids", "every operator has a uid", env -> {
            SingleOutputStreamOperator<Long> s = seq(env, "source").uid("source-uid");
            SingleOutputStreamOperator<Long> m = map(s, "map").uid("map-uid");
            SingleOutputStreamOperator<Long> f = filter(m, "filter").uid("filter-uid");
            sink(f, "sink").uid("sink-uid");
        });
        add("linear_some_uids", "uid on map only; the others are positional", env ->
                sink(filter(map(seq(env, "source"), "map").uid("map-uid"), "filter"), "sink"));
        add("linear_uid_on_source_only", "uid on the source only", env ->
                sink(filter(map(seq(env, "source").uid("my-src"), "map"), "filter"), "sink"));
        add("linear_unicode_uids", "uids with non-ASCII characters", env ->
                sink(map(seq(env, "source").uid("ü-uid"), "map").uid("日本-map"), "sink").uid("sink-\uD83D\uDE00"));
        add("parallelism_change_breaks_chain", "map has parallelism 3: source->map is a REBALANCE edge", env ->
                sink(filter(map(seq(env, "source"), "map").setParallelism(3), "filter"), "sink"));
        add("parallelism_change_tail", "filter and sink at parallelism 1 after a p=2 map", env ->
                sink(filter(map(seq(env, "source"), "map"), "filter").setParallelism(1), "sink").setParallelism(1));
        add("parallelism_per_operator_uids", "parallelism change with uids everywhere", env -> {
            SingleOutputStreamOperator<Long> m = map(seq(env, "source").uid("s"), "map").uid("m").setParallelism(4);
            sink(filter(m, "filter").uid("f").setParallelism(4), "sink").uid("k").setParallelism(1);
        });
        add("uid_hash_lowercase", "setUidHash on the map (lowercase hex)", env ->
                sink(filter(map(seq(env, "source"), "map").setUidHash("0123456789abcdef0123456789abcdef"),
                        "filter"), "sink"));
        add("uid_hash_uppercase_with_uid", "uid + uppercase setUidHash on map, mixed-case uid hash on a legacy sink", env -> {
            SingleOutputStreamOperator<Long> m = map(seq(env, "source"), "map").uid("map-uid")
                    .setUidHash("ABCDEF0123456789ABCDEF0123456789");
            Compat.legacySink(m).name("legacy-sink").setUidHash("FfEeDdCcBbAa99887766554433221100");
        });
        add("start_new_chain", "filter.startNewChain()", env ->
                sink(filter(map(seq(env, "source"), "map"), "filter").startNewChain(), "sink"));
        add("disable_chaining", "map.disableChaining()", env ->
                sink(filter(map(seq(env, "source"), "map").disableChaining(), "filter"), "sink"));
        add("chaining_strategy_head_never", "custom operators with HEAD and NEVER chaining strategies", env -> {
            DataStream<Long> h = withStrategy(seq(env, "source"), "head-op", ChainingStrategy.HEAD);
            DataStream<Long> m = map(h, "map");
            DataStream<Long> n = withStrategy(m, "never-op", ChainingStrategy.NEVER);
            sink(map(n, "after-never"), "sink");
        });
        add("slot_sharing_groups", "map and filter in slot sharing group 'a', sink in 'b'", env -> {
            SingleOutputStreamOperator<Long> m = map(seq(env, "source"), "map").slotSharingGroup("a");
            SingleOutputStreamOperator<Long> f = filter(m, "filter");
            sink(f, "sink").slotSharingGroup("b");
        });
        add("slot_sharing_group_inherited", "source in group 'src'; downstream inherits it", env ->
                sink(map(seq(env, "source").slotSharingGroup("src"), "map"), "sink"));
        add("two_sources_union", "a.union(b) -> map -> sink", env -> {
            DataStream<Long> a = seq(env, "source-a");
            DataStream<Long> b = seq(env, "source-b");
            sink(map(a.union(b), "map"), "sink");
        });
        add("two_sources_union_reversed", "b.union(a): in-edge order differs from two_sources_union", env -> {
            DataStream<Long> a = seq(env, "source-a");
            DataStream<Long> b = seq(env, "source-b");
            sink(map(b.union(a), "map"), "sink");
        });
        add("sources_created_in_reverse", "source-b is created before source-a", env -> {
            DataStream<Long> b = seq(env, "source-b");
            DataStream<Long> a = seq(env, "source-a");
            sink(map(a.union(b), "map"), "sink");
        });
        add("union_self", "a.union(a): two edges from the same source", env -> {
            DataStream<Long> a = map(seq(env, "source"), "map");
            sink(filter(a.union(a), "filter"), "sink");
        });
        add("three_way_union_keyed", "a.union(b, c).keyBy().process()", env -> {
            DataStream<Long> a = seq(env, "a");
            DataStream<Long> b = seq(env, "b");
            DataStream<Long> c = Compat.legacySource(env, "c", true);
            sink(process(keyed(a.union(b, c)), "process"), "sink");
        });
        add("diamond", "source -> (map1, map2) -> union -> sink", env -> {
            DataStream<Long> s = seq(env, "source");
            sink(map(s, "left").union(filter(s, "right")), "sink");
        });
        add("diamond_keyed", "source -> map -> two keyed branches -> union -> sink", env -> {
            DataStream<Long> m = map(seq(env, "source"), "map");
            DataStream<Long> l = process(keyed(m), "left");
            DataStream<Long> r = keyed(m).reduce(new Functions.Sum()).name("right");
            sink(l.union(r), "sink");
        });
        add("connect_comap", "a.connect(b).map(CoMapFunction)", env -> {
            DataStream<Long> a = seq(env, "a");
            DataStream<Long> b = map(seq(env, "b"), "b-map");
            sink(a.connect(b).map(new Functions.Merge()).name("co-map"), "sink");
        });
        add("connect_reversed", "b.connect(a): input order swapped", env -> {
            DataStream<Long> a = seq(env, "a");
            DataStream<Long> b = map(seq(env, "b"), "b-map");
            sink(b.connect(a).map(new Functions.Merge()).name("co-map"), "sink");
        });
        add("keyed_connect", "a.keyBy().connect(b.keyBy()).process(KeyedCoProcessFunction)", env -> {
            DataStream<Long> a = seq(env, "a");
            DataStream<Long> b = seq(env, "b");
            sink(keyed(a).connect(keyed(b)).process(new Functions.Join()).name("join").uid("join"), "sink");
        });
        add("broadcast_state_keyed", "keyed stream connected to a broadcast stream", env -> {
            DataStream<Long> events = seq(env, "events");
            DataStream<Long> rules = Compat.legacySource(env, "rules", false);
            sink(keyed(events).connect(rules.broadcast(Functions.RULES))
                    .process(new Functions.ApplyRules()).name("apply-rules"), "sink");
        });
        add("broadcast_state_unkeyed", "non-keyed stream connected to a broadcast stream", env -> {
            DataStream<Long> events = map(seq(env, "events"), "map");
            DataStream<Long> rules = seq(env, "rules");
            sink(events.connect(rules.broadcast(Functions.RULES))
                    .process(new Functions.ApplyRulesUnkeyed()).name("apply-rules"), "sink");
        });
        add("all_partitioners", "forward, rebalance, rescale, shuffle, broadcast, global, custom, hash", env -> {
            DataStream<Long> s = seq(env, "source");
            DataStream<Long> a = map(s.forward(), "forward");
            DataStream<Long> b = map(a.rebalance(), "rebalance");
            DataStream<Long> c = map(b.rescale(), "rescale");
            DataStream<Long> d = map(c.shuffle(), "shuffle");
            DataStream<Long> e = map(d.broadcast(), "broadcast");
            DataStream<Long> f = map(e.global(), "global").setParallelism(1);
            DataStream<Long> g = map(f.partitionCustom(new Functions.ModPartitioner(), new Functions.Mod()), "custom");
            sink(process(keyed(g), "hash"), "sink");
        });
        add("rebalance_same_parallelism", "explicit rebalance between equal-parallelism operators", env ->
                sink(map(map(seq(env, "source"), "map1").rebalance(), "map2"), "sink"));
        add("keyed_chain_after_keyby", "keyBy -> process -> map (chained) -> sink", env ->
                sink(map(process(keyed(map(seq(env, "source"), "map")), "process"), "after"), "sink"));
        add("keyed_count_window", "keyBy().countWindow(10).reduce()", env ->
                sink(keyed(seq(env, "source")).countWindow(10).reduce(new Functions.Sum()).name("window"), "sink"));
        add("side_output", "process with a side output to a second sink", env -> {
            SingleOutputStreamOperator<Long> p = seq(env, "source").process(new Functions.SplitLate()).name("split");
            sink(p, "main-sink");
            sink(map(p.getSideOutput(Functions.LATE), "late-map"), "late-sink");
        });
        add("fan_out", "one source feeding three maps, each with its own sink", env -> {
            DataStream<Long> s = seq(env, "source");
            for (int i = 1; i <= 3; i++) {
                sink(map(s, "map" + i), "sink" + i);
            }
        });
        add("fan_out_mixed", "source -> forward map, rebalanced map, keyed process", env -> {
            DataStream<Long> s = map(seq(env, "source"), "pre");
            sink(map(s, "forward"), "sink1");
            sink(map(s.rebalance(), "rebalanced"), "sink2");
            sink(process(keyed(s), "keyed"), "sink3");
        });
        add("independent_pipelines", "two unconnected pipelines in one job", env -> {
            linear(env);
            sink(process(keyed(map(Compat.legacySource(env, "legacy", true), "map-b")), "process-b"), "sink-b");
        });
        add("legacy_source_parallel", "ParallelSourceFunction -> map -> legacy SinkFunction", env ->
                Compat.legacySink(map(Compat.legacySource(env, "legacy-source", true), "map")).name("legacy-sink"));
        add("legacy_source_nonparallel", "SourceFunction (parallelism 1) -> map (p=2)", env ->
                sink(map(Compat.legacySource(env, "legacy-source", false), "map"), "sink"));
        add("legacy_source_sink_v2", "legacy source -> map -> Sink V2 writer (a yielding factory: not chained)",
                env -> sink(map(Compat.legacySource(env, "legacy-source", true), "map"), "sink"));
        add("legacy_sink_uid", "FLIP-27 source -> map -> legacy sink with uid", env ->
                Compat.legacySink(map(seq(env, "source"), "map")).name("legacy-sink").uid("legacy-sink"));
        add("flip27_sequence_p4", "env.fromSequence at p=4 -> map p=4 -> Sink V2 at default p=2", env ->
                sink(map(seq(env, "source").setParallelism(4), "map").setParallelism(4), "sink"));
        add("flip27_datagen", "DataGeneratorSource -> filter -> Sink V2", env -> {
            DataGeneratorSource<Long> gen = new DataGeneratorSource<>(new Functions.Identity(), 100, Types.LONG);
            sink(filter(env.fromSource(gen, WatermarkStrategy.noWatermarks(), "datagen"), "filter"), "sink");
        });
        add("sink_v2_committer_uid", "Sink V2 with a committer and a uid", env ->
                map(seq(env, "source"), "map").sinkTo(Compat.committingSink()).name("committing").uid("my-sink"));
        add("sink_v2_committer_no_uid", "Sink V2 with a committer, no uid", env ->
                map(seq(env, "source"), "map").sinkTo(Compat.committingSink()).name("committing"));
        add("sink_v2_committer_uid_hashes", "Sink V2 with a committer, uid hashes via CustomSinkOperatorUidHashes",
                env -> map(seq(env, "source"), "map").sinkTo(Compat.committingSink(),
                        CustomSinkOperatorUidHashes.builder()
                                .setWriterUidHash("00112233445566778899aabbccddeeff")
                                .setCommitterUidHash("FFEEDDCCBBAA99887766554433221100").build())
                        .name("committing").uid("my-sink"));
        add("async_after_legacy_source", "async I/O directly behind a legacy source (not chained)", env ->
                sink(AsyncDataStream.unorderedWait(Compat.legacySource(env, "legacy", true),
                        new Functions.Lookup(), 1, TimeUnit.SECONDS).name("async"), "sink"));
        add("async_after_legacy_source_via_map", "legacy source -> map -> async: chain head is legacy", env ->
                sink(AsyncDataStream.unorderedWait(map(Compat.legacySource(env, "legacy", true), "map"),
                        new Functions.Lookup(), 1, TimeUnit.SECONDS).name("async"), "sink"));
        add("async_after_flip27_source", "async I/O behind a FLIP-27 source (chained)", env ->
                sink(AsyncDataStream.orderedWait(seq(env, "source"), new Functions.Lookup(), 1, TimeUnit.SECONDS)
                        .name("async"), "sink"));
        add("max_parallelism_per_operator", "map has max parallelism 256; chaining ignores it by default", env ->
                sink(filter(map(seq(env, "source"), "map").setMaxParallelism(256), "filter"), "sink"));
        add("max_parallelism_no_chain_different", "same with chain-operators-with-different-max-parallelism=false",
                conf("pipeline.operator-chaining.chain-operators-with-different-max-parallelism", "false"), env ->
                        sink(filter(map(seq(env, "source"), "map").setMaxParallelism(256), "filter"), "sink"));
        add("job_max_parallelism", "job max parallelism 512, one operator 1024, different-max chaining off",
                conf("pipeline.operator-chaining.chain-operators-with-different-max-parallelism", "false"), env -> {
                    env.setMaxParallelism(512);
                    sink(process(keyed(map(seq(env, "source"), "map").setMaxParallelism(1024)), "process"), "sink");
                });
        add("batch_runtime_mode", "RuntimeExecutionMode.BATCH with a keyed process", env -> {
            env.setRuntimeMode(RuntimeExecutionMode.BATCH);
            sink(process(keyed(map(seq(env, "source"), "map")), "process"), "sink");
        });
        add("batch_exchange_in_streaming_mode", "forward PartitionTransformation with StreamExchangeMode.BATCH, "
                + "streaming mode (Flink resets it to UNDEFINED)", env -> {
                    DataStream<Long> m = map(seq(env, "source"), "map");
                    sink(filter(exchange(env, m, StreamExchangeMode.BATCH), "filter"), "sink");
                });
        add("batch_exchange_in_batch_mode", "forward PartitionTransformation with StreamExchangeMode.BATCH, "
                + "RuntimeExecutionMode.BATCH", env -> {
                    env.setRuntimeMode(RuntimeExecutionMode.BATCH);
                    DataStream<Long> m = map(seq(env, "source"), "map");
                    sink(filter(exchange(env, m, StreamExchangeMode.BATCH), "filter"), "sink");
                });
        add("pipelined_exchange_in_batch_mode", "forward PartitionTransformation with StreamExchangeMode.PIPELINED, "
                + "RuntimeExecutionMode.BATCH", env -> {
                    env.setRuntimeMode(RuntimeExecutionMode.BATCH);
                    DataStream<Long> m = map(seq(env, "source"), "map");
                    sink(filter(exchange(env, m, StreamExchangeMode.PIPELINED), "filter"), "sink");
                });
        add("auto_uids_disabled_all_uids", "pipeline.auto-generate-uids=false with a uid on every operator",
                conf("pipeline.auto-generate-uids", "false"), env -> {
                    SingleOutputStreamOperator<Long> m = map(seq(env, "source").uid("source"), "map").uid("map");
                    sink(m, "sink").uid("sink");
                });
        add("auto_uids_disabled_missing_uid", "pipeline.auto-generate-uids=false, the map has no uid or hash",
                conf("pipeline.auto-generate-uids", "false"), env ->
                        sink(map(seq(env, "source").uid("source"), "map"), "sink").uid("sink"));
        add("uid_collision", "two operators with uid(\"dup\")", env ->
                sink(map(map(seq(env, "source"), "map1").uid("dup"), "map2").uid("dup"), "sink"));
        add("empty_uid", "uid(\"\") on the map", env ->
                sink(map(seq(env, "source"), "map").uid(""), "sink"));
        add("uid_before_unhashed_input", "uid node whose input is hashed later (revisit path)", env -> {
            DataStream<Long> a = seq(env, "a");
            DataStream<Long> b = map(map(map(seq(env, "b"), "b1").setParallelism(3), "b2").setParallelism(1), "b3");
            sink(a.connect(b).map(new Functions.Merge()).name("co-map").uid("co-map"), "sink");
        });
        add("long_chain_30", "source -> 30 maps -> sink, all chained", env -> {
            DataStream<Long> s = seq(env, "source");
            for (int i = 1; i <= 30; i++) {
                s = map(s, "map" + i);
            }
            sink(s, "sink");
        });
        add("long_chain_30_broken", "30 maps; map15 has parallelism 3 and map16 a uid", env -> {
            DataStream<Long> s = seq(env, "source");
            for (int i = 1; i <= 30; i++) {
                SingleOutputStreamOperator<Long> m = map(s, "map" + i);
                if (i == 15) {
                    m.setParallelism(3);
                }
                if (i == 16) {
                    m.uid("map16");
                }
                s = m;
            }
            sink(s, "sink");
        });
        add("wide_100", "source fans out to 50 map->filter branches, unioned into one sink", env -> {
            DataStream<Long> s = seq(env, "source");
            List<DataStream<Long>> branches = new ArrayList<>();
            for (int i = 0; i < 50; i++) {
                SingleOutputStreamOperator<Long> m = map(s, "map" + i);
                if (i % 7 == 3) {
                    m.setParallelism(3);
                }
                if (i % 10 == 5) {
                    m.uid("branch-" + i);
                }
                branches.add(filter(m, "filter" + i));
            }
            DataStream<Long> first = branches.get(0);
            @SuppressWarnings("unchecked")
            DataStream<Long>[] rest = branches.subList(1, branches.size()).toArray(new DataStream[0]);
            sink(first.union(rest), "sink");
        });
        add("sql_group_by", "SQL INSERT ... GROUP BY attached to the env, no uids", env -> sql(env, false, GROUP_BY));
        add("sql_group_by_uids", "SQL GROUP BY with table.exec.uid.generation=ALWAYS", env -> sql(env, true, GROUP_BY));
        add("sql_join", "SQL regular join, no uids", env -> sql(env, false, JOIN));
        add("sql_join_uids", "SQL regular join with table.exec.uid.generation=ALWAYS", env -> sql(env, true, JOIN));
        add("sql_group_by_uid_format", "SQL GROUP BY, uids ALWAYS with table.exec.uid.format "
                + "<id>_<type>_<version>_<transformation>", env -> sqlWithFormat(env, true, "<id>_<type>_<version>_<transformation>",
                GROUP_BY));
        add("sql_two_inserts", "statement set with GROUP BY and join inserts", env -> sql(env, false, GROUP_BY, JOIN));
        add("sql_mixed_with_datastream", "DataStream pipeline plus SQL insert in one env", env -> {
            linear(env);
            sql(env, true, GROUP_BY);
        });
        return CASES;
    }

    static List<String> names() {
        List<String> names = new ArrayList<>();
        for (Case c : all()) {
            names.add(c.name);
        }
        return names;
    }
}

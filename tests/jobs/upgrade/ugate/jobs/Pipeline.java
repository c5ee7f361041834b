package ugate.jobs;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.functions.RichMapFunction;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.connector.source.util.ratelimit.RateLimiterStrategy;
import org.apache.flink.configuration.ConfigOptions;
import org.apache.flink.configuration.PipelineOptions;
import org.apache.flink.connector.datagen.source.DataGeneratorSource;
import org.apache.flink.runtime.state.FunctionInitializationContext;
import org.apache.flink.runtime.state.FunctionSnapshotContext;
import org.apache.flink.streaming.api.checkpoint.CheckpointedFunction;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.streaming.api.functions.sink.PrintSink;
import org.apache.flink.util.Collector;

/**
 * The stateful test job of the real-upgrade tests and its variants (one main class per variant).
 *
 * <p>v1: a rate-limited generator of keyed events (keys k0..k7, round robin) -> "tagger", a map
 * that counts the records its subtask has seen in operator ListState "seen" -> keyBy -> "counter",
 * a keyed counter in ValueState "count" -> print. Every counter update prints
 * {@code UGATE variant=<v> job=<job id> key=<k> count=<n>}, so the tests read the job's state from
 * its own output (the TaskManager's .out file). The tagger prints {@code UGATE-INIT} when it
 * initialises (restored or not, with the restored "seen" total) and {@code UGATE-SNAP} when it is
 * snapshotted, so operator state can be checked across the upgrade too.
 *
 * <p>The variants are the upgrades a platform team ships: see the main classes.
 */
public final class Pipeline {
    public static final String JOB_NAME = "ugate-counter";
    public static final int KEYS = 8;

    private Pipeline() {}

    /**
     * The job's name: Flink's {@code pipeline.name} when the submission sets it ({@code -D} or the REST
     * run's {@code flinkConfiguration}), so that several copies of one variant can run side by side under
     * their own names (the deferred rolling upgrade's test); else {@link #JOB_NAME}.
     */
    public static String jobName(StreamExecutionEnvironment env) {
        return env.getConfiguration().getOptional(PipelineOptions.NAME).orElse(JOB_NAME);
    }

    /**
     * A file whose appearance releases a restore ({@code -D ugate.restore-hold-file=<path>}, read by the variants
     * that honour it), else null. While it is missing the tagger's subtasks stay INITIALIZING after a restore, so
     * Flink genuinely takes as long as the test wants to restore the job (the deferred upgrade's timeout test).
     */
    public static String restoreHold(StreamExecutionEnvironment env) {
        return env.getConfiguration().getOptional(
                ConfigOptions.key("ugate.restore-hold-file").stringType().noDefaultValue()).orElse(null);
    }

    /** Options shared by every variant: {@code --rate <events per second>}. */
    public static double rate(String[] args) {
        for (int i = 0; i + 1 < args.length; i++) {
            if (args[i].equals("--rate")) {
                return Double.parseDouble(args[i + 1]);
            }
        }
        return 40.0;
    }

    /** The event source; {@code uid} null means "no uid" (the broken variant). */
    public static DataStream<String> source(StreamExecutionEnvironment env, String[] args, String uid) {
        DataGeneratorSource<String> gen = new DataGeneratorSource<>(
                n -> "k" + (n % KEYS), Long.MAX_VALUE, RateLimiterStrategy.perSecond(rate(args)), Types.STRING);
        SingleOutputStreamOperator<String> s = env.fromSource(gen, WatermarkStrategy.noWatermarks(), "events");
        return uid == null ? s : s.uid(uid);
    }

    /** Operator state: how many records this subtask has passed on (ListState, SPLIT_DISTRIBUTE). */
    public static final class Tagger extends RichMapFunction<String, String> implements CheckpointedFunction {
        private final String variant;
        private final String restoreHold;
        private transient ListState<Long> seenState;
        private long seen;

        public Tagger(String variant) {
            this(variant, null);
        }

        /** {@code restoreHold}: a restore waits (INITIALIZING) until that file exists; null: never waits. */
        public Tagger(String variant, String restoreHold) {
            this.variant = variant;
            this.restoreHold = restoreHold;
        }

        @Override
        public String map(String key) {
            seen++;
            return key;
        }

        @Override
        public void snapshotState(FunctionSnapshotContext ctx) throws Exception {
            seenState.update(java.util.List.of(seen));
            System.out.println("UGATE-SNAP variant=" + variant + " job=" + jobId(getRuntimeContext())
                    + " op=tagger subtask=" + getRuntimeContext().getTaskInfo().getIndexOfThisSubtask()
                    + " checkpoint=" + ctx.getCheckpointId() + " seen=" + seen);
        }

        @Override
        public void initializeState(FunctionInitializationContext ctx) throws Exception {
            seenState = ctx.getOperatorStateStore().getListState(new ListStateDescriptor<>("seen", Types.LONG));
            seen = 0;
            if (ctx.isRestored() && restoreHold != null) {
                System.out.println("UGATE-HOLD variant=" + variant + " job=" + jobId(getRuntimeContext())
                        + " waiting for " + restoreHold);
                while (!java.nio.file.Files.exists(java.nio.file.Path.of(restoreHold))) {
                    Thread.sleep(200);  // interrupted when the job is cancelled
                }
            }
            for (Long v : seenState.get()) {
                seen += v;
            }
            System.out.println("UGATE-INIT variant=" + variant + " job=" + jobId(getRuntimeContext())
                    + " op=tagger subtask=" + getRuntimeContext().getTaskInfo().getIndexOfThisSubtask()
                    + " restored=" + ctx.isRestored() + " seen=" + seen);
        }
    }

    /** Keyed state: a counter per key (ValueState "count" of Long). */
    public static final class Counter extends KeyedProcessFunction<String, String, String> {
        private final String variant;
        private transient ValueState<Long> count;

        public Counter(String variant) {
            this.variant = variant;
        }

        @Override
        public void open(OpenContext ctx) {
            count = getRuntimeContext().getState(new ValueStateDescriptor<>("count", Types.LONG));
        }

        @Override
        public void processElement(String key, Context ctx, Collector<String> out) throws Exception {
            Long c = count.value();
            long next = (c == null ? 0L : c) + 1;
            count.update(next);
            out.collect("UGATE variant=" + variant + " job=" + jobId(getRuntimeContext()) + " key=" + key
                    + " count=" + next);
        }
    }

    /**
     * The same counter with its state's type changed from Long to String: the operator ids, state
     * names and bytes are unchanged (an operator-ID gate passes it) but Flink refuses the restore
     * because the new state serializer is incompatible with the savepoint's.
     */
    public static final class StringCounter extends KeyedProcessFunction<String, String, String> {
        private final String variant;
        private transient ValueState<String> count;

        public StringCounter(String variant) {
            this.variant = variant;
        }

        @Override
        public void open(OpenContext ctx) {
            count = getRuntimeContext().getState(new ValueStateDescriptor<>("count", Types.STRING));
        }

        @Override
        public void processElement(String key, Context ctx, Collector<String> out) throws Exception {
            String c = count.value();
            long next = (c == null ? 0L : Long.parseLong(c)) + 1;
            count.update(Long.toString(next));
            out.collect("UGATE variant=" + variant + " job=" + jobId(getRuntimeContext()) + " key=" + key
                    + " count=" + next);
        }
    }

    static String jobId(org.apache.flink.api.common.functions.RuntimeContext ctx) {
        return ctx.getJobInfo().getJobId().toHexString();
    }

    public static PrintSink<String> printSink() {
        return new PrintSink<>();
    }
}

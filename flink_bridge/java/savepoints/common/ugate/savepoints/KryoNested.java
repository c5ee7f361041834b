package ugate.savepoints;

import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.StateRecoveryOptions;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.util.Collector;

import java.io.File;
import java.util.ArrayList;
import java.util.List;

/**
 * A Kryo-serialized value that is not a POJO and holds a java.util collection inside its object graph: its
 * serializer snapshot names only the class ({@code KryoSerializerSnapshot} of {@link Holder}), Kryo writes the
 * collection's class and elements inside each value. Written by Flink 1.x (Kryo 2), restored by 2.x (Kryo 5), every
 * key's value read back and compared: what the gate's Kryo rule must predict from what Kryo wrote.
 *
 * <p>Tasks as in {@link SchemaChanges}: {@code write:<dir>:<backend>:<variant>} and
 * {@code restore:<savepoint-dir>:<backend>:<variant>}, variant {@code kryo-nested} or
 * {@code kryo-nested-registered} (see {@link #job}).
 */
public final class KryoNested {
    private KryoNested() {}

    private static final int KEYS = 8;

    /** Not a POJO (final fields, no default constructor): Flink falls back to Kryo for it (GenericTypeInfo). */
    public static final class Holder {
        private final String name;
        private final List<String> tags;

        public Holder(String name, List<String> tags) {
            this.name = name;
            this.tags = tags;
        }

        @Override public String toString() {
            return "Holder{" + name + ", " + tags + "}";
        }

        boolean sameAs(Holder o) {
            return o != null && name.equals(o.name) && tags.equals(o.tags);
        }
    }

    static Holder holderOf(long k) {
        List<String> tags = new ArrayList<>();
        for (int i = 0; i < 3; i++) tags.add("t" + k + "-" + i);
        return new Holder("h" + k, tags);
    }

    public static void main(String[] args) throws Exception {
        for (String task : args) {
            String[] p = task.split(":", 4);
            String out;
            try {
                String variant = p.length > 3 ? p[3] : "kryo-nested";
                out = p[0].equals("write") ? write(new File(p[1]), p[2], variant)
                        : restore(new File(p[1]), p[2], variant);
            } catch (Exception e) {
                e.printStackTrace();
                out = "ERROR\t" + String.valueOf(e).replace('\n', ' ');
            }
            System.out.println(task + "\t" + out);
            System.out.flush();
        }
        System.exit(0);
    }

    static String write(File dir, String backend, String variant) throws Exception {
        SchemaChanges.verify = false;
        dir.mkdirs();
        Configuration c = SchemaChanges.config(backend);
        c.set(CheckpointingOptions.CHECKPOINTS_DIRECTORY, new File(dir, "checkpoints").toURI().toString());
        StreamExecutionEnvironment env = SchemaChanges.env(c);
        job(env, variant);
        return SchemaChanges.savepointOf(env.executeAsync("kryo-nested"), dir);
    }

    static String restore(File savepoint, String backend, String variant) throws Exception {
        SchemaChanges.verify = true;
        SchemaChanges.RESULTS.clear();
        SchemaChanges.CHECKED_KEYS.clear();
        Configuration c = SchemaChanges.config(backend);
        c.set(StateRecoveryOptions.SAVEPOINT_PATH, SchemaChanges.savepointIn(savepoint).toURI().toString());
        StreamExecutionEnvironment env = SchemaChanges.env(c);
        job(env, variant);
        return SchemaChanges.awaitChecked(env.executeAsync("kryo-nested-restore"));
    }

    /**
     * Variant {@code kryo-nested-registered} registers {@link ArrayList} with Kryo ({@link KryoTypes}): Kryo then writes
     * the list's class inside each value by registration id instead of by name, and the KryoSerializerSnapshot lists
     * it among its registrations.
     */
    static void job(StreamExecutionEnvironment env, String variant) {
        if (variant.equals("kryo-nested-registered")) {
            KryoTypes.register(env, ArrayList.class);
        }
        DataStream<Long> numbers = env.fromSequence(0, Long.MAX_VALUE).uid("numbers").name("numbers")
                .map(new Functions.Throttle(5)).uid("throttle").name("throttle");
        KeySelector<Long, Long> byNumber = v -> v % KEYS;
        numbers.keyBy(byNumber, Types.LONG).process(new Keeper()).uid("kryo-nested").name("kryo-nested")
                .sinkTo(new DiscardingSink<>()).name("sink");
    }

    static final class Keeper extends KeyedProcessFunction<Long, Long, Long> {
        private transient ValueState<Holder> holder;

        @Override public void open(OpenContext ctx) {
            holder = getRuntimeContext().getState(
                    new ValueStateDescriptor<>("holder", TypeInformation.of(Holder.class)));
        }

        @Override public void processElement(Long v, Context ctx, Collector<Long> out) throws Exception {
            long k = ctx.getCurrentKey();
            if (SchemaChanges.verify) {
                if (!SchemaChanges.CHECKED_KEYS.contains(k)) {
                    String outcome;
                    try {
                        Holder got = holder.value();
                        outcome = got == null ? "MISSING" : holderOf(k).sameAs(got) ? "OK" : "BAD: " + got;
                    } catch (Exception e) {
                        outcome = "BAD: reading it threw " + e;
                    }
                    SchemaChanges.RESULTS.merge("holder", outcome, (old, now) -> old.equals("OK") ? now : old);
                    SchemaChanges.CHECKED_KEYS.add(k);
                }
            } else {
                holder.update(holderOf(k));
            }
            out.collect(v);
        }
    }
}

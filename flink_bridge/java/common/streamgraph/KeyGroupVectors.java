package upgradegate.bridge;

import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.dag.Transformation;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.runtime.state.KeyGroupRange;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.types.Row;
import org.apache.flink.types.RowKind;
import org.apache.flink.util.MathUtils;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;

/**
 * Key-group vectors from Flink's own {@link KeyGroupRangeAssignment}: Java hashCode of keys of
 * several types, murmur, key group, operator index, range splits, default max parallelism and
 * the exact exceptions for invalid arguments. Keys come from a fixed-seed {@link Random}.
 */
final class KeyGroupVectors {
    private KeyGroupVectors() {}

    private static final int[] MAX_PARALLELISMS = {128, 4096, 32768};
    private static final int[][] OPERATOR_INDEX = {{128, 3}, {4096, 7}};

    static Map<String, Object> all() {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("keys", keys());
        out.put("ranges", ranges());
        out.put("default_max_parallelism", defaults());
        out.put("errors", errors());
        return out;
    }

    // ---- keys ------------------------------------------------------------------------------

    private static List<Object> keys() {
        Random rnd = new Random(20240611L);
        List<Object> keys = new ArrayList<>();
        for (String s : Arrays.asList("", "a", "A", "hello", "Hello, World!", "ü", "日本語", "\uD83D\uDE00",
                "a\uD834\uDD1Eb", "\u0000", "\uD800", "tab\tnew\nline", "\"quoted\"")) {
            keys.add(key("String", s, s));
        }
        for (int i = 0; i < 1000; i++) {
            String s = randomString(rnd);
            keys.add(key("String", s, s));
        }
        for (int v : new int[] {0, 1, -1, 42, Integer.MIN_VALUE, Integer.MAX_VALUE, 127, 128, -128}) {
            keys.add(key("Integer", v, v));
        }
        for (int i = 0; i < 700; i++) {
            int v = i < 200 ? i : rnd.nextInt();
            keys.add(key("Integer", v, v));
        }
        for (long v : new long[] {0L, 1L, -1L, Long.MIN_VALUE, Long.MAX_VALUE, 1L << 32, (1L << 32) - 1,
                Integer.MIN_VALUE, Integer.MAX_VALUE + 1L}) {
            keys.add(key("Long", v, v));
        }
        for (int i = 0; i < 700; i++) {
            long v = i < 100 ? i * 1_000_003L : rnd.nextLong();
            keys.add(key("Long", v, v));
        }
        keys.add(key("Boolean", true, true));
        keys.add(key("Boolean", false, false));
        for (double d : new double[] {0.0, -0.0, 1.0, -1.5, Double.NaN, Double.longBitsToDouble(0x7ff8000000000001L),
                Double.POSITIVE_INFINITY, Double.NEGATIVE_INFINITY, Double.MIN_VALUE, Double.MAX_VALUE, 1e-300, 0.1}) {
            keys.add(doubleKey(d));
        }
        for (int i = 0; i < 300; i++) {
            keys.add(doubleKey(i < 100 ? i / 4.0 : (rnd.nextDouble() - 0.5) * Math.pow(10, rnd.nextInt(40) - 20)));
        }
        for (int i = 0; i < 300; i++) {
            String s = randomString(rnd);
            int v = rnd.nextInt();
            keys.add(key("Tuple2<String,Integer>", Tuple2.of(s, v), Arrays.asList(s, v)));
        }
        for (int i = 0; i < 300; i++) {
            long l = rnd.nextLong();
            String s = randomString(rnd);
            boolean b = rnd.nextBoolean();
            keys.add(key("Tuple3<Long,String,Boolean>", Tuple3.of(l, s, b), Arrays.asList(l, s, b)));
        }
        RowKind[] kinds = RowKind.values();
        for (int i = 0; i < 300; i++) {
            Integer a = rnd.nextInt(5) == 0 ? null : rnd.nextInt();
            String s = rnd.nextInt(5) == 0 ? null : randomString(rnd);
            Long l = rnd.nextInt(5) == 0 ? null : rnd.nextLong();
            Boolean b = rnd.nextInt(5) == 0 ? null : rnd.nextBoolean();
            Row row = Row.of(a, s, l, b);
            RowKind kind = i < 200 ? RowKind.INSERT : kinds[rnd.nextInt(kinds.length)];
            row.setKind(kind);
            Map<String, Object> k = key("Row", row, Arrays.asList(a, s, l, b));
            k.put("field_types", Arrays.asList("Integer", "String", "Long", "Boolean"));
            k.put("row_kind", kind.name());
            keys.add(k);
        }
        Row single = Row.ofKind(RowKind.UPDATE_AFTER, "only");
        Map<String, Object> k = key("Row", single, Arrays.asList("only"));
        k.put("field_types", Arrays.asList("String"));
        k.put("row_kind", "UPDATE_AFTER");
        keys.add(k);
        Row empty = Row.of();
        k = key("Row", empty, new ArrayList<>());
        k.put("field_types", new ArrayList<>());
        k.put("row_kind", "INSERT");
        keys.add(k);
        return keys;
    }

    private static String randomString(Random rnd) {
        int len = rnd.nextInt(13);
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < len; i++) {
            int pool = rnd.nextInt(10);
            int cp;
            if (pool < 6) {
                cp = 0x20 + rnd.nextInt(0x5f);
            } else if (pool < 7) {
                cp = 0xa0 + rnd.nextInt(0x160);
            } else if (pool < 8) {
                cp = 0x4e00 + rnd.nextInt(0x200);
            } else if (pool < 9) {
                cp = 0x1f300 + rnd.nextInt(0x200);
            } else {
                cp = 0x400 + rnd.nextInt(0x100);
            }
            sb.appendCodePoint(cp);
        }
        return sb.toString();
    }

    private static Map<String, Object> doubleKey(double d) {
        Map<String, Object> k = key("Double", d, Double.toString(d));
        k.put("bits", Double.doubleToRawLongBits(d));
        return k;
    }

    private static Map<String, Object> key(String type, Object key, Object jsonValue) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("type", type);
        m.put("value", jsonValue);
        int hash = key.hashCode();
        m.put("hash_code", hash);
        m.put("murmur", MathUtils.murmurHash(hash));
        Map<String, Object> groups = new LinkedHashMap<>();
        for (int maxP : MAX_PARALLELISMS) {
            groups.put(String.valueOf(maxP), KeyGroupRangeAssignment.assignToKeyGroup(key, maxP));
        }
        m.put("key_group", groups);
        Map<String, Object> index = new LinkedHashMap<>();
        for (int[] mp : OPERATOR_INDEX) {
            index.put(mp[0] + "/" + mp[1], KeyGroupRangeAssignment.assignKeyToParallelOperator(key, mp[0], mp[1]));
        }
        m.put("operator_index", index);
        return m;
    }

    // ---- ranges, defaults, errors ----------------------------------------------------------

    private static List<Object> ranges() {
        List<Object> out = new ArrayList<>();
        int[] maxPs = {1, 7, 10, 128, 129, 4096, 32768};
        int[] ps = {1, 2, 3, 4, 7, 10, 13, 64, 100};
        for (int maxP : maxPs) {
            for (int p : ps) {
                if (p > maxP) {
                    continue;
                }
                for (int i = 0; i < p; i++) {
                    KeyGroupRange r = KeyGroupRangeAssignment.computeKeyGroupRangeForOperatorIndex(maxP, p, i);
                    Map<String, Object> m = new LinkedHashMap<>();
                    m.put("max_parallelism", maxP);
                    m.put("parallelism", p);
                    m.put("index", i);
                    m.put("start", r.getStartKeyGroup());
                    m.put("end", r.getEndKeyGroup());
                    out.add(m);
                }
            }
        }
        return out;
    }

    private static List<Object> defaults() {
        List<Object> out = new ArrayList<>();
        int[] ps = {1, 85, 86, 171, 172, 341, 342, 683, 684, 1000, 1365, 1366, 2731, 2732, 5461, 5462, 10923, 10924,
                21845, 32768};
        for (int p : ps) {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("parallelism", p);
            m.put("max_parallelism", KeyGroupRangeAssignment.computeDefaultMaxParallelism(p));
            out.add(m);
        }
        return out;
    }

    interface Call {
        Object call() throws Exception;
    }

    private static Map<String, Object> attempt(String description, Call call) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("call", description);
        try {
            Object result = call.call();
            m.put("class", null);
            m.put("message", null);
            m.put("result", result == null ? null : String.valueOf(result));
        } catch (Exception e) {
            m.put("class", e.getClass().getName());
            m.put("message", e.getMessage());
        }
        return m;
    }

    private static Transformation<Long> transformation() {
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        return env.fromSequence(0, 1).map(new Functions.Inc()).returns(Types.LONG).getTransformation();
    }

    private static List<Object> errors() {
        List<Object> out = new ArrayList<>();
        out.add(attempt("computeDefaultMaxParallelism(0)",
                () -> KeyGroupRangeAssignment.computeDefaultMaxParallelism(0)));
        out.add(attempt("computeDefaultMaxParallelism(32769)",
                () -> KeyGroupRangeAssignment.computeDefaultMaxParallelism(32769)));
        out.add(attempt("computeKeyGroupRangeForOperatorIndex(10, 11, 0)",
                () -> KeyGroupRangeAssignment.computeKeyGroupRangeForOperatorIndex(10, 11, 0)));
        out.add(attempt("computeKeyGroupRangeForOperatorIndex(0, 1, 0)",
                () -> KeyGroupRangeAssignment.computeKeyGroupRangeForOperatorIndex(0, 1, 0)));
        out.add(attempt("computeKeyGroupRangeForOperatorIndex(32769, 1, 0)",
                () -> KeyGroupRangeAssignment.computeKeyGroupRangeForOperatorIndex(32769, 1, 0)));
        out.add(attempt("Transformation.setUidHash(\"xyz\")", () -> {
            transformation().setUidHash("xyz");
            return null;
        }));
        out.add(attempt("Transformation.setMaxParallelism(0)", () -> {
            transformation().setMaxParallelism(0);
            return null;
        }));
        out.add(attempt("Transformation.setMaxParallelism(32769)", () -> {
            transformation().setMaxParallelism(32769);
            return null;
        }));
        out.add(attempt("Transformation.setParallelism(0)", () -> {
            transformation().setParallelism(0);
            return null;
        }));
        out.add(attempt("DataStreamSink.setUidHash on a Sink V2 sink", () -> {
            StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
            env.fromSequence(0, 1).sinkTo(new DiscardingSink<>()).setUidHash("00112233445566778899aabbccddeeff");
            return null;
        }));
        return out;
    }
}

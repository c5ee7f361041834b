package upgradegate.bridge;

import org.apache.flink.runtime.state.KeyGroupRangeAssignment;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Baseline for bench/bench_keygroups.py: Flink's own
 * {@link KeyGroupRangeAssignment#assignKeyToParallelOperator} (key.hashCode() -> murmur -> key group ->
 * operator index) timed on exactly the keys the Python side wrote, on one thread.
 *
 * <p>Usage: {@code KeyGroupBench <dir> <maxParallelism> <parallelism> <seconds> <type>...} with type
 * int ({@code <dir>/int.bin}, little-endian int32), long ({@code long.bin}, int64) or string
 * ({@code string.txt}, UTF-8, one per line). Keys are boxed before timing (a KeySelector hands Flink
 * boxed keys). Strings are rebuilt from their chars before every pass, because {@code String} caches
 * its hashCode and a record's key in Flink is a fresh object. Each type is warmed up for half of
 * {@code seconds} and timed for the other half; the operator indexes of the last pass go to
 * {@code <dir>/<type>.out} (little-endian int16) for the Python side to compare. Prints one JSON
 * line per type: keys, passes, best and mean nanoseconds per pass.
 */
public final class KeyGroupBench {
    private KeyGroupBench() {}

    private static volatile int sink;

    public static void main(String[] args) throws Exception {
        Path dir = Paths.get(args[0]);
        int maxParallelism = Integer.parseInt(args[1]);
        int parallelism = Integer.parseInt(args[2]);
        double seconds = Double.parseDouble(args[3]);
        for (int i = 4; i < args.length; i++) {
            String type = args[i];
            Keys keys = load(dir, type);
            short[] out = new short[keys.size()];
            long warmEnd = System.nanoTime() + (long) (seconds * 0.5e9);
            while (System.nanoTime() < warmEnd) pass(keys, out, maxParallelism, parallelism);
            long end = System.nanoTime() + (long) (seconds * 0.5e9);
            long best = Long.MAX_VALUE;
            long total = 0;
            int passes = 0;
            do {
                long t = pass(keys, out, maxParallelism, parallelism);
                best = Math.min(best, t);
                total += t;
                passes++;
            } while (System.nanoTime() < end || passes < 3);
            write(dir.resolve(type + ".out"), out);
            Map<String, Object> r = new LinkedHashMap<>();
            r.put("type", type);
            r.put("keys", keys.size());
            r.put("passes", passes);
            r.put("best_nanos", best);
            r.put("mean_nanos", total / passes);
            System.out.println(Json.write(r));
            System.out.flush();
        }
    }

    /** Nanoseconds for one pass of assignKeyToParallelOperator over every key. */
    private static long pass(Keys keys, short[] out, int maxParallelism, int parallelism) {
        Object[] k = keys.fresh();
        long start = System.nanoTime();
        for (int i = 0; i < k.length; i++) {
            out[i] = (short) KeyGroupRangeAssignment.assignKeyToParallelOperator(k[i], maxParallelism, parallelism);
        }
        long t = System.nanoTime() - start;
        sink += out[k.length - 1];
        return t;
    }

    /** Boxed keys; strings hand out new String objects (hash not yet cached) for every pass. */
    private interface Keys {
        int size();

        Object[] fresh();
    }

    private static Keys load(Path dir, String type) throws IOException {
        switch (type) {
            case "int": {
                ByteBuffer b = read(dir.resolve("int.bin"));
                Object[] keys = new Object[b.remaining() / 4];
                for (int i = 0; i < keys.length; i++) keys[i] = b.getInt();
                return fixed(keys);
            }
            case "long": {
                ByteBuffer b = read(dir.resolve("long.bin"));
                Object[] keys = new Object[b.remaining() / 8];
                for (int i = 0; i < keys.length; i++) keys[i] = b.getLong();
                return fixed(keys);
            }
            case "string": {
                List<String> lines = Files.readAllLines(dir.resolve("string.txt"), StandardCharsets.UTF_8);
                char[][] chars = new char[lines.size()][];
                for (int i = 0; i < chars.length; i++) chars[i] = lines.get(i).toCharArray();
                Object[] keys = new Object[chars.length];
                return new Keys() {
                    @Override public int size() { return chars.length; }

                    @Override public Object[] fresh() {
                        for (int i = 0; i < chars.length; i++) keys[i] = new String(chars[i]);
                        return keys;
                    }
                };
            }
            default:
                throw new IllegalArgumentException("unknown key type " + type);
        }
    }

    private static Keys fixed(Object[] keys) {
        return new Keys() {
            @Override public int size() { return keys.length; }

            @Override public Object[] fresh() { return keys; }
        };
    }

    private static ByteBuffer read(Path p) throws IOException {
        return ByteBuffer.wrap(Files.readAllBytes(p)).order(ByteOrder.LITTLE_ENDIAN);
    }

    private static void write(Path p, short[] values) throws IOException {
        ByteBuffer b = ByteBuffer.allocate(values.length * 2).order(ByteOrder.LITTLE_ENDIAN);
        b.asShortBuffer().put(values);
        try (FileChannel ch = FileChannel.open(p, StandardOpenOption.CREATE, StandardOpenOption.WRITE,
                StandardOpenOption.TRUNCATE_EXISTING)) {
            while (b.hasRemaining()) ch.write(b);
        }
    }
}

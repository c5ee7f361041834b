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
import java.util.List;
import java.util.function.LongSupplier;

/**
 * Flink's side of bench/bench_keygroups.py: its own
 * {@link KeyGroupRangeAssignment#assignKeyToParallelOperator} (key.hashCode() -> murmur -> key group ->
 * operator index) on exactly the keys the Python side wrote, served to bench/fair.py by
 * {@code ugate.fair.FairServer} (timed by this thread's CPU, round by round, alternating with ours).
 *
 * <p>{@code fairWorkload(<dir> <maxParallelism> <parallelism> <type>)} with type int ({@code <dir>/int.bin},
 * little-endian int32), long ({@code long.bin}, int64) or string ({@code string.txt}, UTF-8, one per line). Keys
 * are boxed before timing (a KeySelector hands Flink boxed keys). Strings are rebuilt from their chars before
 * every unit, outside the timed CPU (the supplier is also a {@link Runnable}, which FairServer runs untimed),
 * because {@code String} caches its hashCode and a record's key in Flink is a fresh object. One pass runs while
 * preparing and its operator indexes go to {@code <dir>/<type>.out} (little-endian int16), for the Python side
 * to compare with its own before anything is timed. One unit = one pass over every key; its count = keys.
 */
public final class KeyGroupBench {
    private KeyGroupBench() {}

    private static volatile int sink;

    public static LongSupplier fairWorkload(String[] args) throws IOException {
        Path dir = Paths.get(args[0]);
        int maxParallelism = Integer.parseInt(args[1]);
        int parallelism = Integer.parseInt(args[2]);
        String type = args[3];
        Keys keys = load(dir, type);
        short[] out = new short[keys.size()];
        pass(keys.fresh(), out, maxParallelism, parallelism);
        write(dir.resolve(type + ".out"), out);
        final class Unit implements LongSupplier, Runnable {
            private Object[] next;

            @Override public void run() {
                next = keys.fresh();
            }

            @Override public long getAsLong() {
                pass(next, out, maxParallelism, parallelism);
                return next.length;
            }
        }
        return new Unit();
    }

    /** assignKeyToParallelOperator over every key. */
    private static void pass(Object[] k, short[] out, int maxParallelism, int parallelism) {
        for (int i = 0; i < k.length; i++) {
            out[i] = (short) KeyGroupRangeAssignment.assignKeyToParallelOperator(k[i], maxParallelism, parallelism);
        }
        sink += out[k.length - 1];
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

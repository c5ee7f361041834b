package ugate.savepoints;

import org.apache.flink.runtime.checkpoint.Checkpoints;
import org.apache.flink.runtime.checkpoint.CheckpointProperties;
import org.apache.flink.runtime.checkpoint.MasterState;
import org.apache.flink.runtime.checkpoint.OperatorState;
import org.apache.flink.runtime.checkpoint.OperatorSubtaskState;
import org.apache.flink.runtime.checkpoint.SavepointType;
import org.apache.flink.runtime.checkpoint.SnapshotType;
import org.apache.flink.runtime.checkpoint.metadata.CheckpointMetadata;
import org.apache.flink.runtime.state.IncrementalKeyedStateHandle;
import org.apache.flink.runtime.state.IncrementalRemoteKeyedStateHandle;
import org.apache.flink.runtime.state.KeyGroupRange;
import org.apache.flink.runtime.state.KeyGroupsStateHandle;
import org.apache.flink.runtime.state.KeyedStateHandle;
import org.apache.flink.runtime.state.OperatorStateHandle;
import org.apache.flink.runtime.state.StateObject;
import org.apache.flink.runtime.state.StreamStateHandle;
import org.apache.flink.runtime.state.memory.ByteStreamStateHandle;

import java.io.ByteArrayInputStream;
import java.io.DataInputStream;
import java.io.File;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.LongSupplier;

/**
 * Flink's own reading of a `_metadata` file, as JSON in the exact shape of our Python reader's
 * {@code to_json(detail=True)}: {@code FlinkView view <dir>...} writes {@code <dir>/flink-view.json};
 * {@code fairWorkload} is the benchmark's unit of work ({@code Checkpoints.loadCheckpointMetadata}, see below).
 * Every number comes from Flink's getters (getStateSize, getKeyGroupRange, getStateNameToPartitionOffsets...).
 */
public final class FlinkView {
    private FlinkView() {}

    public static void main(String[] args) throws Exception {
        for (int i = 1; i < args.length; i++) {
            File dir = new File(args[i]).getAbsoluteFile();
            Object view = view(dir);
            Files.write(new File(dir, "flink-view.json").toPath(),
                    (Json.write(view) + "\n").getBytes(StandardCharsets.UTF_8));
        }
        System.exit(0);
    }

    static CheckpointMetadata load(byte[] bytes, String pointer) throws Exception {
        try (DataInputStream in = new DataInputStream(new ByteArrayInputStream(bytes))) {
            return Checkpoints.loadCheckpointMetadata(in, FlinkView.class.getClassLoader(), pointer);
        }
    }

    private static volatile CheckpointMetadata loaded;

    /**
     * Flink's side of bench/bench_metadata.py, served to bench/fair.py by {@code ugate.fair.FairServer} (timed by
     * this thread's CPU, round by round, alternating with ours): one unit = {@code Checkpoints.loadCheckpointMetadata}
     * of the file's bytes, already in memory as ours are; its count = 1 file.
     */
    public static LongSupplier fairWorkload(String[] args) throws Exception {
        File file = new File(args[0]).getAbsoluteFile();
        byte[] bytes = Files.readAllBytes(file.toPath());
        String pointer = file.getParent();
        return () -> {
            try {
                loaded = load(bytes, pointer);  // kept, so the JIT cannot drop the work
                return 1;
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        };
    }

    static Map<String, Object> view(File dir) throws Exception {
        byte[] bytes = Files.readAllBytes(new File(dir, "_metadata").toPath());
        int version = ((bytes[4] & 0xff) << 24) | ((bytes[5] & 0xff) << 16) | ((bytes[6] & 0xff) << 8) | (bytes[7] & 0xff);
        CheckpointMetadata m = load(bytes, dir.getAbsolutePath());
        Templating t = new Templating(dir);
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("version", version);
        out.put("checkpoint_id", m.getCheckpointId());
        out.put("properties", properties(m.getCheckpointProperties()));
        List<Object> masters = new ArrayList<>();
        for (MasterState ms : m.getMasterStates()) {
            Map<String, Object> j = new LinkedHashMap<>();
            j.put("name", ms.name());
            j.put("version", ms.version());
            j.put("bytes", ms.bytes().length);
            masters.add(j);
        }
        out.put("master_states", masters);
        List<Object> ops = new ArrayList<>();
        for (OperatorState s : m.getOperatorStates()) ops.add(operator(s, t));
        out.put("operators", ops);
        return out;
    }

    private static Object properties(CheckpointProperties p) {
        if (p == null) return null;
        Map<String, Object> j = new LinkedHashMap<>();
        SnapshotType type = p.getCheckpointType();
        j.put("type", p.isSavepoint() ? "savepoint" : "checkpoint");
        j.put("format", type instanceof SavepointType ? ((SavepointType) type).getFormatType().name() : null);
        j.put("name", type.getName());
        return j;
    }

    private static Map<String, Object> operator(OperatorState s, Templating t) {
        Map<String, Object> j = new LinkedHashMap<>();
        j.put("operator_id", s.getOperatorID().toHexString());
        j.put("name", Compat.operatorName(s));
        j.put("uid", Compat.operatorUid(s));
        j.put("parallelism", s.getParallelism());
        j.put("max_parallelism", s.getMaxParallelism());
        j.put("fully_finished", s.isFullyFinished());
        ByteStreamStateHandle coord = s.getCoordinatorState();
        j.put("coordinator_state_bytes", coord == null ? null : coord.getStateSize());
        j.put("state_bytes", s.getStateSize());
        List<Object> subtasks = new ArrayList<>();
        for (Map.Entry<Integer, OperatorSubtaskState> e : new TreeMap<>(s.getSubtaskStates()).entrySet()) {
            subtasks.add(subtask(e.getKey(), e.getValue(), t));
        }
        j.put("subtasks", subtasks);
        return j;
    }

    private static Map<String, Object> subtask(int index, OperatorSubtaskState st, Templating t) {
        Map<String, Object> j = new LinkedHashMap<>();
        j.put("index", index);
        j.put("finished", st.isFinished());
        j.put("managed_keyed", keyedSummary(st.getManagedKeyedState()));
        j.put("raw_keyed", keyedSummary(st.getRawKeyedState()));
        j.put("managed_operator", operatorSummary(st.getManagedOperatorState()));
        j.put("raw_operator", operatorSummary(st.getRawOperatorState()));
        long channel = 0;
        List<Object> in = new ArrayList<>();
        List<Object> outp = new ArrayList<>();
        for (StateObject h : st.getInputChannelState()) { channel += h.getStateSize(); in.add(channel(h, t)); }
        for (StateObject h : st.getResultSubpartitionState()) { channel += h.getStateSize(); outp.add(channel(h, t)); }
        j.put("channel_state_bytes", channel);
        Map<String, Object> handles = new LinkedHashMap<>();
        handles.put("managed_keyed", keyedDetail(st.getManagedKeyedState(), t));
        handles.put("raw_keyed", keyedDetail(st.getRawKeyedState(), t));
        handles.put("managed_operator", operatorDetail(st.getManagedOperatorState(), t));
        handles.put("raw_operator", operatorDetail(st.getRawOperatorState(), t));
        handles.put("input_channel", in);
        handles.put("result_subpartition", outp);
        j.put("state_size", st.getStateSize());
        j.put("handles", handles);
        return j;
    }

    private static List<Object> range(KeyGroupRange r) {
        List<Object> l = new ArrayList<>();
        l.add(r.getStartKeyGroup());
        l.add(r.getEndKeyGroup());
        return l;
    }

    private static List<Object> keyedSummary(Collection<KeyedStateHandle> hs) {
        List<Object> l = new ArrayList<>();
        for (KeyedStateHandle h : hs) {
            Map<String, Object> j = new LinkedHashMap<>();
            j.put("key_groups", range(h.getKeyGroupRange()));
            j.put("bytes", h.getStateSize());
            l.add(j);
        }
        return l;
    }

    private static List<Object> operatorSummary(Collection<OperatorStateHandle> hs) {
        List<Object> l = new ArrayList<>();
        for (OperatorStateHandle h : hs) {
            Map<String, Object> states = new TreeMap<>();
            for (Map.Entry<String, OperatorStateHandle.StateMetaInfo> e : h.getStateNameToPartitionOffsets().entrySet()) {
                Map<String, Object> s = new LinkedHashMap<>();
                s.put("mode", e.getValue().getDistributionMode().name());
                s.put("partitions", e.getValue().getOffsets().length);
                states.put(e.getKey(), s);
            }
            Map<String, Object> j = new LinkedHashMap<>();
            j.put("states", states);
            j.put("bytes", h.getStateSize());
            l.add(j);
        }
        return l;
    }

    private static List<Object> keyedDetail(Collection<KeyedStateHandle> hs, Templating t) {
        List<Object> l = new ArrayList<>();
        for (KeyedStateHandle h : hs) l.add(keyed(h, t));
        return l;
    }

    private static Map<String, Object> keyed(KeyedStateHandle h, Templating t) {
        Map<String, Object> j = new LinkedHashMap<>();
        j.put("class", h.getClass().getSimpleName());
        j.put("state_size", h.getStateSize());
        j.put("key_groups", range(h.getKeyGroupRange()));
        if (h instanceof KeyGroupsStateHandle) {
            KeyGroupsStateHandle k = (KeyGroupsStateHandle) h;
            List<Object> offs = new ArrayList<>();
            for (int kg : k.getKeyGroupRange()) offs.add(k.getOffsetForKeyGroup(kg));
            j.put("offsets", offs);
            j.put("delegate", stream(k.getDelegateStateHandle(), t));
        } else if (h instanceof IncrementalRemoteKeyedStateHandle) {
            IncrementalRemoteKeyedStateHandle k = (IncrementalRemoteKeyedStateHandle) h;
            j.put("checkpoint_id", k.getCheckpointId());
            j.put("backend_id", String.valueOf(k.getBackendIdentifier()));
            j.put("checkpointed_size", k.getCheckpointedSize());
            j.put("meta", stream(k.getMetaDataStateHandle(), t));
            j.put("shared", files(k.getSharedState(), t));
            j.put("private", files(k.getPrivateState(), t));
        } else {
            Object cs = call(h, "getCheckpointedSize");
            if (cs != null) j.put("checkpointed_size", cs);
        }
        return j;
    }

    private static List<Object> files(List<IncrementalKeyedStateHandle.HandleAndLocalPath> l, Templating t) {
        List<Object> out = new ArrayList<>();
        for (IncrementalKeyedStateHandle.HandleAndLocalPath p : l) {
            Map<String, Object> j = new LinkedHashMap<>();
            j.put("local_path", p.getLocalPath());
            j.put("handle", stream(p.getHandle(), t));
            out.add(j);
        }
        return out;
    }

    private static List<Object> operatorDetail(Collection<OperatorStateHandle> hs, Templating t) {
        List<Object> l = new ArrayList<>();
        for (OperatorStateHandle h : hs) {
            Map<String, Object> j = new LinkedHashMap<>();
            j.put("class", h.getClass().getSimpleName());
            j.put("state_size", h.getStateSize());
            Map<String, Object> states = new TreeMap<>();
            for (Map.Entry<String, OperatorStateHandle.StateMetaInfo> e : h.getStateNameToPartitionOffsets().entrySet()) {
                Map<String, Object> s = new LinkedHashMap<>();
                s.put("mode", e.getValue().getDistributionMode().name());
                List<Object> offs = new ArrayList<>();
                for (long o : e.getValue().getOffsets()) offs.add(o);
                s.put("offsets", offs);
                states.put(e.getKey(), s);
            }
            j.put("states", states);
            j.put("delegate", stream(h.getDelegateStateHandle(), t));
            l.add(j);
        }
        return l;
    }

    private static Map<String, Object> channel(StateObject h, Templating t) {
        Map<String, Object> j = new LinkedHashMap<>();
        j.put("class", h.getClass().getSimpleName());
        j.put("state_size", h.getStateSize());
        Object idx = call(h, "getSubtaskIndex");
        j.put("subtask", idx);
        Object offs = call(h, "getOffsets");
        if (offs instanceof List) j.put("offsets", new ArrayList<Object>((List<?>) offs));
        Object d = call(h, "getDelegate");
        if (d instanceof StreamStateHandle) j.put("delegate", stream((StreamStateHandle) d, t));
        return j;
    }

    private static Object stream(StreamStateHandle h, Templating t) {
        if (h == null) return null;
        Map<String, Object> j = new LinkedHashMap<>();
        j.put("class", h.getClass().getSimpleName());
        j.put("state_size", h.getStateSize());
        if (h instanceof ByteStreamStateHandle) j.put("name", ((ByteStreamStateHandle) h).getHandleName());
        Object path = call(h, "getFilePath");
        if (path != null) j.put("path", t.apply(path.toString()));
        Object rel = call(h, "getRelativePath");
        if (rel != null) j.put("relative_path", rel.toString());
        Object start = call(h, "getStartPos");
        if (start != null) j.put("start_pos", start);
        return j;
    }

    private static Object call(Object o, String method) {
        try {
            Method m = o.getClass().getMethod(method);
            return m.invoke(o);
        } catch (ReflectiveOperationException | RuntimeException e) {
            return null;
        }
    }

    /** Replaces the snapshot directory in paths by ${SAVEPOINT}, so views survive moving the fixture. */
    static final class Templating {
        private final String[] prefixes;

        Templating(File dir) {
            String abs = dir.getAbsolutePath();
            prefixes = new String[] {"file://" + abs, "file:" + abs, abs};
        }

        String apply(String p) {
            for (String pre : prefixes) if (p.startsWith(pre)) return "${SAVEPOINT}" + p.substring(pre.length());
            return p;
        }
    }

    /** Minimal JSON writer for maps, lists, strings, numbers, booleans and null. */
    static final class Json {
        static String write(Object o) {
            StringBuilder b = new StringBuilder();
            write(o, b);
            return b.toString();
        }

        @SuppressWarnings("unchecked")
        private static void write(Object o, StringBuilder b) {
            if (o == null) {
                b.append("null");
            } else if (o instanceof Map) {
                b.append('{');
                boolean first = true;
                for (Map.Entry<String, Object> e : ((Map<String, Object>) o).entrySet()) {
                    if (!first) b.append(", ");
                    first = false;
                    str(e.getKey(), b);
                    b.append(": ");
                    write(e.getValue(), b);
                }
                b.append('}');
            } else if (o instanceof List) {
                b.append('[');
                boolean first = true;
                for (Object x : (List<Object>) o) {
                    if (!first) b.append(", ");
                    first = false;
                    write(x, b);
                }
                b.append(']');
            } else if (o instanceof String) {
                str((String) o, b);
            } else if (o instanceof Enum) {
                str(((Enum<?>) o).name(), b);
            } else {
                b.append(o);
            }
        }

        private static void str(String s, StringBuilder b) {
            b.append('"');
            for (int i = 0; i < s.length(); i++) {
                char c = s.charAt(i);
                if (c == '"' || c == '\\') b.append('\\').append(c);
                else if (c < 0x20 || c > 0x7e) b.append(String.format("\\u%04x", (int) c));
                else b.append(c);
            }
            b.append('"');
        }
    }
}

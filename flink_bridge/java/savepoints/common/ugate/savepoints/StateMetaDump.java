package ugate.savepoints;

import org.apache.flink.api.common.typeutils.CompositeTypeSerializerSnapshot;
import org.apache.flink.api.common.typeutils.TypeSerializerSnapshot;
import org.apache.flink.core.fs.FSDataInputStream;
import org.apache.flink.core.memory.DataInputViewStreamWrapper;
import org.apache.flink.runtime.checkpoint.OperatorState;
import org.apache.flink.runtime.checkpoint.OperatorSubtaskState;
import org.apache.flink.runtime.checkpoint.metadata.CheckpointMetadata;
import org.apache.flink.runtime.state.IncrementalRemoteKeyedStateHandle;
import org.apache.flink.runtime.state.KeyGroupsStateHandle;
import org.apache.flink.runtime.state.KeyedBackendSerializationProxy;
import org.apache.flink.runtime.state.KeyedStateHandle;
import org.apache.flink.runtime.state.OperatorBackendSerializationProxy;
import org.apache.flink.runtime.state.OperatorStateHandle;
import org.apache.flink.runtime.state.StreamStateHandle;
import org.apache.flink.runtime.state.metainfo.StateMetaInfoSnapshot;
import org.apache.flink.util.LinkedOptionalMap;

import java.io.File;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * What Flink's own {@link KeyedBackendSerializationProxy} and {@link OperatorBackendSerializationProxy} read
 * from every managed keyed and operator state handle of a savepoint: {@code StateMetaDump <dir>...} writes
 * {@code <dir>/flink-state-meta.json}, the oracle our Python state-meta reader is compared with. Serializer
 * snapshots are listed as class, version and nested snapshots (composite snapshots' nested ones, a POJO
 * snapshot's fields, a Kryo snapshot's type and registrations), taken from the objects Flink restored.
 */
public final class StateMetaDump {
    private StateMetaDump() {}

    public static void main(String[] args) throws Exception {
        for (String a : args) {
            File dir = new File(a).getAbsoluteFile();
            byte[] bytes = Files.readAllBytes(new File(dir, "_metadata").toPath());
            CheckpointMetadata m = FlinkView.load(bytes, dir.getAbsolutePath());
            Map<String, Object> out = new LinkedHashMap<>();
            List<Object> ops = new ArrayList<>();
            for (OperatorState s : m.getOperatorStates()) {
                List<Object> subtasks = new ArrayList<>();
                for (Map.Entry<Integer, OperatorSubtaskState> e : new TreeMap<>(s.getSubtaskStates()).entrySet()) {
                    List<Object> keyed = new ArrayList<>();
                    for (KeyedStateHandle h : e.getValue().getManagedKeyedState()) keyed.add(keyed(h));
                    List<Object> operator = new ArrayList<>();
                    for (OperatorStateHandle h : e.getValue().getManagedOperatorState()) operator.add(operator(h));
                    if (keyed.isEmpty() && operator.isEmpty()) continue;
                    Map<String, Object> st = new LinkedHashMap<>();
                    st.put("index", e.getKey());
                    st.put("keyed", keyed);
                    st.put("operator", operator);
                    subtasks.add(st);
                }
                if (subtasks.isEmpty()) continue;
                Map<String, Object> op = new LinkedHashMap<>();
                op.put("operator_id", s.getOperatorID().toHexString());
                op.put("subtasks", subtasks);
                ops.add(op);
            }
            out.put("operators", ops);
            Files.write(new File(dir, "flink-state-meta.json").toPath(),
                    (FlinkView.Json.write(out) + "\n").getBytes(StandardCharsets.UTF_8));
        }
        System.exit(0);
    }

    private static Map<String, Object> keyed(KeyedStateHandle h) throws Exception {
        StreamStateHandle stream;
        if (h instanceof KeyGroupsStateHandle) {
            stream = ((KeyGroupsStateHandle) h).getDelegateStateHandle();
        } else if (h instanceof IncrementalRemoteKeyedStateHandle) {
            stream = ((IncrementalRemoteKeyedStateHandle) h).getMetaDataStateHandle();
        } else {
            throw new IllegalStateException("unsupported keyed handle " + h.getClass().getName());
        }
        KeyedBackendSerializationProxy<?> proxy = new KeyedBackendSerializationProxy<>(StateMetaDump.class.getClassLoader());
        try (FSDataInputStream in = stream.openInputStream()) {
            proxy.read(new DataInputViewStreamWrapper(in));
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("handle", h.getClass().getSimpleName());
        out.put("version", proxy.getReadVersion());
        out.put("compression", proxy.isUsingKeyGroupCompression());
        out.put("key_serializer", snapshot(proxy.getKeySerializerSnapshot()));
        out.put("states", states(proxy.getStateMetaInfoSnapshots()));
        return out;
    }

    private static Map<String, Object> operator(OperatorStateHandle h) throws Exception {
        OperatorBackendSerializationProxy proxy = new OperatorBackendSerializationProxy(StateMetaDump.class.getClassLoader());
        try (FSDataInputStream in = h.getDelegateStateHandle().openInputStream()) {
            proxy.read(new DataInputViewStreamWrapper(in));
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("version", proxy.getReadVersion());
        out.put("compression", call(proxy, "isUsingStateCompression")); // package-private in Flink
        out.put("operator_states", states(proxy.getOperatorStateMetaInfoSnapshots()));
        out.put("broadcast_states", states(proxy.getBroadcastStateMetaInfoSnapshots()));
        return out;
    }

    private static List<Object> states(List<StateMetaInfoSnapshot> snapshots) {
        List<Object> out = new ArrayList<>();
        for (StateMetaInfoSnapshot s : snapshots) {
            Map<String, Object> st = new LinkedHashMap<>();
            st.put("name", s.getName());
            st.put("backend_type", s.getBackendStateType().name());
            st.put("options", new TreeMap<>(s.getOptionsImmutable()));
            Map<String, Object> sers = new TreeMap<>();
            for (Map.Entry<String, TypeSerializerSnapshot<?>> e : s.getSerializerSnapshotsImmutable().entrySet()) {
                sers.put(e.getKey(), snapshot(e.getValue()));
            }
            st.put("serializers", sers);
            out.add(st);
        }
        return out;
    }

    /** class, version and what is nested in a snapshot, read from Flink's restored snapshot objects. */
    static Map<String, Object> snapshot(TypeSerializerSnapshot<?> s) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("class", s.getClass().getName());
        out.put("version", s.getCurrentVersion());
        String name = s.getClass().getName();
        if (s instanceof CompositeTypeSerializerSnapshot) {
            List<Object> nested = new ArrayList<>();
            for (TypeSerializerSnapshot<?> n : ((CompositeTypeSerializerSnapshot<?, ?>) s).getNestedSerializerSnapshots()) {
                nested.add(snapshot(n));
            }
            out.put("nested", nested);
        } else if (name.endsWith(".PojoSerializerSnapshot")) {
            Object data = field(s, "snapshotData");
            out.put("type", ((Class<?>) call(data, "getPojoClass")).getName());
            Map<String, Object> fields = new LinkedHashMap<>();
            LinkedOptionalMap<?, ?> map = (LinkedOptionalMap<?, ?>) call(data, "getFieldSerializerSnapshots");
            map.forEach((k, f, v) -> fields.put(k, v == null ? null : snapshot((TypeSerializerSnapshot<?>) v)));
            out.put("fields", fields);
        } else if (name.endsWith(".KryoSerializerSnapshot")) {
            Object data = field(s, "snapshotData");
            out.put("type", ((Class<?>) call(data, "getTypeClass")).getName());
            Map<String, Object> regs = new LinkedHashMap<>();
            LinkedOptionalMap<?, ?> map = (LinkedOptionalMap<?, ?>) call(data, "getKryoRegistrations");
            map.forEach((k, f, v) -> regs.put(k, v == null ? null : String.valueOf(call(v, "getSerializerDefinitionType"))));
            out.put("registrations", regs);
            List<Object> defaults = new ArrayList<>(((LinkedOptionalMap<?, ?>) call(data, "getDefaultKryoSerializers")).keyNames());
            defaults.addAll(((LinkedOptionalMap<?, ?>) call(data, "getDefaultKryoSerializerClasses")).keyNames());
            out.put("default_serializers", defaults);
        }
        return out;
    }

    private static Object field(Object o, String name) {
        for (Class<?> c = o.getClass(); c != null; c = c.getSuperclass()) {
            try {
                Field f = c.getDeclaredField(name);
                f.setAccessible(true);
                return f.get(o);
            } catch (NoSuchFieldException e) {
                // look in the superclass
            } catch (IllegalAccessException e) {
                throw new IllegalStateException(e);
            }
        }
        throw new IllegalStateException("no field " + name + " in " + o.getClass());
    }

    private static Object call(Object o, String method) {
        try {
            Method m = o.getClass().getDeclaredMethod(method);
            m.setAccessible(true);
            return m.invoke(o);
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException(e);
        }
    }
}

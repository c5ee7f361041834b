package upgradegate.bridge;

import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.streaming.api.graph.StreamGraph;
import org.apache.flink.streaming.api.graph.StreamNode;
import org.apache.flink.streaming.api.operators.AbstractUdfStreamOperator;
import org.apache.flink.streaming.api.operators.SimpleOperatorFactory;
import org.apache.flink.streaming.api.operators.StreamOperatorFactory;
import org.apache.flink.table.runtime.operators.bundle.AbstractMapBundleOperator;
import org.apache.flink.table.runtime.operators.window.tvf.common.WindowAggOperator;
import org.apache.flink.table.runtime.typeutils.InternalSerializers;
import org.apache.flink.table.runtime.typeutils.InternalTypeInfo;
import org.apache.flink.table.runtime.typeutils.RowDataSerializer;
import org.apache.flink.table.types.logical.LogicalType;
import org.apache.flink.table.types.logical.RowType;

import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * What the state of each SQL operator of a StreamGraph will be serialized with, for the gate's SQL
 * state rule (upgrade_gate/gate/sql_state_rules.py): the key serializer (StreamNode's state key
 * serializer, a RowDataSerializer for SQL) and the row types the operator and its function hold
 * for their state (GroupAggFunction#accTypes, the dedup functions' typeInfo, StreamingJoinOperator's
 * leftType/rightType, a mini-batch aggregate's MiniBatchGroupAggFunction#accTypes, a window aggregate's
 * processor's accSerializer, ...), each as its serializer snapshot class with nested field serializers —
 * the same classes the savepoint's serialization proxies record — and, for rows, the fields' logical
 * types ({@code logical_types}), which RowDataSerializerSnapshot#resolveSchemaCompatibility
 * compares. Written beside the spec (top-level {@code sql_state}), never inside it, so spec files
 * keep their format.
 */
public final class SqlStateDumper {
    private SqlStateDumper() {}

    public static Map<String, Object> sqlState(StreamGraph graph) {
        Map<String, Object> out = new TreeMap<>();
        for (StreamNode n : SpecDumper.sortedNodes(graph)) {
            Object operator = operator(n.getOperatorFactory());
            String cls = operator == null ? factoryClass(n) : operator.getClass().getName();
            Object function = function(operator);
            // SQL operators: the table runtime's own, or a DataStream operator (KeyedProcessOperator)
            // running one of its functions (GroupAggFunction, the dedup and rank functions)
            boolean sql = (cls != null && cls.startsWith("org.apache.flink.table."))
                    || (function != null && function.getClass().getName().startsWith("org.apache.flink.table."));
            if (!sql) {
                continue;
            }
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("name", n.getOperatorName());
            m.put("description", n.getOperatorDescription());
            m.put("operator_class", cls);
            m.put("key", n.getStateKeySerializer() == null ? null : tree(n.getStateKeySerializer()));
            Map<String, Object> types = new TreeMap<>();
            if (operator != null) {
                collect(operator, "", types);
                if (function != null) {
                    m.put("function_class", function.getClass().getName());
                    collect(function, "function.", types);
                }
                Object processor = operator instanceof WindowAggOperator ? field(operator, "windowProcessor") : null;
                if (processor != null) {
                    m.put("processor_class", processor.getClass().getName());
                    collect(processor, "windowProcessor.", types);
                }
            }
            m.put("types", types);
            out.put(String.valueOf(n.getId()), m);
        }
        return out;
    }

    private static String factoryClass(StreamNode n) {
        StreamOperatorFactory<?> f = n.getOperatorFactory();
        return f == null ? null : f.getClass().getName();
    }

    private static Object operator(StreamOperatorFactory<?> factory) {
        return factory instanceof SimpleOperatorFactory ? ((SimpleOperatorFactory<?>) factory).getOperator() : null;
    }

    /**
     * The function an operator keeps its keyed state in: a UDF operator's user function (KeyedProcessOperator
     * running GroupAggFunction, the dedup and rank functions), or a mini-batch operator's bundle function
     * (AbstractMapBundleOperator#function: MiniBatchGroupAggFunction, MiniBatchGlobalGroupAggFunction, the
     * mini-batch dedup functions), which is not a UDF operator's, so getUserFunction does not reach it.
     */
    private static Object function(Object operator) {
        if (operator instanceof AbstractUdfStreamOperator) {
            return ((AbstractUdfStreamOperator<?, ?>) operator).getUserFunction();
        }
        return operator instanceof AbstractMapBundleOperator ? field(operator, "function") : null;
    }

    /**
     * The value of the field {@code name} declared by {@code o}'s class or a superclass; null when absent. A
     * window aggregate's state is its processor's (WindowAggOperator#windowProcessor, a WindowProcessor on
     * 1.20 and a SyncStateWindowProcessor on 2.3; the processor's accSerializer is declared by
     * AbstractWindowAggProcessor on 1.20, WindowAggProcessorBase on 2.3), a mini-batch aggregate's its
     * AbstractMapBundleOperator#function: private fields, no getters.
     */
    private static Object field(Object o, String name) {
        for (Class<?> c = o.getClass(); c != null && c != Object.class; c = c.getSuperclass()) {
            try {
                Field f = c.getDeclaredField(name);
                f.setAccessible(true);
                return f.get(o);
            } catch (NoSuchFieldException e) {
                // declared further up
            } catch (ReflectiveOperationException | RuntimeException e) {
                return null;
            }
        }
        return null;
    }

    /**
     * Row types held in fields of {@code o} (its class hierarchy): InternalTypeInfo, RowType, LogicalType[],
     * and RowDataSerializer (a window aggregate processor's accSerializer, the serializer of its state).
     */
    private static void collect(Object o, String prefix, Map<String, Object> types) {
        for (Class<?> c = o.getClass(); c != null && c != Object.class; c = c.getSuperclass()) {
            for (Field f : c.getDeclaredFields()) {
                if (Modifier.isStatic(f.getModifiers())) continue;
                Object v;
                try {
                    f.setAccessible(true);
                    v = f.get(o);
                } catch (ReflectiveOperationException | RuntimeException e) {
                    continue;
                }
                TypeSerializer<?> s = null;
                try {
                    if (v instanceof InternalTypeInfo) {
                        s = ((InternalTypeInfo<?>) v).toSerializer();
                    } else if (v instanceof RowType) {
                        s = InternalSerializers.create((RowType) v);
                    } else if (v instanceof LogicalType[]) {
                        s = InternalSerializers.create(RowType.of((LogicalType[]) v));
                    } else if (v instanceof RowDataSerializer) {
                        s = (RowDataSerializer) v;
                    }
                } catch (RuntimeException e) {
                    continue;
                }
                if (s != null) types.putIfAbsent(prefix + f.getName(), tree(s));
            }
        }
    }

    /** The serializer's snapshot class and, for RowDataSerializer, its field serializers (in order). */
    static Map<String, Object> tree(TypeSerializer<?> s) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("class", s.snapshotConfiguration().getClass().getName());
        List<Object> nested = new ArrayList<>();
        try {
            Field f = s.getClass().getDeclaredField("fieldSerializers");
            f.setAccessible(true);
            for (TypeSerializer<?> fs : (TypeSerializer<?>[]) f.get(s)) nested.add(tree(fs));
        } catch (ReflectiveOperationException | RuntimeException e) {
            // not a row: no nested field serializers
        }
        m.put("nested", nested);
        List<String> logical = logicalTypes(s);
        if (logical != null) m.put("logical_types", logical);
        return m;
    }

    /**
     * A RowDataSerializer's field types ({@code types}, what its RowDataSerializerSnapshot writes and
     * compares with Arrays.equals) as LogicalType#asSerializableString(), the form the gate's savepoint
     * reader produces (upgrade_gate/flink/state_meta/logical_types.py); null when a type has none.
     */
    private static List<String> logicalTypes(TypeSerializer<?> s) {
        try {
            Field f = s.getClass().getDeclaredField("types");
            f.setAccessible(true);
            Object v = f.get(s);
            if (!(v instanceof LogicalType[])) return null;
            List<String> out = new ArrayList<>();
            for (LogicalType t : (LogicalType[]) v) out.add(t.asSerializableString());
            return out;
        } catch (ReflectiveOperationException | RuntimeException e) {
            return null;  // not a row, or a type without a serializable string (RAW, structured, ...)
        }
    }
}

package ugate.checkpoints;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentLinkedQueue;

/** What the probes saw (the MiniCluster runs in this JVM, so they append to a static queue). */
final class Rep {
    private Rep() {}

    private static final ConcurrentLinkedQueue<Object[]> LINES = new ConcurrentLinkedQueue<>();

    static void put(String phase, String operator, int subtask, String metric, Object value) {
        LINES.add(new Object[] {phase, operator, subtask, metric, value});
    }

    static void clear() { LINES.clear(); }

    static int size() { return LINES.size(); }

    /** operator -> [{subtask, metric: value...}] sorted by subtask; the last value of a metric wins. */
    static Map<String, Object> collect(String phase) {
        Map<String, TreeMap<Integer, Map<String, Object>>> byOp = new TreeMap<>();
        for (Object[] l : LINES) {
            if (!l[0].equals(phase)) continue;
            Map<String, Object> m = byOp.computeIfAbsent((String) l[1], k -> new TreeMap<>())
                    .computeIfAbsent((Integer) l[2], k -> new LinkedHashMap<>());
            m.put("subtask", l[2]);
            m.put((String) l[3], l[4]);
        }
        Map<String, Object> out = new LinkedHashMap<>();
        for (Map.Entry<String, TreeMap<Integer, Map<String, Object>>> e : byOp.entrySet()) {
            out.put(e.getKey(), new ArrayList<>(e.getValue().values()));
        }
        return out;
    }

    static List<Object> list() { return new ArrayList<>(LINES); }
}

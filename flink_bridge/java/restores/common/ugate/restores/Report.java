package ugate.restores;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentLinkedQueue;

/**
 * What the user functions saw when their state was initialized (and, for job A, snapshotted).
 * The MiniCluster runs in this JVM, so the functions append to a static queue the driver reads.
 */
final class Report {
    private Report() {}

    private static final ConcurrentLinkedQueue<Object[]> LINES = new ConcurrentLinkedQueue<>();

    static void put(String phase, String operator, int subtask, String metric, Object value) {
        LINES.add(new Object[] {phase, operator, subtask, metric, value});
    }

    static void clear() { LINES.clear(); }

    /** Number of distinct (operator, subtask) pairs that reported in `phase`. */
    static int reporters(String phase) {
        java.util.Set<String> seen = new java.util.HashSet<>();
        for (Object[] l : LINES) if (l[0].equals(phase)) seen.add(l[1] + "#" + l[2]);
        return seen.size();
    }

    /** phase -> operator -> list of {subtask, metric: value...} sorted by subtask. */
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
            List<Object> subtasks = new ArrayList<>(e.getValue().values());
            out.put(e.getKey(), subtasks);
        }
        return out;
    }
}

package ugate.fair;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.management.CompilationMXBean;
import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.lang.management.OperatingSystemMXBean;
import java.lang.management.ThreadMXBean;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.function.LongSupplier;

/**
 * The JVM side of bench/fair.py: Flink's own code timed by this thread's CPU time, one round at a time,
 * when the Python side asks, so the two sides alternate round by round in one process tree.
 *
 * <p>Why a long-lived server and thread CPU: a JVM that warms up and times itself by wall clock, in another
 * minute than ours, gets too few iterations to JIT-compile on a loaded machine and its rate comes out several
 * times too low (issue 34). Here the warm-up is measured in CPU seconds of the timing thread and ends when the
 * rate of the last rounds is stable, and every round is measured with
 * {@link ThreadMXBean#getCurrentThreadCpuTime()} (CLOCK_THREAD_CPUTIME_ID on Linux, the clock Python's
 * {@code time.thread_time_ns()} reads on our side).
 *
 * <p>Usage: {@code FairServer <workload class> <workload args...>}. The workload class has
 * {@code public static LongSupplier fairWorkload(String[] args)}; one {@code getAsLong()} call does one unit of
 * work and returns the items it processed (nodes, files, keys). A supplier that is also a {@link Runnable} has
 * {@code run()} called before every unit, outside the timed CPU: the preparation a unit needs that is not the work
 * being compared (fresh {@code String} objects, whose hash codes Java caches). Reflection keeps this file free of
 * any dependency on the tools whose code it times, so it compiles once (bridge tool {@code fairbench}) and joins
 * their classpath. Protocol on stdin/stdout, one line each; answers are {@code fair <json>} (other stdout lines
 * are someone else's logging and are skipped by the reader):
 * <ul>
 *   <li>(on start) {@code fair {"ready": ...}} once the workload is prepared;</li>
 *   <li>{@code warm <min cpu s> <max cpu s> <round cpu s> <window> <tolerance>}: rounds until at least the
 *       minimum CPU is spent and the last {@code window} rounds' rates lie within {@code tolerance} of their
 *       median (max - min), or until the maximum: answers rounds, CPU spent, whether it became stable;</li>
 *   <li>{@code round <round cpu s>}: units until this thread has spent the round's CPU: answers thread CPU, its
 *       user part (the rest is system time: page faults, I/O; a coarser clock) and wall, all summed over the
 *       units; process CPU over the round less the untimed hook (GC and JIT threads included, for the record);
 *       GC and JIT milliseconds; items; units;</li>
 *   <li>{@code quit}.</li>
 * </ul>
 */
public final class FairServer {
    private FairServer() {}

    private static final ThreadMXBean THREADS = ManagementFactory.getThreadMXBean();
    private static final OperatingSystemMXBean OS = ManagementFactory.getOperatingSystemMXBean();
    private static final CompilationMXBean JIT = ManagementFactory.getCompilationMXBean();
    private static volatile long sink;

    public static void main(String[] args) throws Exception {
        // Our answers go to the real stdout; anything the workload prints goes to stderr, so the
        // protocol stream cannot be interleaved with a stray println.
        PrintStream out = new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), true, "UTF-8");
        System.setOut(System.err);
        if (!THREADS.isCurrentThreadCpuTimeSupported()) throw new IllegalStateException("no thread CPU clock");
        THREADS.setThreadCpuTimeEnabled(true);
        Method prepare = Class.forName(args[0]).getMethod("fairWorkload", String[].class);
        LongSupplier work = (LongSupplier) prepare.invoke(null, (Object) Arrays.copyOfRange(args, 1, args.length));
        out.println("fair {\"ready\": true, \"workload\": \"" + args[0] + "\", \"java\": \""
                + System.getProperty("java.version") + "\", \"vm\": \"" + System.getProperty("java.vm.name")
                + "\", \"processors\": " + Runtime.getRuntime().availableProcessors()
                + ", \"clock\": \"ThreadMXBean.getCurrentThreadCpuTime\"}");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] cmd = line.trim().split("\\s+");
            switch (cmd[0]) {
                case "warm":
                    out.println("fair " + warm(work, Double.parseDouble(cmd[1]), Double.parseDouble(cmd[2]),
                            Double.parseDouble(cmd[3]), Integer.parseInt(cmd[4]), Double.parseDouble(cmd[5])));
                    break;
                case "round":
                    out.println("fair " + round(work, Double.parseDouble(cmd[1])).json());
                    break;
                case "quit":
                    out.println("fair {\"bye\": true}");
                    System.exit(0);
                    break;
                default:
                    out.println("fair {\"error\": \"unknown command " + cmd[0] + "\"}");
            }
        }
        System.exit(0);
    }

    /** One round's measurements. */
    private static final class Round {
        long cpuNs;
        long userNs;
        long wallNs;
        long processCpuNs;
        long gcMs;
        long jitMs;
        long items;
        long units;

        double rate() {
            return items / (cpuNs / 1e9);
        }

        String json() {
            return String.format(Locale.ROOT, "{\"cpu_ns\": %d, \"user_ns\": %d, \"wall_ns\": %d, "
                    + "\"process_cpu_ns\": %d, \"gc_ms\": %d, \"jit_ms\": %d, \"items\": %d, \"units\": %d}",
                    cpuNs, userNs, wallNs, processCpuNs, gcMs, jitMs, items, units);
        }
    }

    /** Units of work until this thread has spent {@code seconds} of CPU in them (at least one unit). */
    private static Round round(LongSupplier work, double seconds) {
        long budget = (long) (seconds * 1e9);
        Runnable before = work instanceof Runnable ? (Runnable) work : null;
        Round r = new Round();
        long gc0 = gcMillis();
        long jit0 = JIT.isCompilationTimeMonitoringSupported() ? JIT.getTotalCompilationTime() : -1;
        long hookNs = 0;
        long proc0 = processCpu();
        do {
            if (before != null) {
                long h0 = THREADS.getCurrentThreadCpuTime();
                before.run();
                hookNs += THREADS.getCurrentThreadCpuTime() - h0;
            }
            long user0 = THREADS.getCurrentThreadUserTime();
            long wall0 = System.nanoTime();
            long cpu0 = THREADS.getCurrentThreadCpuTime();
            r.items += work.getAsLong();
            r.cpuNs += THREADS.getCurrentThreadCpuTime() - cpu0;
            r.wallNs += System.nanoTime() - wall0;
            r.userNs += THREADS.getCurrentThreadUserTime() - user0;
            r.units++;
        } while (r.cpuNs < budget);
        long proc1 = processCpu();
        // The process clock ticks coarsely (10 ms here), so it is read around the round, less the hook's CPU.
        r.processCpuNs = proc0 < 0 || proc1 < 0 ? -1 : proc1 - proc0 - hookNs;
        r.gcMs = gcMillis() - gc0;
        r.jitMs = jit0 < 0 ? -1 : JIT.getTotalCompilationTime() - jit0;
        sink += r.items;
        return r;
    }

    private static String warm(LongSupplier work, double minCpu, double maxCpu, double roundCpu, int window,
                               double tolerance) {
        List<Double> rates = new ArrayList<>();
        long spent = 0;
        double spread = Double.NaN;
        boolean stable = false;
        long gc = 0;
        long jit = 0;
        while (true) {
            Round r = round(work, roundCpu);
            rates.add(r.rate());
            spent += r.cpuNs;
            gc += r.gcMs;
            jit += Math.max(r.jitMs, 0);
            if (rates.size() >= window) {
                spread = spread(rates.subList(rates.size() - window, rates.size()));
                stable = spread <= tolerance;
            }
            if ((stable && spent >= minCpu * 1e9) || spent >= maxCpu * 1e9) break;
        }
        StringBuilder last = new StringBuilder();
        for (double x : rates.subList(Math.max(0, rates.size() - window), rates.size())) {
            if (last.length() > 0) last.append(", ");
            last.append(String.format(Locale.ROOT, "%.6g", x));
        }
        return String.format(Locale.ROOT, "{\"warm_rounds\": %d, \"warm_cpu_ns\": %d, \"stable\": %b, "
                + "\"spread\": %s, \"gc_ms\": %d, \"jit_ms\": %d, \"last_rates\": [%s]}", rates.size(), spent, stable,
                Double.isNaN(spread) ? "null" : String.format(Locale.ROOT, "%.6g", spread), gc, jit, last);
    }

    /** (max - min) / median of the rates: the stability test, the same one fair.py applies to our side. */
    static double spread(List<Double> rates) {
        double[] s = rates.stream().mapToDouble(Double::doubleValue).sorted().toArray();
        int n = s.length;
        double median = n % 2 == 1 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
        return (s[n - 1] - s[0]) / median;
    }

    private static long gcMillis() {
        long t = 0;
        for (GarbageCollectorMXBean gc : ManagementFactory.getGarbageCollectorMXBeans()) {
            t += Math.max(gc.getCollectionTime(), 0);
        }
        return t;
    }

    private static long processCpu() {
        if (OS instanceof com.sun.management.OperatingSystemMXBean) {
            return ((com.sun.management.OperatingSystemMXBean) OS).getProcessCpuTime();
        }
        return -1;
    }
}

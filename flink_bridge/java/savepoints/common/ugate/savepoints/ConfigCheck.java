package ugate.savepoints;

import org.apache.flink.api.common.JobStatus;
import org.apache.flink.configuration.ConfigOption;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.FallbackKey;
import org.apache.flink.configuration.GlobalConfiguration;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;

import java.io.File;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.util.ArrayList;
import java.util.Enumeration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.jar.JarEntry;
import java.util.jar.JarFile;

/**
 * What a Flink release makes of a job's configuration, for the gate's 1.x -> 2.x configuration rule.
 *
 * <p>{@code ConfigCheck options <out.json> <jar>...}: every {@link ConfigOption} constant of every
 * {@code *Options} class in the given jars (Flink's own lib/): key, deprecated and fallback keys, and whether the
 * option is {@code @Deprecated}. The diff of two releases' lists is the table of removed and renamed options.
 *
 * <p>{@code ConfigCheck start <conf-dir>...}: loads each directory's configuration exactly as a cluster does
 * ({@link GlobalConfiguration#loadConfiguration(String)}: config.yaml on 2.x, flink-conf.yaml on 1.x), starts a
 * small keyed job with checkpointing on it in a MiniCluster, and prints one line per directory:
 * {@code <dir>\t{"status": "RUNNING" | "FAILED: <exception> <- <its cause> <- ..."}}.
 */
public final class ConfigCheck {
    private ConfigCheck() {}

    public static void main(String[] args) throws Exception {
        if (args[0].equals("options")) {
            Map<String, Object> options = new TreeMap<>();
            for (int i = 2; i < args.length; i++) options(new File(args[i]), options);
            java.nio.file.Files.writeString(new File(args[1]).toPath(), FlinkView.Json.write(options));
        } else {
            for (int i = 1; i < args.length; i++) {
                System.out.println(args[i] + "\t" + FlinkView.Json.write(Map.of("status", start(args[i]))));
                System.out.flush();
            }
        }
        System.exit(0);
    }

    private static void options(File jar, Map<String, Object> into) throws Exception {
        try (JarFile jf = new JarFile(jar)) {
            Enumeration<JarEntry> entries = jf.entries();
            while (entries.hasMoreElements()) {
                String name = entries.nextElement().getName();
                if (!name.startsWith("org/apache/flink/") || !name.endsWith("Options.class")) continue;
                String cls = name.substring(0, name.length() - ".class".length()).replace('/', '.');
                Class<?> c;
                try {
                    c = Class.forName(cls, false, ConfigCheck.class.getClassLoader());
                } catch (Throwable e) {
                    continue; // optional dependencies missing: not an option class the cluster loads either
                }
                Field[] fields;
                try {
                    fields = c.getDeclaredFields();
                } catch (Throwable e) {
                    continue;
                }
                for (Field f : fields) {
                    if (!Modifier.isStatic(f.getModifiers()) || !ConfigOption.class.isAssignableFrom(f.getType())) {
                        continue;
                    }
                    ConfigOption<?> o;
                    try {
                        f.setAccessible(true);
                        o = (ConfigOption<?>) f.get(null);
                    } catch (Throwable e) {
                        continue;
                    }
                    if (o == null) continue;
                    List<String> deprecated = new ArrayList<>();
                    List<String> fallback = new ArrayList<>();
                    for (FallbackKey k : o.fallbackKeys()) (k.isDeprecated() ? deprecated : fallback).add(k.getKey());
                    Map<String, Object> doc = new LinkedHashMap<>();
                    doc.put("class", cls);
                    doc.put("field", f.getName());
                    doc.put("deprecated", f.isAnnotationPresent(Deprecated.class) || c.isAnnotationPresent(Deprecated.class));
                    doc.put("deprecated_keys", deprecated);
                    doc.put("fallback_keys", fallback);
                    into.putIfAbsent(o.key(), doc);
                }
            }
        }
    }

    /** The configuration a cluster would load from `confDir`, then a job started on it: RUNNING or the error. */
    static String start(String confDir) {
        JobClient client = null;
        try {
            Configuration c = GlobalConfiguration.loadConfiguration(confDir);
            c.setString("execution.checkpointing.interval", "1 s");
            StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(c);
            env.setParallelism(1);
            env.fromSequence(0, Long.MAX_VALUE).uid("numbers").map(new Functions.Throttle(5)).uid("throttle")
                    .keyBy(v -> v % 8).reduce(Long::sum).uid("sum").sinkTo(new DiscardingSink<>());
            client = env.executeAsync("config-check");
            long deadline = System.currentTimeMillis() + 60_000;
            while (System.currentTimeMillis() < deadline) {
                JobStatus s = client.getJobStatus().get();
                if (s.isGloballyTerminalState()) return "FAILED: " + rootCause(client, null);
                if (s == JobStatus.RUNNING) {
                    Thread.sleep(3000); // tasks deployed and a checkpoint taken: the backend was created
                    s = client.getJobStatus().get();
                    if (s == JobStatus.RUNNING) return "RUNNING";
                }
                Thread.sleep(200);
            }
            return "TIMEOUT";
        } catch (Exception e) {
            return "FAILED: " + (client != null ? rootCause(client, e) : root(e));
        } finally {
            if (client != null) {
                try {
                    client.cancel().get();
                } catch (Exception e) {
                    // already gone
                }
            }
        }
    }

    /** Every exception of the chain, outermost first: Flink's own message is often above a JDK root cause
     * (DynamicCodeLoadingException "Cannot find configured state backend factory class" over ClassNotFoundException). */
    private static String root(Throwable t) {
        StringBuilder b = new StringBuilder(t.toString());
        while (t.getCause() != null && t.getCause() != t) {
            t = t.getCause();
            b.append(" <- ").append(t);
        }
        return b.toString();
    }

    private static String rootCause(JobClient client, Exception fallback) {
        Throwable t = fallback;
        try {
            client.getJobExecutionResult().get();
        } catch (Exception e) {
            t = e;
        }
        return t == null ? "job ended" : root(t);
    }
}

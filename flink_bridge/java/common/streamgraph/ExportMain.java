package upgradegate.bridge;

import org.apache.flink.api.dag.Pipeline;
import org.apache.flink.api.dag.Transformation;
import org.apache.flink.client.program.PackagedProgram;
import org.apache.flink.client.program.PackagedProgramUtils;
import org.apache.flink.client.program.ProgramInvocationException;
import org.apache.flink.configuration.ConfigOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.graph.StreamGraph;
import org.apache.flink.table.api.PlanReference;
import org.apache.flink.table.api.bridge.java.StreamStatementSet;
import org.apache.flink.table.api.bridge.java.StreamTableEnvironment;
import org.apache.flink.table.api.internal.TableEnvironmentImpl;
import org.apache.flink.table.delegation.InternalPlan;
import org.apache.flink.table.delegation.Planner;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Graph exporter: the StreamGraph of a user's job jar, SQL script or compiled SQL plan, built
 * by real Flink without running anything, written as the design §4.1 spec.
 *
 * <p>Usage: {@code ExportMain <out.json> <parallelism> jar <jar> <main class> [args...]},
 * {@code ... sql <script.sql>} or {@code ... plan <compiled-plan.json>}. The output file holds
 * {@code {"spec": ...}} or, for problems in the user's input, {@code {"error": {...}}}; the exit
 * code is non-zero only for bugs in this tool.
 */
public final class ExportMain {
    private ExportMain() {}

    private static final Pattern SET = Pattern.compile(
            "(?is)SET\\s+'([^']+)'\\s*=\\s*'([^']*)'");

    public static void main(String[] args) throws Exception {
        String out = args[0];
        int parallelism = Integer.parseInt(args[1]);
        String kind = args[2];
        String path = args[3];
        Map<String, Object> result = new LinkedHashMap<>();
        try {
            StreamGraph graph;
            if (kind.equals("jar")) {
                graph = fromJar(path, args[4], Arrays.copyOfRange(args, 5, args.length), parallelism);
            } else if (kind.equals("sql")) {
                graph = fromSql(path, parallelism);
            } else if (kind.equals("plan")) {
                graph = fromPlan(path, parallelism);
            } else {
                throw new IllegalArgumentException("unknown kind " + kind);
            }
            result.put("spec", SpecDumper.spec(graph));
        } catch (Exception e) {
            result.put("error", userError(e));
        }
        Files.write(Paths.get(out), Json.write(result).getBytes(StandardCharsets.UTF_8));
    }

    /**
     * One line a user can act on: for jars, Flink's own ProgramInvocationException text ("The
     * program's entry point class ... was not found", "The main method caused an error: ...");
     * otherwise the deepest cause (e.g. the SQL parser's "Encountered ... at line 1, column 8").
     */
    private static Map<String, Object> userError(Throwable e) {
        Map<String, Object> m = FlinkIds.error(e);
        String text = e instanceof ProgramInvocationException ? e.getMessage() : (String) m.get("message");
        if (text == null || text.isBlank()) {
            text = m.get("class").toString();
        }
        m.put("message", text.strip().split("\\R", 2)[0]);
        return m;
    }

    private static Configuration configuration(String jobName, int parallelism) {
        Configuration conf = new Configuration();
        conf.set(ConfigOptions.key("pipeline.name").stringType().noDefaultValue(), jobName);
        conf.set(ConfigOptions.key("parallelism.default").intType().noDefaultValue(), parallelism);
        return conf;
    }

    private static StreamExecutionEnvironment environment(String path, int parallelism) {
        String name = new File(path).getName();
        StreamExecutionEnvironment env =
                StreamExecutionEnvironment.getExecutionEnvironment(configuration(name, parallelism));
        env.setParallelism(parallelism);
        return env;
    }

    /** What `flink info` does: run main() in a plan-capturing environment that stops at execute(). */
    static StreamGraph fromJar(String jar, String mainClass, String[] args, int parallelism) throws Exception {
        Configuration conf = new Configuration();
        conf.set(ConfigOptions.key("parallelism.default").intType().noDefaultValue(), parallelism);
        PackagedProgram program = PackagedProgram.newBuilder()
                .setJarFile(new File(jar))
                .setEntryPointClassName(mainClass.isEmpty() ? null : mainClass)
                .setArguments(args)
                .setConfiguration(conf)
                .build();
        try {
            Pipeline pipeline = PackagedProgramUtils.getPipelineFromProgram(program, conf, parallelism, true);
            if (!(pipeline instanceof StreamGraph)) {
                throw new IllegalArgumentException("the program did not build a DataStream job ("
                        + pipeline.getClass().getSimpleName() + ")");
            }
            return (StreamGraph) pipeline;
        } finally {
            program.close();
        }
    }

    /**
     * A SQL script in the SQL client's syntax: DDL, `SET 'k' = 'v';`, INSERT statements, optionally
     * inside `BEGIN STATEMENT SET; ... END;`. All INSERTs go into one statement set attached to
     * the environment, as one job. Statements are split at `;` outside quotes.
     */
    static StreamGraph fromSql(String path, int parallelism) throws Exception {
        String script = new String(Files.readAllBytes(Paths.get(path)), StandardCharsets.UTF_8);
        StreamExecutionEnvironment env = environment(path, parallelism);
        StreamTableEnvironment tEnv = StreamTableEnvironment.create(env);
        StreamStatementSet set = tEnv.createStatementSet();
        int inserts = 0;
        for (String statement : split(script)) {
            String upper = statement.toUpperCase();
            if (applySet(tEnv, statement)) {
                continue;
            } else if (upper.matches("(?s)BEGIN\\s+STATEMENT\\s+SET") || upper.equals("END")) {
                continue;
            } else if (upper.startsWith("INSERT")) {
                set.addInsertSql(statement);
                inserts++;
            } else {
                tEnv.executeSql(statement);
            }
        }
        if (inserts == 0) {
            throw new IllegalArgumentException("no INSERT statement: nothing would run as a job");
        }
        set.attachAsDataStream();
        return env.getStreamGraph(false);
    }

    /** `SET 'k' = 'v'` is SQL-client syntax that TableEnvironment#executeSql rejects; apply it here. */
    static boolean applySet(StreamTableEnvironment tEnv, String statement) {
        Matcher m = SET.matcher(statement);
        if (!m.matches()) {
            return false;
        }
        tEnv.getConfig().getConfiguration().setString(m.group(1), m.group(2));
        return true;
    }

    /** Splits at semicolons outside '...', "..." and `...`, dropping `--` comments. */
    static List<String> split(String script) {
        List<String> out = new ArrayList<>();
        StringBuilder cur = new StringBuilder();
        char quote = 0;
        for (int i = 0; i < script.length(); i++) {
            char c = script.charAt(i);
            if (quote != 0) {
                cur.append(c);
                if (c == quote) {
                    quote = 0;
                }
            } else if (c == '-' && i + 1 < script.length() && script.charAt(i + 1) == '-') {
                while (i < script.length() && script.charAt(i) != '\n') {
                    i++;
                }
                cur.append('\n');
            } else if (c == '\'' || c == '"' || c == '`') {
                quote = c;
                cur.append(c);
            } else if (c == ';') {
                add(out, cur);
            } else {
                cur.append(c);
            }
        }
        add(out, cur);
        return out;
    }

    private static void add(List<String> out, StringBuilder cur) {
        String s = cur.toString().strip();
        if (!s.isEmpty()) {
            out.add(s);
        }
        cur.setLength(0);
    }

    /**
     * A FLIP-190 compiled plan. There is no public API that turns a CompiledPlan into
     * transformations without executing it, so we use the planner the same way
     * TableEnvironmentImpl#executePlan does: Planner#loadPlan + Planner#translatePlan (both public
     * methods of the internal Planner interface, reached via TableEnvironmentImpl#getPlanner),
     * then add the transformations to the environment instead of submitting them.
     */
    static StreamGraph fromPlan(String path, int parallelism) throws Exception {
        StreamExecutionEnvironment env = environment(path, parallelism);
        StreamTableEnvironment tEnv = StreamTableEnvironment.create(env);
        Planner planner = ((TableEnvironmentImpl) tEnv).getPlanner();
        InternalPlan plan = planner.loadPlan(PlanReference.fromFile(path));
        List<Transformation<?>> transformations = planner.translatePlan(plan);
        for (Transformation<?> t : transformations) {
            env.addOperator(t);
        }
        return env.getStreamGraph(false);
    }
}

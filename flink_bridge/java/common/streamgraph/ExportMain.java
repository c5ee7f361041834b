package upgradegate.bridge;

import org.apache.flink.api.dag.Pipeline;
import org.apache.flink.api.dag.Transformation;
import org.apache.flink.client.program.PackagedProgram;
import org.apache.flink.client.program.PackagedProgramUtils;
import org.apache.flink.client.program.ProgramInvocationException;
import org.apache.flink.configuration.ConfigOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.GlobalConfiguration;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.graph.StreamGraph;
import org.apache.flink.streaming.api.graph.StreamGraphHasherV2;
import org.apache.flink.streaming.api.graph.StreamNode;
import org.apache.flink.table.api.PlanReference;
import org.apache.flink.table.api.bridge.java.StreamStatementSet;
import org.apache.flink.table.api.bridge.java.StreamTableEnvironment;
import org.apache.flink.table.api.internal.TableEnvironmentImpl;
import org.apache.flink.table.delegation.InternalPlan;
import org.apache.flink.table.delegation.Planner;
import org.apache.flink.table.operations.BeginStatementSetOperation;
import org.apache.flink.table.operations.EndStatementSetOperation;
import org.apache.flink.table.operations.ModifyOperation;
import org.apache.flink.table.operations.Operation;
import org.apache.flink.table.operations.QueryOperation;
import org.apache.flink.table.operations.SinkModifyOperation;
import org.apache.flink.table.operations.StatementSetOperation;
import org.apache.flink.table.operations.command.ExecutePlanOperation;
import org.apache.flink.table.operations.ddl.CompilePlanOperation;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Graph exporter: the StreamGraph of a user's job jar, SQL script or compiled SQL plan, built
 * by real Flink without running anything, written as the spec of docs/graph-spec.md.
 *
 * <p>Usage: {@code ExportMain <out.json> <conf dir|""> <parallelism|""> <n> [key=value]*n <kind> <path>
 * [main class] [args...]}, kind {@code jar}, {@code sql} or {@code plan}. The configuration is
 * assembled the way {@code flink run} does it (CliFrontend): the conf dir's config file
 * ({@link GlobalConfiguration#loadConfiguration}), overridden by the {@code -D} pairs, overridden
 * by {@code -p} ({@code ProgramOptions#applyToConfiguration} sets {@code parallelism.default}).
 *
 * <p>The output file holds {@code {"spec": ..., "assumed": ..., "depends_on": ...}} or, for
 * problems in the user's input, {@code {"error": {...}}}; the exit code is non-zero only for bugs
 * in this tool. {@code assumed} says, for each setting that decides chaining (and so the IDs of
 * operators without a uid), the value used and where it came from; {@code depends_on} names, per
 * setting, the uid-less operators whose ID changes when the graph is rebuilt with another value.
 */
public final class ExportMain {
    private ExportMain() {}

    private static final Pattern SET = Pattern.compile(
            "(?is)SET\\s+'([^']+)'\\s*=\\s*'([^']*)'");
    private static final Pattern STATEMENT_SET_BEGIN = Pattern.compile(
            "(?is)(?:EXECUTE\\s+STATEMENT\\s+SET\\s+BEGIN|BEGIN\\s+STATEMENT\\s+SET)\\b\\s*(.*)");
    private static final Pattern EXECUTE_DML = Pattern.compile("(?is)EXECUTE\\s+((?:INSERT|UPSERT)\\b.*)");
    private static final Pattern COMPILE_AND_EXECUTE = Pattern.compile(
            "(?is)COMPILE\\s+AND\\s+EXECUTE\\s+PLAN\\s+'([^']*)'\\s+FOR\\s+(.*)");

    static final String PARALLELISM = "parallelism.default";
    static final String CHAINING = "pipeline.operator-chaining.enabled";
    static final String CHAIN_MAX_P = "pipeline.operator-chaining.chain-operators-with-different-max-parallelism";

    /**
     * Settings that decide chaining or the graph's shape (StreamingJobGraphGenerator#isChainable), with
     * Flink's defaults. The first three are probed: the graph is rebuilt with another value.
     */
    static final String[][] SETTINGS = {
        {PARALLELISM, "1"},
        {CHAINING, "true", "pipeline.operator-chaining"},  // the key before 1.18, still read as a fallback
        {CHAIN_MAX_P, "true"},
        {"pipeline.max-parallelism", "(derived per operator)"},
        {"execution.runtime-mode", "STREAMING"},
    };

    /** How to build the graph once, for a given effective configuration. */
    interface Builder {
        StreamGraph build(Configuration conf) throws Exception;
    }

    public static void main(String[] args) throws Exception {
        String out = args[0];
        String confDir = args[1];
        String parallelism = args[2];
        int nDynamic = Integer.parseInt(args[3]);
        Map<String, String> dynamic = new LinkedHashMap<>();
        for (int i = 0; i < nDynamic; i++) {
            String pair = args[4 + i];
            int eq = pair.indexOf('=');
            dynamic.put(pair.substring(0, eq).strip(), pair.substring(eq + 1).strip());
        }
        int at = 4 + nDynamic;
        String kind = args[at];
        String path = args[at + 1];
        Map<String, Object> result = new LinkedHashMap<>();
        Configuration file;
        try {
            file = confDir.isEmpty() ? new Configuration() : GlobalConfiguration.loadConfiguration(confDir);
        } catch (RuntimeException e) {
            Map<String, Object> error = userError(e);
            Throwable root = e;
            while (root.getCause() != null && root.getCause() != root) {
                root = root.getCause();
            }
            // YAML parser messages span lines ("while parsing ...", "in 'reader', line 1, column 22"): keep them all
            String text = String.valueOf(root.getMessage()).strip().replaceAll("\\s*\\R\\s*", "; ");
            error.put("message", text.length() > 400 ? text.substring(0, 400) + "..." : text);
            error.put("where", "config");
            result.put("error", error);
            Files.write(Paths.get(out), Json.write(result).getBytes(StandardCharsets.UTF_8));
            return;
        }
        try {
            Configuration conf = new Configuration(file);
            for (Map.Entry<String, String> e : dynamic.entrySet()) {
                setString(conf, e.getKey(), e.getValue());
            }
            if (!parallelism.isEmpty()) {
                setString(conf, PARALLELISM, parallelism);
            }
            if (!conf.toMap().containsKey(PARALLELISM)) {
                // A cluster's default; a local environment would otherwise take the number of cores.
                setString(conf, PARALLELISM, "1");
            }
            Builder builder;
            if (kind.equals("jar")) {
                String mainClass = args[at + 2];
                String[] programArgs = Arrays.copyOfRange(args, at + 3, args.length);
                builder = c -> fromJar(path, mainClass, programArgs, c);
            } else if (kind.equals("sql")) {
                builder = c -> fromSql(path, c);
            } else if (kind.equals("plan")) {
                builder = c -> fromPlan(path, c);
            } else {
                throw new IllegalArgumentException("unknown kind " + kind);
            }
            StreamGraph graph = builder.build(conf);
            Map<String, Object> spec = SpecDumper.spec(graph);
            ConnectorDumper.addTo(spec, graph);  // connector serializer versions: upgrade_gate/gate/rules/connector_versions.py
            Map<String, Object> sqlState = SqlStateDumper.sqlState(graph);
            if (!sqlState.isEmpty()) {
                spec.put("sql_state", sqlState);  // SQL operators' state serializers: upgrade_gate/gate/sql_state_rules.py
            }
            result.put("spec", spec);
            Map<String, Object> assumed = assumed(conf, file, dynamic, !parallelism.isEmpty());
            result.put("assumed", assumed);
            // Only guesses are probed: a value given, or left to Flink's default by the config
            // file the job really runs with, is the production value.
            List<String> guessed = new ArrayList<>();
            for (Map.Entry<String, Object> e : assumed.entrySet()) {
                Object source = ((Map<?, ?>) e.getValue()).get("source");
                if (confDir.isEmpty() && "default".equals(source)) {
                    guessed.add(e.getKey());
                }
            }
            result.put("depends_on", probe(builder, conf, graph, guessed));
        } catch (Exception e) {
            result.put("error", userError(e));
        }
        Files.write(Paths.get(out), Json.write(result).getBytes(StandardCharsets.UTF_8));
    }

    static void setString(Configuration conf, String key, String value) {
        conf.set(ConfigOptions.key(key).stringType().noDefaultValue(), value);
    }

    /** Each chaining-relevant setting: the value the graph was built with, and where it came from. */
    static Map<String, Object> assumed(Configuration conf, Configuration file, Map<String, String> dynamic,
                                       boolean parallelismFlag) {
        Map<String, String> effective = conf.toMap();
        Map<String, String> fromFile = file.toMap();
        Map<String, Object> out = new LinkedHashMap<>();
        for (String[] setting : SETTINGS) {
            String key = setting[0];
            Map<String, Object> m = new LinkedHashMap<>();
            String value = lookup(effective, setting);
            m.put("value", value == null ? setting[1] : value);
            String source = "default";
            if (parallelismFlag && key.equals(PARALLELISM)) {
                source = "-p";
            } else if (lookup(dynamic, setting) != null) {
                source = "-D";
            } else if (lookup(fromFile, setting) != null) {
                source = "config";
            }
            m.put("source", source);
            out.put(key, m);
        }
        return out;
    }

    /**
     * For each guessed setting in {@code keys}, rebuild the graph with a different value and list the uid-less
     * operators whose ID (Flink's own StreamGraphHasherV2) changes: those IDs depend on it. A
     * parallelism probe uses a value no operator has, so every explicit parallelism then differs
     * from the default and every chain that depends on the default breaks or forms.
     */
    static Map<String, Object> probe(Builder builder, Configuration conf, StreamGraph graph, List<String> keys) {
        Map<String, Object> out = new LinkedHashMap<>();
        boolean uidless = false;
        for (StreamNode n : graph.getStreamNodes()) {
            uidless |= n.getTransformationUID() == null && n.getUserHash() == null;
        }
        if (!uidless) {
            return out;  // every ID comes from a uid (or a uid hash): no setting can change it
        }
        Map<Integer, byte[]> base = new StreamGraphHasherV2().traverseStreamGraphAndGenerateHashes(graph);
        int maxP = conf.toMap().containsKey(PARALLELISM) ? Integer.parseInt(conf.toMap().get(PARALLELISM).strip()) : 1;
        for (StreamNode n : graph.getStreamNodes()) {
            maxP = Math.max(maxP, n.getParallelism());
        }
        Map<String, String> probes = new LinkedHashMap<>();
        probes.put(PARALLELISM, String.valueOf(maxP + 1));
        probes.put(CHAINING, String.valueOf(!flag(conf, CHAINING)));
        probes.put(CHAIN_MAX_P, String.valueOf(!flag(conf, CHAIN_MAX_P)));
        probes.keySet().retainAll(keys);
        for (Map.Entry<String, String> p : probes.entrySet()) {
            Configuration changed = new Configuration(conf);
            setString(changed, p.getKey(), p.getValue());
            List<Object> moved = new ArrayList<>();
            try {
                StreamGraph other = builder.build(changed);
                Map<Integer, byte[]> hashes = new StreamGraphHasherV2().traverseStreamGraphAndGenerateHashes(other);
                // Transformation ids come from a JVM-wide counter, so the rebuilt graph's node ids
                // are shifted; the nodes are the same program's, in the same order.
                List<StreamNode> mine = SpecDumper.sortedNodes(graph);
                List<StreamNode> theirs = SpecDumper.sortedNodes(other);
                for (int i = 0; i < mine.size(); i++) {
                    StreamNode n = mine.get(i);
                    if (n.getTransformationUID() != null || n.getUserHash() != null) {
                        continue;
                    }
                    byte[] now = mine.size() == theirs.size() ? hashes.get(theirs.get(i).getId()) : null;
                    if (now == null || !Arrays.equals(now, base.get(n.getId()))) {
                        moved.add(n.getOperatorName());
                    }
                }
            } catch (Exception e) {
                continue; // the program refuses that value: it cannot be the production one either
            }
            out.put(p.getKey(), moved);
        }
        return out;
    }

    /** A setting's value under its key, else under an older key Flink still reads (Flink's order). */
    static String lookup(Map<String, String> values, String[] setting) {
        for (int i = 0; i < setting.length; i++) {
            if (i != 1 && values.containsKey(setting[i])) {
                return values.get(setting[i]);
            }
        }
        return null;
    }

    static boolean flag(Configuration conf, String key) {
        for (String[] setting : SETTINGS) {
            if (setting[0].equals(key)) {
                String v = lookup(conf.toMap(), setting);
                return v == null || !v.strip().equalsIgnoreCase("false");
            }
        }
        throw new IllegalArgumentException(key);
    }

    /**
     * One line a user can act on: for jars, Flink's own ProgramInvocationException text ("The
     * program's entry point class ... was not found", "The main method caused an error: ...");
     * otherwise the deepest cause (e.g. the SQL parser's "Encountered ... at line 1, column 8").
     */
    private static Map<String, Object> userError(Throwable e) {
        Map<String, Object> m = FlinkIds.error(e);
        String text = e instanceof ProgramInvocationException || e instanceof ExportException
                ? e.getMessage() : (String) m.get("message");
        if (text == null || text.isBlank()) {
            text = m.get("class").toString();
        }
        m.put("message", text.strip().split("\\R", 2)[0]);
        return m;
    }

    /** A problem of the user's input found by the exporter itself; its message is shown as is. */
    static final class ExportException extends Exception {
        ExportException(String message) {
            super(message);
        }
    }

    private static StreamExecutionEnvironment environment(String path, Configuration conf) {
        Configuration c = new Configuration(conf);
        if (!c.toMap().containsKey("pipeline.name")) {
            setString(c, "pipeline.name", new File(path).getName());
        }
        return StreamExecutionEnvironment.getExecutionEnvironment(c);
    }

    static int parallelismOf(Configuration conf) {
        String p = conf.toMap().get(PARALLELISM);
        return p == null ? 1 : Integer.parseInt(p.strip());
    }

    /** What `flink info` does: run main() in a plan-capturing environment that stops at execute(). */
    static StreamGraph fromJar(String jar, String mainClass, String[] args, Configuration conf) throws Exception {
        int parallelism = parallelismOf(conf);
        PackagedProgram program = PackagedProgram.newBuilder()
                .setJarFile(new File(jar))
                .setEntryPointClassName(mainClass.isEmpty() ? null : mainClass)
                .setArguments(args)
                .setConfiguration(conf)
                .build();
        boolean guarded = ExitGuard.install();
        try {
            Pipeline pipeline = PackagedProgramUtils.getPipelineFromProgram(program, conf, parallelism, true);
            if (!(pipeline instanceof StreamGraph)) {
                throw new ExportException("the program did not build a DataStream job ("
                        + pipeline.getClass().getSimpleName() + ")");
            }
            return (StreamGraph) pipeline;
        } finally {
            if (guarded) {
                ExitGuard.remove();
            }
            program.close();
        }
    }

    /**
     * Keeps the JVM alive when a job's main() ends it while its graph is captured. {@code execute()} hands the
     * graph to the plan environment and then aborts main() with {@code ProgramAbortException}; a main() that
     * catches it and calls {@code System.exit} (a common "log and exit 1" wrapper) would end the JVM with the
     * graph unwritten. Refusing the exit turns it into a {@code SecurityException} that leaves main(), and
     * {@code PackagedProgramUtils#getPipelineFromProgram} returns the graph it already holds, as it does for any
     * throwable. Needs a JVM that still allows a security manager (Java 17, with
     * {@code -Djava.security.manager=allow} on 18-23); elsewhere the exit ends the JVM and the caller reports it.
     */
    static final class ExitGuard extends SecurityManager {
        static boolean install() {
            try {
                System.setSecurityManager(new ExitGuard());
                return true;
            } catch (UnsupportedOperationException | SecurityException e) {
                return false;
            }
        }

        static void remove() {
            System.setSecurityManager(null);
        }

        @Override
        public void checkExit(int status) {
            throw new SecurityException("System.exit(" + status + ") from the job's main() while its graph was built");
        }

        @Override
        public void checkPermission(java.security.Permission perm) {
            // everything else is allowed: this guard only keeps the JVM alive
        }

        @Override
        public void checkPermission(java.security.Permission perm, Object context) {
        }
    }

    /**
     * A SQL script in the SQL client's syntax, translated and never executed: DDL runs (it only
     * touches the session's catalog), `SET 'k' = 'v';` is applied, INSERTs (also inside
     * `BEGIN STATEMENT SET; ... END;`, `EXECUTE STATEMENT SET BEGIN ... END;`, `EXECUTE INSERT`,
     * `COMPILE AND EXECUTE PLAN '...' FOR INSERT`) go into one statement set attached to the
     * environment as one job, and `EXECUTE PLAN 'file'` is translated like a compiled plan.
     * Statements that would run a job of their own (SELECT, CREATE TABLE AS, ANALYZE, CALL, ...)
     * or change data (TRUNCATE, DELETE, UPDATE) are refused. Statements are split at `;` outside quotes.
     */
    public static StreamGraph fromSql(String path, Configuration conf) throws Exception {
        String script = new String(Files.readAllBytes(Paths.get(path)), StandardCharsets.UTF_8);
        StreamExecutionEnvironment env = environment(path, conf);
        StreamTableEnvironment tEnv = StreamTableEnvironment.create(env);
        TableEnvironmentImpl impl = (TableEnvironmentImpl) tEnv;
        StreamStatementSet set = tEnv.createStatementSet();
        int inserts = 0;
        List<String> plans = new ArrayList<>();
        int number = 0;
        for (String raw : split(script)) {
            number++;
            String statement = raw;
            Matcher begin = STATEMENT_SET_BEGIN.matcher(statement);
            if (begin.matches()) {
                statement = begin.group(1).strip();
                if (statement.isEmpty()) {
                    continue;
                }
            }
            Matcher dml = EXECUTE_DML.matcher(statement);
            if (dml.matches()) {
                statement = dml.group(1);
            }
            Matcher compiled = COMPILE_AND_EXECUTE.matcher(statement);
            if (compiled.matches()) {
                statement = compiled.group(2).strip();  // what it compiles and runs: the INSERT
                Matcher inner = STATEMENT_SET_BEGIN.matcher(statement);
                if (inner.matches()) {
                    statement = inner.group(1).strip();
                }
            }
            if (applySet(tEnv, statement)) {
                continue;
            }
            if (statement.toUpperCase(Locale.ROOT).matches("(?s)END")) {
                continue;
            }
            List<Operation> operations = impl.getParser().parse(statement);
            Operation op = operations.get(0);
            String what = "statement " + number + " (" + firstWords(statement) + ")";
            if (op instanceof BeginStatementSetOperation || op instanceof EndStatementSetOperation) {
                continue;
            } else if (op instanceof SinkModifyOperation) {
                set.addInsertSql(statement);
                inserts++;
            } else if (op instanceof ExecutePlanOperation) {
                plans.add(planFile(path, ((ExecutePlanOperation) op).getFilePath(), what));
            } else if (op instanceof CompilePlanOperation) {
                continue;  // only writes a plan file; nothing runs
            } else if (op instanceof ModifyOperation || op instanceof QueryOperation
                    || op instanceof StatementSetOperation || runsOrChangesData(op)) {
                throw new ExportException(what + " would run a job of its own or change data; "
                        + "export reads the script's INSERT / statement set / EXECUTE PLAN job only");
            } else {
                tEnv.executeSql(statement);
            }
        }
        if (!plans.isEmpty() && (inserts > 0 || plans.size() > 1)) {
            throw new ExportException("the script runs " + (plans.size() + (inserts > 0 ? 1 : 0))
                    + " jobs (EXECUTE PLAN and INSERT statements); export them one script at a time");
        }
        if (!plans.isEmpty()) {
            return translatePlan(env, tEnv, plans.get(0));
        }
        if (inserts == 0) {
            throw new ExportException("no INSERT statement: nothing would run as a job");
        }
        set.attachAsDataStream();
        return env.getStreamGraph(false);
    }

    /** ANALYZE TABLE runs a job, CALL may, TRUNCATE/DELETE/UPDATE change the data of external tables. */
    static boolean runsOrChangesData(Operation op) {
        String name = op.getClass().getSimpleName();
        return name.startsWith("Analyze") || name.startsWith("CallProcedure") || name.startsWith("Truncate")
                || name.startsWith("Delete") || name.startsWith("Update");
    }

    /** Relative plan paths resolve against the working directory (as the SQL client does), else the script's. */
    static String planFile(String script, String file, String what) throws ExportException {
        Path p = Paths.get(file.startsWith("file://") ? file.substring("file://".length()) : file);
        if (!p.isAbsolute() && !Files.isRegularFile(p)) {
            Path beside = Paths.get(script).toAbsolutePath().getParent().resolve(p);
            if (Files.isRegularFile(beside)) {
                p = beside;
            }
        }
        if (!Files.isRegularFile(p)) {
            throw new ExportException(what + ": plan file " + file + " not found");
        }
        return p.toString();
    }

    static String firstWords(String statement) {
        String s = statement.strip().replaceAll("\\s+", " ");
        return s.length() > 40 ? s.substring(0, 40) + "..." : s;
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
    static StreamGraph fromPlan(String path, Configuration conf) throws Exception {
        StreamExecutionEnvironment env = environment(path, conf);
        return translatePlan(env, StreamTableEnvironment.create(env), path);
    }

    static StreamGraph translatePlan(StreamExecutionEnvironment env, StreamTableEnvironment tEnv, String path)
            throws Exception {
        Planner planner = ((TableEnvironmentImpl) tEnv).getPlanner();
        InternalPlan plan = planner.loadPlan(PlanReference.fromFile(path));
        List<Transformation<?>> transformations = planner.translatePlan(plan);
        for (Transformation<?> t : transformations) {
            env.addOperator(t);
        }
        return env.getStreamGraph(false);
    }
}

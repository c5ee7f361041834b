package ugate.plans;

import org.apache.flink.core.execution.JobClient;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.table.api.PlanReference;
import org.apache.flink.table.api.TableResult;
import org.apache.flink.table.api.bridge.java.StreamTableEnvironment;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;

/**
 * Which FLIP-190 plans a Flink release accepts: {@code EXECUTE PLAN} as the SQL client runs it
 * ({@code TableEnvironment#executePlan}), one fresh table environment per plan, the job cancelled once it
 * runs. Also compiles a plan ({@code COMPILE PLAN ... FOR INSERT}, the script's single INSERT) so every
 * release writes its own, in its own JVM.
 *
 * <p>Usage: {@code PlanAcceptance compile <script.sql> <plan.json>} or
 * {@code PlanAcceptance execute <out.tsv> <ddl.sql> <plan.json>...}: one line per plan,
 * {@code <plan>\tRUNNING} or {@code <plan>\tFAILED\t<class>: <message>} of the root cause.
 */
public final class PlanAcceptance {
    private PlanAcceptance() {}

    public static void main(String[] args) throws Exception {
        if (args[0].equals("compile")) {
            StreamTableEnvironment tEnv = env();
            String insert = null;
            for (String s : statements(args[1])) {
                if (s.toUpperCase().startsWith("INSERT")) {
                    insert = s;
                } else {
                    tEnv.executeSql(s);
                }
            }
            tEnv.compilePlanSql(insert).writeToFile(new File(args[2]), true);
            System.exit(0);
        }
        List<String> lines = new ArrayList<>();
        for (int i = 3; i < args.length; i++) {
            String name = new File(args[i]).getName();
            try {
                StreamTableEnvironment tEnv = env();
                for (String s : statements(args[2])) {
                    tEnv.executeSql(s);
                }
                TableResult r = tEnv.executePlan(PlanReference.fromFile(args[i]));
                JobClient client = r.getJobClient().orElseThrow(() -> new IllegalStateException("no job"));
                String status = "CREATED";
                for (int t = 0; t < 600 && !status.equals("RUNNING") && !status.equals("FAILED"); t++) {
                    status = client.getJobStatus().get().name();
                    Thread.sleep(50);
                }
                client.cancel().get();
                lines.add(name + "\t" + status);
            } catch (Throwable e) {
                Throwable root = e;
                while (root.getCause() != null && root.getCause() != root) {
                    root = root.getCause();
                }
                String msg = String.valueOf(root.getMessage()).replaceAll("\\s+", " ");
                lines.add(name + "\tFAILED\t" + root.getClass().getName() + ": " + msg);
            }
            System.out.println(lines.get(lines.size() - 1));
        }
        Files.write(Paths.get(args[1]), (String.join("\n", lines) + "\n").getBytes(StandardCharsets.UTF_8));
        System.exit(0);
    }

    private static StreamTableEnvironment env() {
        return StreamTableEnvironment.create(StreamExecutionEnvironment.getExecutionEnvironment());
    }

    private static List<String> statements(String path) throws Exception {
        List<String> out = new ArrayList<>();
        for (String s : new String(Files.readAllBytes(Paths.get(path)), StandardCharsets.UTF_8).split(";")) {
            if (!s.strip().isEmpty()) {
                out.add(s.strip());
            }
        }
        return out;
    }
}

package upgradegate.bridge;

import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.table.api.bridge.java.StreamTableEnvironment;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;

/**
 * Test helper: compile the single INSERT of a SQL script into a FLIP-190 plan file with real
 * Flink ({@code COMPILE PLAN}), so exporter tests use a plan Flink itself wrote.
 *
 * <p>Usage: {@code PlanCompiler <script.sql> <plan.json>}.
 */
public final class PlanCompiler {
    private PlanCompiler() {}

    public static void main(String[] args) throws Exception {
        String script = new String(Files.readAllBytes(Paths.get(args[0])), StandardCharsets.UTF_8);
        StreamTableEnvironment tEnv = StreamTableEnvironment.create(StreamExecutionEnvironment.getExecutionEnvironment());
        String insert = null;
        for (String statement : ExportMain.split(script)) {
            if (ExportMain.applySet(tEnv, statement)) {
                continue;
            } else if (statement.toUpperCase().startsWith("INSERT")) {
                insert = statement;
            } else {
                tEnv.executeSql(statement);
            }
        }
        tEnv.compilePlanSql(insert).writeToFile(new File(args[1]), true);
    }
}

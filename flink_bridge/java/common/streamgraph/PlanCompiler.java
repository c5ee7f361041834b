package upgradegate.bridge;

import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.table.api.StatementSet;
import org.apache.flink.table.api.bridge.java.StreamTableEnvironment;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;

/**
 * Test helper: compile the INSERT of a SQL script (several: their statement set) into a FLIP-190 plan
 * file with real Flink ({@code COMPILE PLAN}), so exporter tests use a plan Flink itself wrote.
 *
 * <p>Usage: {@code PlanCompiler <script.sql> <plan.json>}.
 */
public final class PlanCompiler {
    private PlanCompiler() {}

    public static void main(String[] args) throws Exception {
        String script = new String(Files.readAllBytes(Paths.get(args[0])), StandardCharsets.UTF_8);
        StreamTableEnvironment tEnv = StreamTableEnvironment.create(StreamExecutionEnvironment.getExecutionEnvironment());
        List<String> inserts = new ArrayList<>();
        for (String statement : ExportMain.split(script)) {
            if (ExportMain.applySet(tEnv, statement)) {
                continue;
            } else if (statement.toUpperCase().startsWith("INSERT")) {
                inserts.add(statement);
            } else {
                tEnv.executeSql(statement);
            }
        }
        if (inserts.size() == 1) {
            tEnv.compilePlanSql(inserts.get(0)).writeToFile(new File(args[1]), true);
        } else {  // several INSERTs: one plan of their statement set (COMPILE PLAN ... FOR STATEMENT SET)
            StatementSet set = tEnv.createStatementSet();
            for (String insert : inserts) {
                set.addInsertSql(insert);
            }
            set.compilePlan().writeToFile(new File(args[1]), true);
        }
    }
}

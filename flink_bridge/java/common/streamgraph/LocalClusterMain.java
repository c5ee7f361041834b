package upgradegate.bridge;

import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.GlobalConfiguration;
import org.apache.flink.runtime.minicluster.MiniCluster;
import org.apache.flink.runtime.minicluster.MiniClusterConfiguration;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;

/**
 * Test helper: a real Flink session cluster (Dispatcher, JobMaster, one TaskExecutor, REST) in one
 * JVM, configured from a conf dir, for tests that submit jobs with Flink's own CLI
 * ({@code org.apache.flink.client.cli.CliFrontend}, what {@code bin/flink} runs) and take
 * savepoints, against every release whose jars we have (the standalone scripts of
 * {@code flink_bridge/cluster.py} come only with the full 2.3 package).
 *
 * <p>Usage: {@code LocalClusterMain <conf dir> <ready file> <slots>}: writes the REST URL to the
 * ready file once the cluster serves, then runs until its process is killed.
 */
public final class LocalClusterMain {
    private LocalClusterMain() {}

    public static void main(String[] args) throws Exception {
        Configuration conf = GlobalConfiguration.loadConfiguration(args[0]);
        MiniClusterConfiguration config = new MiniClusterConfiguration.Builder()
                .setConfiguration(conf)
                .setNumTaskManagers(1)
                .setNumSlotsPerTaskManager(Integer.parseInt(args[2]))
                .build();
        MiniCluster cluster = new MiniCluster(config);
        cluster.start();
        String url = cluster.getRestAddress().get().toString();
        Files.write(Paths.get(args[1] + ".tmp"), url.getBytes(StandardCharsets.UTF_8));
        Files.move(Paths.get(args[1] + ".tmp"), Paths.get(args[1]));
        Thread.sleep(Long.MAX_VALUE);
    }
}

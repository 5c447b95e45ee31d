// The endpoints a Java AdminClient is told about, for tests/listeners.rs (run
// with the Kafka 4.1.2 jars on the class path:
// scripts/kafka-tool.sh tests/java/ListenerEndpoints.java <bootstrap>).
// Prints, one per line:
//   node <id> <host>:<port>        every node of describeCluster()
//   controller <id> <host>:<port>  its controller
//   topics <n>                     listTopics() answered through those nodes
import java.util.Properties;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.common.Node;

public class ListenerEndpoints {
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", args[0]);
        p.put("request.timeout.ms", "20000");
        p.put("default.api.timeout.ms", "30000");
        try (Admin admin = Admin.create(p)) {
            DescribeClusterResult cluster = admin.describeCluster();
            for (Node n : cluster.nodes().get()) {
                System.out.println("node " + n.id() + " " + n.host() + ":" + n.port());
            }
            Node c = cluster.controller().get();
            System.out.println("controller " + c.id() + " " + c.host() + ":" + c.port());
            // Needs a connection to the node at its advertised endpoint.
            System.out.println("topics " + admin.listTopics().names().get().size());
        }
    }
}

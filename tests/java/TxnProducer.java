// Transactions against a real Apache Kafka broker, for
// tests/txn_state_from_kafka.rs (run with the Kafka 4.1.2 jars on the class
// path: scripts/kafka-tool.sh tests/java/TxnProducer.java <bootstrap>):
//   committed  one transaction over orders-0, orders-1, payments-0, committed
//   aborted    one transaction over orders-0, aborted by the client
//   fenced     a transaction left open on orders-1, fenced by a second
//              producer with the same id, which then commits on payments-0
//   timed-out  a transaction (timeout 1000 ms) left open on orders-0 when the
//              process halts, for the broker to abort
// Prints "open" once the last transaction has its record acknowledged, then
// halts without closing anything.
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;

public class TxnProducer {
    static KafkaProducer<String, String> producer(String bootstrap, String id, int timeoutMs) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("transactional.id", id);
        p.put("transaction.timeout.ms", Integer.toString(timeoutMs));
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        return new KafkaProducer<>(p);
    }

    static ProducerRecord<String, String> record(String topic, int partition) {
        return new ProducerRecord<>(topic, partition, "k", "v");
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
            admin.createTopics(List.of(new NewTopic("orders", 2, (short) 1),
                new NewTopic("payments", 1, (short) 1))).all().get();
        }
        try (KafkaProducer<String, String> p = producer(bootstrap, "committed", 60000)) {
            p.initTransactions();
            p.beginTransaction();
            p.send(record("orders", 0));
            p.send(record("orders", 1));
            p.send(record("payments", 0));
            p.commitTransaction();
        }
        try (KafkaProducer<String, String> p = producer(bootstrap, "aborted", 60000)) {
            p.initTransactions();
            p.beginTransaction();
            p.send(record("orders", 0)).get();
            p.abortTransaction();
        }
        KafkaProducer<String, String> first = producer(bootstrap, "fenced", 60000);
        first.initTransactions();
        first.beginTransaction();
        first.send(record("orders", 1)).get();
        try (KafkaProducer<String, String> second = producer(bootstrap, "fenced", 60000)) {
            second.initTransactions();
            second.beginTransaction();
            second.send(record("payments", 0));
            second.commitTransaction();
        }
        KafkaProducer<String, String> open = producer(bootstrap, "timed-out", 1000);
        open.initTransactions();
        open.beginTransaction();
        open.send(record("orders", 0)).get();
        System.out.println("open");
        System.out.flush();
        Runtime.getRuntime().halt(0);
    }
}

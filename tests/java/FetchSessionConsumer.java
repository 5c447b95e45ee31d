// A consumer of every partition of a topic (assigned, no group), for
// tests/fetch_sessions_java.rs (run with the Kafka 4.1.2 jars on the class
// path: scripts/kafka-tool.sh tests/java/FetchSessionConsumer.java
// <bootstrap> <topic> <partitions> <expected records>).
// Reads from the beginning until it has seen <expected> distinct values (or
// 90 s pass), keeps polling 2 s more to catch duplicates, then prints
// "total=<records received> distinct=<distinct values>".
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Properties;
import java.util.Set;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

public class FetchSessionConsumer {
    public static void main(String[] args) {
        String bootstrap = args[0];
        String topic = args[1];
        int partitions = Integer.parseInt(args[2]);
        int expected = Integer.parseInt(args[3]);
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        p.put("enable.auto.commit", "false");
        p.put("auto.offset.reset", "earliest");
        // Small fetches: many requests, so the session is exercised.
        p.put("max.partition.fetch.bytes", "4096");
        p.put("fetch.max.wait.ms", "200");
        List<TopicPartition> assigned = new ArrayList<>();
        for (int i = 0; i < partitions; i++) {
            assigned.add(new TopicPartition(topic, i));
        }
        long total = 0;
        Set<String> distinct = new HashSet<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(p)) {
            consumer.assign(assigned);
            consumer.seekToBeginning(assigned);
            long deadline = System.currentTimeMillis() + 90_000;
            long stopAt = Long.MAX_VALUE;
            while (System.currentTimeMillis() < Math.min(deadline, stopAt)) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(100))) {
                    total++;
                    distinct.add(r.value());
                }
                if (distinct.size() >= expected && stopAt == Long.MAX_VALUE) {
                    stopAt = System.currentTimeMillis() + 2_000;
                }
            }
        }
        System.out.println("total=" + total + " distinct=" + distinct.size());
    }
}

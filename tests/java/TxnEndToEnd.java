// The Java producer's transactions against sediment, for tests/txn_java.rs
// (run with the Kafka 4.1.2 jars on the class path:
// scripts/kafka-tool.sh tests/java/TxnEndToEnd.java <bootstrap> [--topics-exist]):
//   on topic "txn": commit c1..c3, abort a1 a2, commit c4 (producer "e2e");
//   on topic "fence": a transaction sending f1 is fenced by a second producer
//   with the same transactional.id, which commits f2; the first producer's
//   commit must then fail with ProducerFencedException.
// Then a read_committed and a read_uncommitted consumer read both topics to
// their end offsets. Last, consume-transform-produce (producer "ctp-id",
// group "ctp" with an assigned consumer): "txn" is read, its values sent
// upper-cased to "out" with the consumer's position given to
// sendOffsetsToTransaction, and committed; a second transaction sending
// offset 2 aborts. The group's committed offset is read after each through a
// read_committed consumer (OffsetFetch require_stable). Prints one line per
// finding, key=value.
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class TxnEndToEnd {
    static KafkaProducer<String, String> producer(String bootstrap, String id) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("transactional.id", id);
        p.put("transaction.timeout.ms", "60000");
        p.put("max.block.ms", "30000");
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        return new KafkaProducer<>(p);
    }

    static void send(KafkaProducer<String, String> p, String topic, String... values) throws Exception {
        for (String v : values) {
            p.send(new ProducerRecord<>(topic, 0, "k", v)).get();
        }
    }

    static String read(String bootstrap, String isolation, String topic) {
        Properties c = new Properties();
        c.put("bootstrap.servers", bootstrap);
        c.put("isolation.level", isolation);
        c.put("enable.auto.commit", "false");
        c.put("key.deserializer", StringDeserializer.class.getName());
        c.put("value.deserializer", StringDeserializer.class.getName());
        List<String> values = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(c)) {
            TopicPartition tp = new TopicPartition(topic, 0);
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            long end = consumer.endOffsets(List.of(tp)).get(tp);
            long deadline = System.currentTimeMillis() + 30000;
            while (consumer.position(tp) < end && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                    values.add(r.value());
                }
            }
            return String.join(",", values) + " end=" + end + " position=" + consumer.position(tp);
        }
    }

    static KafkaConsumer<String, String> groupConsumer(String bootstrap) {
        Properties c = new Properties();
        c.put("bootstrap.servers", bootstrap);
        c.put("group.id", "ctp");
        c.put("isolation.level", "read_committed");
        c.put("enable.auto.commit", "false");
        c.put("key.deserializer", StringDeserializer.class.getName());
        c.put("value.deserializer", StringDeserializer.class.getName());
        return new KafkaConsumer<>(c);
    }

    static String committed(String bootstrap, TopicPartition tp) {
        try (KafkaConsumer<String, String> c = groupConsumer(bootstrap)) {
            OffsetAndMetadata o = c.committed(java.util.Set.of(tp), Duration.ofSeconds(30)).get(tp);
            return o == null ? "none" : Long.toString(o.offset());
        }
    }

    static void consumeTransformProduce(String bootstrap) throws Exception {
        TopicPartition tp = new TopicPartition("txn", 0);
        try (KafkaConsumer<String, String> consumer = groupConsumer(bootstrap);
             KafkaProducer<String, String> p = producer(bootstrap, "ctp-id")) {
            p.initTransactions();
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            long end = consumer.endOffsets(List.of(tp)).get(tp);
            List<String> values = new ArrayList<>();
            long deadline = System.currentTimeMillis() + 30000;
            p.beginTransaction();
            while (consumer.position(tp) < end && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                    values.add(r.value());
                    p.send(new ProducerRecord<>("out", 0, r.key(), r.value().toUpperCase())).get();
                }
            }
            long position = consumer.position(tp);
            p.sendOffsetsToTransaction(Map.of(tp, new OffsetAndMetadata(position)),
                consumer.groupMetadata());
            p.commitTransaction();
            System.out.println("ctp consumed=" + String.join(",", values) + " position=" + position
                + " committed=" + committed(bootstrap, tp));
            p.beginTransaction();
            send(p, "out", "X");
            p.sendOffsetsToTransaction(Map.of(tp, new OffsetAndMetadata(2)), consumer.groupMetadata());
            p.abortTransaction();
            System.out.println("ctp after abort committed=" + committed(bootstrap, tp));
        }
        System.out.println("out committed=" + read(bootstrap, "read_committed", "out"));
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        // "--topics-exist": the caller created the three topics (placed on
        // chosen brokers of a cluster, tests/cluster/transactions.rs).
        if (args.length < 2 || !args[1].equals("--topics-exist")) {
            try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
                admin.createTopics(List.of(new NewTopic("txn", 1, (short) 1),
                    new NewTopic("fence", 1, (short) 1), new NewTopic("out", 1, (short) 1))).all().get();
            }
        }
        try (KafkaProducer<String, String> p = producer(bootstrap, "e2e")) {
            p.initTransactions();
            p.beginTransaction();
            send(p, "txn", "c1", "c2", "c3");
            p.commitTransaction();
            p.beginTransaction();
            send(p, "txn", "a1", "a2");
            p.abortTransaction();
            p.beginTransaction();
            send(p, "txn", "c4");
            p.commitTransaction();
        }
        KafkaProducer<String, String> first = producer(bootstrap, "fence-id");
        first.initTransactions();
        first.beginTransaction();
        send(first, "fence", "f1");
        try (KafkaProducer<String, String> second = producer(bootstrap, "fence-id")) {
            second.initTransactions();
            second.beginTransaction();
            send(second, "fence", "f2");
            second.commitTransaction();
        }
        String fenced;
        try {
            first.commitTransaction();
            fenced = "committed";
        } catch (ProducerFencedException e) {
            fenced = "ProducerFencedException";
        } catch (KafkaException e) {
            fenced = e.getClass().getSimpleName() + " caused by "
                + (e.getCause() == null ? "nothing" : e.getCause().getClass().getSimpleName());
        }
        first.close(Duration.ZERO);
        System.out.println("fenced=" + fenced);
        System.out.println("txn committed=" + read(bootstrap, "read_committed", "txn"));
        System.out.println("txn uncommitted=" + read(bootstrap, "read_uncommitted", "txn"));
        System.out.println("fence committed=" + read(bootstrap, "read_committed", "fence"));
        System.out.println("fence uncommitted=" + read(bootstrap, "read_uncommitted", "fence"));
        consumeTransformProduce(bootstrap);
    }
}

// One instance of a consume-transform-produce loop whose consumer uses the
// KIP-848 protocol (group.protocol=consumer) and commits its offsets inside
// its producer's transactions, for tests/groups/consumer_protocol_eos.rs.
//
// Usage: java ConsumerProtocolEosLoop.java BOOTSTRAP GROUP IN OUT NAME ASSIGNOR [INSTANCE_ID]
//
// Reads IN with read_committed, and per poll that returned records writes
// each record's key and value to OUT in one transaction that also carries
// the consumed positions (sendOffsetsToTransaction with the consumer's group
// metadata: member id and member epoch), then commits it. An abortable
// failure (a rebalance made the epoch stale, a partition moved) aborts and
// rewinds every assigned partition to its committed offset; a fatal one
// (fenced) exits with status 1. Prints flushed lines: "owned 0,3" (the
// whole assignment after each rebalance callback), "committed N" (records
// copied in committed transactions so far), "aborted <reason>";
// "stop" on stdin (or its end) closes both clients and prints "closed".

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.time.Duration;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class ConsumerProtocolEosLoop {
    static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], group = args[1], in = args[2], out = args[3], name = args[4];
        Properties c = new Properties();
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        c.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        c.put(ConsumerConfig.CLIENT_ID_CONFIG, name);
        c.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer");
        c.put(ConsumerConfig.GROUP_REMOTE_ASSIGNOR_CONFIG, args[5]);
        if (args.length > 6) c.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, args[6]);
        c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        c.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        c.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "100");
        c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.CLIENT_ID_CONFIG, name + "-producer");
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, group + "-" + name);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());

        AtomicBoolean stop = new AtomicBoolean(false);
        Thread stdin = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(System.in))) {
                String line;
                while ((line = r.readLine()) != null && !line.trim().equals("stop")) { }
            } catch (Exception e) {
                // End of input stops the loop too.
            }
            stop.set(true);
        });
        stdin.setDaemon(true);
        stdin.start();

        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(c);
             KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            producer.initTransactions();
            consumer.subscribe(List.of(in), new ConsumerRebalanceListener() {
                public void onPartitionsAssigned(Collection<TopicPartition> tps) {
                    say("owned " + partitions(consumer.assignment()));
                }

                public void onPartitionsRevoked(Collection<TopicPartition> tps) {
                    say("owned " + partitions(consumer.assignment()));
                }
            });
            long copied = 0;
            while (!stop.get()) {
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
                if (records.isEmpty()) continue;
                Map<TopicPartition, OffsetAndMetadata> positions = new HashMap<>();
                for (TopicPartition tp : records.partitions()) {
                    List<ConsumerRecord<String, String>> rs = records.records(tp);
                    positions.put(tp, new OffsetAndMetadata(rs.get(rs.size() - 1).offset() + 1));
                }
                try {
                    producer.beginTransaction();
                    for (ConsumerRecord<String, String> r : records) {
                        producer.send(new ProducerRecord<>(out, r.key(), r.value()));
                    }
                    producer.sendOffsetsToTransaction(positions, consumer.groupMetadata());
                    producer.commitTransaction();
                    copied += records.count();
                    say("committed " + copied);
                } catch (ProducerFencedException e) {
                    say("fenced " + e);
                    System.exit(1);
                } catch (KafkaException e) {
                    say("aborted " + e);
                    producer.abortTransaction();
                    rewind(consumer);
                }
            }
        }
        say("closed");
    }

    static String partitions(Collection<TopicPartition> tps) {
        TreeSet<Integer> ps = new TreeSet<>();
        for (TopicPartition tp : tps) ps.add(tp.partition());
        StringBuilder b = new StringBuilder();
        for (Integer p : ps) {
            if (b.length() > 0) b.append(',');
            b.append(p);
        }
        return b.toString();
    }

    /// Every assigned partition back to its committed offset (its start
    /// when the group has none), so the aborted records are read again.
    static void rewind(KafkaConsumer<String, String> consumer) {
        Set<TopicPartition> assigned = consumer.assignment();
        Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(assigned);
        for (TopicPartition tp : assigned) {
            OffsetAndMetadata o = committed.get(tp);
            if (o == null) {
                consumer.seekToBeginning(List.of(tp));
            } else {
                consumer.seek(tp, o.offset());
            }
        }
    }
}

// One member of a group being rolled between the classic and the consumer
// group protocols (KIP-848 online migration), for
// tests/groups/group_migration_java.rs.
//
// Usage: java RollingMember.java BOOTSTRAP GROUP TOPIC NAME PROTOCOL
//
// PROTOCOL is classic or consumer. Offsets are committed by hand: after
// every poll that returned records, synchronously, and in the rebalance
// listener before partitions are given up. Each batch whose commit
// succeeded is printed, one line per record, as "committed VALUE"; a batch
// whose commit failed is printed as "uncommitted N" and read again (by this
// member if it still owns the partition, else by its next owner). Lines
// "owned 0,3" follow every assignment change. A line "stop" on stdin (or
// its end) closes the consumer, which leaves the group, and prints "closed".

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

public class RollingMember {
    static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
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

    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, args[1]);
        props.put(ConsumerConfig.CLIENT_ID_CONFIG, args[3]);
        props.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, args[4]);
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        if (args[4].equals("classic")) {
            props.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "10000");
            props.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "1000");
        }

        AtomicBoolean stop = new AtomicBoolean(false);
        Thread stdin = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(System.in))) {
                String line;
                while ((line = r.readLine()) != null && !line.trim().equals("stop")) { }
            } catch (Exception e) {
                // End of input stops the member too.
            }
            stop.set(true);
        });
        stdin.setDaemon(true);
        stdin.start();

        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
            consumer.subscribe(List.of(args[2]), new ConsumerRebalanceListener() {
                public void onPartitionsAssigned(Collection<TopicPartition> tps) {
                    say("owned " + partitions(consumer.assignment()));
                }

                public void onPartitionsRevoked(Collection<TopicPartition> tps) {
                    // Everything consumed was committed after its poll; this
                    // commits nothing new but is what a careful client does.
                    try {
                        consumer.commitSync();
                    } catch (Exception e) {
                        say("revoke-commit-failed " + e.getClass().getSimpleName());
                    }
                    say("revoked " + partitions(tps));
                }

                public void onPartitionsLost(Collection<TopicPartition> tps) {
                    say("lost " + partitions(tps));
                }
            });
            while (!stop.get()) {
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
                if (records.isEmpty()) continue;
                List<String> values = new ArrayList<>();
                for (ConsumerRecord<String, String> r : records) values.add(r.value());
                try {
                    consumer.commitSync();
                    for (String v : values) say("committed " + v);
                } catch (Exception e) {
                    say("uncommitted " + values.size() + " " + e.getClass().getSimpleName());
                    // Read them again if the partition is still ours.
                    for (TopicPartition tp : records.partitions()) {
                        if (consumer.assignment().contains(tp)) {
                            consumer.seek(tp, records.records(tp).get(0).offset());
                        }
                    }
                }
            }
        }
        say("closed");
    }
}

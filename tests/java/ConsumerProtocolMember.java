// One member of a consumer group using the KIP-848 protocol
// (group.protocol=consumer), for tests/consumer_protocol_java.rs.
//
// Usage: java ConsumerProtocolMember.java BOOTSTRAP GROUP TOPIC NAME [ASSIGNOR]
//
// Subscribes with a ConsumerRebalanceListener and prints one line per event,
// flushed: "assigned 0,1" / "revoked 2" / "lost 3" (the partitions the
// callback got), then "owned 0,1,4" (the whole assignment after it); after
// every poll that returned records, commits synchronously and prints
// "consumed N" (N: the total so far). A line "stop" on stdin (or its end)
// closes the consumer, which leaves the group (epoch -1), and prints "closed".

import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicBoolean;
import java.io.BufferedReader;
import java.io.InputStreamReader;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

public class ConsumerProtocolMember {
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
        props.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer");
        if (args.length > 4) props.put(ConsumerConfig.GROUP_REMOTE_ASSIGNOR_CONFIG, args[4]);
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());

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
                    say("assigned " + partitions(tps));
                    say("owned " + partitions(consumer.assignment()));
                }

                public void onPartitionsRevoked(Collection<TopicPartition> tps) {
                    say("revoked " + partitions(tps));
                    say("owned " + partitions(consumer.assignment()));
                }

                public void onPartitionsLost(Collection<TopicPartition> tps) {
                    say("lost " + partitions(tps));
                }
            });
            long total = 0;
            while (!stop.get()) {
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
                if (!records.isEmpty()) {
                    total += records.count();
                    consumer.commitSync();
                    say("consumed " + total);
                }
            }
        }
        say("closed");
    }
}

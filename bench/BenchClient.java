// Helper client for bench/run.sh, run against either broker with the same
// Apache Kafka 4.1.2 client jars as ProducerPerformance/ConsumerPerformance.
//
//   create BOOTSTRAP TOPIC PARTITIONS [key=value ...]
//       Create a topic (replication factor 1) with topic configs.
//   keyed-produce BOOTSTRAP TOPIC RECORDS KEYS VALUE_SIZE [key=value ...]
//       Produce RECORDS records whose keys cycle through KEYS distinct keys (in a
//       shuffled order per round) with VALUE_SIZE-byte random values, acks=all.
//       When every record is acknowledged, print last_write_ms, then apply the
//       key=value topic configs (IncrementalAlterConfigs SET) and print
//       altered_ms. Output is key=value lines for bench.py.
//   alter BOOTSTRAP TOPIC key=value ...
//       Apply the topic configs (IncrementalAlterConfigs SET); print altered_ms.
//   update BOOTSTRAP TOPIC KEYS HOT VALUE_SIZE SEED
//       One record for each of HOT keys spread evenly over the KEYS keys of
//       keyed-produce (key index j * KEYS / HOT), in a shuffled order, with
//       VALUE_SIZE-byte random values (seeded by SEED), acks=all.
//   roll BOOTSTRAP TOPIC PARTITION_DIR [key=value ...]
//       Close partition 0's active segment: set segment.ms=1, then append a
//       marker record (key "roll-marker") until the marker starts a new
//       segment (PARTITION_DIR holds a segment file named after its offset:
//       the config reaches the log asynchronously). Then apply the key=value
//       topic configs and print marker_offset and altered_ms.
//   ready BOOTSTRAP -
//       Wait until every partition of every topic has a leader (after a restart).
//   verify BOOTSTRAP TOPIC CLEANED_OFFSET
//       Read partition 0 from the start to the end and report, for records
//       below CLEANED_OFFSET (the cleaner checkpoint), how many there are and
//       how many distinct keys they have (equal: one record per key).

import java.time.Duration;
import java.util.*;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.*;

public class BenchClient {
    public static void main(String[] args) throws Exception {
        if (args.length < 3) usage();
        switch (args[0]) {
            case "create" -> create(args[1], args[2], Integer.parseInt(args[3]), configs(args, 4));
            case "keyed-produce" -> keyedProduce(args[1], args[2], Long.parseLong(args[3]), Integer.parseInt(args[4]), Integer.parseInt(args[5]), configs(args, 6));
            case "verify" -> verify(args[1], args[2], Long.parseLong(args[3]));
            case "ready" -> ready(args[1]);
            case "alter" -> System.out.println("altered_ms=" + alter(args[1], args[2], configs(args, 3)));
            case "update" -> update(args[1], args[2], Integer.parseInt(args[3]), Integer.parseInt(args[4]), Integer.parseInt(args[5]), Long.parseLong(args[6]));
            case "roll" -> roll(args[1], args[2], args[3], configs(args, 4));
            default -> usage();
        }
    }

    static void usage() {
        System.err.println("usage: BenchClient create|keyed-produce|verify|alter|update|roll|ready BOOTSTRAP TOPIC ...");
        System.exit(2);
    }

    static Map<String, String> configs(String[] args, int from) {
        Map<String, String> m = new LinkedHashMap<>();
        for (int i = from; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            m.put(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        return m;
    }

    static Admin admin(String bootstrap) {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        return Admin.create(p);
    }

    static void create(String bootstrap, String topic, int partitions, Map<String, String> configs) throws Exception {
        try (Admin a = admin(bootstrap)) {
            a.createTopics(List.of(new NewTopic(topic, partitions, (short) 1).configs(configs))).all().get(60, TimeUnit.SECONDS);
            // Wait until every partition has a leader (Kafka creates them asynchronously).
            long deadline = System.currentTimeMillis() + 60_000;
            while (true) {
                var d = a.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
                if (d.partitions().size() == partitions && d.partitions().stream().allMatch(pi -> pi.leader() != null)) break;
                if (System.currentTimeMillis() > deadline) throw new RuntimeException("no leaders for " + topic);
                Thread.sleep(100);
            }
        }
        System.out.println("created=" + topic);
    }

    static void ready(String bootstrap) throws Exception {
        try (Admin a = admin(bootstrap)) {
            long deadline = System.currentTimeMillis() + 120_000;
            while (true) {
                try {
                    Set<String> names = a.listTopics().names().get(10, TimeUnit.SECONDS);
                    var all = a.describeTopics(names).allTopicNames().get(10, TimeUnit.SECONDS);
                    if (all.values().stream().allMatch(d -> d.partitions().stream().allMatch(p -> p.leader() != null))) {
                        System.out.println("topics=" + names.size());
                        return;
                    }
                } catch (Exception e) {
                    if (System.currentTimeMillis() > deadline) throw e;
                }
                if (System.currentTimeMillis() > deadline) throw new RuntimeException("partitions without a leader");
                Thread.sleep(200);
            }
        }
    }

    static void keyedProduce(String bootstrap, String topic, long records, int keys, int valueSize, Map<String, String> after) throws Exception {
        Producer<byte[], byte[]> producer = producer(bootstrap);
        Random rnd = new Random(42);
        byte[][] values = new byte[64][valueSize];
        for (byte[] v : values) rnd.nextBytes(v);
        int[] order = new int[keys];
        byte[][] keyBytes = new byte[keys][];
        for (int i = 0; i < keys; i++) {
            order[i] = i;
            keyBytes[i] = String.format("key-%08d", i).getBytes();
        }
        AtomicReference<Exception> failure = new AtomicReference<>();
        AtomicLong acked = new AtomicLong();
        Callback cb = (md, e) -> {
            if (e != null) failure.compareAndSet(null, e);
            else acked.incrementAndGet();
        };
        long start = System.nanoTime();
        for (long i = 0; i < records; i++) {
            int slot = (int) (i % keys);
            if (slot == 0) {
                for (int j = keys - 1; j > 0; j--) {  // a new shuffle every round
                    int k = rnd.nextInt(j + 1);
                    int t = order[j]; order[j] = order[k]; order[k] = t;
                }
            }
            producer.send(new ProducerRecord<>(topic, 0, keyBytes[order[slot]], values[(int) (i & 63)]), cb);
            if (failure.get() != null) break;
        }
        producer.flush();
        long lastWrite = System.currentTimeMillis();
        double secs = (System.nanoTime() - start) / 1e9;
        producer.close();
        if (failure.get() != null) throw failure.get();
        System.out.println("records=" + acked.get());
        System.out.printf(Locale.ROOT, "seconds=%.3f%n", secs);
        System.out.printf(Locale.ROOT, "mb_per_sec=%.2f%n", acked.get() * (double) (valueSize + 12) / secs / 1e6);
        System.out.println("last_write_ms=" + lastWrite);
        if (!after.isEmpty()) System.out.println("altered_ms=" + alter(bootstrap, topic, after));
    }

    /** Sets the topic configs; returns the wall clock (ms) when the broker has acknowledged them. */
    static long alter(String bootstrap, String topic, Map<String, String> configs) throws Exception {
        try (Admin a = admin(bootstrap)) {
            ConfigResource r = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            List<AlterConfigOp> ops = new ArrayList<>();
            configs.forEach((k, v) -> ops.add(new AlterConfigOp(new ConfigEntry(k, v), AlterConfigOp.OpType.SET)));
            a.incrementalAlterConfigs(Map.of(r, ops)).all().get(60, TimeUnit.SECONDS);
        }
        return System.currentTimeMillis();
    }

    static Producer<byte[], byte[]> producer(String bootstrap) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        return new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer());
    }

    static void update(String bootstrap, String topic, int keys, int hot, int valueSize, long seed) throws Exception {
        Random rnd = new Random(seed);
        byte[][] values = new byte[64][valueSize];
        for (byte[] v : values) rnd.nextBytes(v);
        int[] order = new int[hot];
        for (int j = 0; j < hot; j++) order[j] = (int) ((long) j * keys / hot);
        for (int j = hot - 1; j > 0; j--) {
            int k = rnd.nextInt(j + 1);
            int t = order[j]; order[j] = order[k]; order[k] = t;
        }
        AtomicReference<Exception> failure = new AtomicReference<>();
        AtomicLong acked = new AtomicLong();
        Callback cb = (md, e) -> {
            if (e != null) failure.compareAndSet(null, e);
            else acked.incrementAndGet();
        };
        long start = System.nanoTime();
        try (Producer<byte[], byte[]> producer = producer(bootstrap)) {
            for (int j = 0; j < hot && failure.get() == null; j++) {
                byte[] key = String.format("key-%08d", order[j]).getBytes();
                producer.send(new ProducerRecord<>(topic, 0, key, values[j & 63]), cb);
            }
            producer.flush();
        }
        long lastWrite = System.currentTimeMillis();
        double secs = (System.nanoTime() - start) / 1e9;
        if (failure.get() != null) throw failure.get();
        System.out.println("records=" + acked.get());
        System.out.printf(Locale.ROOT, "seconds=%.3f%n", secs);
        System.out.println("last_write_ms=" + lastWrite);
    }

    static void roll(String bootstrap, String topic, String partitionDir, Map<String, String> after) throws Exception {
        alter(bootstrap, topic, Map.of("segment.ms", "1"));
        long deadline = System.currentTimeMillis() + 60_000;
        long offset;
        try (Producer<byte[], byte[]> producer = producer(bootstrap)) {
            while (true) {
                Thread.sleep(50);
                offset = producer.send(new ProducerRecord<>(topic, 0, "roll-marker".getBytes(), new byte[0])).get(30, TimeUnit.SECONDS).offset();
                if (new java.io.File(partitionDir, String.format("%020d.log", offset)).exists()) break;
                if (System.currentTimeMillis() > deadline) throw new RuntimeException("the active segment of " + topic + " did not roll");
            }
        }
        System.out.println("marker_offset=" + offset);
        System.out.println("altered_ms=" + alter(bootstrap, topic, after));
    }

    static void verify(String bootstrap, String topic, long cleanedOffset) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "2000");
        TopicPartition tp = new TopicPartition(topic, 0);
        long below = 0, total = 0;
        Set<String> keys = new HashSet<>();
        Set<String> allKeys = new HashSet<>();
        try (Consumer<byte[], byte[]> c = new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            c.assign(List.of(tp));
            c.seekToBeginning(List.of(tp));
            long end = c.endOffsets(List.of(tp)).get(tp);
            long pos = c.position(tp);
            while (pos < end) {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofSeconds(5))) {
                    total++;
                    String k = new String(r.key());
                    allKeys.add(k);
                    if (r.offset() < cleanedOffset) {
                        below++;
                        keys.add(k);
                    }
                }
                pos = c.position(tp);
            }
            System.out.println("end_offset=" + end);
        }
        System.out.println("records_total=" + total);
        System.out.println("distinct_keys_total=" + allKeys.size());
        System.out.println("records_below_checkpoint=" + below);
        System.out.println("distinct_keys_below_checkpoint=" + keys.size());
    }
}

// Kafka Streams 4.1.2 with processing.guarantee=exactly_once_v2 against
// sediment, for tests/streams_eos.rs (run with the Kafka 4.1.2 jars on the
// class path: scripts/kafka-tool.sh tests/java/StreamsEosCount.java
// <bootstrap> <state-dir> <records> <mode>). Modes:
//   produce: create topics "words" (1 partition) and "counts", produce
//     <records> keyed records round-robin over keys k0..k3 (not transactional).
//   count: run the app (below) until a read_committed consumer of "counts"
//     has, for every key, a last count equal to its number of input records
//     (or 60 s pass); close the app and print one line per key,
//     key=c1,c2,..., then the changelog topic's cleanup.policy, the
//     application's committed offset on "words", whether "counts" holds
//     markers, and how many of its records only read_uncommitted sees.
//   steady [txn-timeout-ms]: as count, with 2 ms of work per record and up
//     to 150 s for the output (the broker is SIGKILLed and restarted
//     meanwhile), the producer's transaction.timeout.ms if given; if the app
//     reaches state ERROR instead, print "app state=ERROR" and exit 3. Its
//     state changes go to stderr.
//   slow: run the app with 2 ms of work per record, blocking for ever
//     before record 1000; once the output of record 999 is on the broker,
//     print "running open=N", N the output records of the transaction the
//     app holds open (seen read_uncommitted only), and wait to be killed.
// The app counts values per key into a changelog-backed store (changelog
// topic created by Streams, record cache off) and writes each new count to
// "counts"; processing.guarantee=exactly_once_v2, commit.interval.ms=100.
// Environment: EOS_REPLICATION_FACTOR (default 1) is the replication factor
// of every topic, with min.insync.replicas=2 above 1 (tests/cluster/);
// EOS_DEADLINE_S (default 150) the steady mode's wait for the output.
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.LongDeserializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.Stores;

public class StreamsEosCount {
    static final int KEYS = 4;
    static final short RF =
            Short.parseShort(System.getenv().getOrDefault("EOS_REPLICATION_FACTOR", "1"));
    static final Map<String, String> TOPIC_CONFIGS =
            RF > 1 ? Map.of("min.insync.replicas", "2") : Map.of();

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String stateDir = args[1];
        int records = Integer.parseInt(args[2]);
        String mode = args[3];
        if (mode.equals("produce")) {
            produce(bootstrap, records);
            return;
        }
        boolean slow = mode.equals("slow");
        boolean steady = mode.equals("steady");
        int txnTimeoutMs = args.length > 4 ? Integer.parseInt(args[4]) : 0;
        KafkaStreams streams = app(bootstrap, stateDir, slow || steady ? 2 : 0, slow, txnTimeoutMs);
        streams.setStateListener((now, before) -> System.err.println("app state " + before + " -> " + now));
        streams.start();
        if (slow) {
            // The app blocks before record 1000; wait for the output of
            // record 999 (k3's 250th count) to reach the broker.
            Map<String, List<Long>> all = new TreeMap<>();
            try (KafkaConsumer<String, Long> consumer = countsConsumer(bootstrap, "read_uncommitted")) {
                long deadline = System.currentTimeMillis() + 60_000;
                while (!all.getOrDefault("k3", List.of()).contains(250L)) {
                    if (System.currentTimeMillis() > deadline) {
                        System.out.println("no output for record 999: " + all);
                        System.exit(1);
                    }
                    poll(consumer, all);
                }
            }
            Map<String, List<Long>> committed = new TreeMap<>();
            TopicPartition counts = new TopicPartition("counts", 0);
            try (KafkaConsumer<String, Long> consumer = countsConsumer(bootstrap, "read_committed")) {
                long stable = consumer.endOffsets(List.of(counts)).get(counts);
                while (consumer.position(counts) < stable) {
                    poll(consumer, committed);
                }
            }
            // Output of the transaction left open by the blocked app.
            System.out.println("running open=" + (size(all) - size(committed)));
            System.out.flush();
            Thread.sleep(Long.MAX_VALUE);
        }
        Map<String, List<Long>> seen = new TreeMap<>();
        try (KafkaConsumer<String, Long> consumer = countsConsumer(bootstrap, "read_committed")) {
            long deadline = System.currentTimeMillis() + (steady ? steadyDeadlineMs() : 60_000);
            while (!done(seen, records) && System.currentTimeMillis() < deadline) {
                if (streams.state() == KafkaStreams.State.ERROR) {
                    System.out.println("app state=ERROR");
                    System.out.flush();
                    streams.close(Duration.ofSeconds(10));
                    System.exit(3);
                }
                poll(consumer, seen);
            }
        }
        streams.close(Duration.ofSeconds(30));
        for (Map.Entry<String, List<Long>> e : seen.entrySet()) {
            StringBuilder line = new StringBuilder(e.getKey()).append('=');
            for (int i = 0; i < e.getValue().size(); i++) {
                line.append(i == 0 ? "" : ",").append(e.getValue().get(i));
            }
            System.out.println(line);
        }
        Properties a = new Properties();
        a.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(a)) {
            ConfigResource changelog = new ConfigResource(ConfigResource.Type.TOPIC,
                    "eos-count-counts-store-changelog");
            Config config = admin.describeConfigs(List.of(changelog)).all().get().get(changelog);
            System.out.println("changelog cleanup.policy=" + config.get("cleanup.policy").value());
            TopicPartition words = new TopicPartition("words", 0);
            OffsetAndMetadata committed = admin.listConsumerGroupOffsets("eos-count")
                    .partitionsToOffsetAndMetadata().get().get(words);
            System.out.println("words committed=" + (committed == null ? "none" : committed.offset()));
            TopicPartition counts = new TopicPartition("counts", 0);
            long end = admin.listOffsets(Map.of(counts, OffsetSpec.latest())).all().get()
                    .get(counts).offset();
            // Every count is one record; each transaction adds one marker.
            System.out.println("counts has markers=" + (end > records));
            // Records of aborted transactions: seen read_uncommitted only.
            Properties c = new Properties();
            c.put("bootstrap.servers", bootstrap);
            c.put("isolation.level", "read_uncommitted");
            c.put("key.deserializer", StringDeserializer.class.getName());
            c.put("value.deserializer", LongDeserializer.class.getName());
            long all = 0;
            try (KafkaConsumer<String, Long> consumer = new KafkaConsumer<>(c)) {
                consumer.assign(List.of(counts));
                consumer.seekToBeginning(List.of(counts));
                while (consumer.position(counts) < end) {
                    all += consumer.poll(Duration.ofMillis(200)).count();
                }
            }
            long committedCounts = 0;
            for (List<Long> v : seen.values()) {
                committedCounts += v.size();
            }
            System.out.println("aborted records=" + (all - committedCounts));
        }
    }

    static void produce(String bootstrap, int records) throws Exception {
        Properties a = new Properties();
        a.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(a)) {
            admin.createTopics(List.of(new NewTopic("words", 1, RF).configs(TOPIC_CONFIGS),
                    new NewTopic("counts", 1, RF).configs(TOPIC_CONFIGS))).all().get();
        }
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < records; i++) {
                producer.send(new ProducerRecord<>("words", "k" + (i % KEYS), "v" + i));
            }
            producer.flush();
        }
    }

    // workMs: the work per record; block: block for ever before record 1000.
    static KafkaStreams app(String bootstrap, String stateDir, int workMs, boolean block,
            int txnTimeoutMs) {
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream("words", Consumed.with(Serdes.String(), Serdes.String()))
                .peek((k, v) -> {
                    if (workMs > 0) {
                        try {
                            Thread.sleep(block && v.equals("v1000") ? Long.MAX_VALUE : workMs);
                        } catch (InterruptedException e) {
                            Thread.currentThread().interrupt();
                        }
                    }
                })
                .groupByKey(Grouped.with(Serdes.String(), Serdes.String()))
                .count(Materialized.<String, Long>as(Stores.inMemoryKeyValueStore("counts-store"))
                        .withKeySerde(Serdes.String()).withValueSerde(Serdes.Long()))
                .toStream()
                .to("counts", Produced.with(Serdes.String(), Serdes.Long()));
        Properties s = new Properties();
        s.put(StreamsConfig.APPLICATION_ID_CONFIG, "eos-count");
        s.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        s.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        s.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        s.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 100);
        s.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        s.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, (int) RF);
        TOPIC_CONFIGS.forEach((k, v) -> s.put(StreamsConfig.topicPrefix(k), v));
        s.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
        // A killed instance's member leaves the group after this; the broker's
        // group.min.session.timeout.ms is 6 s.
        s.put(StreamsConfig.consumerPrefix("session.timeout.ms"), 6000);
        if (txnTimeoutMs > 0) {
            s.put(StreamsConfig.producerPrefix("transaction.timeout.ms"), txnTimeoutMs);
        }
        KafkaStreams streams = new KafkaStreams(builder.build(), s);
        streams.setUncaughtExceptionHandler(e -> {
            System.err.println("streams failed: " + e);
            e.printStackTrace();
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        return streams;
    }

    static long steadyDeadlineMs() {
        return 1000L * Long.parseLong(System.getenv().getOrDefault("EOS_DEADLINE_S", "150"));
    }

    static long size(Map<String, List<Long>> seen) {
        long n = 0;
        for (List<Long> v : seen.values()) {
            n += v.size();
        }
        return n;
    }

    static KafkaConsumer<String, Long> countsConsumer(String bootstrap, String isolation) {
        Properties c = new Properties();
        c.put("bootstrap.servers", bootstrap);
        c.put("isolation.level", isolation);
        c.put("key.deserializer", StringDeserializer.class.getName());
        c.put("value.deserializer", LongDeserializer.class.getName());
        KafkaConsumer<String, Long> consumer = new KafkaConsumer<>(c);
        TopicPartition tp = new TopicPartition("counts", 0);
        consumer.assign(List.of(tp));
        consumer.seekToBeginning(List.of(tp));
        return consumer;
    }

    static void poll(KafkaConsumer<String, Long> consumer, Map<String, List<Long>> seen) {
        for (ConsumerRecord<String, Long> r : consumer.poll(Duration.ofMillis(200))) {
            seen.computeIfAbsent(r.key(), k -> new ArrayList<>()).add(r.value());
        }
    }

    static boolean done(Map<String, List<Long>> seen, int records) {
        for (int k = 0; k < KEYS; k++) {
            long want = records / KEYS + (k < records % KEYS ? 1 : 0);
            List<Long> got = seen.get("k" + k);
            if (want > 0 && (got == null || got.get(got.size() - 1) < want)) {
                return false;
            }
        }
        return true;
    }
}

// Apache Kafka's own encoding of __transaction_state records, for
// tests/txn_state_kafka_schema.rs: run with the Kafka 4.1.2 jars on the class
// path (scripts/kafka-tool.sh tests/java/TransactionLogBytes.java), it reads
// one record description per stdin line and prints the bytes Kafka's
// generated TransactionLogKey/TransactionLogValue classes write for it, as
// hex, one line each (or "error <exception>" when Kafka refuses to write it).
//
// Lines (strings as hex of their UTF-8 bytes, so any character passes):
//   key <id>
//   value <version> <producerId> <previousProducerId> <nextProducerId>
//         <producerEpoch> <nextProducerEpoch> <timeoutMs> <status>
//         <lastUpdateMs> <startMs> <clientTransactionVersion> <partitions>
// where <partitions> is "null", "-" (an empty list) or
// "<topic>=<id>,<id>/<topic>=" (a topic with no ids ends in "=").
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

import org.apache.kafka.common.protocol.MessageUtil;
import org.apache.kafka.coordinator.transaction.generated.TransactionLogKey;
import org.apache.kafka.coordinator.transaction.generated.TransactionLogValue;

public class TransactionLogBytes {
    public static void main(String[] args) throws Exception {
        BufferedReader in =
            new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            try {
                System.out.println(hex(encode(line.split(" ", -1))));
            } catch (RuntimeException e) {
                System.out.println("error " + e.getClass().getSimpleName());
            }
        }
    }

    static byte[] encode(String[] f) {
        if (f[0].equals("key")) {
            return MessageUtil.toVersionPrefixedBytes((short) 0,
                new TransactionLogKey().setTransactionalId(text(f[1])));
        }
        TransactionLogValue v = new TransactionLogValue()
            .setProducerId(Long.parseLong(f[2]))
            .setPreviousProducerId(Long.parseLong(f[3]))
            .setNextProducerId(Long.parseLong(f[4]))
            .setProducerEpoch(Short.parseShort(f[5]))
            .setNextProducerEpoch(Short.parseShort(f[6]))
            .setTransactionTimeoutMs(Integer.parseInt(f[7]))
            .setTransactionStatus(Byte.parseByte(f[8]))
            .setTransactionLastUpdateTimestampMs(Long.parseLong(f[9]))
            .setTransactionStartTimestampMs(Long.parseLong(f[10]))
            .setClientTransactionVersion(Short.parseShort(f[11]))
            .setTransactionPartitions(partitions(f[12]));
        return MessageUtil.toVersionPrefixedBytes(Short.parseShort(f[1]), v);
    }

    static List<TransactionLogValue.PartitionsSchema> partitions(String s) {
        if (s.equals("null")) {
            return null;
        }
        List<TransactionLogValue.PartitionsSchema> out = new ArrayList<>();
        if (s.equals("-")) {
            return out;
        }
        for (String entry : s.split("/")) {
            String[] kv = entry.split("=", -1);
            List<Integer> ids = new ArrayList<>();
            for (String id : kv[1].split(",")) {
                if (!id.isEmpty()) {
                    ids.add(Integer.parseInt(id));
                }
            }
            out.add(new TransactionLogValue.PartitionsSchema().setTopic(text(kv[0])).setPartitionIds(ids));
        }
        return out;
    }

    static String text(String hex) {
        byte[] b = new byte[hex.length() / 2];
        for (int i = 0; i < b.length; i++) {
            b[i] = (byte) Integer.parseInt(hex.substring(2 * i, 2 * i + 2), 16);
        }
        return new String(b, StandardCharsets.UTF_8);
    }

    static String hex(byte[] bytes) {
        StringBuilder s = new StringBuilder();
        for (byte b : bytes) {
            s.append(String.format("%02x", b));
        }
        return s.toString();
    }
}

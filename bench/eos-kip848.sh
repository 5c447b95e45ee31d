#!/usr/bin/env bash
# Usage: bench/eos-kip848.sh
#
# Issue 30's exactly-once loop with KIP-848 groups, timed on Apache Kafka
# 4.4.0 and on sediment in the same run: tests/java/ConsumerProtocolEosLoop.java
# members (the Java 4.1.2 client, group.protocol=consumer, offsets committed
# in their transactions) copy 3,000 records while members join, leave, one
# is SIGKILLed and a static one returns; once with the `range` and once with
# the `uniform` server-side assignor, each checked exactly (every input
# value in the output once, the group's offsets at the input's end).
#
# Runs the ignored test eos_loop_time_beside_kafka_4_4 (tests/groups/
# consumer_protocol_eos.rs) in a release build, so sediment is the release
# binary; prints one line per assignor with both times and their ratio
# (sediment / Kafka; the target is at most 2). Takes about 5 minutes after
# the build.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/kafka-jars.sh 4.4.0 >/dev/null
cargo test --release --test groups -- --ignored --nocapture --exact \
    consumer_protocol_eos::eos_loop_time_beside_kafka_4_4 2>&1 |
    grep -E '^eos-kip848|converged|test result|panicked'

#!/usr/bin/env bash
# Usage: bench/key-audit.sh [SIZE_MB]
#
# The key audit on a large compacted partition, side by side with the only
# way Apache Kafka offers to answer "where does key K still live":
# kafka-dump-log --print-data-log over every segment, filtered for the key.
#
# Builds the release binary, starts sediment on a temporary data dir
# (loopback), fills one compacted partition with SIZE_MB (default 1024) of
# 1 KiB records with unique keys plus five copies of the key `audited`
# (confluent-kafka from target/pyenv), then times:
#   1. `sediment key-audit` against the running broker (reads under the
#      cleaner's I/O limit, unlimited here);
#   2. `sediment key-audit --data-dir` on the stopped broker's files;
#   3. Kafka 4.1.2's DumpLogSegments --print-data-log over the same segment
#      files, piped through grep for the key.
# Prints seconds, bytes read and MB/s for each, and the ratios.
set -euo pipefail
cd "$(dirname "$0")/.."

size_mb="${1:-1024}"
cargo build --release --quiet
bin="$PWD/target/release/sediment"
python="$(scripts/python-env.sh | tail -1)"
jars="$(scripts/kafka-jars.sh 4.1.2)"
work="$(mktemp -d)"
trap 'kill "${pid:-0}" 2>/dev/null || true; rm -rf "$work"' EXIT

port=$((20000 + RANDOM % 20000))
metrics=$((port + 1))
"$bin" serve --override "listeners=PLAINTEXT://127.0.0.1:$port" \
  --override "log.dirs=$work/data" --override "metrics.listen=127.0.0.1:$metrics" \
  >"$work/broker.log" 2>&1 &
pid=$!
for _ in $(seq 100); do
  "$bin" health --bootstrap-server "127.0.0.1:$port" >/dev/null 2>&1 && break
  sleep 0.1
done

"$python" - "$port" "$size_mb" <<'EOF'
import sys
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
bootstrap = f"127.0.0.1:{sys.argv[1]}"
size_mb = int(sys.argv[2])
admin = AdminClient({"bootstrap.servers": bootstrap})
config = {"cleanup.policy": "compact", "segment.bytes": str(128 << 20)}
for f in admin.create_topics([NewTopic("big", 1, 1, config=config)]).values():
    f.result()
p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20,
              "compression.type": "none", "queue.buffering.max.kbytes": 1 << 20})
value = b"x" * 1000
records = size_mb * 1024
for i in range(records):
    if i % (records // 5) == 0:
        p.produce("big", key=b"audited", value=b"copy-%d" % i, partition=0)
    p.produce("big", key=b"key-%09d" % i, value=value, partition=0)
    if i % 10000 == 0:
        p.poll(0)
p.flush()
EOF

now() { date +%s.%N; }
seconds() { local s; s=$(now); "$@" >/dev/null; "$python" -c "print($(now) - $s)"; }

t_live=$(seconds "$bin" key-audit --metrics "127.0.0.1:$metrics" --topic big --key audited --json)
"$bin" key-audit --metrics "127.0.0.1:$metrics" --topic big --key audited --json >"$work/live.json"
kill "$pid"; wait "$pid" 2>/dev/null || true
t_offline=$(seconds "$bin" key-audit --data-dir "$work/data" --topic big --key audited --json)
"$bin" key-audit --data-dir "$work/data" --topic big --key audited --json >"$work/offline.json"
segments=$(ls "$work"/data/big-0/*.log | paste -sd, -)
s=$(now)
java -Xmx1g -cp "$jars/*" -Dlog4j2.configurationFile="$PWD/tools/kafka-jars/log4j2.properties" \
  kafka.tools.DumpLogSegments --print-data-log --files "$segments" \
  | grep -c 'key: audited ' >"$work/kafka.count" || true
t_kafka=$("$python" -c "print($(now) - $s)")

"$python" - "$work" "$t_live" "$t_offline" "$t_kafka" <<'EOF2'
import json, sys, pathlib
work = pathlib.Path(sys.argv[1])
t_live, t_offline, t_kafka = map(float, sys.argv[2:5])
live = json.loads((work / "live.json").read_text())
offline = json.loads((work / "offline.json").read_text())
mb = live["bytes_read"] / 2**20
segs = len(list((work / "data" / "big-0").glob("*.log")))
print(f"partition: {mb:.1f} MB in {segs} segment(s); copies of the key: sediment {len(live['copies'])} "
      f"(data dir {len(offline['copies'])}), kafka-dump-log {(work / 'kafka.count').read_text().strip()}")
print(f"{'':44} {'seconds':>8} {'MB/s':>8}")
for name, t in [("sediment key-audit (running broker)", t_live),
                ("sediment key-audit --data-dir", t_offline),
                ("kafka-dump-log --print-data-log | grep", t_kafka)]:
    print(f"{name:44} {t:8.2f} {mb / t:8.1f}")
print(f"kafka-dump-log time / key-audit time: {t_kafka / t_live:.1f}x (running), {t_kafka / t_offline:.1f}x (data dir)")
EOF2

#!/usr/bin/env bash
# Usage: bench/ab.sh OLD_BIN NEW_BIN [ROUNDS]
#
# A/B of two sediment binaries on the produce and fetch paths, alternating
# them ROUNDS times (default 4) so that other work on the machine hits both:
# per round and binary, a fresh broker takes 500,000 x 1 KiB records from
# ProducerPerformance (acks=all) into a 1- and an 8-partition topic, then
# ConsumerPerformance reads each back. Prints, per run, the broker's CPU
# seconds (utime+stime), MB/s and the peak RSS, then the medians. The broker
# CPU is the steady number on a busy machine; MB/s is bounded by the Java
# clients on 2 cores. Run bench/run.sh once first (it fetches the Kafka jars
# and compiles bench/BenchClient.java).
set -euo pipefail
[ $# -ge 2 ] || { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}" >&2; exit 2; }
old="$(realpath "$1")"; new="$(realpath "$2")"; rounds="${3:-4}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
jars="$("$root/scripts/kafka-jars.sh" 4.1.2)"
classes="$root/target/bench/classes"
[ -f "$classes/BenchClient.class" ] || { echo "ab: run bench/run.sh once first (compiles BenchClient)" >&2; exit 1; }
work="$(mktemp -d "$root/target/bench/ab-XXXXXX")"
trap 'kill "${pid:-}" 2>/dev/null || true; rm -rf "$work"' EXIT
java_cp=(java -Xmx512m "-Dlog4j2.configurationFile=$root/tools/kafka-jars/log4j2.properties" -cp "$classes:$jars/*")
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
tck=$(getconf CLK_TCK)

run() {  # label binary
  local label=$1 bin=$2 port metrics
  port=$(free_port); metrics=$(free_port)
  rm -rf "$work/data"
  "$bin" serve --override "listeners=PLAINTEXT://127.0.0.1:$port" --override "log.dirs=$work/data" \
    --override log.segment.bytes=134217728 --override group.initial.rebalance.delay.ms=0 \
    --override "metrics.listen=127.0.0.1:$metrics" >"$work/broker.log" 2>&1 &
  pid=$!
  sleep 0.5
  for n in 1 8; do
    "${java_cp[@]}" BenchClient create "127.0.0.1:$port" "t$n" "$n" >/dev/null
    sync
    echo 5 >"/proc/$pid/clear_refs"
    local a mb b rss
    a=$(ticks "$pid")
    mb=$("${java_cp[@]}" org.apache.kafka.tools.ProducerPerformance --topic "t$n" --num-records 500000 --record-size 1024 \
      --throughput -1 --producer-props "bootstrap.servers=127.0.0.1:$port" acks=all 2>/dev/null |
      sed -n 's/.*records sent.*(\([0-9.]*\) MB\/sec).*/\1/p' | tail -1)
    b=$(ticks "$pid"); rss=$(awk '/VmHWM/{print $2}' "/proc/$pid/status")
    echo "$label produce ${n}p cpu_s $(echo "scale=2; ($b-$a)/$tck" | bc) MB/s $mb peak_rss_kB $rss"
    echo 5 >"/proc/$pid/clear_refs"
    a=$(ticks "$pid")
    mb=$("${java_cp[@]}" org.apache.kafka.tools.ConsumerPerformance --bootstrap-server "127.0.0.1:$port" --topic "t$n" \
      --messages 500000 --group "g$n" --hide-header 2>/dev/null | tail -1 | awk -F', ' '{print $4}')
    b=$(ticks "$pid"); rss=$(awk '/VmHWM/{print $2}' "/proc/$pid/status")
    echo "$label consume ${n}p cpu_s $(echo "scale=2; ($b-$a)/$tck" | bc) MB/s $mb peak_rss_kB $rss"
  done
  kill "$pid"; wait "$pid" || true; pid=
}

for r in $(seq 1 "$rounds"); do
  run old "$old"
  run new "$new"
done | tee "$work/runs.txt"
echo "medians:"
python3 - "$work/runs.txt" <<'EOF'
import statistics, sys
from collections import defaultdict
rows = defaultdict(list)
for line in open(sys.argv[1]):
    f = line.split()
    rows[(f[1], f[2], f[0])].append((float(f[4]), float(f[6] or 0), int(f[8])))
for (phase, parts, label) in sorted(rows):
    v = rows[(phase, parts, label)]
    print(f"{phase:8} {parts} {label}: cpu_s {statistics.median(x[0] for x in v):6.2f}  MB/s {statistics.median(x[1] for x in v):7.1f}  peak_rss_MB {statistics.median(x[2] for x in v) / 1024:6.1f}")
EOF

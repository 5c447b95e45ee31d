#!/usr/bin/env bash
# Usage: bench/cluster.sh [options]
#
# Three brokers at replication factor 3, side by side (issue 29, acceptance
# 8): Apache Kafka 4.1.2 (one KRaft controller and three brokers) and
# sediment (one etcd and three brokers) on this machine, one after the
# other, each with its defaults:
#   produce   ProducerPerformance, acks=all, 1 KiB records, to topics of 1
#             and 8 partitions (RF 3, min.insync.replicas=2): records/s,
#             MB/s, p99 and the brokers' CPU seconds per GiB produced,
#             then paced at --latency-rate for latency below saturation;
#   failover  a librdkafka producer writing every millisecond while the
#             partition's leader is SIGKILLed --kills times: kill to the
#             first acknowledgement after it, each time; every record must
#             be acknowledged.
# Writes bench/results/<date>-<commit>-cluster.md (and .json) and prints it.
# About 10 minutes with the defaults.
#
# Options (passed on to bench/cluster.py):
#   --records N         records per produce run (default 300000, about 300 MB)
#   --partitions LIST   partition counts of the produce topics (default 1,8)
#   --repeat N          produce runs per partition count; the report gives medians (default 2)
#   --kills N           leader kills in the failover phase (default 5)
#   --latency-rate N    records/s of the paced produce run per partition count, for the
#                       latency percentiles below saturation (default 2000)
#   --latency-seconds N how long the paced run lasts (default 20)
#   --phases LIST       produce,failover (default both)
#   --clusters LIST     kafka,sediment (default both, in that order)
#   --note TEXT         a sentence for the report (what else ran on the machine)
# Environment:
#   SEDIMENT_BIN        use this sediment binary instead of building target/release/sediment
#   BENCH_DIR           work dir for data and logs (default target/bench/cluster-<date>)
#
# Needs Java 17+ and Maven (scripts/kafka-jars.sh), Rust, etcd (Debian's
# etcd-server) and Python 3 (scripts/python-env.sh makes the venv with
# confluent-kafka).
set -euo pipefail

if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
  sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
  exit 0
fi

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "$root"
command -v etcd >/dev/null || { echo "bench: etcd is missing (apt-get install etcd-server)" >&2; exit 1; }
jars="$(scripts/kafka-jars.sh 4.1.2)"
python="$(scripts/python-env.sh | tail -1)"
if [ -z "${SEDIMENT_BIN:-}" ]; then
  echo "bench: cargo build --release" >&2
  cargo build --release --quiet --bin sediment
  SEDIMENT_BIN="$root/target/release/sediment"
fi
classes="$root/target/bench/classes"
mkdir -p "$classes"

stamp="$(date +%Y%m%d-%H%M%S)"
commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
workdir="${BENCH_DIR:-$root/target/bench/cluster-$stamp}"
exec "$python" bench/cluster.py --jars "$jars" --classes "$classes" --sediment-bin "$SEDIMENT_BIN" \
  --workdir "$workdir" --out "bench/results/$stamp-$commit-cluster.md" --commit "$commit" "$@"

#!/usr/bin/env bash
# Usage: bench/remote-read.sh [MB] [SEGMENT_MB] [ROUNDS]
#
# Tiered storage reads against local reads of the same bytes, on loopback:
# moto's S3 server (target/pyenv) and one sediment broker with tiered storage
# on. Produces MB (default 512) of 1 KiB records to a remote-enabled topic
# (SEGMENT_MB segments, default 16; local.retention.bytes one segment) and
# to a plain one, waits until local retention has left only the newest
# segments of the first on disk, restarts the broker (its remote-cache is
# emptied at start), then reads with Kafka's ConsumerPerformance:
#   local        the plain topic (page cache warm);
#   remote-cold  the remote topic, every store-only segment downloaded;
#   remote-warm  the remote topic again, from the segment cache;
# and GETs the same objects from moto with boto3 (moto's own rate). Each read
# records MB/s, the broker's CPU seconds and peak RSS, moto's CPU seconds and
# the cache's misses and hits. ROUNDS (default 3) repeats restart, reads and
# GETs; the report shows medians and every round. Writes
# bench/results/<date>-<commit>-remote.md (raw numbers in .json next to it)
# and prints it. About 5 minutes at 512 MB.
#
# Environment:
#   SEDIMENT_BIN   the sediment binary (default: cargo build --release, then
#                  target/release/sediment)
#   BENCH_DIR      work dir for data and logs (default target/bench/remote-<date>)
#   BENCH_LABEL    put this in the report title
set -euo pipefail

if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
  sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
  exit 0
fi

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "$root"
mb="${1:-512}"
segment_mb="${2:-16}"
rounds="${3:-3}"

if [ -z "${SEDIMENT_BIN:-}" ]; then
  echo "remote-read: cargo build --release" >&2
  cargo build --release --quiet --bin sediment
  SEDIMENT_BIN="$root/target/release/sediment"
fi
python="$(scripts/python-env.sh | tail -1)"
jars="$(scripts/kafka-jars.sh 4.1.2)"

stamp="$(date -u +%Y%m%d-%H%M%S)"
commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
work="${BENCH_DIR:-$root/target/bench/remote-$stamp}"
mkdir -p bench/results

exec "$python" bench/remote_read.py --bin "$SEDIMENT_BIN" --jars "$jars" --python "$python" \
  --work "$work" --out "bench/results/$stamp-$commit-remote.md" --commit "$commit" \
  --mb "$mb" --segment-mb "$segment_mb" --rounds "$rounds" --label "${BENCH_LABEL:-}"

#!/usr/bin/env bash
# Usage: bench/remote-clean.sh [MB] [SEGMENT_MB] [ROUNDS] [KEYS]
#
# Compaction in the store against a local clean of the same records, on
# loopback: moto's S3 server (target/pyenv) and one sediment broker with
# tiered storage on. Each round writes MB (default 256) of 1 KiB records
# over KEYS keys (default: records / 4, so each key has about 4 versions;
# BenchClient keyed-produce) to two fresh topics with SEGMENT_MB segments
# (default 8), both cleanup.policy=delete: `local` (no remote storage) and
# `remote` (remote.storage.enable, local.retention.bytes=1: once uploaded,
# every closed segment is only in the store). Each is then altered to
# cleanup.policy=compact and its clean timed from the alter:
#   local   until the cleaner checkpoint reaches the active segment;
#   remote  until the broker logs "segments in the store cleaned" (the
#           manifest with store_clean_offset is written), then the manifest
#           is read with boto3;
# with the broker's CPU seconds, /proc/<pid>/io and peak RSS, moto's CPU
# seconds and requests, and the store's objects and bytes before and after.
# ROUNDS (default 2) repeats with fresh topics, alternating which clean runs
# first; the report shows medians, the ratios remote : local, every round,
# and every clean the broker logged (a store clean that repeats shows
# there). Writes bench/results/<date>-<commit>-remote-clean.md (raw numbers
# in .json next to it) and prints it. About 2 minutes at the defaults.
#
# Environment:
#   SEDIMENT_BIN   the sediment binary (default: cargo build --release, then
#                  target/release/sediment)
#   BENCH_DIR      work dir for data and logs (default target/bench/remote-clean-<date>)
#   BENCH_LABEL    put this in the report title
#   CACHE_MB       sediment.remote.storage.cache.bytes in MiB (default 1 GiB
#                  or twice MB); below MB the store clean cannot keep the
#                  store in the cache, and the report's peak cache disk shows
#                  what it held
set -euo pipefail

if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
  sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
  exit 0
fi

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "$root"
mb="${1:-256}"
segment_mb="${2:-8}"
rounds="${3:-2}"
keys="${4:-0}"

if [ -z "${SEDIMENT_BIN:-}" ]; then
  echo "remote-clean: cargo build --release" >&2
  cargo build --release --quiet --bin sediment
  SEDIMENT_BIN="$root/target/release/sediment"
fi
python="$(scripts/python-env.sh | tail -1)"
jars="$(scripts/kafka-jars.sh 4.1.2)"

# BenchClient (keyed produce, verify), as bench/run.sh compiles it.
classes="$root/target/bench/classes"
if [ ! -f "$classes/BenchClient.class" ] || [ bench/BenchClient.java -nt "$classes/BenchClient.class" ]; then
  mkdir -p "$classes"
  javac -nowarn -d "$classes" -cp "$jars/*" bench/BenchClient.java
fi

stamp="$(date -u +%Y%m%d-%H%M%S)"
commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
work="${BENCH_DIR:-$root/target/bench/remote-clean-$stamp}"
mkdir -p bench/results

exec "$python" bench/remote_clean.py --bin "$SEDIMENT_BIN" --jars "$jars" --classes "$classes" \
  --python "$python" --work "$work" --out "bench/results/$stamp-$commit-remote-clean.md" --commit "$commit" \
  --mb "$mb" --segment-mb "$segment_mb" --rounds "$rounds" --keys "$keys" --cache-mb "${CACHE_MB:-0}" --label "${BENCH_LABEL:-}"

#!/usr/bin/env bash
# Usage: bench/run.sh [options]
#
# Side-by-side benchmark of Apache Kafka 4.1.2 and sediment on this machine:
# raw disk, produce (1 and 8 partitions), consume, transactional produce,
# produce and consume over SSL (1 partition), compaction (the same log cleaned
# warm and cold), the changelog workload (a large stable key set, rounds of
# updates to a small hot set, each cleaned), broker CPU per GB consumed over 8
# and 100 partitions (consume-cpu), and each broker's peak RSS and CPU per
# phase. Brokers run one at a time. Writes a markdown report to
# bench/results/<date>-<commit>.md (and the raw numbers next to it as .json)
# and prints it. About 30 minutes with the defaults (about 4 of them the SSL
# phase, --no-ssl skips it; about 8 the compaction phase and 5 the changelog).
# Exits 1 (after writing the report) when a broker's run failed, e.g. a clean
# did not finish within --clean-timeout.
#
# Options (all passed on to bench/bench.py):
#   --records N            records per produce run, 1 KiB each (default 1000000)
#   --partitions LIST      partition counts of the produce/consume topics (default 1,8)
#   --repeat N             rounds of produce+consume per broker, to fresh topics; the
#                          report shows the medians and every run (default 3)
#   --compact-records N    keyed records for the compaction phase (default 5000000)
#   --compact-keys N       distinct keys for the compaction phase (default 500000)
#                          The compaction phase produces once, stops the broker, copies the
#                          partition dir, and cleans the same bytes twice on a restarted broker:
#                          warm (log in the page cache), then from the copy cold (page cache
#                          dropped right before the clean: needs root for drop_caches, else
#                          posix_fadvise per file). Cold is set against a disk limit from the
#                          disk phase's raw rates (run --phases disk,... for it).
#   --no-compaction        skip the compaction phase
#   --profile-clean        perf record -g of each broker during its warm clean (needs perf);
#                          the report lists the top entries of perf report --no-children
#   --clean-timeout S      a clean not finished after S seconds fails that broker's run and
#                          the script's exit status (default 240)
#   --cleaner-backoff-ms N log.cleaner.backoff.ms of both brokers: the idle cleaner's poll
#                          interval, part of every timed clean (default 100)
#   --changelog-keys N     changelog phase: keys written once, then cleaned (default 2000000)
#   --changelog-hot-percent P  changelog phase: the percent of the keys (spread over the key
#                          space) that each round updates (default 5)
#   --changelog-rounds N   changelog phase: rounds of hot-key updates, each followed by a
#                          clean timed to fully cleaned (default 3)
#   --changelog-value-bytes N  changelog phase: value size (default 1024)
#   --changelog-garbage-ratio R  changelog phase: sediment's topic gets
#                          sediment.compaction.min.segment.garbage.ratio=R (0..1; Kafka rejects the key,
#                          so its topic is created as before); default unset: neither gets it
#   --txn-duration-ms N    transactional produce phase: ProducerPerformance with a
#                          transactional id, a commit every N ms (default 100)
#   --no-txn               skip the transactional produce phase
#   --ssl-partitions LIST  SSL phase: ProducerPerformance and ConsumerPerformance over a
#                          second listener, SSL, in both brokers (the same PEM key store,
#                          made with openssl in the work dir), the same records as the
#                          PLAINTEXT phases, to topics of these partition counts (default 1)
#   --no-ssl               skip the SSL phase; the brokers then have no SSL listener
#   --phases LIST          phases to run (default all):
#                          disk,produce,consume,txn,ssl,compaction,changelog,consume-cpu
#   --cpu-partitions LIST  consume-cpu phase: broker CPU s per GB that ConsumerPerformance reads back
#                          from topics of these partition counts (default 8,100)
#   --cpu-records N        consume-cpu phase: 1 KiB records per topic (default 1000000, about 1 GB)
#   --sediment-override K=V  a broker key for sediment only (repeatable), e.g.
#                          max.incremental.fetch.session.cache.slots=0 (no fetch sessions)
#   --brokers LIST         kafka,sediment (default both, in that order); sediment-no-sessions is
#                          sediment with max.incremental.fetch.session.cache.slots=0 (fetch
#                          sessions off), e.g. --phases consume-cpu --brokers
#                          kafka,sediment,sediment-no-sessions for their before/after
#   --disk-mb N            size of the raw disk test file (default 2048)
#   --label TEXT           put TEXT in the report title (e.g. before/after)
#   --out FILE             report path (default bench/results/<date>-<commit>.md)
#   --keep-data            keep the brokers' data dirs (under target/bench/run-*)
#   --wait-idle SECONDS    in all, wait up to this long for other work on the machine to
#                          stop, checked before the disk test and each broker session (default 120:
#                          a busy machine adds at most 2 minutes to the run)
#   --sequential           each broker once through all stages (default: round by round,
#                          alternating the brokers, so bursts of other work hit both)
# Environment:
#   SEDIMENT_BIN           use this sediment binary instead of building target/release/sediment
#   BENCH_DIR              work dir for data and logs (default target/bench/run-<date>)
#
# Needs Java 17+ (java, javac) and Maven for the first jar download
# (scripts/kafka-jars.sh), Rust for the release build, Python 3, and openssl for
# the SSL phase's certificates.
set -euo pipefail

if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
  sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
  exit 0
fi

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "$root"

jars="$(scripts/kafka-jars.sh 4.1.2)"

if [ -z "${SEDIMENT_BIN:-}" ]; then
  echo "bench: cargo build --release" >&2
  cargo build --release --quiet --bin sediment
  SEDIMENT_BIN="$root/target/release/sediment"
fi

# BenchClient: compiled once against the same client jars, rebuilt when edited.
classes="$root/target/bench/classes"
if [ ! -f "$classes/BenchClient.class" ] || [ bench/BenchClient.java -nt "$classes/BenchClient.class" ]; then
  mkdir -p "$classes"
  javac -nowarn -d "$classes" -cp "$jars/*" bench/BenchClient.java
fi

stamp="$(date +%Y%m%d-%H%M%S)"
commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
workdir="${BENCH_DIR:-$root/target/bench/run-$stamp}"
out="bench/results/$stamp-$commit.md"
has_out=0
for a in "$@"; do [ "$a" = "--out" ] && has_out=1; done
extra=()
[ "$has_out" = 1 ] || extra=(--out "$out")

exec python3 bench/bench.py --jars "$jars" --classes "$classes" --sediment-bin "$SEDIMENT_BIN" \
  --workdir "$workdir" "${extra[@]}" "$@"

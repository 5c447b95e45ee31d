#!/usr/bin/env bash
# The fuzz targets of fuzz/ (cargo-fuzz, libFuzzer), for a newcomer:
#   scripts/fuzz.sh                      every target for FUZZ_SECONDS (20) each
#   scripts/fuzz.sh <target> [libFuzzer options...]
#                                        one target, e.g. -runs=10000000
#   scripts/fuzz.sh list                 the targets
#   scripts/fuzz.sh seeds                rewrite the seed corpus (fuzz/corpus/)
#                                        with sediment's own encoders
# FUZZ_SANITIZER (default address) picks cargo-fuzz's sanitizer: none runs
# several times faster, for long runs of targets that are safe Rust only.
# Needs nightly Rust (rustup toolchain install nightly); installs cargo-fuzz
# if it is missing. Builds with CARGO_BUILD_JOBS (default 1). Each run reads
# the committed seeds in fuzz/corpus/<target>/ and grows its own corpus in
# fuzz/target/corpus/<target>/ (not committed); a crash is written to
# fuzz/artifacts/<target>/ and reproduced with
#   cargo +nightly fuzz run <target> fuzz/artifacts/<target>/<file>   (from fuzz/)
# After each target it prints the executions, exec/s, peak RSS and whether
# it crashed; the exit status is non-zero if any target crashed.
# Not part of scripts/test.sh or CI: too slow for them.
set -euo pipefail
cd "$(dirname "$0")/.."

export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-1}"
# No allocation stacks in AddressSanitizer's bookkeeping: twice the
# executions for the targets that allocate most (segment_recovery); a
# crash's own stack is still printed.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_odr_violation=0:malloc_context_size=0}"
seconds="${FUZZ_SECONDS:-20}"
sanitizer="${FUZZ_SANITIZER:-address}"

# The largest input worth trying per target (libFuzzer's -max_len); 4096
# for those not named. Formats with long strings or many files get more.
max_len() {
  case "$1" in
    group_records | consumer_group_records) echo 70000 ;;
    segment_recovery | batch_reader | recompression | batch_validation) echo 65536 ;;
    handle_request | handle_request_secured | request_frame) echo 16384 ;;
    tls_pem | security_stores | remote_manifest | offset_time_index) echo 16384 ;;
    # Every input compiles its rules' regexes: short rules (as real ones
    # are) keep the target near 1k exec/s instead of a few hundred.
    principal_mapper) echo 1024 ;;
    *) echo 4096 ;;
  esac
}

if ! command -v cargo-fuzz >/dev/null 2>&1; then
  echo "installing cargo-fuzz" >&2
  cargo install cargo-fuzz --locked
fi

targets() {
  (cd fuzz && cargo +nightly fuzz list)
}

# Run one target with libFuzzer options "$@"; print its figures.
run() {
  local target="$1"
  shift
  local log work
  log="$(mktemp)"
  work="fuzz/target/corpus/$target"
  mkdir -p "$work" "fuzz/corpus/$target" "fuzz/artifacts/$target"
  local status=0
  # The first corpus directory gets the new inputs; the seeds are read only.
  (cd fuzz && cargo +nightly fuzz run --sanitizer "$sanitizer" "$target" "../$work" "corpus/$target" -- \
    -max_len="$(max_len "$target")" -rss_limit_mb=2048 -timeout=30 -print_final_stats=1 \
    "$@") >"$log" 2>&1 || status=$?
  local runs rate rss
  runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)"
  rate="$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)"
  rss="$(sed -n 's/^stat::peak_rss_mb: *//p' "$log" | tail -1)"
  if [ "$status" = 0 ]; then
    printf '%-24s %12s runs %8s exec/s %6s MB peak RSS   ok\n' "$target" "${runs:-?}" "${rate:-?}" "${rss:-?}"
  else
    printf '%-24s %12s runs %8s exec/s %6s MB peak RSS   CRASHED (exit %s)\n' "$target" "${runs:-?}" "${rate:-?}" "${rss:-?}" "$status"
    grep -E 'panicked at|ERROR: libFuzzer|ERROR: AddressSanitizer|Test unit written to|^error' "$log" | head -8 | sed 's/^/    /'
    echo "    full log: $log"
    return 1
  fi
  rm -f "$log"
}

case "${1:-}" in
  list)
    targets
    ;;
  seeds)
    # On stable, into the main target dir (it shares the crate's build).
    CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}" \
      cargo run --quiet --manifest-path fuzz/seeds/Cargo.toml -- fuzz/corpus
    ;;
  "")
    echo "building every target (first build: several minutes)" >&2
    (cd fuzz && cargo +nightly fuzz build --sanitizer "$sanitizer") >/dev/null
    failed=0
    for t in $(targets); do
      run "$t" -max_total_time="$seconds" || failed=1
    done
    exit "$failed"
    ;;
  -*)
    echo "usage: scripts/fuzz.sh [list | seeds | <target> [libFuzzer options...]]" >&2
    exit 2
    ;;
  *)
    run "$@"
    ;;
esac
